//! A deterministic simulation of browser tabs running the leader protocol, for the tests.
//!
//! Virtual time; one executor for every tab; a network that loses, duplicates, delays and
//! (through random delays) reorders messages; tabs that freeze (nothing of theirs runs, their
//! messages queue up), die (their tasks vanish mid-way, the lock passes on), close or join.
//! localStorage is one shared log of writes that each tab sees through its own view: its own
//! writes at once, other tabs' writes `lag` ms later (the cross-tab delay that makes the
//! leader necessary). Every client operation is recorded with its start, end and result,
//! and the log tells what really happened, so the tests can compare the two.

use super::{Message, Protocol, Role, Tab};
use crate::base::error::Result;
use crate::base::sync::LocalFuture;
use crate::base::time::{Clock, Millis};
use crate::storage::{Commit, KvCapabilities, KvStore, Slot, Store, Versioned, VersionedKv};
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use std::cell::{Cell, RefCell};
use std::future::{ready, Future};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

/// The agent every simulated tab uses.
pub(super) const AGENT: &str = "sim";
/// Simulated time never runs past this (a protocol that hangs fails the test).
const TIME_LIMIT: Millis = 30 * 60_000;

/// How the network misbehaves (probabilities in per mille).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Faults {
    pub(super) loss: u32,
    pub(super) dup: u32,
    pub(super) max_delay: Millis,
    pub(super) long: u32,
    pub(super) long_max: Millis,
}

/// A small deterministic random source (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }
}

/// Virtual time and its timers.
#[derive(Default)]
struct Time {
    now: Cell<Millis>,
    timers: RefCell<Vec<(Millis, Waker)>>,
}

struct Sleep {
    time: Rc<Time>,
    due: Millis,
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.time.now.get() >= self.due {
            return Poll::Ready(());
        }
        self.time.timers.borrow_mut().push((self.due, cx.waker().clone()));
        Poll::Pending
    }
}

/// The clock every tab reads.
pub(super) struct SimClock(Rc<Time>);

impl Clock for SimClock {
    fn now_ms(&self) -> Millis {
        self.0.now.get()
    }
    fn sleep(&self, ms: Millis) -> LocalFuture<'static, ()> {
        Box::pin(Sleep { time: self.0.clone(), due: self.0.now.get() + ms })
    }
}

/// One write to the shared localStorage (`None`: a removal).
#[derive(Debug, Clone)]
pub(super) struct Write {
    pub(super) at: Millis,
    pub(super) by: usize,
    pub(super) key: String,
    pub(super) value: Option<String>,
}

/// One tab's view of localStorage.
struct View {
    log: Rc<RefCell<Vec<Write>>>,
    time: Rc<Time>,
    tab: usize,
    lag: Millis,
}

impl View {
    fn visible(&self, w: &Write) -> bool {
        w.by == self.tab || w.at + self.lag <= self.time.now.get()
    }
    fn read(&self, key: &str) -> Option<String> {
        self.log.borrow().iter().rev().find(|w| w.key == key && self.visible(w)).and_then(|w| w.value.clone())
    }
    fn write(&self, key: &str, value: Option<&str>) {
        let w = Write { at: self.time.now.get(), by: self.tab, key: key.to_string(), value: value.map(str::to_string) };
        self.log.borrow_mut().push(w);
    }
}

impl KvStore for View {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(ready(Ok(self.read(key))))
    }
    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        self.write(key, Some(value));
        Box::pin(ready(Ok(())))
    }
    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        self.write(key, None);
        Box::pin(ready(Ok(())))
    }
    fn capabilities(&self) -> KvCapabilities {
        KvCapabilities { keys: true, compare_and_set: true }
    }
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        let mut keys: Vec<String> = Vec::new();
        for w in self.log.borrow().iter().filter(|w| w.key.starts_with(prefix) && self.visible(w)) {
            if !keys.contains(&w.key) {
                keys.push(w.key.clone());
            }
        }
        keys.retain(|k| self.read(k).is_some());
        Box::pin(ready(Ok(keys)))
    }
    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        let ok = self.read(key).as_deref() == expected;
        if ok {
            self.write(key, Some(value));
        }
        Box::pin(ready(Ok(ok)))
    }
    fn describe(&self) -> String {
        format!("the view of tab {}", self.tab)
    }
}

/// What a client operation gave.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Outcome {
    Loaded(Option<Versioned>),
    Committed(u64),
    Conflict,
    Done,
    Failed(String),
}

/// A storage operation of a client, as the tab's engine would call it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Call {
    Load(Slot),
    Commit(Slot, u64, String),
    Discard(Slot),
}

/// One client operation and what became of it (`end: None`: its tab died first).
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub(super) tab: usize,
    pub(super) call: Call,
    pub(super) start: Millis,
    pub(super) end: Option<Millis>,
    pub(super) outcome: Option<Outcome>,
    /// Whether it ran after the network healed.
    pub(super) probe: bool,
}

/// What a tab's client does next: read a slot, read it and write it back changed, or
/// discard it, after `think` ms.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Load(Slot, Millis),
    Update(Slot, Millis),
    Discard(Slot, Millis),
}

/// Something that happens to a tab.
#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
    Kill(usize),
    Close(usize),
    Freeze(usize, Millis),
    Thaw(usize),
}

struct SimTab {
    alive: Cell<bool>,
    open: Cell<bool>,
    frozen: Cell<bool>,
    thaw: RefCell<Vec<Waker>>,
    busy: Cell<usize>,
    protocol: RefCell<Option<Rc<Protocol>>>,
}

impl SimTab {
    fn protocol(&self) -> Rc<Protocol> {
        self.protocol.borrow().clone().expect("the tab's protocol is set at once")
    }
    fn reachable(&self) -> bool {
        self.alive.get() && self.open.get()
    }
}

/// A task of one tab: nothing of it runs while the tab is frozen, and it vanishes when the
/// tab dies.
struct TabTask {
    tab: Rc<SimTab>,
    inner: Option<LocalFuture<'static, ()>>,
}

impl Future for TabTask {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.tab.alive.get() {
            self.inner = None;
            return Poll::Ready(());
        }
        if self.tab.frozen.get() {
            self.tab.thaw.borrow_mut().push(cx.waker().clone());
            return Poll::Pending;
        }
        match self.inner.as_mut().map(|f| f.as_mut().poll(cx)) {
            Some(Poll::Pending) => Poll::Pending,
            _ => {
                self.inner = None;
                Poll::Ready(())
            }
        }
    }
}

struct InFlight {
    at: Millis,
    seq: u64,
    to: usize,
    message: Message,
}

/// Picks messages to lose: by sender and content.
pub(super) type Loss = Box<dyn Fn(usize, &Message) -> bool>;

/// A tab's way out: the simulated network and executor.
struct Link {
    sim: Weak<Sim>,
    tab: usize,
}

impl Tab for Link {
    fn post(&self, message: &Message) {
        if let Some(sim) = self.sim.upgrade() {
            sim.broadcast(self.tab, message);
        }
    }
    fn spawn(&self, task: LocalFuture<'static, ()>) {
        if let Some(sim) = self.sim.upgrade() {
            sim.spawn_on(self.tab, task);
        }
    }
}

/// The simulated browser.
pub(super) struct Sim {
    time: Rc<Time>,
    spawner: futures::executor::LocalSpawner,
    rng: RefCell<Rng>,
    faults: Cell<Faults>,
    lag: Millis,
    net: RefCell<Vec<InFlight>>,
    seq: Cell<u64>,
    tabs: RefCell<Vec<Rc<SimTab>>>,
    /// The lock's queue: the first one holds it.
    locks: RefCell<Vec<usize>>,
    /// When each leadership was granted.
    pub(super) grants: RefCell<Vec<Millis>>,
    log: Rc<RefCell<Vec<Write>>>,
    pub(super) records: RefCell<Vec<Record>>,
    events: RefCell<Vec<(Millis, Event)>>,
    healed: Cell<bool>,
    lose: RefCell<Option<Loss>>,
    values: Cell<u64>,
    me: Weak<Sim>,
}

impl Sim {
    /// A browser whose network misbehaves as `faults` says and whose tabs see each other's
    /// writes `lag` ms late; `pool` runs everything.
    pub(super) fn new(pool: &LocalPool, faults: Faults, lag: Millis, seed: u64) -> Rc<Sim> {
        Rc::new_cyclic(|me| Sim {
            time: Rc::new(Time { now: Cell::new(1_000_000), ..Time::default() }),
            spawner: pool.spawner(),
            rng: RefCell::new(Rng(seed | 1)),
            faults: Cell::new(faults),
            lag,
            net: RefCell::default(),
            seq: Cell::new(0),
            tabs: RefCell::default(),
            locks: RefCell::default(),
            grants: RefCell::default(),
            log: Rc::default(),
            records: RefCell::default(),
            events: RefCell::default(),
            healed: Cell::new(false),
            lose: RefCell::default(),
            values: Cell::new(0),
            me: me.clone(),
        })
    }

    /// The current virtual time.
    pub(super) fn now(&self) -> Millis {
        self.time.now.get()
    }

    /// Everything ever written to localStorage, in order.
    pub(super) fn log(&self) -> Vec<Write> {
        self.log.borrow().clone()
    }

    /// A new tab joins: it asks for the lock and runs `steps`.
    pub(super) fn open_tab(&self, steps: Vec<Step>) -> usize {
        let id = self.tabs.borrow().len();
        let view = View { log: self.log.clone(), time: self.time.clone(), tab: id, lag: self.lag };
        let direct = Rc::new(VersionedKv::new(Rc::new(view), AGENT));
        let link = Rc::new(Link { sim: self.me.clone(), tab: id });
        let protocol = Protocol::new(direct, link, Rc::new(SimClock(self.time.clone())), AGENT.into(), format!("tab{id}"));
        let tab = SimTab {
            alive: Cell::new(true),
            open: Cell::new(true),
            frozen: Cell::new(false),
            thaw: RefCell::default(),
            busy: Cell::new(0),
            protocol: RefCell::new(Some(protocol)),
        };
        self.tabs.borrow_mut().push(Rc::new(tab));
        self.locks.borrow_mut().push(id);
        self.grant();
        if !steps.is_empty() {
            self.client(id, steps, false);
        }
        id
    }

    /// The role of tab `id`.
    pub(super) fn role(&self, id: usize) -> Role {
        self.tab(id).protocol().role()
    }

    /// Schedules `event` at `at` ms from the start.
    pub(super) fn at(&self, at: Millis, event: Event) {
        self.events.borrow_mut().push((self.now() + at, event));
    }

    /// From now on the network is reliable and fast (the tests' liveness phase).
    pub(super) fn heal(&self) {
        self.healed.set(true);
        self.faults.set(Faults { max_delay: 5, ..Faults::default() });
    }

    /// Runs `steps` on tab `id` (a probe if `probe`).
    pub(super) fn client(&self, id: usize, steps: Vec<Step>, probe: bool) {
        let tab = self.tab(id);
        tab.busy.set(tab.busy.get() + 1);
        let me = self.me.upgrade().expect("the simulation is alive");
        self.spawn_on(
            id,
            Box::pin(async move {
                for step in steps {
                    me.step(id, step, probe).await;
                }
                let tab = me.tab(id);
                tab.busy.set(tab.busy.get() - 1);
            }),
        );
    }

    async fn step(&self, id: usize, step: Step, probe: bool) {
        let (Step::Load(_, think) | Step::Update(_, think) | Step::Discard(_, think)) = step;
        SimClock(self.time.clone()).sleep(think).await;
        match step {
            Step::Load(slot, _) => {
                self.call(id, Call::Load(slot), probe).await;
            }
            Step::Update(slot, _) => {
                if let Some(Outcome::Loaded(v)) = self.call(id, Call::Load(slot), probe).await {
                    let n = self.values.get() + 1;
                    self.values.set(n);
                    let base = v.map_or(0, |v| v.revision);
                    self.call(id, Call::Commit(slot, base, format!("tab{id}-value{n}")), probe).await;
                }
            }
            Step::Discard(slot, _) => {
                self.call(id, Call::Discard(slot), probe).await;
            }
        }
    }

    async fn call(&self, id: usize, call: Call, probe: bool) -> Option<Outcome> {
        let protocol = self.tab(id).protocol();
        let index = self.records.borrow().len();
        let record = Record { tab: id, call: call.clone(), start: self.now(), end: None, outcome: None, probe };
        self.records.borrow_mut().push(record);
        let failed = |e: crate::base::error::Error| Outcome::Failed(e.to_string());
        let outcome = match call {
            Call::Load(slot) => protocol.load(slot).await.map_or_else(failed, Outcome::Loaded),
            Call::Commit(slot, base, value) => match protocol.commit(slot, base, value).await {
                Ok(Commit::Committed(rev)) => Outcome::Committed(rev),
                Ok(Commit::Conflict) => Outcome::Conflict,
                Err(e) => failed(e),
            },
            Call::Discard(slot) => protocol.discard(slot).await.map_or_else(failed, |_| Outcome::Done),
        };
        let mut records = self.records.borrow_mut();
        records[index].end = Some(self.now());
        records[index].outcome = Some(outcome.clone());
        Some(outcome)
    }

    fn tab(&self, id: usize) -> Rc<SimTab> {
        self.tabs.borrow()[id].clone()
    }

    fn spawn_on(&self, id: usize, task: LocalFuture<'static, ()>) {
        let task = TabTask { tab: self.tab(id), inner: Some(task) };
        self.spawner.spawn_local(task).expect("the executor runs");
    }

    fn broadcast(&self, from: usize, message: &Message) {
        if self.lose.borrow().as_ref().is_some_and(|lose| lose(from, message)) {
            return;
        }
        let faults = self.faults.get();
        let tabs: Vec<(usize, bool)> = self.tabs.borrow().iter().enumerate().map(|(i, t)| (i, t.reachable())).collect();
        for (to, reachable) in tabs {
            if to == from || !reachable {
                continue;
            }
            let mut rng = self.rng.borrow_mut();
            if rng.chance(faults.loss) {
                continue;
            }
            let copies = if rng.chance(faults.dup) { 2 } else { 1 };
            for _ in 0..copies {
                let delay = if rng.chance(faults.long) { rng.below(faults.long_max + 1) } else { rng.below(faults.max_delay + 1) };
                let seq = self.seq.get() + 1;
                self.seq.set(seq);
                self.net.borrow_mut().push(InFlight { at: self.now() + delay, seq, to, message: message.clone() });
            }
        }
    }

    /// Gives the lock to the first tab in its queue if it does not hold it yet.
    fn grant(&self) {
        let head = self.locks.borrow().first().copied();
        if let Some(id) = head {
            let protocol = self.tab(id).protocol();
            if protocol.role() == Role::Follower {
                self.grants.borrow_mut().push(self.now());
                protocol.granted();
            }
        }
    }

    fn release(&self, id: usize) {
        self.locks.borrow_mut().retain(|t| *t != id);
        self.grant();
    }

    fn apply(&self, event: Event) {
        match event {
            Event::Kill(id) => {
                let tab = self.tab(id);
                if tab.alive.replace(false) {
                    // Its tasks vanish at their next poll.
                    for w in tab.thaw.borrow_mut().drain(..) {
                        w.wake();
                    }
                    self.release(id);
                }
            }
            Event::Close(id) => {
                let tab = self.tab(id);
                if tab.alive.get() && tab.open.replace(false) {
                    tab.protocol().close();
                    self.release(id);
                }
            }
            Event::Freeze(id, ms) => {
                self.tab(id).frozen.set(true);
                self.events.borrow_mut().push((self.now() + ms, Event::Thaw(id)));
            }
            Event::Thaw(id) => {
                let tab = self.tab(id);
                tab.frozen.set(false);
                for w in tab.thaw.borrow_mut().drain(..) {
                    w.wake();
                }
            }
        }
    }

    /// Whether every open tab's clients are done and nothing more is scheduled.
    fn settled(&self) -> bool {
        self.events.borrow().is_empty() && self.tabs.borrow().iter().all(|t| !t.reachable() || t.busy.get() == 0)
    }

    /// Runs until `until` (ms from now), or with `None` until every client is done.
    pub(super) fn run(&self, pool: &mut LocalPool, until: Option<Millis>) {
        let until = until.map(|ms| self.now() + ms);
        loop {
            pool.run_until_stalled();
            if until.is_none() && self.settled() {
                return;
            }
            let deliverable = |m: &InFlight| {
                let tab = self.tab(m.to);
                tab.reachable() && !tab.frozen.get()
            };
            self.net.borrow_mut().retain(|m| self.tab(m.to).reachable());
            let next = [
                self.time.timers.borrow().iter().map(|t| t.0).min(),
                self.net.borrow().iter().filter(|m| deliverable(m)).map(|m| m.at).min(),
                self.events.borrow().iter().map(|e| e.0).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            let next = match (next, until) {
                (Some(n), Some(u)) if n > u => None,
                (n, _) => n,
            };
            let Some(next) = next else {
                if let Some(u) = until {
                    self.time.now.set(u.max(self.now()));
                    pool.run_until_stalled();
                }
                assert!(until.is_some(), "the simulation stalled with clients still waiting");
                return;
            };
            assert!(next < TIME_LIMIT + 1_000_000, "the protocol did not finish within {} virtual minutes", TIME_LIMIT / 60_000);
            self.time.now.set(next.max(self.now()));
            let now = self.now();
            let due: Vec<Event> = {
                let mut events = self.events.borrow_mut();
                events.sort_by_key(|e| e.0);
                let n = events.iter().take_while(|e| e.0 <= now).count();
                events.drain(..n).map(|e| e.1).collect()
            };
            for event in due {
                self.apply(event);
            }
            let mut arrived: Vec<InFlight> = Vec::new();
            {
                let mut net = self.net.borrow_mut();
                let mut i = 0;
                while i < net.len() {
                    if net[i].at <= now && deliverable(&net[i]) {
                        arrived.push(net.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
            }
            arrived.sort_by_key(|m| (m.at, m.seq));
            for m in arrived {
                self.tab(m.to).protocol().receive(m.message);
            }
            let woken: Vec<Waker> = {
                let mut timers = self.time.timers.borrow_mut();
                let (due, rest): (Vec<_>, Vec<_>) = timers.drain(..).partition(|t| t.0 <= now);
                *timers = rest;
                due.into_iter().map(|t| t.1).collect()
            };
            for w in woken {
                w.wake();
            }
        }
    }

    /// The tabs that are alive and open.
    pub(super) fn open_tabs(&self) -> Vec<usize> {
        self.tabs.borrow().iter().enumerate().filter(|(_, t)| t.reachable()).map(|(i, _)| i).collect()
    }

    /// From now on the messages `lose` picks (by sender and content) are lost.
    pub(super) fn lose(&self, lose: Loss) {
        *self.lose.borrow_mut() = Some(lose);
    }

    /// Removes every key, as `localStorage.clear()` in some other script would.
    pub(super) fn clear_storage(&self) {
        let mut keys: Vec<String> = Vec::new();
        for w in self.log.borrow().iter() {
            if !keys.contains(&w.key) {
                keys.push(w.key.clone());
            }
        }
        let at = self.now();
        self.log.borrow_mut().extend(keys.into_iter().map(|key| Write { at, by: usize::MAX, key, value: None }));
    }

    /// Removes `key`, as some other script would.
    pub(super) fn remove_key(&self, key: &str) {
        let w = Write { at: self.now(), by: usize::MAX, key: key.to_string(), value: None };
        self.log.borrow_mut().push(w);
    }

    /// Posts `message` from tab `from` to the others, through the (faulty) network.
    pub(super) fn inject(&self, from: usize, message: &Message) {
        self.broadcast(from, message);
    }
}
