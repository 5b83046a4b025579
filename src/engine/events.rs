//! Events the engine emits: `update`, `error`, `queued`, `processed`, `debug`.

use crate::base::error::Error;
use crate::base::time::Millis;
use crate::extract::delta::Skipped;
use crate::llm::Usage;
use crate::memory::document::{Document, Fact, SectionId};

/// Why memory changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateReason {
    /// An LLM extraction of a queued thread was applied.
    Extraction,
    /// `addFact`.
    AddFact,
    /// `updateFact`.
    UpdateFact,
    /// `removeFact`.
    RemoveFact,
    /// `updateSection`.
    UpdateSection,
    /// `clear`.
    Clear,
    /// `import`.
    Import,
    /// `revert` or `undo`: an earlier version of the document, committed again.
    Revert,
    /// Another tab, worker or process changed the stored memory.
    Remote,
}

impl UpdateReason {
    /// The name used in JS events, e.g. `"extraction"`.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateReason::Extraction => "extraction",
            UpdateReason::AddFact => "addFact",
            UpdateReason::UpdateFact => "updateFact",
            UpdateReason::RemoveFact => "removeFact",
            UpdateReason::UpdateSection => "updateSection",
            UpdateReason::Clear => "clear",
            UpdateReason::Import => "import",
            UpdateReason::Revert => "revert",
            UpdateReason::Remote => "remote",
        }
    }
}

/// What changed in memory: the payload of `update`.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateEvent {
    /// Why.
    pub reason: UpdateReason,
    /// The thread whose conversation was extracted (for [`UpdateReason::Extraction`]).
    pub thread_id: Option<String>,
    /// The stored revision after the change.
    pub revision: u64,
    /// Facts that are new.
    pub added: Vec<Fact>,
    /// Ids of facts that are gone.
    pub removed: Vec<String>,
    /// Facts whose content, category or confidence changed.
    pub changed: Vec<Fact>,
    /// Sections whose summary changed.
    pub sections: Vec<SectionId>,
    /// Facts the `maxFacts` cap dropped in this change (those that were stored are also in
    /// `removed`; an imported or new fact evicted at once is only here).
    pub evicted: Vec<Fact>,
}

impl UpdateEvent {
    /// The difference between two versions of the document.
    pub fn diff(reason: UpdateReason, before: &Document, after: &Document, revision: u64) -> UpdateEvent {
        let mut ev = UpdateEvent {
            reason,
            thread_id: None,
            revision,
            added: Vec::new(),
            removed: Vec::new(),
            changed: Vec::new(),
            sections: Vec::new(),
            evicted: Vec::new(),
        };
        let d = crate::memory::diff::diff_facts(&before.facts, &after.facts);
        ev.added = d.added.iter().map(|&i| after.facts[i].clone()).collect();
        ev.removed = d.removed.iter().map(|&i| before.facts[i].id.clone()).collect();
        ev.changed = d.changed.iter().map(|&(_, i)| after.facts[i].clone()).collect();
        ev.sections = SectionId::ALL.into_iter().filter(|s| before.section(*s).summary != after.section(*s).summary).collect();
        ev
    }
}

/// A failure reported as an event: the payload of `error`.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorEvent {
    /// The error (its `code` is the stable code).
    pub error: Error,
    /// The queued thread concerned, if any.
    pub thread_id: Option<String>,
    /// Which attempt of that thread failed (1-based), if any.
    pub attempt: Option<u32>,
}

/// A queued conversation was extracted and applied: the payload of `processed` (also when
/// the model found nothing new, so a status display can tell "done" from "never ran").
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessedEvent {
    /// The thread.
    pub thread_id: String,
    /// Whether memory changed (if so, an `update` event came first).
    pub changed: bool,
    /// The stored revision afterwards.
    pub revision: u64,
    /// Parts of the model's reply that were invalid and skipped.
    pub skipped: Vec<Skipped>,
    /// Tokens of the extraction call: the provider's figures when it reported them, else
    /// the token counter's count of the request and the reply.
    pub usage: Usage,
    /// Whether `usage` came from the provider (`false`: estimated).
    pub usage_reported: bool,
    /// What the reply proposed: new facts, section updates (and section strings),
    /// removals and reinforcements. 0: the model said "nothing changed".
    pub proposed: usize,
    /// What memory learned: facts added and sections replaced. 0 is an empty extraction
    /// (whether the model proposed nothing or everything was refused).
    pub learned: usize,
}

/// A conversation was queued: the payload of `queued`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedEvent {
    /// The thread.
    pub thread_id: String,
    /// When the queue is due to be processed (epoch ms), if scheduled.
    pub due_at: Option<Millis>,
    /// Entries waiting in this instance's view of the queue.
    pub pending: usize,
}

/// A diagnostic note: the payload of `debug`. Nothing failed; something an application
/// may not expect happened (a conversation not queued, memory that ends with the process).
#[derive(Debug, Clone, PartialEq)]
pub struct DebugEvent {
    /// A stable code: `"NOT_QUEUED"` (observe() resolved `false`), `"EPHEMERAL_STORAGE"`,
    /// `"EMPTY_EXTRACTIONS"` (a run of extractions that learned nothing), or
    /// `"HISTORY_DROPPED"` (a deletion on a full store was written without some history).
    pub code: &'static str,
    /// What happened and why, for a person.
    pub message: String,
    /// The thread concerned, if any.
    pub thread_id: Option<String>,
    /// For `NOT_QUEUED`: `"paused"`, `"empty"`, `"no-user-message"` or `"no-answer"`. For
    /// `EMPTY_EXTRACTIONS`: `"nothing-proposed"` or `"all-refused"`. For `HISTORY_DROPPED`:
    /// `"storage-full"`.
    pub reason: Option<&'static str>,
}

/// Everything the engine reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Memory changed.
    Update(UpdateEvent),
    /// Something failed in the background (or a queued entry was dropped).
    Error(ErrorEvent),
    /// A conversation was queued.
    Queued(QueuedEvent),
    /// A queued conversation was processed.
    Processed(ProcessedEvent),
    /// A diagnostic note.
    Debug(DebugEvent),
}

impl Event {
    /// The event's name in JS: `"update"`, `"error"`, `"queued"`, `"processed"`, `"debug"`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Update(_) => "update",
            Event::Error(_) => "error",
            Event::Queued(_) => "queued",
            Event::Processed(_) => "processed",
            Event::Debug(_) => "debug",
        }
    }
}
