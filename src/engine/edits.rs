//! Manual edits (`import`, `addFact`, `updateFact`, `removeFact`, `updateSection`, `clear`):
//! each validates its input, then runs its [`crate::edit`] function through the commit loop,
//! which replays it on a newer document when another writer got there first.

use super::{Engine, UpdateReason};
use crate::document::Document;
use crate::edit::{self, NewManualFact};
use crate::error::{Error, Result};
use crate::json::Value;
use crate::{Fact, Section, SectionId};

/// What a successful [`Engine::commit`] guarantees about its edit closure.
const EDITED: &str = "a successful commit ran the edit";

impl Engine {
    /// Replaces the whole memory with `doc` (a JSON object or string), after validating it.
    pub async fn import(&self, doc: &Value) -> Result<Document> {
        self.check_open()?;
        let parsed = match doc {
            Value::String(s) => Document::from_json(s, &*self.parts().ids),
            other => Document::from_value(other, &*self.parts().ids),
        }
        .map_err(|e| Error::invalid(format!("cannot import: {e}")))?;
        self.commit(UpdateReason::Import, None, false, &mut |d| {
            *d = parsed.clone();
            Ok(())
        })
        .await
    }

    /// Adds a hand-written fact; returns it (or the existing fact with the same content).
    pub async fn add_fact(&self, fact: &Value) -> Result<Fact> {
        self.check_open()?;
        let nf = NewManualFact::from_value(fact)?;
        let ids = self.parts().ids.clone();
        let now = crate::time::iso_from_millis(self.now());
        let mut fact = None;
        self.commit(UpdateReason::AddFact, None, true, &mut |d| {
            fact = Some(edit::add_fact(d, &nf, &now, &*ids)?.0);
            Ok(())
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// Patches fact `id`; `NOT_FOUND` if there is none.
    pub async fn update_fact(&self, id: &str, patch: &Value) -> Result<Fact> {
        self.check_open()?;
        let mut fact = None;
        self.commit(UpdateReason::UpdateFact, None, true, &mut |d| {
            fact = Some(edit::update_fact(d, id, patch)?);
            Ok(())
        })
        .await?;
        Ok(fact.expect(EDITED))
    }

    /// Removes fact `id`; `NOT_FOUND` if there is none.
    pub async fn remove_fact(&self, id: &str) -> Result<Fact> {
        self.check_open()?;
        let mut fact = None;
        self.commit(UpdateReason::RemoveFact, None, true, &mut |d| {
            fact = Some(edit::remove_fact(d, id)?);
            Ok(())
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
        let doc = self
            .commit(UpdateReason::UpdateSection, None, true, &mut |d| {
                let s = d.section_mut(id);
                if s.summary != summary {
                    s.summary = summary.clone();
                    s.updated_at = now.clone();
                }
                Ok(())
            })
            .await?;
        Ok(doc.section(id).clone())
    }

    /// Empties all sections and facts.
    pub async fn clear(&self) -> Result<()> {
        self.check_open()?;
        self.commit(UpdateReason::Clear, None, true, &mut |d| {
            edit::clear(d);
            Ok(())
        })
        .await?;
        Ok(())
    }
}
