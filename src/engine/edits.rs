//! Manual edits (`import`, `addFact`, `updateFact`, `removeFact`, `updateSection`, `clear`):
//! each validates its input, then runs its [`crate::edit`] function through the commit loop,
//! which replays it on a newer document when another writer got there first.
//!
//! `import` and `addFact` apply `maxFacts` like an extraction does (by the eviction policy);
//! `addFact` never evicts the fact it adds. What they evict is in the `update` event's
//! `evicted`.

use super::{Engine, UpdateReason};
use crate::apply::enforce_max_facts;
use crate::document::Document;
use crate::edit::{self, NewManualFact};
use crate::error::{Error, Result};
use crate::json::Value;
use crate::{Fact, Section, SectionId};

/// What a successful [`Engine::commit`] guarantees about its edit closure.
const EDITED: &str = "a successful commit ran the edit";

impl Engine {
    /// Replaces the whole memory with `doc` (a JSON object or string), after validating it.
    /// Over `maxFacts`, the facts the eviction policy ranks lowest are left out.
    pub async fn import(&self, doc: &Value) -> Result<Document> {
        self.check_open()?;
        let parsed = match doc {
            Value::String(s) => Document::from_json(s, &*self.parts().ids),
            other => Document::from_value(other, &*self.parts().ids),
        }
        .map_err(|e| Error::invalid(format!("cannot import: {e}")))?;
        let cfg = self.config().apply;
        let now = crate::time::iso_from_millis(self.now());
        let record = self
            .commit(UpdateReason::Import, None, false, &mut |r| {
                r.doc = parsed.clone();
                Ok(enforce_max_facts(&mut r.doc, &cfg, &now, &[]))
            })
            .await?;
        Ok(record.doc)
    }

    /// Adds a hand-written fact; returns it (or the existing fact with the same content).
    /// Over `maxFacts`, the lowest-ranked other fact is evicted.
    pub async fn add_fact(&self, fact: &Value) -> Result<Fact> {
        self.check_open()?;
        let nf = NewManualFact::from_value(fact)?;
        let ids = self.parts().ids.clone();
        let now = crate::time::iso_from_millis(self.now());
        let cfg = self.config().apply;
        let mut fact = None;
        self.commit(UpdateReason::AddFact, None, true, &mut |r| {
            let (f, _) = edit::add_fact(&mut r.doc, &nf, &now, &*ids)?;
            let evicted = enforce_max_facts(&mut r.doc, &cfg, &now, &[f.id.as_str()]);
            fact = Some(f);
            Ok(evicted)
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// Patches fact `id`; `NOT_FOUND` if there is none.
    pub async fn update_fact(&self, id: &str, patch: &Value) -> Result<Fact> {
        self.check_open()?;
        let mut fact = None;
        self.commit(UpdateReason::UpdateFact, None, true, &mut |r| {
            fact = Some(edit::update_fact(&mut r.doc, id, patch)?);
            Ok(Vec::new())
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// Removes fact `id`; `NOT_FOUND` if there is none.
    pub async fn remove_fact(&self, id: &str) -> Result<Fact> {
        self.check_open()?;
        let mut fact = None;
        self.commit(UpdateReason::RemoveFact, None, true, &mut |r| {
            fact = Some(edit::remove_fact(&mut r.doc, id)?);
            Ok(Vec::new())
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// Replaces the summary of one section (`"workContext"` … or `"user.workContext"` …) by
    /// hand; its `updatedAt` becomes now.
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
        let now = crate::time::iso_from_millis(self.now());
        let summary = summary.trim().to_string();
        let record = self
            .commit(UpdateReason::UpdateSection, None, true, &mut |r| {
                let s = r.doc.section_mut(id);
                if s.summary != summary {
                    s.summary = summary.clone();
                    s.updated_at = now.clone();
                }
                Ok(Vec::new())
            })
            .await?;
        Ok(record.doc.section(id).clone())
    }

    /// Empties all sections and facts. The thread watermarks stay: a conversation already
    /// extracted is not learned again (which would bring back what was just cleared).
    pub async fn clear(&self) -> Result<()> {
        self.check_open()?;
        self.commit(UpdateReason::Clear, None, true, &mut |r| {
            edit::clear(&mut r.doc);
            Ok(Vec::new())
        })
        .await?;
        Ok(())
    }
}
