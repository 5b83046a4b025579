//! The debounce queue state machine (docs/design.md#queue-and-failures).
//!
//! The queue is plain data ([`QueueFile`]) persisted in storage, so every instance (tab,
//! worker, process) sharing the storage sees the same entries, plus pure functions over it
//! that take the current time as an argument. Nothing here sleeps or reads a clock, so the
//! timing rules are tested natively by passing times by hand.
//!
//! Rules, for one instance `me` at time `now`:
//!
//! * **One entry per thread**: `observe` replaces the queued history of the same thread.
//! * **Claims**: a claim is live while `until > now`. An entry under another instance's live
//!   claim is not due for `me` but its `until` counts for [`QueueFile::next_due`] (so a
//!   survivor takes over when the claimant died); an entry under `me`'s own live claim is in
//!   progress and ignored. An expired claim counts as none.
//! * **Retry**: an entry with `retry_at` (after a failure) is due at that time.
//! * **Debounce**: every other entry is *waiting*. The waiting entries share one timer,
//!   reset by each observe and bounded by `max_wait_ms` from the oldest of them:
//!   `min(max(last_at) + debounce_ms, min(first_at) + max_wait_ms)`. When it is reached all
//!   waiting entries are due together, so a continuous stream cannot starve the queue.

use crate::base::time::Millis;
use crate::memory::message::ChatMessage;

mod codec;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    /// The instance id of the claimant.
    pub owner: String,
    /// Epoch ms after which the claim is void (the claimant is presumed dead).
    pub until: Millis,
}

/// One thread's pending update: the newest filtered history of that thread.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
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
    pub retry_at: Option<Millis>,
    /// Who is processing it right now, if anyone.
    pub claim: Option<Claim>,
    /// Code of the last failure, for display.
    pub last_error: Option<String>,
}

/// The persisted queue: all pending entries, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct QueueFile {
    /// Pending entries in order of `first_at`.
    pub entries: Vec<Entry>,
}

/// What happened to an entry after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureOutcome {
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

/// Version of the persisted envelope `{"v":1,"entries":[…]}`.
pub(crate) const QUEUE_FORMAT_VERSION: u32 = 1;

/// First retry delay (after the first failed attempt).
pub(crate) const RETRY_BASE_MS: u64 = 30_000;

/// Longest retry delay.
pub(crate) const RETRY_MAX_MS: u64 = 15 * 60_000;

/// Where an entry stands for one instance at one time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Claimed by this instance with a live claim until the given time: in progress.
    Mine(Millis),
    /// Claimed by another instance until the given time.
    Foreign(Millis),
    /// In retry backoff: due at the given time.
    Retry(Millis),
    /// Part of the debounce group.
    Waiting,
}

impl Entry {
    /// Whether another instance than `me` holds a live claim on this entry at `now`.
    pub(crate) fn claimed_by_other(&self, me: &str, now: Millis) -> bool {
        matches!(self.status(me, now), Status::Foreign(_))
    }

    /// Whether `me` holds a live claim on this entry at `now` (it is in progress there).
    #[cfg(test)]
    pub(crate) fn claimed_by(&self, me: &str, now: Millis) -> bool {
        matches!(self.status(me, now), Status::Mine(_))
    }

    fn status(&self, me: &str, now: Millis) -> Status {
        match &self.claim {
            // A claim is live while `until > now`; an expired claim counts as none.
            Some(c) if c.until > now => {
                if c.owner == me {
                    Status::Mine(c.until)
                } else {
                    Status::Foreign(c.until)
                }
            }
            _ => match self.retry_at {
                Some(t) => Status::Retry(t),
                None => Status::Waiting,
            },
        }
    }
}

impl QueueFile {
    /// Reads a persisted queue. Entries that cannot be read are dropped and described in the
    /// second element (so the caller can emit an `error` event for each). Text that is not a
    /// queue at all gives an empty queue and one description.
    ///
    /// The text must be an object with an `entries` array (`v` is not checked, so a queue
    /// written by a newer minor format is still read as far as possible). An entry is dropped
    /// when it does not deserialize, has an empty `threadId` or no messages. When two entries
    /// name the same thread, the one observed last (`lastAt`) is kept. Never panics.
    pub(crate) fn from_json(text: &str) -> (QueueFile, Vec<String>) {
        let mut problems = Vec::new();
        let value = match crate::json::Value::parse(text) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("persisted queue is not JSON ({e}); starting with an empty queue"));
                return (QueueFile::default(), problems);
            }
        };
        let items = match value.get("entries").and_then(|v| v.as_array()) {
            Some(a) => a,
            None => {
                problems.push("persisted queue has no `entries` list; starting with an empty queue".to_string());
                return (QueueFile::default(), problems);
            }
        };
        let mut queue = QueueFile::default();
        for (i, item) in items.iter().enumerate() {
            let name = match item.get("threadId").and_then(|t| t.as_str()) {
                Some(t) => format!("queue entry {i} (thread \"{t}\")"),
                None => format!("queue entry {i}"),
            };
            let entry: Entry = match codec::entry_from_value(item) {
                Ok(e) => e,
                Err(e) => {
                    problems.push(format!("{name} is unreadable and was dropped: {e}"));
                    continue;
                }
            };
            if entry.thread_id.is_empty() {
                problems.push(format!("{name} has an empty thread id and was dropped"));
                continue;
            }
            if entry.messages.is_empty() {
                problems.push(format!("{name} has no messages and was dropped"));
                continue;
            }
            match queue.entries.iter().position(|e| e.thread_id == entry.thread_id) {
                Some(j) if queue.entries[j].last_at >= entry.last_at => {
                    problems.push(format!("{name} duplicates a newer entry of the same thread and was dropped"));
                }
                Some(j) => {
                    problems.push(format!("an older duplicate of {name} was dropped"));
                    queue.entries[j] = entry;
                }
                None => queue.entries.push(entry),
            }
        }
        (queue, problems)
    }

    /// The queue as JSON for storage: `{"v":1,"entries":[…]}`.
    pub(crate) fn to_json(&self) -> String {
        codec::queue_to_json(self)
    }

    /// The entry of `thread_id`, if queued.
    pub(crate) fn entry(&self, thread_id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.thread_id == thread_id)
    }

    /// Queues (or replaces) `thread_id`'s messages observed at `now`. Keeps `first_at` and
    /// any claim of an existing entry; resets attempts and retry time (new content).
    ///
    /// A new entry gets `first_at = last_at = now` and goes to the end. A replacement sets
    /// `last_at = now`, the new `version` and messages, and clears `attempts`, `retry_at` and
    /// `last_error`: the failures counted against the old content do not count against the
    /// new one.
    pub(crate) fn observe(&mut self, thread_id: &str, messages: Vec<ChatMessage>, now: Millis, version: String) {
        if let Some(i) = self.entries.iter().position(|e| e.thread_id == thread_id) {
            if self.entries[i].retry_at.is_some() {
                // New content for an entry in retry backoff starts waiting afresh: with the
                // LLM down and the user still chatting, this keeps it to one call per
                // debounce window instead of one per turn (its max wait had long passed).
                let mut moved = self.entries.remove(i);
                moved.first_at = now;
                let at = self.entries.partition_point(|x| x.first_at <= now);
                self.entries.insert(at, moved);
            }
            let e = self.entries.iter_mut().find(|e| e.thread_id == thread_id).expect("just positioned");
            e.messages = messages;
            e.last_at = now;
            e.version = version;
            e.attempts = 0;
            e.retry_at = None;
            e.last_error = None;
        } else {
            self.entries.push(Entry {
                thread_id: thread_id.to_string(),
                messages,
                first_at: now,
                last_at: now,
                version,
                attempts: 0,
                retry_at: None,
                claim: None,
                last_error: None,
            });
        }
    }

    /// When the debounce group (the waiting entries: no live claim, no retry backoff) is due
    /// for `me` at `now`: `min(max(last_at) + debounce_ms, min(first_at) + max_wait_ms)`.
    /// `None` when no entry is waiting.
    pub(crate) fn debounce_due(&self, cfg: &QueueConfig, me: &str, now: Millis) -> Option<Millis> {
        let mut waiting = self.entries.iter().filter(|e| e.status(me, now) == Status::Waiting);
        let first = waiting.next()?;
        let (mut last_at, mut first_at) = (first.last_at, first.first_at);
        for e in waiting {
            last_at = last_at.max(e.last_at);
            first_at = first_at.min(e.first_at);
        }
        Some(last_at.saturating_add(cfg.debounce_ms).min(first_at.saturating_add(cfg.max_wait_ms)))
    }

    /// When the queue next needs attention from instance `me`, or `None` if never.
    ///
    /// The earliest of: the debounce group's due time ([`QueueFile::debounce_due`]), the
    /// `retry_at` of entries in backoff, and the expiry of live claims: another instance's
    /// (so a survivor takes over when the claimant died) and `me`'s own (an entry whose
    /// settle write failed stays claimed until then, and must not be forgotten). `None`
    /// exactly when the queue is empty. The result may be `<= now`, meaning "due now".
    pub(crate) fn next_due(&self, cfg: &QueueConfig, me: &str, now: Millis) -> Option<Millis> {
        let mut next = self.debounce_due(cfg, me, now);
        for e in &self.entries {
            let t = match e.status(me, now) {
                Status::Foreign(until) | Status::Mine(until) => until,
                Status::Retry(t) => t,
                Status::Waiting => continue,
            };
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        next
    }

    /// Thread ids that instance `me` should process at `now`, oldest first.
    ///
    /// When the debounce group is due, all its entries are due together (one LLM call per
    /// thread); entries in backoff are due once their `retry_at` is reached. Entries under a
    /// live claim (of anyone) are never due.
    pub(crate) fn due(&self, cfg: &QueueConfig, me: &str, now: Millis) -> Vec<String> {
        let group_due = self.debounce_due(cfg, me, now).is_some_and(|t| t <= now);
        self.oldest_first(|e| match e.status(me, now) {
            Status::Waiting => group_due,
            Status::Retry(t) => t <= now,
            Status::Mine(_) | Status::Foreign(_) => false,
        })
    }

    /// Thread ids that `me` may process right now regardless of timing (for `flush()`):
    /// every entry not claimed by another live instance, oldest first. This includes entries
    /// in retry backoff and entries `me` itself has claimed.
    pub(crate) fn claimable(&self, me: &str, now: Millis) -> Vec<String> {
        self.oldest_first(|e| !e.claimed_by_other(me, now))
    }

    /// Ids of the entries passing `keep`, stably sorted by `first_at`.
    fn oldest_first(&self, keep: impl Fn(&Entry) -> bool) -> Vec<String> {
        let mut picked: Vec<&Entry> = self.entries.iter().filter(|e| keep(e)).collect();
        crate::base::sort::sort_by(&mut picked, |a, b| a.first_at < b.first_at);
        picked.into_iter().map(|e| e.thread_id.clone()).collect()
    }

    /// Claims the given threads for `me` until `now + lease_ms`; returns those actually
    /// claimed with the version claimed (threads claimed by another live instance or gone
    /// are skipped). A thread `me` already holds is claimed again (its lease renewed); a
    /// thread listed twice is returned once.
    pub(crate) fn claim(&mut self, threads: &[String], me: &str, now: Millis, lease_ms: u64) -> Vec<(String, String)> {
        let until = now.saturating_add(lease_ms);
        let mut out: Vec<(String, String)> = Vec::new();
        for t in threads {
            if out.iter().any(|(id, _)| id == t) {
                continue;
            }
            let Some(e) = self.entries.iter_mut().find(|e| &e.thread_id == t) else { continue };
            if e.claimed_by_other(me, now) {
                continue;
            }
            e.claim = Some(Claim { owner: me.to_string(), until });
            out.push((e.thread_id.clone(), e.version.clone()));
        }
        out
    }

    /// Extends `me`'s claim on `thread_id` to `now + lease_ms`, if `me` still holds it (also
    /// when it has run out and nobody took it). `false` when the entry is gone, unclaimed
    /// (released, or re-created after another instance processed it) or claimed by another
    /// instance: the attempt holding it must then stop.
    pub(crate) fn renew(&mut self, thread_id: &str, me: &str, now: Millis, lease_ms: u64) -> bool {
        let Some(e) = self.entries.iter_mut().find(|e| e.thread_id == thread_id) else { return false };
        match &mut e.claim {
            Some(c) if c.owner == me => {
                c.until = now.saturating_add(lease_ms);
                true
            }
            _ => false,
        }
    }

    /// Records a successful run of `version`: the entry is removed, or, if newer messages
    /// arrived meanwhile, kept unclaimed with `first_at = now`.
    ///
    /// A kept entry starts waiting anew at `now` (its `last_at`, the newest observe, stays),
    /// and moves behind the entries that have waited longer. An unknown thread is ignored.
    pub(crate) fn succeed(&mut self, thread_id: &str, version: &str, now: Millis) {
        let Some(i) = self.entries.iter().position(|e| e.thread_id == thread_id) else { return };
        if self.entries[i].version == version {
            self.entries.remove(i);
            return;
        }
        let mut e = self.entries.remove(i);
        e.claim = None;
        e.first_at = now;
        let at = self.entries.partition_point(|x| x.first_at <= now);
        self.entries.insert(at, e);
    }

    /// Records a failed run of `version` with error `code`.
    ///
    /// * entry gone: [`FailureOutcome::Gone`];
    /// * version changed (newer messages arrived): the claim is cleared and the failure not
    ///   counted, [`FailureOutcome::Superseded`];
    /// * otherwise `attempts` grows by one, `last_error = code`, the claim is cleared, and the
    ///   entry is removed once `attempts >= max_attempts` ([`FailureOutcome::Abandoned`]) or
    ///   else scheduled at `now + retry_delay_ms(attempts)` ([`FailureOutcome::Retry`]).
    pub(crate) fn fail(&mut self, thread_id: &str, version: &str, code: &str, now: Millis, cfg: &QueueConfig) -> FailureOutcome {
        let Some(i) = self.entries.iter().position(|e| e.thread_id == thread_id) else {
            return FailureOutcome::Gone;
        };
        let e = &mut self.entries[i];
        e.claim = None;
        if e.version != version {
            return FailureOutcome::Superseded;
        }
        e.attempts = e.attempts.saturating_add(1);
        e.last_error = Some(code.to_string());
        let attempt = e.attempts;
        if attempt >= cfg.max_attempts {
            self.entries.remove(i);
            return FailureOutcome::Abandoned { attempt };
        }
        let retry_at = now.saturating_add(retry_delay_ms(attempt));
        e.retry_at = Some(retry_at);
        FailureOutcome::Retry { attempt, retry_at }
    }

    /// Drops every claim held by `me` (on `close()`), so others can take the entries at once.
    pub(crate) fn release(&mut self, me: &str) {
        for e in &mut self.entries {
            if e.claim.as_ref().is_some_and(|c| c.owner == me) {
                e.claim = None;
            }
        }
    }
}

/// Delay before retrying an entry whose `attempts`-th attempt failed.
///
/// Exponential from [`RETRY_BASE_MS`], capped at [`RETRY_MAX_MS`]:
/// `min(30 s × 2^(attempts − 1), 15 min)`, i.e. 30 s, 60 s, 2 min, 4 min, 8 min, then 15 min.
/// `attempts = 0` is treated as 1.
pub(crate) fn retry_delay_ms(attempts: u32) -> u64 {
    let exp = attempts.max(1) - 1;
    if exp >= 32 {
        return RETRY_MAX_MS;
    }
    RETRY_BASE_MS.saturating_mul(1u64 << exp).min(RETRY_MAX_MS)
}

#[cfg(test)]
mod tests;
