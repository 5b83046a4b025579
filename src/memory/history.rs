//! The history of the memory document: what each commit changed, kept in the stored record
//! beside the document (so an entry and its document are written by the same atomic commit,
//! in every backend), and the arithmetic that reverts the document to an earlier revision.
//!
//! ```text
//! "history":{"lastUpdated":"2026-03-14T10:31:02.000Z","entries":[{newest}, …, {oldest}]}
//! ```
//!
//! An entry (newest first, at most `historyLimit`, see [`History::push`]):
//!
//! ```text
//! {"revision":12,"at":1773484262000,"reason":"extraction","threadId":"t1",
//!  "sections":[{"name":"workContext","before":{section},"after":{section}}],
//!  "added":[{fact}], "removed":[{fact}], "removedAt":[3],
//!  "changed":[{"before":{fact},"after":{fact}}],
//!  "order":["fact_…", …],            only when the commit re-ordered the facts it kept
//!  "memory":{"version":…,"extra":…}, only when the document's other fields changed (import)
//!  "forgot":["fact_…"],              tombstones this commit added (removeFact with forget)
//!  "revertedTo":9}                   for reason "revert"
//! ```
//!
//! Every entry holds the whole facts before and after, so reverting restores them exactly
//! (ids, timestamps, unknown fields), and superseded or removed facts stay findable.
//! Undoing an entry turns the document after it into the document before it; reverting to
//! revision `r` undoes, newest first, every entry after `r`. That is exact only if every
//! change since `r` has its entry: entries are only ever dropped oldest first, and a change
//! made by a writer that keeps no history (an older version of this library) is detected by
//! `lastUpdated`: the history remembers the document's `lastUpdated` after its newest entry,
//! and a document whose `lastUpdated` differs was changed without an entry, so the entries
//! are dropped when the record is read (they could no longer be reverted exactly).
//!
//! Commits that change nothing in the document (a watermark moving, a forget tombstone
//! dropped) add no entry. Everything here is linear in the facts.

use crate::base::error::{Error, Result};
use crate::base::hash::FxMap;
use crate::base::time::Millis;
use crate::json::{ArrayWriter, ObjectWriter, ToJson, Value};
use crate::memory::diff::{diff_facts, index_ids};
use crate::memory::document::{Document, Fact, Section, SectionId};

/// Entries kept by default (`historyLimit`).
pub const DEFAULT_HISTORY_LIMIT: usize = 100;

/// The entries stored are cut, oldest first, once they take more than this many bytes of
/// JSON (the newest entry is always kept): every commit rewrites the whole record, so a
/// `clear()` or an `import()` of 10 000 facts (an entry of megabytes) must not make every
/// later commit that large. A typical extraction's entry is 1–2 KB, so the 100 entries of
/// the default limit fit.
pub const HISTORY_BYTES: usize = 256 * 1024;

/// The stored history (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct History {
    /// The entries as stored, newest first.
    pub entries: Vec<Value>,
    /// `lastUpdated` of the document after the newest entry.
    pub last_updated: String,
}

/// What a commit's entry says besides the change itself.
#[derive(Debug, Clone, Copy)]
pub struct EntryMeta<'a> {
    /// The revision the commit makes.
    pub revision: u64,
    /// When (epoch ms).
    pub at: Millis,
    /// `extraction`, `addFact`, `updateFact`, `removeFact`, `updateSection`, `import`,
    /// `clear` or `revert`.
    pub reason: &'a str,
    /// The thread of an extraction.
    pub thread_id: Option<&'a str>,
    /// For a revert: the revision whose document it restored.
    pub reverted_to: Option<u64>,
    /// Ids of the forget tombstones the commit added.
    pub forgot: &'a [String],
}

/// See [`History::undo_state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UndoState {
    /// The entry's change is the newest one in effect: undoing it reverts to the revision
    /// before it.
    Newest,
    /// A later revert already undid it.
    Undone,
    /// A newer change (this revision) is in effect on top of it.
    Overtaken(u64),
    /// No entry has this revision (never was, or cut from the history).
    Missing,
}

/// The revision of an entry (0 for a malformed one).
pub fn entry_revision(e: &Value) -> u64 {
    e.get("revision").and_then(Value::as_u64).unwrap_or(0)
}

/// The history entry of a commit from `before` to `after`, as JSON.
pub fn entry(meta: &EntryMeta, before: &Document, after: &Document) -> Value {
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.u64("revision", meta.revision).u64("at", meta.at).str("reason", meta.reason);
    if let Some(t) = meta.thread_id {
        o.str("threadId", t);
    }
    if let Some(r) = meta.reverted_to {
        o.u64("revertedTo", r);
    }
    let mut sections = ArrayWriter::new(o.key("sections"));
    for id in SectionId::ALL {
        let (b, a) = (before.section(id), after.section(id));
        if b != a {
            let mut s = ObjectWriter::new(sections.item());
            s.str("name", id.key());
            b.write_json(s.key("before"));
            a.write_json(s.key("after"));
            s.finish();
        }
    }
    sections.finish();
    let d = diff_facts(&before.facts, &after.facts);
    facts(&mut o, "added", d.added.iter().map(|&i| &after.facts[i]));
    facts(&mut o, "removed", d.removed.iter().map(|&i| &before.facts[i]));
    let mut at = ArrayWriter::new(o.key("removedAt"));
    for &i in &d.removed {
        crate::json::write_u64(at.item(), i as u64);
    }
    at.finish();
    let mut changed = ArrayWriter::new(o.key("changed"));
    for &(b, a) in &d.changed {
        let mut c = ObjectWriter::new(changed.item());
        before.facts[b].write_json(c.key("before"));
        after.facts[a].write_json(c.key("after"));
        c.finish();
    }
    changed.finish();
    if d.reordered {
        let mut order = ArrayWriter::new(o.key("order"));
        for f in &before.facts {
            order.str(&f.id);
        }
        order.finish();
    }
    let meta_changed = before.version != after.version
        || before.extra != after.extra
        || before.user_extra != after.user_extra
        || before.history_extra != after.history_extra;
    if meta_changed {
        let mut m = ObjectWriter::new(o.key("memory"));
        m.str("version", &before.version);
        for (key, map) in [("extra", &before.extra), ("user", &before.user_extra), ("history", &before.history_extra)] {
            m.value(key, &Value::Object(map.clone()));
        }
        m.finish();
    }
    if !meta.forgot.is_empty() {
        let mut f = ArrayWriter::new(o.key("forgot"));
        for id in meta.forgot {
            f.str(id);
        }
        f.finish();
    }
    o.finish();
    Value::parse(&out).unwrap_or_default()
}

fn facts<'a>(o: &mut ObjectWriter, key: &str, list: impl Iterator<Item = &'a Fact>) {
    let mut a = ArrayWriter::new(o.key(key));
    for f in list {
        f.write_json(a.item());
    }
    a.finish();
}

fn array<'a>(e: &'a Value, key: &str) -> &'a [Value] {
    e.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn fact_of(v: &Value) -> std::result::Result<Fact, String> {
    Fact::from_value(v, 0)
}

/// Turns `doc` (the document after entry `e`) into the document before it. The error
/// describes a malformed entry.
fn undo(doc: &mut Document, e: &Value) -> std::result::Result<(), String> {
    for s in array(e, "sections") {
        let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
        let id = SectionId::ALL.into_iter().find(|id| id.key() == name).ok_or("an unknown section")?;
        *doc.section_mut(id) = Section::from_value(s.get("before"), name)?;
    }
    let mut gone: FxMap<Box<str>, u32> = FxMap::default();
    for f in array(e, "added") {
        gone.insert(f.get("id").and_then(Value::as_str).unwrap_or_default().into(), 0);
    }
    let mut was: FxMap<Box<str>, u32> = FxMap::default();
    let changed = array(e, "changed");
    for (i, c) in changed.iter().enumerate() {
        let id = c.get("before").and_then(|b| b.get("id")).and_then(Value::as_str).unwrap_or_default();
        was.insert(id.into(), i as u32);
    }
    let mut kept = Vec::with_capacity(doc.facts.len());
    for f in doc.facts.drain(..) {
        if gone.contains_key(f.id.as_str()) {
            continue;
        }
        match was.get(f.id.as_str()) {
            Some(&i) => kept.push(fact_of(changed[i as usize].get("before").unwrap_or(&Value::Null))?),
            None => kept.push(f),
        }
    }
    // The removed facts go back to their old positions (ascending), the others fill the
    // gaps in their order: one pass.
    let (removed, at) = (array(e, "removed"), array(e, "removedAt"));
    let mut facts = Vec::with_capacity(kept.len() + removed.len());
    let mut rest = kept.into_iter();
    for (f, pos) in removed.iter().zip(at) {
        let pos = pos.as_u64().ok_or("a position that is not a number")? as usize;
        while facts.len() < pos {
            match rest.next() {
                Some(k) => facts.push(k),
                None => break,
            }
        }
        facts.push(fact_of(f)?);
    }
    facts.extend(rest);
    if let Some(order) = e.get("order").and_then(Value::as_array) {
        let index = index_ids(&facts);
        let mut slots: Vec<Option<Fact>> = facts.into_iter().map(Some).collect();
        let mut ordered = Vec::with_capacity(slots.len());
        for id in order.iter().filter_map(Value::as_str) {
            if let Some(f) = index.get(id).and_then(|&i| slots[i as usize].take()) {
                ordered.push(f);
            }
        }
        ordered.extend(slots.into_iter().flatten());
        facts = ordered;
    }
    doc.facts = facts;
    if let Some(m) = e.get("memory") {
        let map = |key: &str| m.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
        doc.version = m.get("version").and_then(Value::as_str).unwrap_or(crate::memory::document::VERSION).to_string();
        (doc.extra, doc.user_extra, doc.history_extra) = (map("extra"), map("user"), map("history"));
    }
    Ok(())
}

impl History {
    /// Reads the stored history of a record whose document is `doc`. Malformed entries are
    /// left out; all of them are when `doc` was changed without an entry (see the module
    /// docs), or when an entry is not older than the one before it.
    pub fn from_value(v: Option<&Value>, doc: &Document) -> History {
        let Some(v) = v else { return History::default() };
        let last_updated = v.get("lastUpdated").and_then(Value::as_str).unwrap_or_default().to_string();
        let entries: Vec<Value> = array(v, "entries").iter().filter(|e| entry_revision(e) > 0).cloned().collect();
        let ordered = entries.windows(2).all(|w| entry_revision(&w[0]) > entry_revision(&w[1]));
        if last_updated != doc.last_updated || !ordered {
            return History::default();
        }
        History { entries, last_updated }
    }

    /// Adds the entry of a commit whose document now has `last_updated`, keeping the
    /// newest `limit` (0: none; the history is off). The byte budget ([`HISTORY_BYTES`]) is
    /// applied when the history is written.
    pub fn push(&mut self, entry: Value, limit: usize, last_updated: &str) {
        self.entries.insert(0, entry);
        self.entries.truncate(limit);
        self.last_updated = last_updated.to_string();
    }

    /// The revision of the newest entry.
    pub fn newest(&self) -> Option<u64> {
        self.entries.first().map(entry_revision)
    }

    /// Where the change of entry `revision` stands, for an undo named after it: still the
    /// newest change in effect, already undone by a later revert (so undoing it again is a
    /// no-op, never an undo of that undo), overtaken by a newer change that is in effect, or
    /// not in the history at all.
    ///
    /// Walks the entries newer than `revision`, newest first: a revert to `r` means that every
    /// entry after `r` (older than the revert) is no longer in effect.
    pub fn undo_state(&self, revision: u64) -> UndoState {
        if !self.entries.iter().any(|e| entry_revision(e) == revision) {
            return UndoState::Missing;
        }
        let mut floor = u64::MAX;
        let mut newer = None;
        for e in self.entries.iter().take_while(|e| entry_revision(e) > revision) {
            let rev = entry_revision(e);
            if rev > floor {
                continue;
            }
            match e.get("revertedTo").and_then(Value::as_u64) {
                Some(to) if e.get("reason").and_then(Value::as_str) == Some("revert") => floor = to,
                _ => newer = newer.or(Some(rev)),
            }
        }
        match newer {
            _ if floor < revision => UndoState::Undone,
            Some(rev) => UndoState::Overtaken(rev),
            None => UndoState::Newest,
        }
    }

    /// The document as it was after revision `revision`, computed from `current` (the
    /// document at revision `current_revision`), and the forget tombstones the undone
    /// commits added (a revert gives up what it brings back). `NOT_FOUND` when a change
    /// since `revision` is no longer in the history.
    pub fn document_at(&self, current: &Document, revision: u64, current_revision: u64) -> Result<(Document, Vec<String>)> {
        let newer = self.entries.iter().take_while(|e| entry_revision(e) > revision).count();
        let reachable = match self.entries.last() {
            _ if revision > current_revision => false,
            _ if newer == 0 => self.newest().is_some() || revision == current_revision,
            Some(oldest) => entry_revision(oldest) <= revision + 1 || newer < self.entries.len(),
            None => false,
        };
        if !reachable {
            let held = match (self.entries.last(), self.entries.first()) {
                (Some(o), Some(n)) => format!("the history holds the changes of revisions {} to {}", entry_revision(o), entry_revision(n)),
                _ => "the history is empty".into(),
            };
            return Err(Error::NotFound(format!(
                "revision {revision} cannot be restored: {held}, and memory is at revision {current_revision}"
            )));
        }
        let mut doc = current.clone();
        let mut forgot = Vec::new();
        for e in &self.entries[..newer] {
            undo(&mut doc, e).map_err(|why| Error::corrupt(format!("history entry {} is unreadable: {why}", entry_revision(e))))?;
            forgot.extend(array(e, "forgot").iter().filter_map(Value::as_str).map(str::to_string));
        }
        Ok((doc, forgot))
    }
}

/// Writes `{"lastUpdated":…,"entries":[…]}`, newest first, cutting older entries once they
/// pass [`HISTORY_BYTES`] (the newest is always written).
impl ToJson for History {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        o.str("lastUpdated", &self.last_updated);
        let list = o.key("entries");
        list.push('[');
        let start = list.len();
        for (i, e) in self.entries.iter().enumerate() {
            let mark = list.len();
            if i > 0 {
                list.push(',');
            }
            e.write(list);
            if i > 0 && list.len() - start > HISTORY_BYTES {
                list.truncate(mark);
                break;
            }
        }
        list.push(']');
        o.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::SequentialIds;

    fn doc(v: Value) -> Document {
        Document::from_value(&v, &SequentialIds::starting_at(1)).unwrap()
    }

    fn meta(revision: u64) -> EntryMeta<'static> {
        EntryMeta { revision, at: 1, reason: "updateFact", thread_id: None, reverted_to: None, forgot: &[] }
    }

    #[test]
    fn undoing_an_entry_restores_facts_sections_order_and_unknown_fields_exactly() {
        let before = doc(json!({"version": "1.0", "lastUpdated": "a", "custom": 1,
            "user": {"workContext": {"summary": "Go", "updatedAt": "t1", "x": [1]}}, "history": {},
            "facts": [{"id": "f1", "content": "one", "confidence": 0.81, "createdAt": "c1", "source": "t", "pin": true},
                      {"id": "f2", "content": "two"}, {"id": "f3", "content": "three", "note": {"a": 1.10}}]}));
        let after = doc(json!({"version": "1.1", "lastUpdated": "b",
            "user": {"workContext": {"summary": "Rust", "updatedAt": "t2"}}, "history": {"h": 2},
            "facts": [{"id": "f3", "content": "three!"}, {"id": "f1", "content": "one", "confidence": 0.81, "createdAt": "c1", "source": "t", "pin": true}, {"id": "f4", "content": "four"}]}));
        let e = entry(&meta(2), &before, &after);
        let mut d = after.clone();
        undo(&mut d, &e).unwrap();
        d.last_updated = before.last_updated.clone();
        assert_eq!(d, before);
        assert_eq!(d.to_json(), before.to_json());
        assert!(e.get("order").is_some() && e.get("memory").is_some());
    }

    #[test]
    fn only_revisions_whose_later_changes_are_all_kept_can_be_restored() {
        let d0 = doc(json!({"user": {}, "history": {}, "facts": []}));
        let mut h = History::default();
        let mut docs = vec![d0.clone()];
        for rev in 1..=5u64 {
            let mut d = docs.last().unwrap().clone();
            d.facts.push(fact_of(&json!({"id": format!("f{rev}"), "content": format!("c{rev}")})).unwrap());
            d.last_updated = format!("t{rev}");
            h.push(entry(&meta(rev), docs.last().unwrap(), &d), 3, &d.last_updated);
            docs.push(d);
        }
        let now = docs.last().unwrap();
        assert_eq!(h.entries.len(), 3);
        for r in 2..=5 {
            let (back, _) = h.document_at(now, r, 5).unwrap();
            assert_eq!(back.facts, docs[r as usize].facts, "revision {r}");
        }
        assert_eq!(h.document_at(now, 1, 5).unwrap_err().code(), "NOT_FOUND");
        assert_eq!(h.document_at(now, 6, 5).unwrap_err().code(), "NOT_FOUND");
        assert!(History::default().document_at(now, 4, 5).is_err());
        assert!(History::default().document_at(now, 5, 5).is_ok());
        // A document changed by a writer without history makes the entries unusable.
        let stale = History::from_value(Some(&h.to_value()), &Document { last_updated: "other".into(), ..now.clone() });
        assert!(stale.entries.is_empty());
        assert_eq!(History::from_value(Some(&h.to_value()), now), h);
    }

    #[test]
    fn the_byte_budget_cuts_old_entries_but_keeps_the_newest() {
        let big = "x".repeat(HISTORY_BYTES);
        let mut h = History::default();
        for rev in 1..=3u64 {
            h.push(json!({"revision": rev, "pad": "small"}), 100, "");
        }
        h.push(json!({"revision": 4, "pad": big}), 100, "");
        let back = History::from_value(Some(&h.to_value()), &Document::default());
        assert_eq!(back.entries.iter().map(entry_revision).collect::<Vec<_>>(), vec![4]);
        h.push(json!({"revision": 5}), 100, "");
        let back = History::from_value(Some(&h.to_value()), &Document::default());
        assert_eq!(back.entries.iter().map(entry_revision).collect::<Vec<_>>(), vec![5], "the big entry goes once it is not the newest");
    }

    #[test]
    fn an_undo_named_after_a_revision_sees_whether_that_change_is_still_in_effect() {
        let mut h = History::default();
        let change = |rev: u64| json!({"revision": rev, "reason": "addFact"});
        let revert = |rev: u64, to: u64| json!({"revision": rev, "reason": "revert", "revertedTo": to});
        for rev in 1..=3 {
            h.push(change(rev), 100, "");
        }
        assert_eq!(h.undo_state(3), UndoState::Newest);
        assert_eq!(h.undo_state(2), UndoState::Overtaken(3));
        assert_eq!(h.undo_state(9), UndoState::Missing);
        // Another writer undid 3 first: undoing 3 again is a no-op, also after a later change.
        h.push(revert(4, 2), 100, "");
        assert_eq!(h.undo_state(3), UndoState::Undone);
        assert_eq!(h.undo_state(2), UndoState::Newest, "after undoing 3, 2 is the newest change in effect");
        assert_eq!(h.undo_state(4), UndoState::Newest, "the undo itself can be undone (a redo)");
        h.push(change(5), 100, "");
        assert_eq!(h.undo_state(3), UndoState::Undone);
        assert_eq!(h.undo_state(2), UndoState::Overtaken(5));
        // A redo (revert to 3) puts 3 back in effect.
        h.push(revert(6, 3), 100, "");
        assert_eq!(h.undo_state(3), UndoState::Newest);
        assert_eq!(h.undo_state(5), UndoState::Undone);
    }
}
