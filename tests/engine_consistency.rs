//! The engine's cache and events agree with storage: when revisions go backwards (a reset
//! elsewhere), when a read overlaps this instance's own commit, when a commit's last step
//! reports an error after landing, and when the queue cannot be read at open; and flush()
//! means "applied", also when another instance is processing an entry.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

use common::*;
use std::cell::Cell;
use std::rc::Rc;
use user_memory::engine::{Event, UpdateReason, FLUSH_POLL_MS};
use user_memory::error::{Error, Result};
use user_memory::storage::{Commit, KvCapabilities, KvStore, MemoryKv, Slot, Store, Versioned, VersionedKv};
use user_memory::sync::LocalFuture;

fn update_reasons(r: &Recorder) -> Vec<(UpdateReason, usize)> {
    r.0.borrow().iter().filter_map(|e| if let Event::Update(u) = e { Some((u.reason, u.added.len())) } else { None }).collect()
}

/// After a reset elsewhere (UserMemory.reset(), a deleted file, a wiped Durable Object)
/// revisions start again at 1: an open instance still adopts the newer, lower-numbered
/// document, stops injecting the wiped facts and says so with an `update` event.
#[test]
fn a_reset_elsewhere_is_adopted_although_the_revision_went_backwards() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let a = RigBuilder::shared(&kv, &clock).instance("A").open().await.unwrap();
        a.engine.add_fact(&json!({"content": "Secret the user wants forgotten"})).await.unwrap();
        a.engine.add_fact(&json!({"content": "Another old fact"})).await.unwrap();
        assert_eq!(a.engine.revision(), 2);
        // Reset from elsewhere (UserMemory.reset(), deleting the file ...), then a new fact.
        VersionedKv::new(kv.clone(), "default").discard(Slot::Document).await.unwrap();
        let b = RigBuilder::shared(&kv, &clock).instance("B").open().await.unwrap();
        b.engine.add_fact(&json!({"content": "Brand new fact"})).await.unwrap();
        a.events.clear();
        let fresh = a.engine.get().await.unwrap();
        assert_eq!(fresh.facts.len(), 1, "get() returns the stored doc");
        let block = a.engine.inject(&turn("hi", "hello")).await;
        assert!(!block.contains("Secret the user wants forgotten"), "{block}");
        assert!(block.contains("Brand new fact"), "{block}");
        // (Both rigs number their ids from 1, so the new fact reuses an old id: the event
        // shows it as changed, and the second old fact as removed.)
        let reasons: Vec<UpdateReason> = update_reasons(&a.events).into_iter().map(|(r, _)| r).collect();
        assert_eq!(reasons, vec![UpdateReason::Remote], "one update event tells listeners");
        assert_eq!(a.engine.revision(), 1);
    });
}

/// A get() overlapping addFact's commit (at every point of it) never reports the instance's
/// own change as a remote one: exactly one `update`, reason `addFact`, with the fact.
#[test]
fn a_get_overlapping_a_commit_never_reports_the_own_change_as_remote() {
    let mut hits = Vec::new();
    for delay in 0..20 {
        run(async {
            let kv = Rc::new(MemoryKv::new());
            let clock = FakeClock::at(T0);
            let store = Rc::new(VersionedKv::new(Rc::new(YieldingKv { inner: kv.clone() }), "default"));
            let a = RigBuilder::shared(&kv, &clock).store(store).open().await.unwrap();
            a.engine.add_fact(&json!({"content": "Existing"})).await.unwrap();
            a.events.clear();
            let e1 = a.engine.clone();
            let e2 = a.engine.clone();
            let fact = json!({"content": "Likes tea"});
            let (r1, r2) = futures::future::join(async move { e1.add_fact(&fact).await }, async move {
                for _ in 0..delay {
                    YieldOnce(false).await;
                }
                e2.get().await
            })
            .await;
            r1.unwrap();
            r2.unwrap();
            let reasons = update_reasons(&a.events);
            if reasons != vec![(UpdateReason::AddFact, 1)] {
                hits.push((delay, reasons));
            }
        });
    }
    assert!(hits.is_empty(), "wrong update events: {hits:?}");
}

/// A store whose compare-and-set of the document pointer writes, then reports an error
/// (e.g. the directory fsync after a rename failed), once.
struct FailAfterCas {
    inner: Rc<MemoryKv>,
    armed: Cell<bool>,
}

impl KvStore for FailAfterCas {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        self.inner.get(key)
    }
    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        self.inner.set(key, value)
    }
    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        self.inner.delete(key)
    }
    fn capabilities(&self) -> KvCapabilities {
        self.inner.capabilities()
    }
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        self.inner.keys(prefix)
    }
    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        Box::pin(async move {
            let r = self.inner.compare_and_set(key, expected, value).await;
            if key.ends_with("/doc") && self.armed.replace(false) {
                return Err(Error::StorageFailed("fsync of the directory failed".into()));
            }
            r
        })
    }
    fn describe(&self) -> String {
        "fail-after-cas".into()
    }
}

/// A commit whose pointer flip landed although the store reported an error is a commit:
/// addFact resolves, the cache has the fact and `update` fires.
#[test]
fn a_commit_that_landed_despite_an_error_counts_as_committed() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let raw = Rc::new(FailAfterCas { inner: kv.clone(), armed: Cell::new(true) });
        let store = Rc::new(VersionedKv::new(raw, "default"));
        let a = RigBuilder::shared(&kv, &clock).store(store).open().await.unwrap();
        a.engine.add_fact(&json!({"content": "Likes tea"})).await.unwrap();
        assert_eq!(a.engine.cached().facts.len(), 1);
        assert_eq!(update_reasons(&a.events), vec![(UpdateReason::AddFact, 1)]);
        assert_eq!(a.engine.get().await.unwrap().facts.len(), 1, "and it is stored");
        assert_eq!(kv.snapshot().len(), 2, "the pointer and one version: the old one was removed");
    });
}

/// A store whose first read of the queue fails.
struct QueueLoadFailsOnce {
    inner: VersionedKv,
    failed: Cell<bool>,
}

impl Store for QueueLoadFailsOnce {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        if slot == Slot::Queue && !self.failed.replace(true) {
            return Box::pin(async { Err(Error::StorageFailed("transient".into())) });
        }
        self.inner.load(slot)
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        self.inner.commit(slot, base, value)
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        "q".into()
    }
}

/// A transient error reading the queue at open does not strand the persisted entries: the
/// queue is due at once (timer armed, nextDueAt() set), and the run re-reads it, reports
/// the error and processes the entry.
#[test]
fn a_transient_queue_read_error_at_open_is_retried_at_once() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let a = RigBuilder::shared(&kv, &clock).instance("A").open().await.unwrap();
        a.engine.observe("t1", &turn("I keep bees", "ok")).unwrap().unwrap().await.unwrap();
        a.engine.close().await.unwrap();
        let store = Rc::new(QueueLoadFailsOnce { inner: VersionedKv::new(kv.clone(), "default"), failed: Cell::new(false) });
        let b = RigBuilder::shared(&kv, &clock).instance("B").store(store).open().await.unwrap();
        clock.advance(3_600_000);
        let now = clock.now();
        assert!(b.engine.next_due_at().is_some_and(|t| t <= now), "due now");
        assert!(b.scheduler.armed().is_some(), "the timer is armed");
        b.llm.push(reply_with_facts(&["Keeps bees"]));
        let report = b.engine.process_due().await.unwrap();
        assert_eq!(report.processed, vec!["t1"]);
        assert_eq!(b.events.error_codes(), vec!["STORAGE_FAILED"], "the failed read is reported");
        assert_eq!(b.engine.next_due_at(), None);
    });
}

/// A store whose next queue read takes its snapshot at once and answers late.
struct SlowQueueRead {
    inner: VersionedKv,
    slow_next: Cell<bool>,
}

impl Store for SlowQueueRead {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        let slow = slot == Slot::Queue && self.slow_next.replace(false);
        Box::pin(async move {
            let snapshot = self.inner.load(slot).await; // snapshot taken now (IDB read txn)
            if slow {
                for _ in 0..50 {
                    YieldOnce(false).await;
                }
            }
            snapshot
        })
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        self.inner.commit(slot, base, value)
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        "slow".into()
    }
}

/// refresh_queue() (run on other instances' notifications) overlapping this instance's own
/// queue write never replaces the view with an older queue: the own entry stays visible
/// and the timer armed.
#[test]
fn a_slow_refresh_queue_never_overwrites_a_newer_view() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let store = Rc::new(SlowQueueRead { inner: VersionedKv::new(kv.clone(), "default"), slow_next: Cell::new(false) });
        let a = RigBuilder::shared(&kv, &clock).store(store.clone()).open().await.unwrap();
        store.slow_next.set(true);
        let e = a.engine.clone();
        let persist = a.engine.observe("t1", &turn("I keep bees", "ok")).unwrap().unwrap();
        let (r1, r2) = futures::future::join(async move { e.refresh_queue().await }, persist).await;
        r1.unwrap();
        r2.unwrap();
        let stored = VersionedKv::new(kv.clone(), "default").load(Slot::Queue).await.unwrap().unwrap();
        assert!(stored.value.contains("t1"), "t1 is persisted");
        assert_eq!(a.engine.queue_status().pending, vec!["t1".to_string()], "and in the view");
        assert_eq!(a.engine.next_due_at(), Some(T0 + 30_000));
        assert_eq!(a.scheduler.armed(), Some(T0 + 30_000), "the timer is armed for it");
    });
}

/// An observation written late (its instance was slow to persist) never replaces a newer
/// observation of the same thread that another instance persisted meanwhile: the queued
/// entry keeps the thread's latest messages.
#[test]
fn a_late_write_of_an_older_observation_keeps_the_newer_one() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let a = RigBuilder::shared(&kv, &clock).instance("A").open().await.unwrap();
        let b = RigBuilder::shared(&kv, &clock).instance("B").open().await.unwrap();
        let late = a.engine.observe("t", &turn("the older turn", "ok")).unwrap().unwrap();
        clock.advance(10_000);
        b.engine.observe("t", &turn("the newer turn", "ok")).unwrap().unwrap().await.unwrap();
        late.await.unwrap();
        let stored = VersionedKv::new(kv.clone(), "default").load(Slot::Queue).await.unwrap().unwrap();
        assert!(stored.value.contains("the newer turn"), "{}", stored.value);
        assert!(!stored.value.contains("the older turn"), "{}", stored.value);
    });
}

/// Runs `f` as a task of `pool` and returns where its result will appear.
fn spawn<T: 'static>(
    pool: &futures::executor::LocalPool,
    f: impl std::future::Future<Output = T> + 'static,
) -> Rc<std::cell::RefCell<Option<T>>> {
    use futures::task::LocalSpawnExt;
    let out = Rc::new(std::cell::RefCell::new(None));
    let slot = out.clone();
    pool.spawner().spawn_local(async move { *slot.borrow_mut() = Some(f.await) }).unwrap();
    out
}

/// flush() resolves when what was queued before it is applied: an entry another instance
/// (B) is processing is waited for, not skipped, and not processed a second time.
#[test]
fn flush_waits_for_an_entry_another_instance_is_processing() {
    let kv = Rc::new(MemoryKv::new());
    let clock = FakeClock::at(T0);
    let mut pool = futures::executor::LocalPool::new();
    let a = pool.run_until(RigBuilder::shared(&kv, &clock).instance("A").open()).unwrap();
    pool.run_until(a.engine.observe("t1", &turn("I climb", "cool")).unwrap().unwrap()).unwrap();
    let (gated, release) = GatedLlm::new();
    let b = pool.run_until(RigBuilder::shared(&kv, &clock).instance("B").llm(gated.clone()).open()).unwrap();
    clock.advance(30_000);
    // B's timer fires first: it claims t1 and waits for its model.
    let b_run = spawn(&pool, {
        let e = b.engine.clone();
        async move { e.process_due().await }
    });
    pool.run_until_stalled();
    assert_eq!(gated.calls.get(), 1, "B is extracting t1");
    // A flushes meanwhile; it keeps waiting (and polling) while B works.
    let flushed = spawn(&pool, {
        let e = a.engine.clone();
        async move { e.flush().await }
    });
    // Five minutes pass (more than twice B's lease): B renews its claim while its model
    // works, and A's flush keeps waiting (polling every 0.5 s).
    for _ in 0..600 {
        clock.advance(500);
        pool.run_until_stalled();
    }
    assert!(flushed.borrow().is_none(), "flush() has not resolved while B still holds t1: {:?}", flushed.borrow());
    assert_eq!(a.llm.calls(), 0, "and A did not take t1 over");
    release.send(reply_with_facts(&["Climbs"])).unwrap();
    run_in(
        &mut pool,
        std::future::poll_fn(|_| if flushed.borrow().is_some() { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }),
    );
    let report = flushed.borrow_mut().take().unwrap().expect("flush resolves once B is done");
    assert!(report.processed.is_empty(), "A did not process t1 itself");
    assert_eq!(b_run.borrow_mut().take().unwrap().unwrap().processed, vec!["t1"]);
    assert_eq!(a.llm.calls(), 0, "one LLM call for the burst");
    assert_eq!(pool.run_until(a.engine.get()).unwrap().facts[0].content, "Climbs");
}

/// An entry whose claimant died (its claim runs out) is taken over by the waiting flush().
#[test]
fn flush_takes_over_an_entry_whose_claimant_died() {
    let kv = Rc::new(MemoryKv::new());
    let clock = FakeClock::at(T0);
    let mut pool = futures::executor::LocalPool::new();
    let a = pool.run_until(RigBuilder::shared(&kv, &clock).instance("A").open()).unwrap();
    pool.run_until(a.engine.observe("t1", &turn("I climb", "cool")).unwrap().unwrap()).unwrap();
    let (gated, _never) = GatedLlm::new();
    let b = pool.run_until(RigBuilder::shared(&kv, &clock).instance("B").llm(gated.clone()).open()).unwrap();
    clock.advance(30_000);
    let b_run = {
        use futures::task::LocalSpawnExt;
        let e = b.engine.clone();
        pool.spawner().spawn_local_with_handle(async move { e.process_due().await }).unwrap()
    };
    pool.run_until_stalled();
    assert_eq!(gated.calls.get(), 1);
    // B "dies" holding the claim (its task, renewals included, is gone). A's flush waits
    // until the claim expires, then does it.
    drop(b_run);
    a.llm.push(reply_with_facts(&["Climbs"]));
    let report = run_in(&mut pool, a.engine.flush()).unwrap();
    assert_eq!(report.processed, vec!["t1"]);
    assert!(clock.now() >= T0 + 30_000 + 120_000, "not before B's claim ran out");
    assert!(clock.now() <= T0 + 30_000 + 120_000 + FLUSH_POLL_MS, "and at the first poll after it");
    assert_eq!(pool.run_until(a.engine.get()).unwrap().facts[0].content, "Climbs");
}

/// A second close() (e.g. from a second Ctrl-C handler that then exits the process)
/// resolves only once the first close()'s queue write has landed.
#[test]
fn a_second_close_resolves_only_after_the_first_ones_queue_write() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let store = Rc::new(VersionedKv::new(Rc::new(YieldingKv { inner: kv.clone() }), "default"));
        let a = RigBuilder::shared(&kv, &clock).store(store).open().await.unwrap();
        // Observed, not yet written: close() writes it.
        drop(a.engine.observe("t", &turn("I keep bees", "ok")).unwrap().unwrap());
        let first = a.engine.close();
        let second = async {
            a.engine.close().await.unwrap();
            let queue = VersionedKv::new(kv.clone(), "default").load(Slot::Queue).await.unwrap();
            assert!(queue.is_some_and(|q| q.value.contains("I keep bees")), "written by the time the second close() resolves");
        };
        let (r, ()) = futures::future::join(first, second).await;
        r.unwrap();
    });
}

/// An instance whose renewal comes too late (its event loop was blocked, its tab frozen)
/// finds the entry taken over: it drops its extraction and commits nothing, so the entry is
/// applied once, by the instance that took it over.
#[test]
fn an_instance_that_lost_its_claim_commits_nothing() {
    let kv = Rc::new(MemoryKv::new());
    let clock = FakeClock::at(T0);
    let mut pool = futures::executor::LocalPool::new();
    let a = pool.run_until(RigBuilder::shared(&kv, &clock).instance("A").open()).unwrap();
    pool.run_until(a.engine.observe("t1", &turn("I climb", "cool")).unwrap().unwrap()).unwrap();
    let (gated, release) = GatedLlm::new();
    let b = pool.run_until(RigBuilder::shared(&kv, &clock).instance("B").llm(gated.clone()).open()).unwrap();
    clock.advance(30_000);
    let b_run = spawn(&pool, {
        let e = b.engine.clone();
        async move { e.process_due().await }
    });
    pool.run_until_stalled();
    assert_eq!(gated.calls.get(), 1, "B is extracting t1");
    // B's timers do not run for longer than its lease; A, awake, takes t1 over meanwhile.
    clock.0.set(clock.now() + 130_000);
    a.llm.push(reply_with_facts(&["Climbs (from A)"]));
    assert_eq!(pool.run_until(a.engine.process_due()).unwrap().processed, vec!["t1"]);
    // B wakes: its renewal finds t1 gone, so it stops waiting for its model.
    clock.advance(0);
    pool.run_until_stalled();
    let report = b_run.borrow_mut().take().expect("B's batch ended").unwrap();
    assert!(report.processed.is_empty() && report.failed.is_empty(), "{report:?}");
    assert!(release.send(reply_with_facts(&["Climbs (from B)"])).is_err(), "B dropped its extraction");
    let facts: Vec<String> = pool.run_until(b.engine.get()).unwrap().facts.into_iter().map(|f| f.content).collect();
    assert_eq!(facts, vec!["Climbs (from A)".to_string()]);
}
