//! Manual edits: `addFact`, `updateFact`, `removeFact`, `clear` (docs/design.md#documents).
//!
//! Each edit is a pure function on a [`Document`], so the engine can replay it on a newer
//! document when a commit finds a conflict, exactly like an LLM delta.

use crate::base::error::{Error, Result};
use crate::base::ids::IdSource;
use crate::json::field::{missing, object, opt_text, wrong_type};
use crate::json::{Map, Value};
use crate::memory::document::{normalize_content, read_confidence, Document, Fact, MANUAL_SOURCE};

/// Confidence of a hand-added fact when none is given: the user said it explicitly.
pub const MANUAL_CONFIDENCE: f64 = 0.9;

/// The fields of a fact this module reads itself; any others are kept in `extra`.
const KNOWN_FIELDS: [&str; 6] = ["id", "content", "category", "confidence", "createdAt", "source"];

/// A validated `addFact` argument.
#[derive(Debug, Clone, PartialEq)]
pub struct NewManualFact {
    /// Trimmed, non-empty content.
    pub content: String,
    /// Category (default `context`).
    pub category: String,
    /// Confidence in [0, 1] (default 0.9).
    pub confidence: f64,
    /// Any other fields given, kept on the fact.
    pub extra: Map,
    /// An id to restore (undo of a removal); must not be in use. Default: a fresh one.
    pub id: Option<String>,
    /// A creation time to restore. Default: now.
    pub created_at: Option<String>,
    /// A source to restore. Default: `"manual"`.
    pub source: Option<String>,
}

impl NewManualFact {
    /// Validates `{content, category?, confidence?, …}`.
    pub fn from_value(v: &Value) -> Result<NewManualFact> {
        let obj = v.as_object().ok_or_else(|| wrong_type("fact", "an object { content, category?, confidence? }", v))?;
        let content = opt_text(obj, "", "content")?.ok_or_else(|| missing("", "content"))?;
        let mut extra = obj.clone();
        extra.retain(|k, _| !KNOWN_FIELDS.contains(&k));
        Ok(NewManualFact {
            id: opt_text(obj, "", "id")?,
            created_at: opt_text(obj, "", "createdAt")?,
            source: opt_text(obj, "", "source")?,
            content,
            category: opt_text(obj, "", "category")?.unwrap_or_else(|| crate::memory::document::DEFAULT_CATEGORY.into()),
            confidence: read_confidence(obj.get("confidence"))
                .map_err(|why| Error::invalid(format!("`confidence` {why}")))?
                .unwrap_or(MANUAL_CONFIDENCE),
            extra,
        })
    }
}

/// Adds a hand-written fact (`source: "manual"` unless one is given). If a fact with the
/// same content (case- and whitespace-insensitive) exists, nothing is added and that fact
/// is returned with `false`. A given `id` already used by another fact is `INVALID_INPUT`.
pub fn add_fact(doc: &mut Document, fact: &NewManualFact, now_iso: &str, ids: &dyn IdSource) -> Result<(Fact, bool)> {
    let key = normalize_content(&fact.content);
    if let Some(existing) = doc.facts.iter().find(|f| normalize_content(&f.content) == key) {
        return Ok((existing.clone(), false));
    }
    let id = match &fact.id {
        Some(id) if doc.fact(id).is_some() => {
            return Err(Error::invalid(format!("a fact with id \"{id}\" already exists")));
        }
        Some(id) => id.clone(),
        None => doc.fresh_id(ids),
    };
    let f = Fact {
        id,
        content: fact.content.clone(),
        category: fact.category.clone(),
        confidence: fact.confidence,
        created_at: fact.created_at.clone().unwrap_or_else(|| now_iso.to_string()),
        source: fact.source.clone().unwrap_or_else(|| MANUAL_SOURCE.to_string()),
        extra: fact.extra.clone(),
    };
    doc.facts.push(f.clone());
    Ok((f, true))
}

/// Applies a patch `{content?, category?, confidence?, …}` to fact `id`. `id`, `createdAt`
/// and `source` cannot be changed; other unknown fields are set (a `null` removes one).
pub fn update_fact(doc: &mut Document, id: &str, patch: &Value) -> Result<Fact> {
    let obj = object(patch, "patch")?;
    for k in ["id", "createdAt", "source"] {
        if let Some(v) = obj.get(k) {
            let unchanged = doc.fact(id).is_some_and(|f| match k {
                "id" => v.as_str() == Some(&f.id),
                "createdAt" => v.as_str() == Some(&f.created_at),
                _ => v.as_str() == Some(&f.source),
            });
            if !unchanged {
                return Err(Error::invalid(format!("`{k}` of a fact cannot be changed")));
            }
        }
    }
    let content = opt_text(obj, "", "content")?;
    let cat = opt_text(obj, "", "category")?;
    let confidence = read_confidence(obj.get("confidence")).map_err(|why| Error::invalid(format!("`confidence` {why}")))?;
    let fact = doc.facts.iter_mut().find(|f| f.id == id).ok_or_else(|| Error::NotFound(format!("no fact with id \"{id}\"")))?;
    if let Some(c) = content {
        fact.content = c;
    }
    if let Some(c) = cat {
        fact.category = c;
    }
    if let Some(c) = confidence {
        fact.confidence = c;
    }
    for (k, v) in obj {
        if KNOWN_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if v.is_null() {
            fact.extra.remove(k);
        } else {
            fact.extra.insert(k.clone(), v.clone());
        }
    }
    Ok(fact.clone())
}

/// Removes fact `id`; `NOT_FOUND` if there is none.
pub fn remove_fact(doc: &mut Document, id: &str) -> Result<Fact> {
    let pos = doc.facts.iter().position(|f| f.id == id).ok_or_else(|| Error::NotFound(format!("no fact with id \"{id}\"")))?;
    Ok(doc.facts.remove(pos))
}

/// Empties every section and removes every fact. Unknown top-level fields are kept (they
/// belong to whoever wrote them), `version` too.
pub fn clear(doc: &mut Document) {
    let fresh = Document::empty();
    doc.sections = fresh.sections;
    doc.facts.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::SequentialIds;
    use crate::json::ToJson;

    #[test]
    fn add_update_remove_clear_round() {
        let ids = SequentialIds::starting_at(1);
        let mut doc = Document::empty();
        let nf = NewManualFact::from_value(&json!({"content": "  Uses Rust  ", "pinned": true})).unwrap();
        let (f, added) = add_fact(&mut doc, &nf, "2026-01-01T00:00:00.000Z", &ids).unwrap();
        assert!(added);
        assert_eq!((f.id.as_str(), f.content.as_str(), f.category.as_str()), ("fact_00000001", "Uses Rust", "context"));
        assert_eq!((f.confidence, f.source.as_str()), (0.9, "manual"));
        assert_eq!(f.extra.get("pinned"), Some(&json!(true)));

        let dup = NewManualFact::from_value(&json!({"content": "uses   RUST"})).unwrap();
        let (same, added) = add_fact(&mut doc, &dup, "later", &ids).unwrap();
        assert!(!added);
        assert_eq!(same.id, f.id);
        assert_eq!(doc.facts.len(), 1);

        // Undo of a removal restores the fact exactly.
        let removed = remove_fact(&mut doc, &f.id).unwrap();
        let restore = NewManualFact::from_value(&removed.to_value()).unwrap();
        let (back, _) = add_fact(&mut doc, &restore, "much later", &ids).unwrap();
        assert_eq!(back, removed);
        assert_eq!(
            add_fact(&mut doc, &NewManualFact { content: "other".into(), ..restore }, "", &ids).unwrap_err().code(),
            "INVALID_INPUT"
        );

        let u = update_fact(&mut doc, &f.id, &json!({"confidence": "0.75", "category": "knowledge", "pinned": null, "note": "x"})).unwrap();
        assert_eq!((u.confidence, u.category.as_str()), (0.75, "knowledge"));
        assert!(u.extra.get("pinned").is_none());
        assert_eq!(u.extra.get("note"), Some(&json!("x")));
        assert_eq!(update_fact(&mut doc, "fact_nope", &json!({})).unwrap_err().code(), "NOT_FOUND");
        assert_eq!(update_fact(&mut doc, &f.id, &json!({"id": "fact_other"})).unwrap_err().code(), "INVALID_INPUT");
        assert_eq!(update_fact(&mut doc, &f.id, &json!({"content": 3})).unwrap_err().code(), "INVALID_INPUT");

        doc.section_mut(crate::SectionId::WorkContext).summary = "x".into();
        doc.extra.insert("custom".into(), json!(1));
        clear(&mut doc);
        assert!(doc.is_empty());
        assert_eq!(doc.extra.get("custom"), Some(&json!(1)));
        assert_eq!(remove_fact(&mut doc, &f.id).unwrap_err().code(), "NOT_FOUND");
    }

    #[test]
    fn invalid_new_facts_are_rejected_with_the_field_named() {
        for (v, field) in [
            (json!("text"), "object"),
            (json!({}), "content"),
            (json!({"content": "  "}), "content"),
            (json!({"content": "x", "confidence": "high"}), "confidence"),
            (json!({"content": "x", "category": 5}), "category"),
        ] {
            let e = NewManualFact::from_value(&v).unwrap_err();
            assert_eq!(e.code(), "INVALID_INPUT");
            assert!(e.message().contains(field), "{}", e.message());
        }
    }
}
