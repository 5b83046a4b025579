//! The exported `UserMemory` class (docs/api.md lists every method).
//!
//! Every async method clones the engine handle and returns a `Promise` built from an
//! `async move` block, so no borrow of `self` lives across an `.await`: JS may call any
//! method while another is still running on the same instance.

use super::convert::{self, from_json, messages, query_messages, set, to_json};
use super::embed::{read_embed, LocalSpawner};
use super::error::{to_js, IntoJsResult};
use super::maintenance;
use super::marshal::{
    doc_js, explain_limit, explanation_js, fact_js, flag_option, forgotten_js, forgotten_options, history_options, hits_js,
};
use super::marshal::{import_arg, json_arg, observe_at, report_js, revision_arg, search_options, string_arg, undo_options};
use super::options;
use super::persist::{self, Persistence};
use super::platform::{JsClock, JsCounter, JsEvents, TimerScheduler};
use super::stores::{in_node, open_backend};
use super::tabs::Tabs;
use crate::base::error::{Error, Result};
use crate::base::ids::{IdSource, RandomIds};
use crate::base::sync::LocalFuture;
use crate::engine::{DebugEvent, Event, EventSink};
use crate::engine::{Engine, Parts};
use crate::json::{ArrayWriter, ObjectWriter, ToJson, Value};
use crate::llm::{NoLlm, NO_LLM};
use crate::recall::inject::Explanation;
use crate::recall::token_count::{Estimate, TokenCounter};
use crate::storage::Store;
use crate::Document;
use js_sys::{Function, Promise};
use std::cell::Cell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

/// Long-term memory of one agent: call `observe()` after each turn and `inject()` before
/// each model call.
///
/// ```ts
/// const memory = await UserMemory.open({ agent: "default", llm: { baseUrl, apiKey, model } });
/// memory.observe(threadId, messages);
/// const block = await memory.inject(messages);
/// ```
#[wasm_bindgen]
pub struct UserMemory {
    engine: Engine,
    /// What `options()` shows of the embedding model (JSON; `null` without one).
    embed: std::cell::RefCell<String>,
    events: Rc<JsEvents>,
    /// Cross-tab session of the browser backends (tabs.rs); closed by `close()`.
    tabs: Option<Tabs>,
    /// Whether `persist: true` was given.
    persist: bool,
    /// What the browser says about its storage (persist.rs); `status()` reports it.
    persistence: Rc<Cell<Persistence>>,
    /// Whether memory is encrypted at rest (`options().encryption`).
    encrypted: bool,
    /// The storage in force, as `options().storage` reports it.
    storage: String,
    /// Opened with an `llm`: flush() and processDue() can extract.
    extracts: bool,
    /// A Node process whose memory defaulted to `"memory"` while timers extract: its first
    /// queued conversation warns (once per process) that memory ends with the process.
    ephemeral: bool,
}

thread_local! {
    /// Whether this process has delivered its `EPHEMERAL_STORAGE` debug event.
    static WARNED_EPHEMERAL: Cell<bool> = const { Cell::new(false) };
}

#[wasm_bindgen]
extern "C" {
    /// `search()`'s options object, typed for TypeScript (an optional trailing argument).
    #[wasm_bindgen(typescript_type = "SearchOptions")]
    pub type SearchOptionsArg;
    /// `removeFact()`'s options (`{ forget }`), an optional trailing argument.
    #[wasm_bindgen(typescript_type = "RemoveOptions")]
    pub type RemoveOptionsArg;
    /// `clear()`'s options (`{ tombstones }`), an optional trailing argument.
    #[wasm_bindgen(typescript_type = "ClearOptions")]
    pub type ClearOptionsArg;
    /// `undo()`'s options (`{ revision }`), an optional trailing argument.
    #[wasm_bindgen(typescript_type = "UndoOptions")]
    pub type UndoOptionsArg;
    /// `history()`'s options (`{ limit, before }`), an optional trailing argument.
    #[wasm_bindgen(typescript_type = "HistoryOptions")]
    pub type HistoryOptionsArg;
    /// `forgotten()`'s options (`{ matching }`), an optional trailing argument.
    #[wasm_bindgen(typescript_type = "ForgottenOptions")]
    pub type ForgottenOptionsArg;
}

thread_local! {
    /// One shared do-nothing rejection handler.
    static NOOP: Closure<dyn FnMut(JsValue)> = Closure::new(|_: JsValue| {});
    /// How many of the synchronous methods that run user callbacks are on the stack.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Synchronous calls nested deeper than this are refused: a listener or `countTokens` that
/// calls back into the module, which calls it again, and so on, would otherwise run until
/// the JS stack overflows somewhere inside the wasm.
const MAX_DEPTH: u32 = 16;

/// Marks one synchronous method as running (see [`MAX_DEPTH`]); `INVALID_INPUT` past it.
struct Entered;

impl Entered {
    fn new() -> Result<Entered> {
        DEPTH.with(|d| {
            if d.get() >= MAX_DEPTH {
                return Err(Error::invalid(format!(
                    "calls into user-memory nested {MAX_DEPTH} deep: a listener or countTokens keeps calling back into the memory that called it"
                )));
            }
            d.set(d.get() + 1);
            Ok(Entered)
        })
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// The asynchronous methods as data: each exported method packs its arguments into a
/// `Call` and returns [`Call::promise`]. One `async fn` for all of them compiles to one
/// state machine, instead of one per method with its own poll function, drop glue and
/// boxed-future vtable (a few hundred bytes of wasm each).
enum Call {
    Open(JsValue),
    Persist(LocalFuture<'static, Result<()>>),
    Flush(Engine),
    ProcessDue(Engine),
    Get(Engine),
    Import(Engine, JsValue),
    AddFact(Engine, JsValue),
    UpdateFact(Engine, JsValue, JsValue),
    RemoveFact(Engine, JsValue, JsValue),
    UpdateSection(Engine, JsValue, JsValue),
    Clear(Engine, JsValue),
    History(Engine, JsValue),
    Revert(Engine, JsValue),
    Undo(Engine, JsValue),
    Forgotten(Engine, JsValue),
    Unforget(Engine, JsValue),
    Search(Engine, JsValue, JsValue),
    Inject(LocalFuture<'static, String>),
    Explain(LocalFuture<'static, (Explanation, Rc<Document>)>),
    Close(Engine, Rc<JsEvents>, Option<Tabs>),
    Inspect(JsValue),
    Encrypt(JsValue),
    Reset(JsValue),
}

impl Call {
    /// Runs the call; the promise resolves to its value or rejects with its error.
    fn promise(self) -> Promise {
        future_to_promise(async move { self.run().await.js() })
    }

    async fn run(self) -> Result<JsValue> {
        match self {
            Call::Open(options) => UserMemory::open_inner(options).await.map(JsValue::from),
            Call::Persist(pending) => pending.await.map(|_| JsValue::TRUE),
            Call::Flush(e) => e.flush().await.map(|r| report_js(&r)),
            Call::ProcessDue(e) => e.process_due().await.map(|r| report_js(&r)),
            Call::Get(e) => e.get().await.map(|d| doc_js(&d)),
            Call::Import(e, doc) => {
                let v = import_arg(&doc)?;
                e.import(&v).await.map(|d| doc_js(&d))
            }
            Call::AddFact(e, fact) => {
                let v = json_arg(&fact, "fact", "the fact")?;
                e.add_fact(&v).await.map(|f| fact_js(&f))
            }
            Call::UpdateFact(e, id, patch) => {
                let (id, v) = (string_arg(&id, FACT_ID)?, json_arg(&patch, "patch", "the patch")?);
                e.update_fact(&id, &v).await.map(|f| fact_js(&f))
            }
            Call::RemoveFact(e, id, opts) => {
                let (id, forget) = (string_arg(&id, FACT_ID)?, flag_option(&opts, "removeFact", "forget")?);
                e.remove_fact(&id, forget).await.map(|f| fact_js(&f))
            }
            Call::History(e, opts) => {
                let (limit, before) = history_options(&opts)?;
                e.history(limit, before).await.map(|h| from_json(&Value::Array(h).to_json()))
            }
            Call::Revert(e, revision) => e.revert(revision_arg(&revision, REVERT_NEEDS)?).await.map(|d| doc_js(&d)),
            Call::Undo(e, opts) => e.undo(undo_options(&opts)?).await.map(|d| doc_js(&d)),
            Call::Forgotten(e, opts) => match forgotten_options(&opts)? {
                Some(text) => e.forgotten_matching(&text).await.map(|t| forgotten_js(t.into_iter().collect())),
                None => e.forgotten().await.map(forgotten_js),
            },
            Call::Unforget(e, id) => {
                let id = string_arg(&id, FACT_ID)?;
                e.unforget(&id).await.map(|t| from_json(&t.to_json()))
            }
            Call::UpdateSection(e, section, summary) => {
                let (section, summary) = (string_arg(&section, "the section name")?, string_arg(&summary, "the summary")?);
                e.update_section(&section, &summary).await.map(|s| from_json(&s.to_json()))
            }
            Call::Clear(e, opts) => e.clear(flag_option(&opts, "clear", "tombstones")?).await.map(|_| JsValue::UNDEFINED),
            Call::Search(e, query, opts) => {
                let (query, opts) = (string_arg(&query, "the search query")?, search_options(&opts)?);
                Ok(hits_js(&e.search(&query, &opts).await))
            }
            Call::Inject(block) => Ok(JsValue::from_str(&block.await)),
            Call::Explain(explanation) => Ok(explanation_js(&explanation.await)),
            Call::Close(e, events, tabs) => {
                let r = e.close().await;
                events.clear();
                // After the last queue write: stop cross-tab updates, give up localStorage leadership.
                if let Some(tabs) = tabs {
                    tabs.close();
                }
                r.map(|_| JsValue::UNDEFINED)
            }
            Call::Inspect(options) => maintenance::inspect(&options).await,
            Call::Encrypt(options) => maintenance::encrypt(&options).await,
            Call::Reset(options) => maintenance::reset(&options).await,
        }
    }
}

/// How the fact-id arguments are named in messages.
const FACT_ID: &str = "the fact id";

/// `revert()`'s message for a revision that is not one.
const REVERT_NEEDS: &str = "revert(revision) needs a revision number (a `revision` of history() or status())";

/// The store seen through encryption with `key`, or, without a key, the store after checking
/// that it is not encrypted memory (which must never be read as plaintext nor overwritten).
/// `options`: the `open()` options, for the rollback mark.
async fn secure(
    store: Rc<dyn Store>,
    agent: &str,
    key: Option<&crate::storage::crypto::UserKey>,
    options: &JsValue,
) -> Result<Rc<dyn Store>> {
    match key {
        #[cfg(feature = "encryption")]
        Some(key) => {
            let opened = crate::storage::crypto::open(store, agent, Rc::new(super::crypto::WebCrypto), key).await?;
            Ok(Rc::new(match super::crypto::rollback_mark(options) {
                Some(mark) => opened.with_mark(mark).await,
                None => opened,
            }))
        }
        #[cfg(not(feature = "encryption"))]
        Some(_) => {
            let _ = options;
            Err(super::error::not_built("`encryption`", "encryption"))
        }
        None => Ok(Rc::new(crate::storage::crypto::open_plain(store, agent).await?)),
    }
}

#[wasm_bindgen]
impl UserMemory {
    /// Opens the memory of `options.agent` in `options.storage`, resuming any updates that
    /// were still queued when the last instance stopped.
    #[wasm_bindgen(unchecked_return_type = "Promise<UserMemory>")]
    pub fn open(#[wasm_bindgen(unchecked_param_type = "UserMemoryOptions")] options: JsValue) -> Promise {
        Call::Open(options).promise()
    }

    /// Queues the conversation of thread `threadId` for extraction (debounced). Returns at
    /// once; the promise resolves to `true` once the entry is persisted, or `false` when
    /// there was nothing worth remembering. Throws `INVALID_INPUT` or `CLOSED` synchronously.
    /// Ignoring the promise is fine: a storage failure is also an `error` event, and the
    /// promise never becomes an unhandled rejection. `options.at` (a `Date`, an ISO string
    /// or epoch milliseconds) says when the conversation happened, for the messages without
    /// a time of their own (a backfill). (Typed in types.rs, generic over the caller's
    /// message type.)
    #[wasm_bindgen(skip_typescript)]
    pub fn observe(
        &self,
        #[wasm_bindgen(js_name = threadId)] thread_id: JsValue,
        messages_: JsValue,
        options: JsValue,
    ) -> std::result::Result<Promise, JsValue> {
        let _entered = Entered::new().js()?;
        let thread = thread_id.as_string().ok_or_else(|| to_js(&Error::invalid("`threadId` must be a string")))?;
        let at = observe_at(&options).js()?;
        let msgs = messages(&messages_).js()?;
        let pending = self.engine.observe_at(&thread, &msgs, at).js()?;
        let p = match pending {
            None => Promise::resolve(&JsValue::FALSE),
            Some(fut) => {
                self.warn_if_ephemeral(&thread);
                Call::Persist(Box::pin(fut)).promise()
            }
        };
        // Mark the promise as handled: callers that ignore it never see an unhandled
        // rejection; callers that await it still get the error.
        NOOP.with(|noop| {
            let _ = p.catch(noop);
        });
        Ok(p)
    }

    /// The `<memory>…</memory>` block for the next model call, or `""`.
    #[wasm_bindgen(skip_typescript)]
    pub fn inject(&self, messages_: JsValue) -> Promise {
        let entered = Entered::new();
        let turns = self.engine.options().inject.recent_turns;
        match entered.as_ref().map_err(Error::clone).and_then(|_| query_messages(&messages_, turns)) {
            // Without an embedder nothing in the selection waits: the block is ready now,
            // and a resolved promise costs a fraction of a spawned task (a third of the
            // boundary's share at 500 facts, `node bench/inject-profile.mjs 500`).
            Ok(m) => match self.engine.inject_now(&m) {
                Some(block) => Promise::resolve(&JsValue::from_str(&block)),
                None => Call::Inject(Box::pin(self.engine.inject(&m))).promise(),
            },
            Err(e) => Promise::reject(&to_js(&e)),
        }
    }

    /// Per fact: similarity, confidence, score, token cost, whether it was injected and why.
    #[wasm_bindgen(skip_typescript)]
    pub fn explain(&self, messages_: JsValue, options: JsValue) -> Promise {
        let entered = Entered::new();
        let turns = self.engine.options().inject.recent_turns;
        let args = entered.as_ref().map_err(Error::clone).and_then(|_| Ok((query_messages(&messages_, turns)?, explain_limit(&options)?)));
        match args {
            Ok((m, limit)) => Call::Explain(Box::pin(self.engine.explain_top(&m, limit))).promise(),
            Err(e) => Promise::reject(&to_js(&e)),
        }
    }

    /// The facts matching `query` (any text: a tool call's argument, a search box), ranked
    /// as `inject()` ranks them, best first, with their scores: at most `limit` (default
    /// 10), each scoring at least `minScore` (default 0). Facts sharing nothing with the
    /// query are not returned.
    #[wasm_bindgen(unchecked_return_type = "Promise<SearchResult[]>")]
    pub fn search(&self, #[wasm_bindgen(unchecked_param_type = "string")] query: JsValue, options: Option<SearchOptionsArg>) -> Promise {
        Call::Search(self.engine.clone(), query, options.map_or(JsValue::UNDEFINED, JsValue::from)).promise()
    }

    /// Processes every queued conversation now; resolves when all were applied, rejects
    /// with the first failure's error after trying the rest.
    #[wasm_bindgen(unchecked_return_type = "Promise<RunReport>")]
    pub fn flush(&self) -> Promise {
        if !self.extracts {
            return Promise::reject(&to_js(&Error::invalid(NO_LLM)));
        }
        Call::Flush(self.engine.clone()).promise()
    }

    /// Processes the entries that are due now (for Durable Object alarms and other
    /// schedulers). Failures are reported as `error` events and in the report.
    #[wasm_bindgen(js_name = processDue, unchecked_return_type = "Promise<RunReport>")]
    pub fn process_due(&self) -> Promise {
        if !self.extracts {
            return Promise::reject(&to_js(&Error::invalid(NO_LLM)));
        }
        Call::ProcessDue(self.engine.clone()).promise()
    }

    /// When the queue is next due (epoch ms), or `null`.
    #[wasm_bindgen(js_name = nextDueAt, unchecked_return_type = "number | null")]
    pub fn next_due_at(&self) -> JsValue {
        self.engine.next_due_at().map_or(JsValue::NULL, |t| JsValue::from_f64(t as f64))
    }

    /// The queue as this instance sees it: pending thread ids, next due time, whether a
    /// batch is running, and the stored revision of memory.
    #[wasm_bindgen(unchecked_return_type = "QueueStatus")]
    pub fn status(&self) -> JsValue {
        let s = self.engine.queue_status();
        let mut out = String::new();
        let mut o = ObjectWriter::new(&mut out);
        let mut pending = ArrayWriter::new(o.key("pending"));
        for t in &s.pending {
            pending.str(t);
        }
        pending.finish();
        o.opt_u64("nextDueAt", s.next_due_at).bool("processing", s.processing).u64("revision", self.engine.revision());
        let mut ex = ObjectWriter::new(o.key("extractions"));
        ex.u64("total", s.extractions).u64("empty", s.empty_extractions);
        ex.finish();
        o.str("persistence", self.persistence.get().as_str());
        o.finish();
        from_json(&out)
    }

    /// The memory document (a fresh copy, read from storage).
    #[wasm_bindgen(unchecked_return_type = "Promise<MemoryDocument>")]
    pub fn get(&self) -> Promise {
        Call::Get(self.engine.clone()).promise()
    }

    /// The memory document as DeerFlow-compatible JSON (same as `get()`).
    #[wasm_bindgen(js_name = export, unchecked_return_type = "Promise<MemoryDocument>")]
    pub fn export_doc(&self) -> Promise {
        self.get()
    }

    /// Replaces the whole memory with `doc` (an object or a JSON string) after validating it.
    #[wasm_bindgen(js_name = import, unchecked_return_type = "Promise<MemoryDocument>")]
    pub fn import_doc(&self, #[wasm_bindgen(unchecked_param_type = "MemoryDocument | string")] doc: JsValue) -> Promise {
        Call::Import(self.engine.clone(), doc).promise()
    }

    /// Adds a fact by hand (`source: "manual"`, default confidence 0.9); resolves to the
    /// fact (the existing one if a fact with the same content exists).
    #[wasm_bindgen(js_name = addFact, unchecked_return_type = "Promise<Fact>")]
    pub fn add_fact(&self, #[wasm_bindgen(unchecked_param_type = "NewFact")] fact: JsValue) -> Promise {
        Call::AddFact(self.engine.clone(), fact).promise()
    }

    /// Changes `content`, `category`, `confidence` (or other fields) of fact `id`.
    #[wasm_bindgen(js_name = updateFact, unchecked_return_type = "Promise<Fact>")]
    pub fn update_fact(
        &self,
        #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue,
        #[wasm_bindgen(unchecked_param_type = "FactPatch")] patch: JsValue,
    ) -> Promise {
        Call::UpdateFact(self.engine.clone(), id, patch).promise()
    }

    /// Removes fact `id`; resolves to the removed fact. With `{ forget: true }` a tombstone
    /// of its content is kept (in the same commit), so extraction does not learn it again.
    #[wasm_bindgen(js_name = removeFact, unchecked_return_type = "Promise<Fact>")]
    pub fn remove_fact(&self, #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue, options: Option<RemoveOptionsArg>) -> Promise {
        Call::RemoveFact(self.engine.clone(), id, options.map_or(JsValue::UNDEFINED, JsValue::from)).promise()
    }

    /// What each commit changed, newest first (read fresh from storage): at most `limit`
    /// entries, only those of revisions below `before`.
    #[wasm_bindgen(unchecked_return_type = "Promise<HistoryEntry[]>")]
    pub fn history(&self, options: Option<HistoryOptionsArg>) -> Promise {
        Call::History(self.engine.clone(), options.map_or(JsValue::UNDEFINED, JsValue::from)).promise()
    }

    /// Commits the document as it was after `revision` as a new revision (reason
    /// `"revert"`, itself revertible); resolves to it. `NOT_FOUND` when a change since then
    /// is no longer in the history.
    #[wasm_bindgen(unchecked_return_type = "Promise<MemoryDocument>")]
    pub fn revert(&self, #[wasm_bindgen(unchecked_param_type = "number")] revision: JsValue) -> Promise {
        Call::Revert(self.engine.clone(), revision).promise()
    }

    /// Undoes the change of history entry `revision` (default: the newest entry when called;
    /// a second `undo()` undoes that undo). Named once: if another instance undid it first,
    /// this is a no-op; if a newer change is in effect on top of it, `CONFLICT`.
    #[wasm_bindgen(unchecked_return_type = "Promise<MemoryDocument>")]
    pub fn undo(&self, options: Option<UndoOptionsArg>) -> Promise {
        Call::Undo(self.engine.clone(), options.map_or(JsValue::UNDEFINED, JsValue::from)).promise()
    }

    /// The forget tombstones, oldest first: what extraction will not learn again. With
    /// `{ matching: text }`, the one tombstone `text` matches (a trivial variant counts), or
    /// none: what a tool asked to remember `text` must refuse.
    #[wasm_bindgen(unchecked_return_type = "Promise<ForgottenFact[]>")]
    pub fn forgotten(&self, options: Option<ForgottenOptionsArg>) -> Promise {
        Call::Forgotten(self.engine.clone(), options.map_or(JsValue::UNDEFINED, JsValue::from)).promise()
    }

    /// `text` as `inject()` renders a stored value: invisible and control characters
    /// stripped, links reduced to their words (with `neutralizeLinks`), whitespace collapsed,
    /// `&`, `<`, `>` and their look-alikes escaped. For every text handed to a model outside
    /// the block (the MCP server's and the AI SDK's tools).
    #[wasm_bindgen(js_name = safeText)]
    pub fn safe_text(&self, #[wasm_bindgen(unchecked_param_type = "string")] text: JsValue) -> std::result::Result<String, JsValue> {
        let text = string_arg(&text, "safeText(text): the text").js()?;
        Ok(crate::recall::render::render_value(&text, self.engine.options().inject.neutralize_links))
    }

    /// Drops the tombstone of fact `id` (extraction may learn it again); resolves to it.
    #[wasm_bindgen(unchecked_return_type = "Promise<ForgottenFact>")]
    pub fn unforget(&self, #[wasm_bindgen(unchecked_param_type = "string")] id: JsValue) -> Promise {
        Call::Unforget(self.engine.clone(), id).promise()
    }

    /// Replaces the summary of one section by hand (`"workContext"`, … or
    /// `"user.workContext"`, …); resolves to the section.
    #[wasm_bindgen(js_name = updateSection, unchecked_return_type = "Promise<Section>")]
    pub fn update_section(
        &self,
        #[wasm_bindgen(unchecked_param_type = "SectionName")] section: JsValue,
        #[wasm_bindgen(unchecked_param_type = "string")] summary: JsValue,
    ) -> Promise {
        Call::UpdateSection(self.engine.clone(), section, summary).promise()
    }

    /// Changes options at runtime, validated like `open()`'s: pause learning
    /// (`{ enabled: false }`), turn injection off, change budgets or timing. `agent`, `llm`
    /// and `storage` cannot change. Throws `INVALID_INPUT`.
    pub fn configure(&self, #[wasm_bindgen(unchecked_param_type = "RuntimeOptions")] changes: JsValue) -> std::result::Result<(), JsValue> {
        let _entered = Entered::new().js()?;
        let embed = match changes.is_object() && js_sys::Reflect::has(&changes, &"embed".into()).unwrap_or(false) {
            true => Some(read_embed(&super::convert::prop(&changes, "embed")).js()?),
            false => None,
        };
        convert::check_finite(&changes, "options").js()?;
        if !super::convert::prop(&changes, "persist").is_undefined() {
            return Err(to_js(&Error::invalid("`persist` is chosen at open(); it cannot change on an open instance")));
        }
        let mut v = to_json(&changes, "the options").js()?;
        if !self.extracts && v.get("autoProcess").and_then(Value::as_bool) == Some(true) {
            return Err(to_js(&Error::invalid(crate::llm::AUTO_NEEDS_LLM)));
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("embed");
        }
        self.engine.configure(&v).js()?;
        if let Some(e) = embed {
            self.engine.set_embedder(e.embedder, Rc::new(LocalSpawner));
            *self.embed.borrow_mut() = e.resolved;
        }
        Ok(())
    }

    /// The options in force (without `llm` and `countTokens`), with the storage in force,
    /// `persist` and the storage's `persistence`.
    #[wasm_bindgen(unchecked_return_type = "ResolvedOptions")]
    pub fn options(&self) -> JsValue {
        let out = from_json(&self.engine.options().to_json());
        set(&out, "storage", &JsValue::from_str(&self.storage));
        set(&out, "persist", &JsValue::from_bool(self.persist));
        set(&out, "encryption", &JsValue::from_bool(self.encrypted));
        set(&out, "persistence", &JsValue::from_str(self.persistence.get().as_str()));
        set(&out, "embed", &from_json(&self.embed.borrow()));
        out
    }

    /// Empties every section and removes every fact; the forget tombstones stay unless
    /// `{ tombstones: true }`.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn clear(&self, options: Option<ClearOptionsArg>) -> Promise {
        Call::Clear(self.engine.clone(), options.map_or(JsValue::UNDEFINED, JsValue::from)).promise()
    }

    /// Subscribes to `"update"`, `"error"`, `"queued"`, `"processed"` or `"debug"`; returns the
    /// unsubscribe function.
    #[wasm_bindgen(skip_typescript)]
    pub fn on(&self, event: JsValue, listener: JsValue) -> std::result::Result<JsValue, JsValue> {
        let event = event.as_string().unwrap_or_default();
        let Some(listener) = listener.dyn_ref::<Function>().cloned() else {
            return Err(to_js(&Error::invalid("`on(event, listener)` needs a function as the listener")));
        };
        if !matches!(event.as_str(), "update" | "error" | "queued" | "processed" | "debug") {
            return Err(to_js(&Error::invalid(format!(
                "unknown event \"{event}\" (use \"update\", \"error\", \"queued\", \"processed\" or \"debug\")"
            ))));
        }
        let id = self.events.add(&event, listener);
        let events = self.events.clone();
        Ok(Closure::<dyn Fn()>::new(move || events.remove(id)).into_js_value())
    }

    /// Cancels the timer, writes pending observations and releases claims. Queued entries
    /// stay persisted for the next `open()`. Later calls to `observe()`/`flush()` throw
    /// `CLOSED`; a second `close()` resolves once the first one's write is done.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn close(&self) -> Promise {
        Call::Close(self.engine.clone(), self.events.clone(), self.tabs.clone()).promise()
    }

    /// Reads what is stored for an agent without validating it, for recovery from
    /// `CORRUPT_MEMORY`: `{ document, queue, vectors }` as raw strings (or `null`).
    #[wasm_bindgen(unchecked_return_type = "Promise<StoredData>")]
    pub fn inspect(#[wasm_bindgen(unchecked_param_type = "StorageOptions")] options: JsValue) -> Promise {
        Call::Inspect(options).promise()
    }

    /// Encrypts an agent's plain memory in place with `encryption` (resumable: an
    /// interrupted run is finished by the next `encrypt()` or `open()`), and/or rotates its
    /// key to `newEncryption` (a new data key, every value re-sealed; resumable the same
    /// way). Instances still open refuse to write afterwards (`DECRYPT_FAILED`: reopen them).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn encrypt(#[wasm_bindgen(unchecked_param_type = "EncryptOptions")] options: JsValue) -> Promise {
        Call::Encrypt(options).promise()
    }

    /// Deletes everything stored for an agent (memory, queue, fact vectors and the
    /// encryption key record): the explicit reset after `CORRUPT_MEMORY`, once whatever was
    /// readable has been exported with `inspect()`.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn reset(#[wasm_bindgen(unchecked_param_type = "StorageOptions")] options: JsValue) -> Promise {
        Call::Reset(options).promise()
    }
}

impl UserMemory {
    /// Says once per process, at the first conversation queued into memory that ends with
    /// the process (Node, no `storage` given): as the `EPHEMERAL_STORAGE` debug event when a
    /// `debug` listener hears it; else, unless an `error` listener shows the app watches its
    /// memory, as a `console.warn` (a newcomer's first script loses its memory on exit, and a
    /// debug event nobody listens to tells no one). `storage: "memory"` given explicitly is
    /// never reported.
    fn warn_if_ephemeral(&self, thread: &str) {
        if !self.ephemeral || WARNED_EPHEMERAL.get() {
            return;
        }
        WARNED_EPHEMERAL.set(true);
        let message = "no `storage` was given, so memory is kept in this process only (\"memory\") and lost on exit, queued conversations too: pass storage: fileStore(dir) from user-memory/node, or another store";
        if self.events.listens("debug") {
            self.events.emit(Event::Debug(DebugEvent {
                code: "EPHEMERAL_STORAGE",
                message: message.into(),
                thread_id: Some(thread.to_string()),
                reason: None,
            }));
        } else if !self.events.listens("error") {
            web_sys::console::warn_1(&JsValue::from_str(&format!(
                "user-memory: {message} (storage: \"memory\" says it is meant; a \"debug\" listener gets this as an event instead)"
            )));
        }
    }

    async fn open_inner(options: JsValue) -> Result<UserMemory> {
        let opts = options::read(&options)?;
        let backend = open_backend(&opts.storage, &opts.config.agent).await?;
        let persistence = persist::start(backend.browser, opts.persist).await;
        let ephemeral = backend.defaulted_to_memory && opts.config.auto_process && in_node();
        let encrypted = opts.encryption.is_some();
        let store = secure(backend.store, &opts.config.agent, opts.encryption.as_ref(), &options).await?;
        let (storage, extracts) = (backend.name, opts.llm.is_some());
        let counter: Rc<dyn TokenCounter> = match opts.count_tokens {
            Some(f) => Rc::new(JsCounter { f, running: Cell::new(false) }),
            None => Rc::new(Estimate),
        };
        let events = Rc::new(JsEvents::default());
        let scheduler = Rc::new(TimerScheduler::default());
        let ids = Rc::new(RandomIds);
        let mut instance_id = String::with_capacity(16);
        crate::base::hex::push_hex(&mut instance_id, u64::from(ids.random_u32()) << 32 | u64::from(ids.random_u32()), 16);
        let engine = Engine::open(Parts {
            config: opts.config,
            store,
            llm: opts.llm.unwrap_or_else(|| Rc::new(NoLlm)),
            clock: Rc::new(JsClock),
            ids,
            counter,
            scheduler: scheduler.clone(),
            events: events.clone(),
            instance_id,
            lease_ms: crate::engine::CLAIM_LEASE_MS,
        })
        .await?;
        scheduler.set_target(engine.downgrade());
        if let Some(tabs) = &backend.tabs {
            tabs.connect(engine.downgrade());
        }
        if opts.embed.embedder.is_some() {
            engine.set_embedder(opts.embed.embedder, Rc::new(LocalSpawner));
            // The stored vectors, so the first inject() can use them (a failure to read them
            // is reported by the background fill, which reads them again).
            let _ = engine.refresh_vectors().await;
        }
        Ok(UserMemory {
            engine,
            events,
            tabs: backend.tabs,
            persist: opts.persist,
            persistence,
            encrypted,
            embed: opts.embed.resolved.into(),
            storage,
            extracts,
            ephemeral,
        })
    }
}
