//! The delta: what one extraction says should change in memory.
//!
//! A [`Delta`] is produced by the parser from a model reply and consumed by
//! [`apply_delta`](crate::extract::apply::apply_delta). It is plain data and serialisable, so a commit
//! that loses a race can replay it on the newer document (or send it to another tab)
//! without calling the LLM again.
//!
//! The shape follows DeerFlow HEAD's extraction output: section updates and new facts may
//! carry the labels `scope`, `durability` and `authority` (only `user` + `durable` +
//! `descriptive` items are stored; the labels themselves are not), a removal may name the new
//! fact that replaces it (`replacementFactIndex`), and `factsToReinforce` lists facts the
//! conversation confirmed.

use crate::memory::document::SectionId;

/// DeerFlow HEAD's write-side labels of an item. `None` = not given = the accepted value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Labels {
    /// Whom the item is about: `user` (accepted), `thread`, `project`, … (lower-cased).
    pub scope: Option<String>,
    /// `durable` (accepted) or `temporary`.
    pub durability: Option<String>,
    /// `descriptive` (accepted) or `transactional` (a permission, a one-off instruction).
    pub authority: Option<String>,
}

impl Labels {
    /// Whether the item is about the user, durable and descriptive (a missing label counts
    /// as the accepted value).
    pub fn accepted(&self) -> bool {
        let ok = |v: &Option<String>, accepted: &str| v.as_deref().map_or(true, |v| v == accepted);
        ok(&self.scope, "user") && ok(&self.durability, "durable") && ok(&self.authority, "descriptive")
    }
}

/// A proposed replacement for one summary section.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SectionUpdate {
    /// The new summary text.
    pub summary: String,
    /// Whether the model asked for the replacement. Applied only when `true` and the summary
    /// is not blank.
    pub should_update: bool,
    /// Scope labels (an update not about the user in general is not applied).
    pub labels: Labels,
}

/// A proposed new fact, already validated: non-empty content, a category, and a finite
/// confidence within [0, 1] (0.5 when the model gave none).
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NewFact {
    /// The fact, trimmed.
    pub content: String,
    /// Its category (`context` when the model gave none).
    pub category: String,
    /// The model's confidence, clamped to [0, 1].
    pub confidence: f64,
    /// Scope labels (not stored).
    pub labels: Labels,
    /// How many days the fact is expected to stay true (stored as `expected_valid_days`).
    pub expected_valid_days: Option<f64>,
    /// For a `correction`: what was wrong (stored as `sourceError`, rendered `(avoid: …)`).
    pub source_error: Option<String>,
    /// When the event the fact tells of happened: an ISO-8601 date or date-time already
    /// checked by [`event_days`](crate::base::time::event_days) (stored as `happenedAt`).
    pub happened_at: Option<String>,
}

/// A section the reply gave as a bare string (`"workContext": "Neovim"`) instead of
/// `{"summary": …}`, or a statement of the reply's `userSaid` list: no summary, but often
/// the user's own words, which apply may keep as a candidate fact
/// (docs/pipeline.md#small-models).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SectionString {
    /// Where in the reply, e.g. `user.workContext` or `userSaid[0]`.
    pub path: String,
    /// The string, trimmed.
    pub text: String,
}

/// One entry of `factsToRemove`: a plain id, or DeerFlow HEAD's removal object (its
/// free-text `reason` is accepted and not kept).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Removal {
    /// The fact to remove.
    pub id: String,
    /// `scope` of the removal; a non-`user` scope removes nothing.
    pub scope: Option<String>,
    /// Index into `newFacts` of the fact that replaces this one: the removal applies only if
    /// that fact is applied.
    pub replacement: Option<usize>,
}

impl Removal {
    /// A plain removal of `id`.
    pub fn id(id: impl Into<String>) -> Removal {
        Removal { id: id.into(), ..Removal::default() }
    }
}

/// One piece of a reply that was not applied, with a stable reason (reported in
/// `processed` events, never applied).
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Skipped {
    /// Where in the reply, e.g. `newFacts[2]`.
    pub path: String,
    /// A stable code from [`reasons`], e.g. `invalid`, `scope-gated`, `near-duplicate`.
    pub reason: String,
    /// Human-readable detail, e.g. `confidence is not a finite number`.
    pub detail: String,
    /// The fact concerned (the one merged into, the one a removal named …), if any.
    pub fact: Option<String>,
}

impl Skipped {
    /// A skipped part with a reason code and a detail.
    pub fn new(path: String, reason: &str, detail: &str) -> Skipped {
        Skipped { path, reason: reason.to_string(), detail: detail.to_string(), fact: None }
    }

    /// The same, naming the fact concerned.
    pub fn with_fact(mut self, id: &str) -> Skipped {
        self.fact = Some(id.to_string());
        self
    }
}

pub use crate::json::field::{cat, index_path as path};

/// The stable reason codes of [`Skipped::reason`] (documented in docs/pipeline.md).
pub mod reasons {
    /// The part is malformed (the detail says how).
    pub const INVALID: &str = "invalid";
    /// A new fact below `factConfidenceThreshold`.
    pub const BELOW_THRESHOLD: &str = "below-threshold";
    /// Not about the user in general: a `scope`, `durability` or `authority` label refused it.
    pub const SCOPE_GATED: &str = "scope-gated";
    /// A new fact copied from an assistant message, not said by the user.
    pub const ASSISTANT_COPY: &str = "assistant-copy";
    /// A new fact that records a file upload (uploads belong to one session).
    pub const UPLOAD: &str = "upload";
    /// A new fact with the same text as an existing one (that fact was confirmed).
    pub const DUPLICATE: &str = "duplicate";
    /// A new fact saying the same as an existing one in other words (merged into it).
    pub const NEAR_DUPLICATE: &str = "near-duplicate";
    /// "Remove X and add X's same text": X stays as it was (confirmed).
    pub const UNCHANGED: &str = "unchanged";
    /// A new fact that `maxFacts` evicted in the same commit.
    pub const EVICTED: &str = "evicted";
    /// A paired removal whose replacement was not applied.
    pub const REPLACEMENT_NOT_APPLIED: &str = "replacement-not-applied";
    /// A removal in a delta whose new facts were all refused.
    pub const NO_FACT_APPLIED: &str = "no-fact-applied";
    /// More unpaired removals in one delta than the guard allows.
    pub const TOO_MANY_REMOVALS: &str = "too-many-removals";
    /// An unpaired removal of a fact the user's new messages do not mention.
    pub const REMOVAL_UNRELATED: &str = "removal-unrelated";
    /// A removal or reinforcement of an id memory does not hold.
    pub const UNKNOWN_FACT: &str = "unknown-fact";
    /// A removal (or replacement) of a fact the extraction prompt did not show the model
    /// (memory larger than `extractionMemoryTokens`): nothing unseen is deleted.
    pub const NOT_SHOWN: &str = "not-shown";
    /// A new fact or summary quoting a secret of the LLM configuration (the API key, a header
    /// value): secrets never enter the document.
    pub const SECRET: &str = "secret";
    /// A fact or summary that copies the extraction prompt's own wording: an example's
    /// fact the user did not say, or a section's description (`"last 1-3 months"`).
    pub const PROMPT_COPY: &str = "prompt-copy";
    /// A section update too short to be a summary (`"workContext": "Neovim"`) and not the
    /// user's own words either (then it would have been kept as a fact).
    pub const FRAGMENT: &str = "fragment";
    /// A new fact that is the user's task rather than something about them: a question, a
    /// request (`Translate …`), or mostly text the user quoted or pasted.
    pub const TASK_RESIDUE: &str = "task-residue";
    /// A new fact the user asked to forget (the same text as a forget tombstone, or a
    /// near-duplicate of one); `factId` is the forgotten fact's id.
    pub const FORGOTTEN: &str = "forgotten";
}

/// Everything one extraction proposes.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Delta {
    /// Section proposals, indexed by [`SectionId::index`]; `None` = not mentioned.
    pub sections: [Option<SectionUpdate>; 6],
    /// Facts to add, in reply order.
    pub new_facts: Vec<NewFact>,
    /// Facts to remove, in reply order, each id once.
    pub facts_to_remove: Vec<Removal>,
    /// Ids of facts the conversation confirmed.
    pub facts_to_reinforce: Vec<String>,
    /// Parts of the reply that were invalid and skipped.
    pub skipped: Vec<Skipped>,
    /// Sections given as bare strings and the statements of `userSaid` (see
    /// [`SectionString`]).
    pub section_strings: Vec<SectionString>,
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
            && self.facts_to_reinforce.is_empty()
            && self.sections.iter().flatten().all(|s| !s.should_update || s.summary.trim().is_empty())
            && self.section_strings.is_empty()
    }
}
