//! The debounce queue state machine (SPEC §5, §11 Queue and failures).
//!
//! PLACEHOLDER BODIES: the types and signatures below are the contract the engine is
//! written against; the logic and tests are being written.
//!
//! The queue is plain data ([`QueueFile`]) persisted in storage, so every instance (tab,
//! worker, process) sharing the storage sees the same entries, plus pure functions over it
//! that take the current time as an argument. Nothing here sleeps or reads a clock, so the
//! timing rules are tested natively by passing times by hand.

use crate::message::ChatMessage;
use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// Timing of the update queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Quiet time after the last `observe()` before processing (default 30 000).
    pub debounce_ms: u64,
    /// Longest wait of an entry under a continuous stream (default 300 000).
    pub max_wait_ms: u64,
    /// Attempts before an entry is abandoned (default 5).
    pub max_attempts: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig { debounce_ms: 30_000, max_wait_ms: 300_000, max_attempts: 5 }
    }
}

/// An instance's exclusive right to process an entry until `until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The instance id of the claimant.
    pub owner: String,
    /// Epoch ms after which the claim is void (the claimant is presumed dead).
    pub until: Millis,
}

/// One thread's pending update: the newest filtered history of that thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The thread id given to `observe()`.
    pub thread_id: String,
    /// The filtered conversation (newest full history of the thread).
    pub messages: Vec<ChatMessage>,
    /// When this entry started waiting (anchor of `maxWaitMs`).
    pub first_at: Millis,
    /// When the thread was last observed (anchor of the debounce).
    pub last_at: Millis,
    /// Changes with every `observe()`; lets a finished run tell whether newer messages
    /// arrived meanwhile.
    pub version: String,
    /// Failed attempts so far for the current version.
    pub attempts: u32,
    /// After a failure: not before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Millis>,
    /// Who is processing it right now, if anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
    /// Code of the last failure, for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The persisted queue: all pending entries, oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QueueFile {
    /// Pending entries in order of `first_at`.
    pub entries: Vec<Entry>,
}

/// What happened to an entry after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureOutcome {
    /// It stays queued and is due again at `retry_at`; `attempt` is the number of the
    /// attempt that failed (1-based).
    Retry {
        /// The failed attempt's number.
        attempt: u32,
        /// When to try again.
        retry_at: Millis,
    },
    /// It reached `max_attempts` and was removed.
    Abandoned {
        /// The failed attempt's number (= `max_attempts`).
        attempt: u32,
    },
    /// Newer messages arrived while it ran; the failure does not count against them.
    Superseded,
    /// The entry is gone (processed or removed by someone else).
    Gone,
}

impl QueueFile {
    /// Reads a persisted queue. Entries that cannot be read are dropped and described in the
    /// second element (so the caller can emit an `error` event for each). Text that is not a
    /// queue at all gives an empty queue and one description.
    pub fn from_json(text: &str) -> (QueueFile, Vec<String>) {
        let _ = text;
        (QueueFile::default(), Vec::new())
    }

    /// The queue as JSON for storage.
    pub fn to_json(&self) -> String {
        String::new()
    }

    /// The entry of `thread_id`, if queued.
    pub fn entry(&self, thread_id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.thread_id == thread_id)
    }

    /// Queues (or replaces) `thread_id`'s messages observed at `now`. Keeps `first_at` and
    /// any claim of an existing entry; resets attempts and retry time (new content).
    pub fn observe(&mut self, thread_id: &str, messages: Vec<ChatMessage>, now: Millis, version: String) {
        let _ = (thread_id, messages, now, version);
    }

    /// When the queue next needs attention from instance `me`, or `None` if never.
    pub fn next_due(&self, cfg: &QueueConfig, me: &str, now: Millis) -> Option<Millis> {
        let _ = (cfg, me, now);
        None
    }

    /// Thread ids that instance `me` should process at `now`, oldest first.
    pub fn due(&self, cfg: &QueueConfig, me: &str, now: Millis) -> Vec<String> {
        let _ = (cfg, me, now);
        Vec::new()
    }

    /// Thread ids that `me` may process right now regardless of timing (for `flush()`):
    /// every entry not claimed by another live instance, oldest first.
    pub fn claimable(&self, me: &str, now: Millis) -> Vec<String> {
        let _ = (me, now);
        Vec::new()
    }

    /// Claims the given threads for `me` until `now + lease_ms`; returns those actually
    /// claimed with the version claimed (threads claimed by another live instance or gone
    /// are skipped).
    pub fn claim(&mut self, threads: &[String], me: &str, now: Millis, lease_ms: u64) -> Vec<(String, String)> {
        let _ = (threads, me, now, lease_ms);
        Vec::new()
    }

    /// Records a successful run of `version`: the entry is removed, or, if newer messages
    /// arrived meanwhile, kept unclaimed with `first_at = now`.
    pub fn succeed(&mut self, thread_id: &str, version: &str, now: Millis) {
        let _ = (thread_id, version, now);
    }

    /// Records a failed run of `version` with error `code`.
    pub fn fail(&mut self, thread_id: &str, version: &str, code: &str, now: Millis, cfg: &QueueConfig) -> FailureOutcome {
        let _ = (thread_id, version, code, now, cfg);
        FailureOutcome::Gone
    }

    /// Drops every claim held by `me` (on `close()`), so others can take the entries at once.
    pub fn release(&mut self, me: &str) {
        let _ = me;
    }
}

/// Delay before retrying an entry whose `attempts`-th attempt failed.
pub fn retry_delay_ms(attempts: u32) -> u64 {
    let _ = attempts;
    30_000
}
