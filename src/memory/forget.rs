//! Forget tombstones: what the user asked to forget (`removeFact(id, { forget: true })`), so
//! that extraction does not learn it again from the next conversation that mentions it.
//!
//! Stored in the record beside the document (committed atomically with the removal):
//! `"forgotten":[{"id":"fact_…","content":"allergic to penicillin","at":1773484200000}]`,
//! oldest first. A tombstone holds only what matching needs: the fact's normalised content
//! ([`normalize_content`]) and the id it had (to name it in `processed.skipped` and to
//! `unforget` it). Matching is [`crate::extract::apply`]'s duplicate test: the same normalised text,
//! or a near-duplicate by token Jaccard, whatever the category.

use crate::base::time::Millis;
use crate::json::{ArrayWriter, ObjectWriter, ToJson, Value};
use crate::memory::document::{normalize_content, Fact};

/// Tombstones kept: past this, the oldest are dropped (each is one short sentence, so the
/// list stays under ~100 KB).
pub const MAX_TOMBSTONES: usize = 1000;

/// One forgotten fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    /// The id of the removed fact.
    pub id: String,
    /// Its normalised content.
    pub content: String,
    /// When it was forgotten (epoch ms).
    pub at: Millis,
}

/// The tombstones of a record, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tombstones {
    /// The tombstones, oldest first.
    pub list: Vec<Tombstone>,
}

impl Tombstones {
    /// Forgets `fact` at `now`: a tombstone of its normalised content (one per content; a
    /// newer one replaces it). Keeps the newest [`MAX_TOMBSTONES`].
    pub fn forget(&mut self, fact: &Fact, now: Millis) {
        let content = normalize_content(&fact.content);
        self.list.retain(|t| t.content != content && t.id != fact.id);
        self.list.push(Tombstone { id: fact.id.clone(), content, at: now });
        let over = self.list.len().saturating_sub(MAX_TOMBSTONES);
        self.list.drain(..over);
    }

    /// Drops the tombstone with `id`; returns it.
    pub fn unforget(&mut self, id: &str) -> Option<Tombstone> {
        let pos = self.list.iter().position(|t| t.id == id)?;
        Some(self.list.remove(pos))
    }

    /// The ids of tombstones that are in `self` but not in `before` (what a commit added).
    pub fn added_since(&self, before: &Tombstones) -> Vec<String> {
        self.list.iter().filter(|t| !before.list.iter().any(|b| b.id == t.id)).map(|t| t.id.clone()).collect()
    }

    /// Reads the stored list; malformed tombstones are left out.
    pub fn from_value(v: Option<&Value>) -> Tombstones {
        let list = v.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let list = list
            .iter()
            .filter_map(|t| {
                let (id, content) = (t.get("id")?.as_str()?, t.get("content")?.as_str()?);
                Some(Tombstone { id: id.to_string(), content: content.to_string(), at: t.get("at").and_then(Value::as_u64).unwrap_or(0) })
            })
            .collect();
        Tombstones { list }
    }
}

impl ToJson for Tombstone {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        o.str("id", &self.id).str("content", &self.content).u64("at", self.at);
        o.finish();
    }
}

impl ToJson for Tombstones {
    fn write_json(&self, out: &mut String) {
        let mut a = ArrayWriter::new(out);
        for t in &self.list {
            t.write_json(a.item());
        }
        a.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_hold_the_normalised_content_once_and_are_bounded() {
        let fact = |id: &str, c: &str| Fact::from_value(&json!({"id": id, "content": c}), 0).unwrap();
        let mut t = Tombstones::default();
        t.forget(&fact("f1", "  Allergic to   PENICILLIN "), 5);
        t.forget(&fact("f2", "allergic to penicillin"), 6);
        assert_eq!(t.list, vec![Tombstone { id: "f2".into(), content: "allergic to penicillin".into(), at: 6 }]);
        let back = Tombstones::from_value(Some(&t.to_value()));
        assert_eq!(back, t);
        for i in 0..MAX_TOMBSTONES + 3 {
            t.forget(&fact(&format!("g{i}"), &format!("thing {i}")), i as u64);
        }
        assert_eq!(t.list.len(), MAX_TOMBSTONES);
        assert_eq!(t.list[0].id, "g3", "the oldest go first");
        assert!(t.unforget("g3").is_some() && t.unforget("g3").is_none());
    }
}
