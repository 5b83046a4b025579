//! Processing batches natively: claims renewed entry by entry during a long batch, and
//! `close()` cancelling the LLM call in flight without counting it as a failure.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::*;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use user_memory::config::Config;
use user_memory::engine::{Engine, ManualScheduler, Parts};
use user_memory::error::{Error, Result};
use user_memory::ids::SequentialIds;
use user_memory::json::Value;
use user_memory::llm::{Llm, LlmReply, LlmRequest};
use user_memory::storage::{MemoryKv, Slot, Store, VersionedKv};
use user_memory::sync::LocalFuture;
use user_memory::time::Millis;
use user_memory::tokens::Estimate;

/// One entry of the persisted queue, as its JSON says.
struct StoredEntry {
    thread_id: String,
    attempts: u64,
    retry_at: Option<u64>,
    claim: Option<(String, u64)>,
}

/// The persisted queue's entries, read straight from storage (its JSON form:
/// `{"v":1,"entries":[{threadId, attempts, retryAt?, claim?: {owner, until}, …}]}`).
async fn stored_queue(kv: &Rc<MemoryKv>) -> Vec<StoredEntry> {
    let store = VersionedKv::new(kv.clone(), "default");
    let Some(v) = store.load(Slot::Queue).await.unwrap() else { return Vec::new() };
    let file = Value::parse(&v.value).expect("the queue is JSON");
    let entries = file.get("entries").and_then(Value::as_array).expect("`entries` is an array");
    let num = |e: &Value, k: &str| e.get(k).and_then(Value::as_u64);
    entries
        .iter()
        .map(|e| StoredEntry {
            thread_id: e.get("threadId").and_then(Value::as_str).expect("threadId").to_string(),
            attempts: num(e, "attempts").unwrap_or(0),
            retry_at: num(e, "retryAt"),
            claim: e
                .get("claim")
                .filter(|c| !c.is_null())
                .map(|c| (c.get("owner").and_then(Value::as_str).expect("claim.owner").to_string(), num(c, "until").expect("claim.until"))),
        })
        .collect()
}

/// Opens an engine on `kv` with `llm` and a short claim lease.
async fn open_with(kv: &Rc<MemoryKv>, clock: &Rc<FakeClock>, llm: Rc<dyn Llm>, instance: &str, lease_ms: u64) -> (Engine, Rc<Recorder>) {
    let events = Rc::new(Recorder::default());
    let mut config = Config::default();
    config.queue.debounce_ms = 1_000;
    let engine = Engine::open(Parts {
        config,
        store: Rc::new(VersionedKv::new(kv.clone(), "default")),
        llm,
        clock: clock.clone(),
        ids: Rc::new(SequentialIds::starting_at(0x500)),
        counter: Rc::new(Estimate),
        scheduler: Rc::new(ManualScheduler::default()),
        events: events.clone(),
        instance_id: instance.into(),
        lease_ms,
    })
    .await
    .unwrap();
    (engine, events)
}

/// The thread a request is about: the tests put the thread id in the user message.
fn thread_of(req: &LlmRequest) -> String {
    ["t1", "t2", "t3"].iter().find(|t| req.prompt.contains(&format!("about {t}"))).unwrap().to_string()
}

/// What a call saw: the thread, when it started, and the stored claim (owner, until) then.
type Seen = (String, Millis, Option<(String, Millis)>);

/// A slow model: each call takes `call_ms` of (fake) time. Before answering it records, for
/// the thread it works on, who holds the stored claim and until when; `during` runs once,
/// inside the first call (another instance acting meanwhile).
struct SlowLlm {
    clock: Rc<FakeClock>,
    kv: Rc<MemoryKv>,
    call_ms: Millis,
    seen: RefCell<Vec<Seen>>,
    during: RefCell<Option<LocalFuture<'static, ()>>>,
}

impl Llm for SlowLlm {
    fn complete<'a>(&'a self, req: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        Box::pin(async move {
            let thread = thread_of(req);
            let q = stored_queue(&self.kv).await;
            let claim = q.into_iter().find(|e| e.thread_id == thread).and_then(|e| e.claim);
            self.seen.borrow_mut().push((thread.clone(), self.clock.now(), claim));
            self.clock.advance(self.call_ms);
            let during = self.during.borrow_mut().take();
            if let Some(f) = during {
                f.await;
            }
            reply_with_facts(&[&format!("fact of {thread}")]).map(LlmReply::text)
        })
    }
}

#[test]
fn a_long_batch_renews_each_claim_right_before_processing_that_entry() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let llm =
            Rc::new(SlowLlm { clock: clock.clone(), kv: kv.clone(), call_ms: 5_000, seen: RefCell::default(), during: RefCell::default() });
        // Each call outlasts the 2 s lease taken at the start of the batch.
        let (a, _) = open_with(&kv, &clock, llm.clone(), "A", 2_000).await;
        for t in ["t1", "t2", "t3"] {
            a.observe(t, &turn(&format!("about {t}"), "ok")).unwrap().unwrap().await.unwrap();
        }
        let report = a.flush().await.unwrap();
        assert_eq!(report.processed, vec!["t1", "t2", "t3"]);
        let seen = llm.seen.borrow();
        assert_eq!(seen.len(), 3);
        for (thread, at, claim) in seen.iter() {
            let (owner, until) = claim.clone().unwrap_or_else(|| panic!("{thread} unclaimed while its call ran"));
            assert_eq!(owner, "A");
            assert!(until > *at, "{thread}: the claim (until {until}) had expired when its call started ({at})");
        }
    });
}

#[test]
fn an_entry_taken_over_after_its_claim_expired_is_not_processed_twice() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        // Calls take 4 s, claims last 6 s: t3's claim from the start of the batch expires
        // during t2's call, while t2's (renewed) claim is still live.
        let a_llm =
            Rc::new(SlowLlm { clock: clock.clone(), kv: kv.clone(), call_ms: 4_000, seen: RefCell::default(), during: RefCell::default() });
        let (a, _) = open_with(&kv, &clock, a_llm.clone(), "A", 6_000).await;
        for t in ["t1", "t2", "t3"] {
            a.observe(t, &turn(&format!("about {t}"), "ok")).unwrap().unwrap().await.unwrap();
        }
        let b_llm =
            Rc::new(SlowLlm { clock: clock.clone(), kv: kv.clone(), call_ms: 0, seen: RefCell::default(), during: RefCell::default() });
        let (b, _) = open_with(&kv, &clock, b_llm.clone(), "B", 60_000).await;
        let b2 = b.clone();
        let hook: LocalFuture<'static, ()> = Box::pin(async move {
            let r = b2.process_due().await.unwrap();
            assert_eq!(r.processed, vec!["t3"], "B takes over only the entry whose claim expired");
        });
        // Armed during A's first call, so it runs inside the second one.
        let first_done = Rc::new(Cell::new(false));
        *a_llm.during.borrow_mut() = Some({
            let slot = a_llm.clone();
            let flag = first_done.clone();
            Box::pin(async move {
                flag.set(true);
                *slot.during.borrow_mut() = Some(hook);
            })
        });
        let report = a.flush().await.unwrap();
        assert!(first_done.get());
        assert_eq!(report.processed, vec!["t1", "t2"], "A skips the entry B took");
        let threads: Vec<String> = a_llm.seen.borrow().iter().map(|s| s.0.clone()).collect();
        assert_eq!(threads, vec!["t1", "t2"]);
        assert_eq!(b_llm.seen.borrow().len(), 1);
        let mut facts: Vec<String> = a.get().await.unwrap().facts.iter().map(|f| f.content.clone()).collect();
        facts.sort();
        assert_eq!(facts, vec!["fact of t1", "fact of t2", "fact of t3"]);
        assert!(stored_queue(&kv).await.is_empty());
    });
}

/// A model that never answers until cancelled; then it fails with `CLOSED`, as the fetch
/// transport does when `close()` aborts it.
#[derive(Default)]
struct HangingLlm {
    calls: Cell<usize>,
    cancelled: Rc<Cell<bool>>,
    wakers: Rc<RefCell<Vec<std::task::Waker>>>,
}

impl Llm for HangingLlm {
    fn complete<'a>(&'a self, _: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        self.calls.set(self.calls.get() + 1);
        let cancelled = self.cancelled.clone();
        let wakers = self.wakers.clone();
        Box::pin(std::future::poll_fn(move |cx| {
            if cancelled.get() {
                std::task::Poll::Ready(Err(Error::Closed))
            } else {
                wakers.borrow_mut().push(cx.waker().clone());
                std::task::Poll::Pending
            }
        }))
    }

    fn cancel(&self) {
        self.cancelled.set(true);
        for w in self.wakers.take() {
            w.wake();
        }
    }
}

#[test]
fn close_cancels_the_call_in_flight_without_counting_a_failed_attempt() {
    use futures::task::LocalSpawnExt;
    let kv = Rc::new(MemoryKv::new());
    let clock = FakeClock::at(T0);
    let mut pool = futures::executor::LocalPool::new();
    let llm = Rc::new(HangingLlm::default());
    let (a, events) = pool.run_until(open_with(&kv, &clock, llm.clone(), "A", 60_000));
    pool.run_until(async {
        a.observe("t1", &turn("about t1", "ok")).unwrap().unwrap().await.unwrap();
        a.observe("t2", &turn("about t2", "ok")).unwrap().unwrap().await.unwrap();
    });
    let result = Rc::new(RefCell::new(None));
    let (a2, out) = (a.clone(), result.clone());
    pool.spawner().spawn_local(async move { *out.borrow_mut() = Some(a2.flush().await) }).unwrap();
    pool.run_until_stalled();
    assert_eq!(llm.calls.get(), 1, "the first call is in flight");
    pool.run_until(a.close()).unwrap();
    pool.run_until_stalled();
    assert!(llm.cancelled.get(), "close() cancelled the transport");
    match result.borrow().as_ref() {
        Some(Err(e)) => assert_eq!(e.code(), "CLOSED", "the interrupted flush() fails with CLOSED"),
        Some(Ok(r)) => panic!("flush() resolved although nothing was applied: {r:?}"),
        None => panic!("flush() did not settle once the call was cancelled"),
    }
    assert_eq!(llm.calls.get(), 1, "the batch stopped: t2 was not started");
    assert!(events.error_codes().is_empty(), "a cancelled call is not a failure: {:?}", events.error_codes());
    let q = pool.run_until(stored_queue(&kv));
    assert_eq!(q.len(), 2, "both entries stay queued");
    for e in &q {
        assert_eq!(e.attempts, 0, "{}: no attempt counted", e.thread_id);
        assert!(e.claim.is_none(), "{}: claim released", e.thread_id);
        assert!(e.retry_at.is_none(), "{}: no retry backoff", e.thread_id);
    }
    // The next instance resumes both at once.
    let b = pool
        .run_until(RigBuilder::shared(&kv, &clock).instance("B").replies(vec![reply_with_facts(&["x"]), reply_with_facts(&["y"])]).open())
        .unwrap();
    let r = pool.run_until(b.engine.flush()).unwrap();
    assert_eq!(r.processed, vec!["t1", "t2"]);
}

/// A store whose queue writes fail while `broken` is set (storage gone mid-session).
/// A store whose queue writes fail while `broken` is set, or from the moment
/// `queue_writes_left` (when set) runs out.
struct FlakyQueueStore {
    inner: VersionedKv,
    broken: Cell<bool>,
    queue_writes_left: Cell<Option<u32>>,
}

impl FlakyQueueStore {
    fn new(kv: &Rc<MemoryKv>) -> FlakyQueueStore {
        FlakyQueueStore { inner: VersionedKv::new(kv.clone(), "default"), broken: Cell::new(false), queue_writes_left: Cell::new(None) }
    }
}

impl Store for FlakyQueueStore {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<user_memory::storage::Versioned>>> {
        self.inner.load(slot)
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<user_memory::storage::Commit>> {
        if slot == Slot::Queue {
            match self.queue_writes_left.get() {
                Some(0) => self.broken.set(true),
                Some(n) => self.queue_writes_left.set(Some(n - 1)),
                None => {}
            }
            if self.broken.get() {
                return Box::pin(async { Err(Error::StorageFailed("disk gone".into())) });
            }
        }
        self.inner.commit(slot, base, value)
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        "flaky store".into()
    }
}

#[test]
fn a_storage_failure_of_a_timer_run_is_an_error_event_and_backs_off_instead_of_spinning() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let store = Rc::new(FlakyQueueStore::new(&kv));
        let rig = RigBuilder::shared(&kv, &clock).store(store.clone()).open().await.unwrap();
        rig.engine.observe("t1", &turn("about t1", "ok")).unwrap().unwrap().await.unwrap();
        store.broken.set(true);
        clock.advance(30_000);
        // The timer fires: the claim cannot be written.
        let err = rig.engine.process_due().await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_FAILED");
        assert_eq!(rig.events.error_codes(), vec!["STORAGE_FAILED"], "reported to listeners");
        assert_eq!(rig.llm.calls(), 0);
        let armed = rig.scheduler.armed().expect("the timer is armed again");
        assert!(armed >= clock.now() + 30_000, "backs off ({} ms) instead of firing again at once", armed as i64 - clock.now() as i64);
        // Storage is back: the retry processes the entry.
        store.broken.set(false);
        rig.llm.push(reply_with_facts(&["ok"]));
        clock.advance(30_000);
        let r = rig.engine.process_due().await.unwrap();
        assert_eq!(r.processed, vec!["t1"]);
    });
}

#[test]
fn an_entry_whose_settle_write_failed_is_taken_up_again_when_its_claim_expires() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let store = Rc::new(FlakyQueueStore::new(&kv));
        let rig = RigBuilder::shared(&kv, &clock).store(store.clone()).open().await.unwrap();
        rig.engine.observe("t1", &turn("I keep bees", "ok")).unwrap().unwrap().await.unwrap();
        rig.llm.push(reply_with_facts(&["Keeps bees"]));
        // The claim is written; the write that settles the entry after the commit fails.
        store.queue_writes_left.set(Some(1));
        clock.advance(30_000);
        let err = rig.engine.process_due().await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_FAILED");
        assert_eq!(rig.llm.calls(), 1);
        assert_eq!(rig.engine.get().await.unwrap().facts.len(), 1, "the delta itself was committed");
        // The entry is still persisted, claimed by this instance: it must not be forgotten.
        let claim_ends = clock.now() + 120_000;
        assert_eq!(rig.engine.next_due_at(), Some(claim_ends), "nextDueAt() is when the claim runs out");
        assert_eq!(rig.scheduler.armed(), Some(claim_ends), "and the timer is armed for it");
        // Storage is back; when the claim expires the entry is processed again (at least
        // once: the repeated fact is a duplicate, not a second copy).
        store.queue_writes_left.set(None);
        store.broken.set(false);
        rig.llm.push(reply_with_facts(&["Keeps bees"]));
        clock.advance(claim_ends - clock.now());
        let r = rig.engine.process_due().await.unwrap();
        assert_eq!(r.processed, vec!["t1"]);
        assert_eq!(rig.engine.get().await.unwrap().facts.len(), 1);
        assert_eq!(rig.engine.next_due_at(), None, "the queue is empty");
    });
}

#[test]
fn with_auto_process_off_a_run_never_arms_a_timer() {
    run(async {
        let rig = RigBuilder::new().config(|c| c.auto_process = false).open().await.unwrap();
        rig.engine.observe("t1", &turn("about t1", "ok")).unwrap().unwrap().await.unwrap();
        rig.llm.push(Err(Error::LlmHttp { status: 500, message: "down".into() }));
        rig.clock.advance(30_000);
        let r = rig.engine.process_due().await.unwrap();
        assert_eq!(r.failed, vec!["t1"]);
        assert_eq!(rig.scheduler.armed(), None, "no timer: the caller drives processDue()");
        assert_eq!(rig.engine.next_due_at(), Some(rig.clock.now() + 30_000), "but nextDueAt() says when");
    });
}
