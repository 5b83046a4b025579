//! Manual edits (`import`, `addFact`, `updateFact`, `removeFact`, `updateSection`, `clear`):
//! each validates its input, then runs its [`crate::memory::edit`] function through the commit loop,
//! which replays it on a newer document when another writer got there first.
//!
//! `import` and `addFact` apply `maxFacts` like an extraction does (by the eviction policy);
//! `addFact` never evicts the fact it adds. What they evict is in the `update` event's
//! `evicted`.

use super::store_ops::Edit;
use super::{Engine, UpdateReason};
use crate::base::error::{Error, Result};
use crate::extract::apply::enforce_max_facts;
use crate::json::Value;
use crate::memory::document::Document;
use crate::memory::edit::{self, NewManualFact};
use crate::memory::forget::{Tombstone, Tombstones};
use crate::memory::history::{entry_revision, UndoState};
use crate::memory::record::Record;
use crate::{Fact, Section, SectionId};

/// What a successful [`Engine::commit`] guarantees about its edit closure.
const EDITED: &str = "a successful commit ran the edit";

impl Engine {
    /// Replaces the whole memory with `doc` (a JSON object or string), after validating it.
    /// Over `maxFacts`, the facts the eviction policy ranks lowest are left out. Invisible
    /// and control characters are stripped from every fact's content and category and every
    /// summary, as on every other way in (a fact of only such characters is `INVALID_INPUT`
    /// naming it, and nothing is written).
    pub async fn import(&self, doc: &Value) -> Result<Document> {
        self.check_open()?;
        let mut parsed = match doc {
            Value::String(s) => Document::from_json(s, &*self.parts().ids),
            other => Document::from_value(other, &*self.parts().ids),
        }
        .map_err(|e| Error::invalid(format!("cannot import: {e}")))?;
        for f in &mut parsed.facts {
            f.content = stored_text(&f.content).map_err(|e| Error::invalid(format!("cannot import fact \"{}\": {}", f.id, e.message())))?;
            f.category = crate::extract::sanitize::strip_invisible(&f.category).trim().to_string();
        }
        for id in SectionId::ALL {
            let s = parsed.section_mut(id);
            s.summary = crate::extract::sanitize::strip_invisible(&s.summary).trim().to_string();
        }
        let cfg = self.config().apply;
        let now = crate::base::time::iso_from_millis(self.now());
        let record = self
            .commit(UpdateReason::Import, None, false, &mut |r| {
                r.doc = parsed.clone();
                Ok(enforce_max_facts(&mut r.doc, &cfg, &now, &[]).into())
            })
            .await?;
        Ok(record.doc)
    }

    /// Adds a hand-written fact; returns it (or the existing fact with the same content).
    /// Over `maxFacts`, the lowest-ranked other fact is evicted. Invisible and control
    /// characters are stripped from the content, as extraction strips them.
    pub async fn add_fact(&self, fact: &Value) -> Result<Fact> {
        self.check_open()?;
        let mut nf = NewManualFact::from_value(fact)?;
        nf.content = stored_text(&nf.content)?;
        let ids = self.parts().ids.clone();
        let now = crate::base::time::iso_from_millis(self.now());
        let cfg = self.config().apply;
        let mut fact = None;
        self.commit(UpdateReason::AddFact, None, true, &mut |r| {
            let (f, _) = edit::add_fact(&mut r.doc, &nf, &now, &*ids)?;
            let evicted = enforce_max_facts(&mut r.doc, &cfg, &now, &[f.id.as_str()]);
            fact = Some(f);
            Ok(evicted.into())
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// Patches fact `id`; `NOT_FOUND` if there is none. A new content loses its invisible
    /// and control characters, as in [`Engine::add_fact`].
    pub async fn update_fact(&self, id: &str, patch: &Value) -> Result<Fact> {
        self.check_open()?;
        let mut patch = patch.clone();
        if let Some(Value::String(c)) = patch.as_object_mut().and_then(|o| o.get_mut("content")) {
            *c = stored_text(c)?;
        }
        let mut fact = None;
        self.commit(UpdateReason::UpdateFact, None, true, &mut |r| {
            fact = Some(edit::update_fact(&mut r.doc, id, &patch)?);
            Ok(Edit::default())
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// Removes fact `id`; `NOT_FOUND` if there is none. With `forget`, a tombstone of its
    /// content is kept in the same commit, so that extraction does not learn it again.
    pub async fn remove_fact(&self, id: &str, forget: bool) -> Result<Fact> {
        self.check_open()?;
        let now = self.now();
        let mut fact = None;
        self.commit(UpdateReason::RemoveFact, None, true, &mut |r| {
            let f = edit::remove_fact(&mut r.doc, id)?;
            if forget {
                r.forgotten.forget(&f, now);
            }
            fact = Some(f);
            Ok(Edit::default())
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// The forget tombstones, oldest first (read fresh from storage).
    pub async fn forgotten(&self) -> Result<Vec<Tombstone>> {
        self.check_open()?;
        Ok(self.refresh_record().await?.forgotten.list)
    }

    /// The tombstone `text` matches, if any (read fresh from storage): the same fact or a
    /// trivial variant of it by its words ([`Tombstones::find`]), else, with an embedder,
    /// one it means, compared as an extraction's new facts are (an embedding failure is an
    /// `EMBED_FAILED` event and leaves the words alone). What the tools check before they
    /// remember a fact.
    pub async fn forgotten_matching(&self, text: &str) -> Result<Option<Tombstone>> {
        let mut list = Tombstones { list: self.forgotten().await? };
        if let Some(k) = list.find(text) {
            return Ok(Some(list.list.swap_remove(k)));
        }
        let clean = [crate::extract::sanitize::strip_invisible(text.trim()).trim().to_string()];
        if clean[0].is_empty() {
            return Ok(None);
        }
        // (It reads the tombstones again: one forgotten in between is found by the next call.)
        let meant = self.forgotten_by_meaning(&clean).await;
        let k = meant.first().and_then(|(_, id)| list.list.iter().position(|t| t.id == *id));
        Ok(k.map(|k| list.list.swap_remove(k)))
    }

    /// Drops the tombstone of fact `id` (extraction may learn it again); `NOT_FOUND` if
    /// there is none.
    pub async fn unforget(&self, id: &str) -> Result<Tombstone> {
        self.check_open()?;
        let mut dropped = None;
        // Only the tombstones change: no history entry, no `update` event.
        self.commit(UpdateReason::RemoveFact, None, false, &mut |r| {
            dropped = Some(r.forgotten.unforget(id).ok_or_else(|| Error::NotFound(format!("no forgotten fact with id \"{id}\"")))?);
            Ok(Edit::default())
        })
        .await?;
        Ok(dropped.expect(EDITED))
    }

    /// The history entries, newest first: at most `limit`, only those of revisions below
    /// `before` (for paging), read fresh from storage.
    pub async fn history(&self, limit: Option<usize>, before: Option<u64>) -> Result<Vec<Value>> {
        self.check_open()?;
        let entries = self.refresh_record().await?.history.entries;
        let older = entries.into_iter().filter(|e| before.map_or(true, |b| entry_revision(e) < b));
        Ok(older.take(limit.unwrap_or(usize::MAX)).collect())
    }

    /// Undoes the change of history entry `revision` by reverting to the revision before it;
    /// without one, the newest entry when the call first reads the history (so a second
    /// `undo()` undoes that undo), unless that entry is a revert this instance has not seen:
    /// another instance's undo pressed at the same time, which must not be undone, so this
    /// is then a no-op. The entry is named once, so a replay after a conflict never undoes
    /// something else: when another writer already undid it, a no-op (the current document
    /// is returned, nothing is written); when a newer change is in effect on top of it,
    /// `CONFLICT` and nothing is written; `NOT_FOUND` when the history has no such entry.
    pub async fn undo(&self, revision: Option<u64>) -> Result<Document> {
        self.check_open()?;
        let seen = self.revision();
        let mut named = revision;
        let record = self
            .commit(UpdateReason::Revert, None, true, &mut |r| {
                let target = match named {
                    Some(rev) => rev,
                    None => {
                        let newest = r.history.entries.first().ok_or_else(|| Error::NotFound("nothing to undo: the history is empty".into()))?;
                        let rev = entry_revision(newest);
                        if rev > seen && newest.get("reason").and_then(Value::as_str) == Some("revert") {
                            return Ok(Edit::default());
                        }
                        *named.insert(rev)
                    }
                };
                match r.history.undo_state(target) {
                    UndoState::Newest => self.revert_in(r, target - 1),
                    UndoState::Undone => Ok(Edit::default()),
                    UndoState::Overtaken(newer) => Err(Error::Conflict(format!(
                        "revision {target} is no longer the newest change (revision {newer} came after it): nothing was undone; revert({}) undoes both",
                        target - 1
                    ))),
                    UndoState::Missing => Err(Error::NotFound(format!("nothing to undo: the history has no revision {target}"))),
                }
            })
            .await?;
        Ok(record.doc)
    }

    /// Commits the document as it was after `revision` as a new revision (reason `revert`,
    /// itself revertible). Computed inside the commit, so it replays on a newer document like
    /// any edit (a second revert to the same revision is a no-op); the forget tombstones that
    /// the undone commits added are dropped with them. `NOT_FOUND` when a change since that
    /// revision is no longer in the history.
    pub async fn revert(&self, revision: u64) -> Result<Document> {
        self.check_open()?;
        let record = self.commit(UpdateReason::Revert, None, true, &mut |r| self.revert_in(r, revision)).await?;
        Ok(record.doc)
    }

    /// The edit of a revert to `target`, inside the commit closure: restores the document of
    /// that revision and drops the tombstones the undone commits added. Reverting twice to
    /// the same revision changes nothing the second time (so writes nothing).
    fn revert_in(&self, r: &mut Record, target: u64) -> Result<Edit> {
        // Inside the commit, the cached revision is the base's (the loop adopted it).
        let (doc, forgot) = r.history.document_at(&r.doc, target, self.revision())?;
        r.doc = doc;
        for id in forgot {
            r.forgotten.unforget(&id);
        }
        Ok(Edit { evicted: Vec::new(), reverted_to: Some(target) })
    }

    /// Replaces the summary of one section (`"workContext"` … or `"user.workContext"` …) by
    /// hand; its `updatedAt` becomes now. Invisible and control characters are stripped, as
    /// from a fact.
    pub async fn update_section(&self, section: &str, summary: &str) -> Result<Section> {
        self.check_open()?;
        let key = section.rsplit('.').next().unwrap_or(section);
        let id = SectionId::ALL
            .into_iter()
            .find(|s| s.key() == key && (section == key || section == format!("{}.{}", s.group(), s.key())))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown section \"{section}\" (workContext, personalContext, topOfMind, recentMonths, earlierContext, longTermBackground)"
                ))
            })?;
        let now = crate::base::time::iso_from_millis(self.now());
        // Control characters are stripped on store, as from a fact (an OSC 52 clipboard
        // write in a summary would reach a terminal that prints it).
        let summary = crate::extract::sanitize::strip_invisible(summary).trim().to_string();
        let record = self
            .commit(UpdateReason::UpdateSection, None, true, &mut |r| {
                let s = r.doc.section_mut(id);
                if s.summary != summary {
                    s.summary = summary.clone();
                    s.updated_at = now.clone();
                }
                Ok(Edit::default())
            })
            .await?;
        Ok(record.doc.section(id).clone())
    }

    /// Empties all sections and facts. The thread watermarks stay: a conversation already
    /// extracted is not learned again (which would bring back what was just cleared). The
    /// forget tombstones stay too (the user still wants those things forgotten), unless
    /// `tombstones`.
    pub async fn clear(&self, tombstones: bool) -> Result<()> {
        self.check_open()?;
        self.commit(UpdateReason::Clear, None, true, &mut |r| {
            edit::clear(&mut r.doc);
            if tombstones {
                r.forgotten.list.clear();
            }
            Ok(Edit::default())
        })
        .await?;
        Ok(())
    }
}

/// A hand-written fact's content as it is stored: invisible and control characters
/// (terminal escapes among them) stripped, trimmed; `INVALID_INPUT` when nothing is left.
fn stored_text(content: &str) -> Result<String> {
    let clean = crate::extract::sanitize::strip_invisible(content);
    let clean = clean.trim();
    if clean.is_empty() && !content.trim().is_empty() {
        return Err(Error::invalid("`content` has only invisible or control characters"));
    }
    Ok(clean.to_string())
}
