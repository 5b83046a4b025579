//! The delta: what one extraction says should change in memory (SPEC §6).
//!
//! A [`Delta`] is produced by the parser from a model reply and consumed by
//! [`apply_delta`](crate::apply::apply_delta). It is plain data and serialisable, so a commit
//! that loses a race can replay it on the newer document (or send it to another tab)
//! without calling the LLM again.

use crate::document::SectionId;

/// A proposed replacement for one summary section.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SectionUpdate {
    /// The new summary text.
    pub summary: String,
    /// Whether the model asked for the replacement. Applied only when `true` and the summary
    /// is not blank.
    pub should_update: bool,
}

/// A proposed new fact, already validated: non-empty content, a category, and a finite
/// confidence within [0, 1] (0.5 when the model gave none).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NewFact {
    /// The fact, trimmed.
    pub content: String,
    /// Its category (`context` when the model gave none).
    pub category: String,
    /// The model's confidence, clamped to [0, 1].
    pub confidence: f64,
}

/// One piece of a reply that was skipped, with the reason (reported in events, never
/// applied).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Skipped {
    /// Where in the reply, e.g. `newFacts[2]`.
    pub path: String,
    /// Why, e.g. `confidence is not a finite number`.
    pub reason: String,
}

/// Everything one extraction proposes.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Delta {
    /// Section proposals, indexed by [`SectionId::index`]; `None` = not mentioned.
    pub sections: [Option<SectionUpdate>; 6],
    /// Facts to add, in reply order.
    pub new_facts: Vec<NewFact>,
    /// Ids of facts to remove.
    pub facts_to_remove: Vec<String>,
    /// Parts of the reply that were invalid and skipped.
    pub skipped: Vec<Skipped>,
}

impl Delta {
    /// The proposal for section `id`, if any.
    pub fn section(&self, id: SectionId) -> Option<&SectionUpdate> {
        self.sections[id.index()].as_ref()
    }

    /// Whether the delta proposes nothing at all.
    pub fn is_noop(&self) -> bool {
        self.new_facts.is_empty()
            && self.facts_to_remove.is_empty()
            && self.sections.iter().flatten().all(|s| !s.should_update || s.summary.trim().is_empty())
    }
}
