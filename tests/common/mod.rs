//! Test doubles for the engine's platform traits: a clock moved by hand, a scripted LLM,
//! an event recorder, and a builder that opens an engine on an in-memory store.
#![allow(dead_code, unreachable_pub, unused_macros)]

/// serde_json's `json!`, converted through text into the crate's own JSON value (what the
/// engine's methods take).
macro_rules! json {
    ($($t:tt)+) => {
        user_memory::json::Value::parse(&serde_json::json!($($t)+).to_string()).expect("valid JSON")
    };
}

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use user_memory::config::Config;
use user_memory::engine::{Engine, Event, EventSink, ManualScheduler, Parts};
use user_memory::error::{Error, Result};
use user_memory::ids::SequentialIds;
use user_memory::llm::{Llm, LlmReply, LlmRequest};
use user_memory::message::{InputMessage, Role};
use user_memory::storage::{KvCapabilities, KvStore, MemoryKv, Store, VersionedKv};
use user_memory::sync::LocalFuture;
use user_memory::time::{Clock, Millis};
use user_memory::tokens::Estimate;

/// 2026-03-14T10:30:00Z
pub const T0: Millis = 1_773_484_200_000;

/// Time moved by hand: `advance()` moves it (and wakes the sleeps it ends), and [`run`]
/// moves it to the end of the earliest sleep whenever nothing else can run, as if the
/// process had been idle until then. A sleep therefore never spins: a task sleeping while
/// another waits for a gated LLM leaves the executor stalled until the test acts.
#[derive(Default)]
pub struct FakeClock(pub Rc<Cell<Millis>>);

/// Unfinished sleeps of every fake clock: (the clock's time, deadline, waker, id).
type Sleeps = Vec<(Rc<Cell<Millis>>, Millis, std::task::Waker, u64)>;

thread_local! {
    static SLEEPS: RefCell<Sleeps> = RefCell::default();
    static SLEEP_IDS: Cell<u64> = const { Cell::new(0) };
}

impl FakeClock {
    pub fn at(t: Millis) -> Rc<FakeClock> {
        Rc::new(FakeClock(Rc::new(Cell::new(t))))
    }
    pub fn advance(&self, ms: Millis) {
        self.0.set(self.0.get() + ms);
        wake_ended_sleeps();
    }
    pub fn now(&self) -> Millis {
        self.0.get()
    }
}

fn wake_ended_sleeps() {
    let ended: Vec<std::task::Waker> = SLEEPS.with(|s| {
        let mut s = s.borrow_mut();
        let (done, left): (Vec<_>, Vec<_>) = s.drain(..).partition(|(now, until, _, _)| now.get() >= *until);
        *s = left;
        done.into_iter().map(|(_, _, w, _)| w).collect()
    });
    ended.into_iter().for_each(std::task::Waker::wake);
}

/// Moves the clock of the earliest unfinished sleep to its end; `false` if there is none.
pub fn skip_to_next_sleep() -> bool {
    let next = SLEEPS.with(|s| s.borrow().iter().min_by_key(|(_, until, _, _)| *until).map(|(now, until, _, _)| (now.clone(), *until)));
    let Some((now, until)) = next else { return false };
    now.set(now.get().max(until));
    wake_ended_sleeps();
    true
}

struct FakeSleep {
    now: Rc<Cell<Millis>>,
    until: Millis,
    id: u64,
}

impl std::future::Future for FakeSleep {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.now.get() >= self.until {
            return std::task::Poll::Ready(());
        }
        SLEEPS.with(|s| {
            let mut s = s.borrow_mut();
            s.retain(|(_, _, _, id)| *id != self.id);
            s.push((self.now.clone(), self.until, cx.waker().clone(), self.id));
        });
        std::task::Poll::Pending
    }
}

impl Drop for FakeSleep {
    fn drop(&mut self) {
        let _ = SLEEPS.try_with(|s| s.borrow_mut().retain(|(_, _, _, id)| *id != self.id));
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> Millis {
        self.0.get()
    }

    fn sleep(&self, ms: Millis) -> LocalFuture<'static, ()> {
        let id = SLEEP_IDS.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        Box::pin(FakeSleep { now: self.0.clone(), until: self.0.get().saturating_add(ms), id })
    }
}

/// A future that is pending once (waking itself), then ready: lets other tasks run.
pub struct YieldOnce(pub bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// A KvStore whose every operation yields once to the executor (like any real async store).
pub struct YieldingKv {
    pub inner: Rc<MemoryKv>,
}

impl KvStore for YieldingKv {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            YieldOnce(false).await;
            self.inner.get(key).await
        })
    }
    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            YieldOnce(false).await;
            self.inner.set(key, value).await
        })
    }
    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            // An unlink is slower than a (cached) read.
            for _ in 0..4 {
                YieldOnce(false).await;
            }
            self.inner.delete(key).await
        })
    }
    fn capabilities(&self) -> KvCapabilities {
        self.inner.capabilities()
    }
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        self.inner.keys(prefix)
    }
    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        Box::pin(async move {
            YieldOnce(false).await;
            self.inner.compare_and_set(key, expected, value).await
        })
    }
    fn describe(&self) -> String {
        "yielding".into()
    }
}

/// Answers from a script, in order; records every request.
#[derive(Default)]
pub struct ScriptedLlm {
    pub replies: RefCell<VecDeque<Result<String>>>,
    pub requests: RefCell<Vec<LlmRequest>>,
}

impl ScriptedLlm {
    pub fn new(replies: Vec<Result<String>>) -> Rc<ScriptedLlm> {
        Rc::new(ScriptedLlm { replies: RefCell::new(replies.into()), requests: RefCell::default() })
    }
    pub fn push(&self, reply: Result<String>) {
        self.replies.borrow_mut().push_back(reply);
    }
    pub fn calls(&self) -> usize {
        self.requests.borrow().len()
    }
}

impl Llm for ScriptedLlm {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        self.requests.borrow_mut().push(request.clone());
        let reply = self.replies.borrow_mut().pop_front().unwrap_or_else(|| Err(Error::LlmFailed("the script has no more replies".into())));
        Box::pin(async move { reply.map(LlmReply::text) })
    }
}

#[derive(Default)]
pub struct Recorder(pub RefCell<Vec<Event>>);

impl EventSink for Recorder {
    fn emit(&self, event: Event) {
        self.0.borrow_mut().push(event);
    }
}

impl Recorder {
    pub fn names(&self) -> Vec<&'static str> {
        self.0.borrow().iter().map(Event::name).collect()
    }
    pub fn error_codes(&self) -> Vec<&'static str> {
        self.0
            .borrow()
            .iter()
            .filter_map(|e| match e {
                Event::Error(err) => Some(err.error.code()),
                _ => None,
            })
            .collect()
    }
    pub fn clear(&self) {
        self.0.borrow_mut().clear();
    }
}

/// Everything a test needs to drive one engine.
pub struct Rig {
    pub engine: Engine,
    pub clock: Rc<FakeClock>,
    pub llm: Rc<ScriptedLlm>,
    pub events: Rc<Recorder>,
    pub scheduler: Rc<ManualScheduler>,
    pub kv: Rc<MemoryKv>,
}

pub struct RigBuilder {
    pub config: Config,
    pub kv: Rc<MemoryKv>,
    pub store: Option<Rc<dyn Store>>,
    pub clock: Rc<FakeClock>,
    pub llm: Rc<ScriptedLlm>,
    /// An LLM used instead of `llm` (which then stays unused).
    pub other_llm: Option<Rc<dyn user_memory::llm::Llm>>,
    pub instance: String,
}

/// An LLM whose answer is held until the test releases it (one call).
pub struct GatedLlm {
    pub gate: RefCell<Option<futures::channel::oneshot::Receiver<Result<String>>>>,
    pub calls: Cell<usize>,
}

impl GatedLlm {
    /// The LLM and the sender that releases its answer.
    pub fn new() -> (Rc<GatedLlm>, futures::channel::oneshot::Sender<Result<String>>) {
        let (tx, rx) = futures::channel::oneshot::channel();
        (Rc::new(GatedLlm { gate: RefCell::new(Some(rx)), calls: Cell::new(0) }), tx)
    }
}

impl user_memory::llm::Llm for GatedLlm {
    fn complete<'a>(&'a self, _: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        self.calls.set(self.calls.get() + 1);
        let rx = self.gate.borrow_mut().take().expect("one call only");
        Box::pin(async move {
            rx.await.unwrap_or_else(|_| Err(user_memory::error::Error::LlmFailed("gate dropped".into()))).map(LlmReply::text)
        })
    }
}

impl RigBuilder {
    pub fn new() -> RigBuilder {
        let mut config = Config::default();
        config.queue.debounce_ms = 30_000;
        RigBuilder {
            config,
            kv: Rc::new(MemoryKv::new()),
            store: None,
            clock: FakeClock::at(T0),
            llm: ScriptedLlm::new(vec![]),
            other_llm: None,
            instance: "A".into(),
        }
    }
    pub fn shared(kv: &Rc<MemoryKv>, clock: &Rc<FakeClock>) -> RigBuilder {
        RigBuilder { kv: kv.clone(), clock: clock.clone(), ..RigBuilder::new() }
    }
    pub fn instance(mut self, id: &str) -> Self {
        self.instance = id.into();
        self
    }
    pub fn llm(mut self, llm: Rc<dyn user_memory::llm::Llm>) -> Self {
        self.other_llm = Some(llm);
        self
    }
    pub fn store(mut self, store: Rc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }
    pub fn config(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(&mut self.config);
        self
    }
    pub fn replies(self, replies: Vec<Result<String>>) -> Self {
        for r in replies {
            self.llm.push(r);
        }
        self
    }
    pub async fn open(self) -> Result<Rig> {
        let events = Rc::new(Recorder::default());
        let scheduler = Rc::new(ManualScheduler::default());
        let kv: Rc<dyn KvStore> = self.kv.clone();
        let store = self.store.unwrap_or_else(|| Rc::new(VersionedKv::new(kv, &self.config.agent)));
        let engine = Engine::open(Parts {
            config: self.config,
            store,
            llm: self.other_llm.unwrap_or_else(|| self.llm.clone()),
            clock: self.clock.clone(),
            ids: Rc::new(SequentialIds::starting_at(0x100)),
            counter: Rc::new(Estimate),
            scheduler: scheduler.clone(),
            events: events.clone(),
            instance_id: self.instance,
            lease_ms: 120_000,
        })
        .await?;
        Ok(Rig { engine, clock: self.clock, llm: self.llm, events, scheduler, kv: self.kv })
    }
}

pub fn user(text: &str) -> InputMessage {
    InputMessage::new(Role::User, text)
}

pub fn assistant(text: &str) -> InputMessage {
    InputMessage::new(Role::Assistant, text)
}

pub fn turn(u: &str, a: &str) -> Vec<InputMessage> {
    vec![user(u), assistant(a)]
}

/// A model reply adding the given facts (confidence 0.9, category knowledge).
pub fn reply_with_facts(facts: &[&str]) -> Result<String> {
    let facts: Vec<serde_json::Value> =
        facts.iter().map(|f| serde_json::json!({"content": f, "category": "knowledge", "confidence": 0.9})).collect();
    Ok(serde_json::json!({"newFacts": facts, "factsToRemove": []}).to_string())
}

/// Runs a future to completion on this thread. When it cannot make progress, the fake
/// clocks skip to the end of the earliest sleep (see [`FakeClock`]); with no sleep left
/// either, it is stuck for good and the test fails instead of hanging.
pub fn run<F: std::future::Future>(f: F) -> F::Output {
    drive(None, f)
}

/// [`run`] for a future that needs the tasks of `pool` to make progress too.
pub fn run_in<F: std::future::Future>(pool: &mut futures::executor::LocalPool, f: F) -> F::Output {
    drive(Some(pool), f)
}

fn drive<F: std::future::Future>(mut pool: Option<&mut futures::executor::LocalPool>, f: F) -> F::Output {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, Wake};
    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = std::sync::Arc::new(Flag(AtomicBool::new(true)));
    let waker = std::task::Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        flag.0.store(false, Ordering::SeqCst);
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        if let Some(pool) = pool.as_deref_mut() {
            pool.run_until_stalled();
            // What the pool did may have let `f` finish without waking it (a shared slot).
            flag.0.store(false, Ordering::SeqCst);
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
        // Everything is stalled unless something woke `f`: time passes.
        if !flag.0.load(Ordering::SeqCst) && !skip_to_next_sleep() {
            panic!("the future can never finish: nothing wakes it and no fake sleep is pending");
        }
    }
}

/// A fact created on 2026-01-01 by hand, category `context`.
pub fn fact(id: &str, content: &str, confidence: f64) -> user_memory::document::Fact {
    user_memory::document::Fact {
        id: id.into(),
        content: content.into(),
        category: "context".into(),
        confidence,
        created_at: "2026-01-01T00:00:00Z".into(),
        source: "manual".into(),
        extra: Default::default(),
    }
}
