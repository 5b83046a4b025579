//! The engine: the whole pipeline over platform traits, with no JS in it.
//!
//! [`Engine`] owns the cached document and its relevance index, this instance's view of the
//! persisted queue, and the handles to storage, the LLM, the clock and the timer. It is a
//! cheap `Rc` handle: every async method clones what it needs before its first `.await`, so
//! JS can call any method while another one is still running (no `RefCell` borrow is ever
//! held across an `.await`).
//!
//! Concurrency inside one instance is serialised by two [`AsyncLock`]s: `store_lock` around
//! every storage read-modify-write, `process_lock` around a processing batch (one batch at a
//! time: docs/design.md#queue-and-failures). Across instances (tabs, processes) the storage revisions and the queue
//! claims do the work.

pub mod config;
mod edits;
mod embedding;
mod events;
mod process;
mod store_ops;

pub use embedding::{Spawner, FILL_RETRY_BASE_MS, FILL_RETRY_MAX_MS, QUERY_RETRY_BASE_MS, QUERY_RETRY_MAX_MS};
pub use events::{DebugEvent, ErrorEvent, Event, ProcessedEvent, QueuedEvent, UpdateEvent, UpdateReason};
pub use process::RunReport;

use crate::base::error::{Error, Result};
use crate::base::ids::IdSource;
use crate::base::sync::{race, AsyncLock, Either, LocalFuture};
use crate::base::time::{Clock, Millis, Stamp};
use crate::engine::config::Config;
use crate::extract::filter;
use crate::extract::prompt;
use crate::json::Value;
use crate::llm::Llm;
use crate::memory::document::{Document, Fact};
use crate::memory::message::{ChatMessage, InputMessage};
use crate::memory::record::{Record, Threads};
use crate::queue::QueueFile;
use crate::recall::inject::{self, Explanation, Report};
use crate::recall::relevance::FactIndex;
use crate::recall::search::{self, SearchHit, SearchOptions};
use crate::recall::token_count::TokenCounter;
use crate::storage::Store;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

/// How often `flush()` re-reads the queue while another instance processes one of its
/// entries.
pub const FLUSH_POLL_MS: Millis = 500;

/// How long a claim on a queue entry lasts unless renewed. An attempt renews it every third
/// of this while it runs, however long its LLM call takes, so a claim left by an instance
/// that died (a killed process, a closed tab) runs out within this time and another
/// instance takes the entry over.
pub const CLAIM_LEASE_MS: u64 = 15_000;

/// Arms the one queue timer. The platform calls [`Engine::process_due`] when it fires.
pub trait Scheduler {
    /// Fire at `at` (epoch ms; now if in the past), replacing any earlier arming; `None`
    /// cancels.
    fn arm(&self, at: Option<Millis>);
}

/// A scheduler that never fires: for `autoProcess: false` and for tests that drive time.
#[derive(Debug, Default)]
pub struct ManualScheduler {
    armed: Cell<Option<Millis>>,
}

impl ManualScheduler {
    /// The time last armed, if any.
    pub fn armed(&self) -> Option<Millis> {
        self.armed.get()
    }
}

impl Scheduler for ManualScheduler {
    fn arm(&self, at: Option<Millis>) {
        self.armed.set(at);
    }
}

/// Receives the engine's events.
pub trait EventSink {
    /// Delivers one event. Must not panic; should not block.
    fn emit(&self, event: Event);
}

/// Everything an engine is built from.
pub struct Parts {
    /// Validated options.
    pub config: Config,
    /// Storage of this agent.
    pub store: Rc<dyn Store>,
    /// The extraction LLM.
    pub llm: Rc<dyn Llm>,
    /// Current time.
    pub clock: Rc<dyn Clock>,
    /// Fresh fact ids.
    pub ids: Rc<dyn IdSource>,
    /// Token counting for the injection budget.
    pub counter: Rc<dyn TokenCounter>,
    /// The queue timer.
    pub scheduler: Rc<dyn Scheduler>,
    /// Where events go.
    pub events: Rc<dyn EventSink>,
    /// Unique id of this instance (claims in the shared queue).
    pub instance_id: String,
    /// How long a claim on a queue entry lasts unless renewed ([`CLAIM_LEASE_MS`] in the
    /// package); renewed every third of it while an attempt runs.
    pub lease_ms: u64,
}

/// A queued observation not yet written to storage.
#[derive(Debug, Clone)]
struct PendingObserve {
    thread_id: String,
    messages: Vec<ChatMessage>,
    at: Millis,
    version: String,
}

struct State {
    /// The cached document and its index, shared with a running `inject()`/`explain()`
    /// (which releases the borrow before calling the token counter, a user callback that
    /// may call back into the engine); replaced, never mutated while shared.
    doc: Rc<Document>,
    /// The thread watermarks stored with the document (how far each thread was extracted).
    threads: Threads,
    revision: u64,
    index: Rc<FactIndex>,
    queue: QueueFile,
    pending: Vec<PendingObserve>,
    deferred: Vec<Event>,
    /// The persisted queue could not be read, or held entries that had to be dropped: it is
    /// due now, so a run re-reads it (and reports what was dropped) instead of waiting for
    /// the next `observe()`.
    queue_unchecked: bool,
    seq: u64,
    closed: bool,
    processing: bool,
    /// How the extractions went, for `status()` and `EMPTY_EXTRACTIONS`.
    extractions: process::ExtractionStats,
}

struct Inner {
    parts: Parts,
    /// The live options (`configure()` swaps them); `parts.config` is what `open` got.
    config: RefCell<Rc<Config>>,
    state: RefCell<State>,
    /// The embedding model and the fact vectors (apart from `state`, see `embedding.rs`).
    embed: RefCell<embedding::EmbedState>,
    /// A selection is counting tokens right now (the counter may be a user callback).
    ranking: Cell<bool>,
    store_lock: AsyncLock,
    process_lock: AsyncLock,
}

/// The memory of one agent: observe, process, inject, edit. See the module docs.
#[derive(Clone)]
pub struct Engine {
    inner: Rc<Inner>,
}

/// A handle that does not keep the engine alive (for timers).
#[derive(Clone)]
pub struct WeakEngine(std::rc::Weak<Inner>);

impl WeakEngine {
    /// The engine, if it still exists.
    pub fn upgrade(&self) -> Option<Engine> {
        self.0.upgrade().map(|inner| Engine { inner })
    }
}

/// A snapshot of the queue for status displays.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStatus {
    /// Thread ids waiting (in this instance's view).
    pub pending: Vec<String>,
    /// When the queue is next due, if ever.
    pub next_due_at: Option<Millis>,
    /// Whether this instance is processing a batch right now.
    pub processing: bool,
    /// Extractions this instance committed since it opened.
    pub extractions: u64,
    /// Of those, the ones that learned nothing (a model that never learns shows here).
    pub empty_extractions: u64,
}

/// Facts `explain()` reports beyond the block's fact count when no `limit` is given: the
/// near misses a "why not this fact?" view needs.
pub const EXPLAIN_MARGIN: usize = 20;

impl Engine {
    /// Opens memory: removes crash leftovers, reads the document and the queue, and arms
    /// the timer for any pending entries (so a reload or restart loses nothing).
    ///
    /// Stored data that cannot be read is `CORRUPT_MEMORY` and is left untouched.
    pub async fn open(parts: Parts) -> Result<Engine> {
        let _ = parts.store.cleanup().await;
        let (record, revision) = store_ops::read_record(&*parts.store, &*parts.ids).await?;
        let Record { doc, threads, .. } = record;
        let mut index = FactIndex::new();
        index.sync(&doc.facts);
        // Problems with the queue never prevent opening: they are reported as `error`
        // events once someone can listen (at the first queue write).
        let (queue, problems, queue_unchecked) = match store_ops::read_queue(&*parts.store).await {
            Ok(read) => {
                let unchecked = !read.dropped.is_empty();
                (read.file, Vec::new(), unchecked)
            }
            Err(e) => (QueueFile::default(), vec![e], true),
        };
        let deferred = problems.into_iter().map(|e| Event::Error(ErrorEvent { error: e, thread_id: None, attempt: None })).collect();
        let engine = Engine {
            inner: Rc::new(Inner {
                config: RefCell::new(Rc::new(parts.config.clone())),
                parts,
                state: RefCell::new(State {
                    doc: Rc::new(doc),
                    threads,
                    revision,
                    index: Rc::new(index),
                    queue,
                    pending: Vec::new(),
                    deferred,
                    queue_unchecked,
                    seq: 0,
                    closed: false,
                    processing: false,
                    extractions: Default::default(),
                }),
                embed: RefCell::default(),
                ranking: Cell::new(false),
                store_lock: AsyncLock::new(),
                process_lock: AsyncLock::new(),
            }),
        };
        engine.rearm();
        Ok(engine)
    }

    /// A handle that does not keep the engine alive.
    pub fn downgrade(&self) -> WeakEngine {
        WeakEngine(Rc::downgrade(&self.inner))
    }

    fn parts(&self) -> &Parts {
        &self.inner.parts
    }

    fn config(&self) -> Rc<Config> {
        self.inner.config.borrow().clone()
    }

    /// The options in force.
    pub fn options(&self) -> Rc<Config> {
        self.config()
    }

    /// Changes options at runtime (pause learning, disable injection, other budgets …);
    /// validated like `open()`'s. The timer is re-armed for the new timing.
    pub fn configure(&self, changes: &Value) -> Result<()> {
        self.check_open()?;
        let next = self.config().with_changes(changes)?;
        *self.inner.config.borrow_mut() = Rc::new(next);
        self.rearm();
        Ok(())
    }

    fn now(&self) -> Millis {
        self.inner.parts.clock.now_ms()
    }

    fn emit(&self, event: Event) {
        self.inner.parts.events.emit(event);
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.state.borrow().closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Whether [`close`](Engine::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.state.borrow().closed
    }

    /// Filters `messages` and queues them for thread `thread_id`; returns `None` when there
    /// was nothing worth remembering (or learning is disabled), else a future that resolves
    /// once the entry is persisted. The queue timer is armed before this returns, so the
    /// future may be dropped: the entry is still processed.
    pub fn observe(&self, thread_id: &str, messages: &[InputMessage]) -> Result<Option<impl Future<Output = Result<()>> + 'static>> {
        self.observe_at(thread_id, messages, None)
    }

    /// [`Engine::observe`], saying when the conversation happened (a backfill of old
    /// conversations): each message without a time of its own ([`InputMessage::at`]) is
    /// taken as said at `at`, or, without `at`, now. The extraction prompt states the newest
    /// of these times as the conversation's date.
    pub fn observe_at(
        &self,
        thread_id: &str,
        messages: &[InputMessage],
        at: Option<Stamp>,
    ) -> Result<Option<impl Future<Output = Result<()>> + 'static>> {
        self.check_open()?;
        if thread_id.is_empty() || thread_id.chars().count() > 256 {
            return Err(Error::invalid("`threadId` must be a string of 1 to 256 characters"));
        }
        let enabled = self.config().enabled;
        let mut kept = if enabled { filter::filter_messages(messages) } else { Vec::new() };
        let skip = if enabled { filter::not_queued(messages, &kept) } else { Some(filter::NotQueued::paused()) };
        if let Some(skip) = skip {
            self.not_queued(thread_id, skip);
            return Ok(None);
        }
        // The queue stores only what can reach the prompt: each message cut the way the
        // prompt cuts it, and of the history only what follows the thread's watermark plus
        // the context the prompt shows before it (so a long thread's entry stays small).
        date_messages(&mut kept, at.unwrap_or_else(|| Stamp::utc(self.now())));
        for m in &mut kept {
            if m.content.len() > prompt::MAX_MESSAGE_CHARS {
                m.content = filter::truncate_for_prompt(&m.content, prompt::MAX_MESSAGE_CHARS);
            }
        }
        let start = self.inner.state.borrow().threads.processed_upto(thread_id, &kept);
        if !kept[start..].iter().any(|m| m.role == crate::memory::message::Speaker::User) {
            // Everything the user said here was extracted already.
            self.not_queued(thread_id, filter::NotQueued::already_extracted());
            return Ok(None);
        }
        let kept = kept.split_off(start.saturating_sub(prompt::CONTEXT_MESSAGES));
        let now = self.now();
        let pending_count = {
            let mut st = self.inner.state.borrow_mut();
            st.seq += 1;
            let version = format!("{}:{}", self.parts().instance_id, st.seq);
            st.queue.observe(thread_id, kept.clone(), now, version.clone());
            st.pending.push(PendingObserve { thread_id: thread_id.to_string(), messages: kept, at: now, version });
            st.queue.entries.len()
        };
        let due_at = self.rearm();
        self.emit(Event::Queued(QueuedEvent { thread_id: thread_id.to_string(), due_at, pending: pending_count }));
        let me = self.clone();
        Ok(Some(async move { me.persist_pending().await }))
    }

    /// Says in a `debug` event why `observe()` queued nothing.
    fn not_queued(&self, thread_id: &str, skip: filter::NotQueued) {
        self.emit(Event::Debug(DebugEvent {
            code: "NOT_QUEUED",
            message: format!("observe(\"{thread_id}\") queued nothing: {}", skip.message),
            thread_id: Some(thread_id.to_string()),
            reason: Some(skip.reason),
        }));
    }

    /// Writes queued observations to storage (merging with what other instances queued).
    pub async fn persist_pending(&self) -> Result<()> {
        let result = self.update_queue(&mut |_| ()).await;
        if let Err(e) = &result {
            self.emit(Event::Error(ErrorEvent { error: e.clone(), thread_id: None, attempt: None }));
        }
        result
    }

    /// When the queue is next due in `st` (see [`Engine::next_due_at`]).
    fn due_at(&self, st: &State) -> Option<Millis> {
        if st.closed {
            return None;
        }
        let now = self.now();
        let next = st.queue.next_due(&self.config().queue, &self.parts().instance_id, now);
        if st.queue_unchecked {
            return Some(next.map_or(now, |t| t.min(now)));
        }
        next
    }

    /// Arms the scheduler for the next due time and returns it.
    fn rearm(&self) -> Option<Millis> {
        let next = self.due_at(&self.inner.state.borrow());
        if self.config().auto_process || next.is_none() {
            self.parts().scheduler.arm(next);
        }
        next
    }

    /// When the queue is next due (epoch ms), or `None` if nothing is queued (see
    /// `QueueFile::next_due` in `src/queue/mod.rs`).
    pub fn next_due_at(&self) -> Option<Millis> {
        self.due_at(&self.inner.state.borrow())
    }

    /// The queue as this instance sees it.
    pub fn queue_status(&self) -> QueueStatus {
        let st = self.inner.state.borrow();
        QueueStatus {
            pending: st.queue.entries.iter().map(|e| e.thread_id.clone()).collect(),
            next_due_at: self.due_at(&st),
            processing: st.processing,
            extractions: st.extractions.total,
            empty_extractions: st.extractions.empty,
        }
    }

    /// The cached document and index, without holding a borrow of the engine's state: the
    /// token counter may be a user callback that calls back into the engine (`observe()`
    /// inside `countTokens`).
    fn snapshot(&self) -> (Rc<Document>, Rc<FactIndex>) {
        let st = self.inner.state.borrow();
        (st.doc.clone(), st.index.clone())
    }

    /// The injection options in force, with the current time for fact lifetimes.
    fn inject_options(&self) -> inject::InjectOptions {
        inject::InjectOptions { now_ms: Some(self.now()), ..self.config().inject }
    }

    /// The `<memory>` block for the next model call (from the cached document). With an
    /// embedding model the recent turns are embedded first (see `embedding.rs`); without one,
    /// or when that fails, the ranking is lexical.
    pub fn inject(&self, messages: &[InputMessage]) -> impl Future<Output = String> + 'static {
        let ranked = self.rank(messages, Report::Block);
        async move { ranked.await.0.block }
    }

    /// Per-fact scores (lexical, dense, fused) and the reasons for the selection, with the
    /// document they refer to.
    pub fn explain(&self, messages: &[InputMessage]) -> impl Future<Output = (Explanation, Rc<Document>)> + 'static {
        self.rank(messages, Report::All)
    }

    /// [`Engine::explain`] with only the facts that entered the block and the first `limit`
    /// in score order; `None` is the block's fact count plus [`EXPLAIN_MARGIN`]. With
    /// thousands of facts, building and handing over every fact's report costs far more than
    /// the selection itself.
    pub fn explain_top(
        &self,
        messages: &[InputMessage],
        limit: Option<usize>,
    ) -> impl Future<Output = (Explanation, Rc<Document>)> + 'static {
        let limit = limit.unwrap_or(self.config().inject.top_facts.saturating_add(EXPLAIN_MARGIN));
        self.rank(messages, Report::Top(limit))
    }

    /// The selection of [`Engine::inject`], with the per-fact report `report` asks for.
    ///
    /// A selection asked for while another one counts tokens (by a `countTokens` that calls
    /// `inject()`) counts with the built-in estimate: it runs later than its caller, so the
    /// counter's own guard against recursion would not see it.
    fn rank(&self, messages: &[InputMessage], report: Report) -> LocalFuture<'static, (Explanation, Rc<Document>)> {
        let me = self.clone();
        let kept = filter::filter_messages(messages);
        let nested = self.inner.ranking.get();
        Box::pin(async move {
            // The query's text only for an embedder (the selection makes its own).
            let q = match me.has_embedder() {
                true => me.query_vectors(&inject::query_text(&kept, me.config().inject.recent_turns)).await,
                false => None,
            };
            // (No await from here on: the query's fact vectors belong to this document.)
            me.select(&kept, q.as_ref(), nested, report)
        })
    }

    /// [`Engine::inject`] when nothing in it waits, that is without an embedding model: the
    /// block now, with no future to box and poll (`None` with an embedder).
    pub fn inject_now(&self, messages: &[InputMessage]) -> Option<String> {
        if self.has_embedder() {
            return None;
        }
        let kept = filter::filter_messages(messages);
        Some(self.select(&kept, None, self.inner.ranking.get(), Report::Block).0.block)
    }

    /// The selection over the cached document and index, with the query's vectors if any;
    /// `nested`: asked for while another selection counts tokens (see [`Engine::rank`]).
    fn select(
        &self,
        kept: &[ChatMessage],
        q: Option<&embedding::QueryVectors>,
        nested: bool,
        report: Report,
    ) -> (Explanation, Rc<Document>) {
        let opts = self.inject_options();
        let (doc, index) = self.snapshot();
        let dense = q.map(|q| q.dense());
        let counter: &dyn TokenCounter = if nested { &crate::recall::token_count::Estimate } else { &*self.parts().counter };
        let was = self.inner.ranking.replace(true);
        let x = inject::select(&doc, &index, dense.as_ref(), kept, &opts, counter, report);
        self.inner.ranking.set(was);
        (x, doc)
    }

    /// The facts matching `query`, ranked as `inject()` ranks (see [`crate::recall::search`]), from
    /// the cached document, with the hit's fact.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> impl Future<Output = Vec<(SearchHit, Fact)>> + 'static {
        let (me, query, opts) = (self.clone(), query.to_string(), *opts);
        async move {
            let q = me.query_vectors(&query).await;
            let (doc, index) = me.snapshot();
            let dense = q.as_ref().map(|q| q.dense());
            let hits = search::search(&doc, &index, dense.as_ref(), &query, &opts, &me.inject_options());
            hits.into_iter().map(|h| (h.clone(), doc.facts[h.position].clone())).collect()
        }
    }

    /// The cached document (no storage read).
    pub fn cached(&self) -> Document {
        (*self.inner.state.borrow().doc).clone()
    }

    /// The cached thread watermarks (no storage read).
    pub fn cached_threads(&self) -> Threads {
        self.inner.state.borrow().threads.clone()
    }

    /// The cached revision.
    pub fn revision(&self) -> u64 {
        self.inner.state.borrow().revision
    }

    /// Re-reads the document from storage; if another instance changed it, updates the
    /// cache and emits `update` with reason `remote`. Returns the current document.
    ///
    /// The read waits for this instance's own writes (`store_lock`), so it never sees one
    /// half-done (and reports it as someone else's) and never overtakes a newer read.
    pub async fn refresh(&self) -> Result<Document> {
        Ok(self.refresh_record().await?.doc)
    }

    /// [`Engine::refresh`], returning the whole stored record (history, tombstones).
    async fn refresh_record(&self) -> Result<Record> {
        let _guard = self.inner.store_lock.lock().await;
        let (record, revision) = store_ops::read_record(&*self.parts().store, &*self.parts().ids).await?;
        if let Some(ev) = self.adopt(&record, revision, UpdateReason::Remote, None) {
            self.emit_update(ev);
        }
        Ok(record)
    }

    /// Re-reads the persisted queue (another instance queued or processed something) and
    /// re-arms the timer. Like [`Engine::refresh`], the read waits for this instance's own
    /// writes.
    pub async fn refresh_queue(&self) -> Result<()> {
        let _guard = self.inner.store_lock.lock().await;
        let read = store_ops::read_queue(&*self.parts().store).await?;
        {
            let mut st = self.inner.state.borrow_mut();
            let mut view = read.file;
            for p in &st.pending {
                view.observe(&p.thread_id, p.messages.clone(), p.at, p.version.clone());
            }
            st.queue = view;
        }
        self.rearm();
        Ok(())
    }

    /// Replaces the cached document, emitting `update`. A `Remote` document (read under
    /// `store_lock`, so it is the newest) is adopted whenever it differs from the cache,
    /// also at a lower revision: after `reset()` or a store emptied by hand, revisions
    /// start again at 1.
    /// The record's watermarks replace the cached ones in every case.
    ///
    /// Linear in the facts, and copies `doc` only when it replaces the cache.
    fn adopt(&self, record: &Record, revision: u64, reason: UpdateReason, thread_id: Option<&str>) -> Option<UpdateEvent> {
        let doc = &record.doc;
        let ev = {
            let mut st = self.inner.state.borrow_mut();
            if st.threads != record.threads {
                st.threads = record.threads.clone();
            }
            if reason == UpdateReason::Remote && revision == st.revision && *doc == *st.doc {
                return None;
            }
            let mut ev = UpdateEvent::diff(reason, &st.doc, doc, revision);
            ev.thread_id = thread_id.map(str::to_string);
            // No `inject()` holds the index now (they finish before any commit can run), so it
            // is updated in place; were one running, a new index would be built instead.
            match Rc::get_mut(&mut st.index) {
                Some(index) => index.sync(&doc.facts),
                None => {
                    let mut index = FactIndex::with_params(st.index.params());
                    index.sync(&doc.facts);
                    st.index = Rc::new(index);
                }
            }
            st.doc = Rc::new(doc.clone());
            st.revision = revision;
            ev
        };
        self.document_changed();
        Some(ev)
    }

    /// The stored document, freshly read.
    pub async fn get(&self) -> Result<Document> {
        self.refresh().await
    }

    /// Processes every entry queued when it is called, now, and resolves when all were
    /// applied; fails with the first failure's error (the others were still tried).
    ///
    /// An entry another live instance is processing right now is waited for (its result is
    /// what this flush is about), re-reading the queue every [`FLUSH_POLL_MS`]; whatever that
    /// instance leaves (a failure, or a claim that expired because it died) is taken over.
    pub async fn flush(&self) -> Result<RunReport> {
        self.check_open()?;
        let asked: Vec<String> = self.inner.state.borrow().queue.entries.iter().map(|e| e.thread_id.clone()).collect();
        let mut report = self.run(process::Mode::Flush).await?;
        let me = self.parts().instance_id.clone();
        // Each pass either waits for another instance or runs a batch that tries every
        // entry left; a bound on the batches keeps a queue that keeps changing from looping.
        let mut batches = 0;
        loop {
            let now = self.now();
            let (mut busy_until, mut left) = (None::<Millis>, false);
            for e in self.inner.state.borrow().queue.entries.iter() {
                let tried = report.processed.contains(&e.thread_id) || report.failed.contains(&e.thread_id);
                if tried || !asked.contains(&e.thread_id) {
                    continue;
                }
                if e.claimed_by_other(&me, now) {
                    let until = e.claim.as_ref().map_or(now, |c| c.until);
                    busy_until = Some(busy_until.map_or(until, |t| t.min(until)));
                } else {
                    left = true;
                }
            }
            if left && batches < asked.len() {
                batches += 1;
                let more = self.run(process::Mode::Flush).await?;
                report.processed.extend(more.processed);
                report.failed.extend(more.failed);
                if report.first_error.is_none() {
                    report.first_error = more.first_error;
                }
                continue;
            }
            let Some(until) = busy_until else { break };
            self.parts().clock.sleep((until - now).min(FLUSH_POLL_MS)).await;
            if self.is_closed() {
                report.first_error.get_or_insert(Error::Closed);
                break;
            }
            self.refresh_queue().await?;
        }
        match &report.first_error {
            Some(e) => Err(e.clone()),
            None => Ok(report),
        }
    }

    /// Processes the entries that are due now (for schedulers and Durable Object alarms).
    /// Failures are reported through `error` events and in the report, not as an `Err`.
    pub async fn process_due(&self) -> Result<RunReport> {
        self.check_open()?;
        self.run(process::Mode::Due).await
    }

    /// Stops the timer, writes pending observations, and gives up this instance's claims.
    /// Pending entries stay persisted for the next `open()`.
    ///
    /// Storage that does not answer within `closeTimeoutMs` (an adapter whose promise never
    /// settles) is given up on: `STORAGE_UNAVAILABLE` naming the store, also as an `error`
    /// event. Nothing more is written; the stored queue is what the last completed write left.
    pub async fn close(&self) -> Result<()> {
        let limit = self.config().close_timeout_ms;
        if self.inner.state.borrow().closed {
            // A second close() resolves only after the first one's queue write: a caller
            // that exits the process when it resolves must not cut that write short.
            return match race(Box::pin(self.inner.store_lock.lock()), self.parts().clock.sleep(limit)).await {
                Either::Left(_written) => Ok(()),
                Either::Right(()) => Err(self.storage_silent(limit)),
            };
        }
        self.inner.state.borrow_mut().closed = true;
        self.parts().scheduler.arm(None);
        // A call in flight (or waiting to retry) ends now with `CLOSED`; its entry stays
        // queued, unclaimed, without counting an attempt.
        self.parts().llm.cancel();
        self.cancel_embedder();
        let me = self.parts().instance_id.clone();
        let result = match race(self.update_queue(&mut |q| q.release(&me)), self.parts().clock.sleep(limit)).await {
            Either::Left(written) => written,
            Either::Right(()) => {
                let error = self.storage_silent(limit);
                self.emit(Event::Error(ErrorEvent { error: error.clone(), thread_id: None, attempt: None }));
                Err(error)
            }
        };
        self.parts().scheduler.arm(None);
        result
    }

    /// What `close()` says when storage did not answer within `limit` ms.
    fn storage_silent(&self, limit: u64) -> Error {
        Error::StorageUnavailable(format!(
            "close() gave up after {limit} ms (closeTimeoutMs): {} did not answer. Nothing more is written: the stored \
             queue is what the last completed write left (a write still in flight may yet land), and observations not \
             written by then are not saved",
            self.parts().store.describe()
        ))
    }
}

/// Gives every message a time: one without its own takes that of the message before it
/// (an answer is as old as its question), the ones before the first timed message that of
/// the first, and only when no message has a time of its own, `fallback` (the `at` of a
/// backfill, or now).
fn date_messages(messages: &mut [ChatMessage], fallback: Stamp) {
    let first = messages.iter().find_map(|m| m.at).unwrap_or(fallback);
    let mut last = first;
    for m in messages {
        last = *m.at.get_or_insert(last);
    }
}
