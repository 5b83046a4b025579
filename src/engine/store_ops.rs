//! Storage read-modify-write loops: the document commit with replay on conflict, and the
//! queue update that also writes pending observations.

use super::{DebugEvent, Engine, ErrorEvent, Event, UpdateEvent, UpdateReason};
use crate::base::error::{Error, Result};
use crate::base::ids::IdSource;
use crate::base::sync::LocalFuture;
use crate::base::time::iso_from_millis;
use crate::json::ToJson;
use crate::memory::document::Fact;
use crate::memory::history::{self, EntryMeta};
use crate::memory::record::Record;
use crate::queue::QueueFile;
use crate::storage::{Commit, Slot, Store};

/// How often a commit is replayed on a newer revision before giving up with `CONFLICT`.
///
/// A writer that loses once tends to keep losing to another one committing in a tight loop
/// (both re-read at the same moment and the other is a step ahead), until that loop ends:
/// the bound must outlast a burst of edits from another process or tab (two Node
/// processes adding 30 facts each to one file store lost 16 replays in a row about one time
/// in three). Each replay is one read and one compare-and-set.
pub(super) const MAX_REPLAYS: usize = 64;

/// What an edit closure of [`Engine::commit`] reports besides the record it changed.
#[derive(Debug, Default)]
pub(super) struct Edit {
    /// The facts the `maxFacts` cap evicted, for the `update` event.
    pub(super) evicted: Vec<Fact>,
    /// For a revert: the revision whose document it restored (for the history entry).
    pub(super) reverted_to: Option<u64>,
}

impl From<Vec<Fact>> for Edit {
    fn from(evicted: Vec<Fact>) -> Edit {
        Edit { evicted, reverted_to: None }
    }
}

/// Reads and validates the stored record (`(empty, 0)` when none was stored yet).
pub(super) async fn read_record(store: &dyn Store, ids: &dyn IdSource) -> Result<(Record, u64)> {
    match store.load(Slot::Document).await? {
        None => Ok((Record::default(), 0)),
        Some(v) => match Record::from_json(&v.value, ids) {
            Ok(record) => Ok((record, v.revision)),
            Err(why) => Err(Error::corrupt(format!(
                "the memory stored in {} (revision {}) is not valid memory: {why}. It was left as it \
                 is and nothing is written over it: UserMemory.inspect() shows the stored text",
                store.describe(),
                v.revision
            ))),
        },
    }
}

/// The queue as read from storage.
pub(super) struct QueueRead {
    pub(super) file: QueueFile,
    pub(super) revision: u64,
    /// Entries (or the whole slot) that could not be read and were dropped.
    pub(super) dropped: Vec<Error>,
    /// The slot itself is unreadable and must be discarded before the next commit.
    pub(super) corrupt_slot: bool,
}

/// Reads the persisted queue; unreadable entries are dropped (and reported), an unreadable
/// slot counts as empty (and reported). Only storage failures are errors.
pub(super) async fn read_queue(store: &dyn Store) -> Result<QueueRead> {
    match store.load(Slot::Queue).await {
        Ok(None) => Ok(QueueRead { file: QueueFile::default(), revision: 0, dropped: Vec::new(), corrupt_slot: false }),
        Ok(Some(v)) => {
            let (file, dropped) = QueueFile::from_json(&v.value);
            let dropped =
                dropped.into_iter().map(|d| Error::corrupt(format!("a queued update could not be read and was dropped: {d}"))).collect();
            Ok(QueueRead { file, revision: v.revision, dropped, corrupt_slot: false })
        }
        Err(e @ Error::CorruptMemory(_)) => Ok(QueueRead {
            file: QueueFile::default(),
            revision: 0,
            dropped: vec![Error::corrupt(format!("the update queue was unreadable and was dropped: {}", e.message()))],
            corrupt_slot: true,
        }),
        Err(e) => Err(e),
    }
}

impl Engine {
    /// Read-modify-write of the persisted queue: re-reads it, merges this instance's pending
    /// observations, applies `f`, and commits (replaying on conflict). The result becomes
    /// this instance's view of the queue, and the timer is re-armed.
    ///
    /// `f` runs once per try; after a success its last run is the one that counted, so a
    /// caller that needs a result has `f` store it in a captured variable. (Type-erased and
    /// boxed so that the loop is compiled once, not once per call site.)
    pub(super) fn update_queue<'a>(&'a self, f: &'a mut dyn FnMut(&mut QueueFile)) -> LocalFuture<'a, Result<()>> {
        Box::pin(self.update_queue_loop(f))
    }

    async fn update_queue_loop(&self, f: &mut dyn FnMut(&mut QueueFile)) -> Result<()> {
        let _guard = self.inner.store_lock.lock().await;
        let store = self.parts().store.clone();
        for _ in 0..MAX_REPLAYS {
            let read = read_queue(&*store).await?;
            self.inner.state.borrow_mut().queue_unchecked = false;
            let deferred: Vec<Event> = std::mem::take(&mut self.inner.state.borrow_mut().deferred);
            for ev in deferred {
                self.emit(ev);
            }
            if read.corrupt_slot {
                store.discard(Slot::Queue).await?;
            }
            let mut file = read.file.clone();
            let pending = self.inner.state.borrow().pending.clone();
            for p in &pending {
                // Skip observations another write of ours already persisted, and ones
                // another instance has since superseded with a newer observation of the
                // same thread (an entry holds the thread's latest messages).
                if file.entry(&p.thread_id).is_some_and(|e| e.version == p.version || e.last_at > p.at) {
                    continue;
                }
                file.observe(&p.thread_id, p.messages.clone(), p.at, p.version.clone());
            }
            f(&mut file);
            let unchanged = file == read.file && read.dropped.is_empty();
            let revision = if unchanged {
                Some(read.revision)
            } else {
                match store.commit(Slot::Queue, read.revision, file.to_json()).await? {
                    Commit::Committed(rev) => Some(rev),
                    Commit::Conflict => None,
                }
            };
            if revision.is_some() {
                // Reported once, by the write that removed them (not by every replay).
                for error in read.dropped {
                    self.emit(Event::Error(ErrorEvent { error, thread_id: None, attempt: None }));
                }
                {
                    let mut st = self.inner.state.borrow_mut();
                    let written = pending.len();
                    st.pending.drain(..written);
                    // Observations made while we were writing are not in `file` yet: keep
                    // them visible in this instance's view.
                    let mut view = file;
                    for p in &st.pending {
                        view.observe(&p.thread_id, p.messages.clone(), p.at, p.version.clone());
                    }
                    st.queue = view;
                }
                self.rearm();
                return Ok(());
            }
        }
        Err(Error::Conflict("the update queue kept changing under concurrent writers; try again".into()))
    }

    /// Read-modify-write of the stored record (the document and what is committed with it,
    /// such as the thread watermarks): reads the newest revision, applies `f`, commits; on a
    /// conflict re-reads and applies `f` again (no second LLM call). On success the cache is
    /// updated and `update` is emitted. `touch` sets `lastUpdated` to now when the document
    /// itself changed. A commit that changes the document appends its history entry in the
    /// same write (`historyLimit` entries are kept).
    ///
    /// As with [`Engine::update_queue`], a caller that needs what `f` produced has it store
    /// that in a captured variable: after a success, `f`'s last run is the committed one.
    pub(super) fn commit<'a>(
        &'a self,
        reason: UpdateReason,
        thread_id: Option<&'a str>,
        touch: bool,
        f: &'a mut dyn FnMut(&mut Record) -> Result<Edit>,
    ) -> LocalFuture<'a, Result<Record>> {
        Box::pin(self.commit_loop(reason, thread_id, touch, f))
    }

    async fn commit_loop(
        &self,
        reason: UpdateReason,
        thread_id: Option<&str>,
        touch: bool,
        f: &mut dyn FnMut(&mut Record) -> Result<Edit>,
    ) -> Result<Record> {
        let _guard = self.inner.store_lock.lock().await;
        let store = self.parts().store.clone();
        let ids = self.parts().ids.clone();
        for _ in 0..MAX_REPLAYS {
            let (base, revision) = read_record(&*store, &*ids).await?;
            // Someone else's newer document: show it to listeners as such first.
            if let Some(ev) = self.adopt(&base, revision, UpdateReason::Remote, None) {
                self.emit_update(ev);
            }
            let mut record = base.clone();
            let edit = f(&mut record)?;
            if record == base {
                return Ok(record);
            }
            if record.doc != base.doc {
                if touch {
                    record.doc.last_updated = iso_from_millis(self.now());
                }
                let forgot = record.forgotten.added_since(&base.forgotten);
                let meta = EntryMeta {
                    revision: revision + 1,
                    at: self.now(),
                    reason: reason.as_str(),
                    thread_id,
                    reverted_to: edit.reverted_to,
                    forgot: &forgot,
                };
                let entry = history::entry(&meta, &base.doc, &record.doc);
                let last_updated = record.doc.last_updated.clone();
                record.history.push(entry, self.config().history_limit, &last_updated);
            }
            let mut written = store.commit(Slot::Document, revision, record.to_json()).await;
            // A deletion must succeed on a full store: the history entry makes the new record
            // as large as the old one, so drop history entries (the oldest first, down to none,
            // not even the deletion's own) until it fits, and say so.
            let kept_before = record.history.entries.len();
            if matches!(reason, UpdateReason::RemoveFact | UpdateReason::Clear) && record.doc != base.doc {
                while matches!(written, Err(Error::StorageQuota(_))) && !record.history.entries.is_empty() {
                    let keep = record.history.entries.len() / 2;
                    record.history.entries.truncate(keep);
                    written = store.commit(Slot::Document, revision, record.to_json()).await;
                }
            }
            match written? {
                Commit::Committed(rev) => {
                    if let Some(mut ev) = self.adopt(&record, rev, reason, thread_id) {
                        ev.evicted = edit.evicted;
                        self.emit_update(ev);
                    }
                    if record.history.entries.len() < kept_before {
                        self.emit(Event::Debug(history_dropped(reason, &*store, kept_before, record.history.entries.len())));
                    }
                    return Ok(record);
                }
                Commit::Conflict => continue,
            }
        }
        Err(Error::Conflict(format!(
            "memory in {} kept changing under concurrent writers ({MAX_REPLAYS} replays); nothing was lost, try again",
            store.describe()
        )))
    }

    /// Emits `update` unless nothing in the document changed (a commit that only moved a
    /// thread's watermark, or a remote write of the same document).
    pub(super) fn emit_update(&self, ev: UpdateEvent) {
        if ev.added.is_empty() && ev.removed.is_empty() && ev.changed.is_empty() && ev.sections.is_empty() && ev.evicted.is_empty() {
            return;
        }
        self.emit(Event::Update(ev));
    }
}

/// The `HISTORY_DROPPED` note: a deletion on a full store was written with `kept` of its
/// `before` history entries (the newest; 0: not even the deletion's own).
fn history_dropped(reason: UpdateReason, store: &dyn Store, before: usize, kept: usize) -> DebugEvent {
    let what = if kept == 0 {
        "without any history entry, not even its own (it cannot be undone)".to_string()
    } else {
        format!("keeping only the newest {kept} history entries")
    };
    DebugEvent {
        code: "HISTORY_DROPPED",
        message: format!(
            "{} is full: {}() was written {what}; {} of {before} history entries were left out to make room, and the changes they recorded can no longer be undone",
            store.describe(),
            reason.as_str(),
            before - kept
        ),
        thread_id: None,
        reason: Some("storage-full"),
    }
}
