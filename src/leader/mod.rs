//! One writer per origin for localStorage (docs/storage.md#several-tabs): the protocol by
//! which the instances of one agent (browser tabs, or several instances in one tab) agree
//! on a leader that alone touches localStorage, and route every other instance's operations
//! through it.
//!
//! localStorage is not immediately consistent between tabs: measured in headless Chromium, a
//! tab that takes a Web Lock right after another tab wrote and released it reads the old
//! value about one time in ten, so "lock, re-read, compare" loses updates. Within one tab,
//! though, localStorage is perfectly consistent. So exactly one instance per origin and agent,
//! the **leader**, touches localStorage; every other instance (a **follower**) sends it its
//! `load`/`commit`/`discard` and waits for the answer.
//!
//! * Leadership is a lock held until the instance closes (in a browser a Web Lock, which the
//!   browser also releases when the tab dies); the platform calls [`Protocol::granted`]
//!   when it gets it. The next instance in the lock's queue becomes leader.
//! * A new leader first waits [`SETTLE_MS`] so that writes of the previous leader reach this
//!   tab's view of localStorage (measured: they arrive within one task), and it does not
//!   serve a request while its view is older than a revision that any instance has already
//!   heard of (every reply carries the revision, and every request the highest revision its
//!   sender knows), waiting up to [`CATCH_UP_MS`] for it. If the view never gets there
//!   (localStorage was cleared, or `reset()` ran), the leader serves what it sees and from
//!   then on ignores marks up to the one that timed out, so followers that heard of the old
//!   revisions do not make every request wait again.
//! * A request that is not answered within [`REQUEST_TIMEOUT_MS`] is sent again (the leader
//!   may have died before answering, or be busy), and so is every waiting request when a new
//!   leader announces itself. The leader serves each request id once: a copy of one it is
//!   serving is ignored, a copy of one it answered gets the same answer again. A commit sent
//!   again to a *new* leader is recognised if it already landed (the slot is at base + 1 with
//!   exactly that value); otherwise it gets `Conflict` and the engine re-reads and replays
//!   its change, which is safe.
//! * After [`GIVE_UP_MS`] without an answer the operation fails with `STORAGE_UNAVAILABLE`
//!   (the engine keeps the work queued and retries later). Every request carries a deadline
//!   a little before that moment, and the leader never starts one whose deadline has passed,
//!   so an operation reported as failed does not happen later. (It may have happened
//!   already: a leader that died between its write and its reply.)
//!
//! Everything here is platform-free: the platform moves [`Message`]s, provides the clock
//! and runs tasks ([`Tab`]); the simulation in `tests.rs` runs tabs that lose, duplicate,
//! delay and reorder messages, freeze and die.

// Only the wasm build runs it for real (natively it runs in the tests' simulated tabs).
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

mod message;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod sim;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

pub(crate) use message::{Answer, Message, Op, Reply, Request};

use crate::base::error::{Error, Result};
use crate::base::sync::{race, AsyncLock, LocalFuture};
use crate::base::time::{Clock, Millis};
use crate::storage::{Commit, Slot, Store, Versioned, VersionedKv};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

/// How long a new leader waits before it serves anything.
pub(crate) const SETTLE_MS: Millis = 50;
/// How long a follower waits for an answer before sending its request again.
pub(crate) const REQUEST_TIMEOUT_MS: Millis = 1000;
/// How long a follower keeps trying without any answer before it fails.
pub(crate) const GIVE_UP_MS: Millis = 30_000;
/// A request's deadline is this long before its sender gives up.
pub(crate) const DEADLINE_MARGIN_MS: Millis = 2000;
/// How long the leader waits for its view of localStorage to reach a revision another
/// instance has heard of; after that it serves what it sees (a `reset` restarts at 0).
pub(crate) const CATCH_UP_MS: Millis = 2000;
const POLL_MS: Millis = 10;
/// How many carried-out writes localStorage remembers, so that one sent again to a new
/// leader is recognised.
const SERVED_KEPT: usize = 32;

/// What the protocol needs from the place it runs in.
pub(crate) trait Tab {
    /// Sends `message` to every other instance of the agent (not back to this one). Best
    /// effort: the protocol copes with messages lost, duplicated, delayed and reordered.
    fn post(&self, message: &Message);
    /// Runs `task` to completion on the event loop.
    fn spawn(&self, task: LocalFuture<'static, ()>);
}

/// Which part an instance plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Public in the wasm build, where `wasm::LeaderStore::role` returns it.
#[cfg_attr(not(target_arch = "wasm32"), allow(unreachable_pub))]
pub enum Role {
    /// Sends its operations to the leader.
    Follower,
    /// Holds the lock and waits [`SETTLE_MS`] before serving.
    Settling,
    /// Performs every operation on localStorage.
    Leader,
    /// Closed: operations fail.
    Closed,
}

/// One instance's side of the protocol; a [`Store`] that performs its operations itself
/// while it leads and sends them to the leader otherwise.
pub(crate) struct Protocol {
    direct: Rc<VersionedKv>,
    tab: Rc<dyn Tab>,
    clock: Rc<dyn Clock>,
    name: String,
    role: Cell<Role>,
    /// The highest revision of each slot this instance has heard of.
    known: [Cell<u64>; Slot::ALL.len()],
    /// Per slot, the highest mark the view did not reach within [`CATCH_UP_MS`] (the slot
    /// was emptied): requests' marks up to it are stale and ignored.
    stale_mark: [Cell<u64>; Slot::ALL.len()],
    /// Operations waiting for a reply or a wake-up.
    waiting: RefCell<Vec<Rc<Mailbox>>>,
    serve_lock: AsyncLock,
    id_prefix: String,
    next_id: Cell<u32>,
    /// Where the latest writes carried out for other instances are recorded.
    served_key: String,
    me: Weak<Protocol>,
}

impl Protocol {
    /// An instance over `direct` (its own view of localStorage), called `name` in messages,
    /// whose request ids start with `id_prefix` (unique per instance). It is a follower
    /// until [`granted`](Protocol::granted).
    pub(crate) fn new(direct: Rc<VersionedKv>, tab: Rc<dyn Tab>, clock: Rc<dyn Clock>, name: String, id_prefix: String) -> Rc<Protocol> {
        let doc = direct.pointer_key(Slot::Document);
        let served_key = format!("{}served", &doc[..doc.len() - Slot::Document.name().len()]);
        Rc::new_cyclic(|me| Protocol {
            served_key,
            direct,
            tab,
            clock,
            name,
            role: Cell::new(Role::Follower),
            known: Default::default(),
            stale_mark: Default::default(),
            waiting: RefCell::default(),
            serve_lock: AsyncLock::new(),
            id_prefix,
            next_id: Cell::new(0),
            me: me.clone(),
        })
    }

    /// This instance's role right now.
    pub(crate) fn role(&self) -> Role {
        self.role.get()
    }

    /// Stops: operations in flight and later ones fail, nothing more is sent. Idempotent.
    /// (The platform releases the lock.)
    pub(crate) fn close(&self) {
        if self.role.replace(Role::Closed) != Role::Closed {
            self.wake_all();
        }
    }

    /// The lock was granted: settle, clean up crash orphans, announce, then serve.
    pub(crate) fn granted(&self) {
        if self.role.get() != Role::Follower {
            return;
        }
        self.role.set(Role::Settling);
        let me = self.me.clone();
        let settle = self.clock.sleep(SETTLE_MS);
        self.tab.spawn(Box::pin(async move {
            settle.await;
            let Some(me) = me.upgrade() else { return };
            if me.role.get() != Role::Settling {
                return;
            }
            me.role.set(Role::Leader);
            let cleanup = Request { id: String::new(), op: Op::Cleanup, known: [0; Slot::ALL.len()], retry: false, until: None };
            let _ = me.serve(&cleanup, false).await;
            me.post(&Message::Leader);
            me.wake_all();
        }));
    }

    /// Handles a message from another instance.
    pub(crate) fn receive(&self, message: Message) {
        match message {
            Message::Request(req) if self.role.get() == Role::Leader => {
                if let Some(me) = self.me.upgrade() {
                    self.tab.spawn(Box::pin(async move { me.answer(req).await }));
                }
            }
            Message::Request(_) => {}
            Message::Reply(reply) => {
                if let Some(slot) = reply.slot {
                    self.note(slot, reply.revision());
                }
                let found = self.waiting.borrow().iter().find(|m| m.id == reply.id).cloned();
                if let Some(mailbox) = found {
                    mailbox.deliver(Some(reply));
                }
            }
            Message::Reset(slot) => self.known[slot.index()].set(0),
            // A new leader: send what is waiting again now rather than at the timeout.
            Message::Leader => self.wake_all(),
        }
    }

    fn post(&self, message: &Message) {
        if self.role.get() != Role::Closed {
            self.tab.post(message);
        }
    }

    fn note(&self, slot: Slot, rev: u64) {
        let k = &self.known[slot.index()];
        k.set(k.get().max(rev));
    }

    fn wake_all(&self) {
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        for mailbox in waiting {
            mailbox.deliver(None);
        }
    }

    /// Waits for the reply to `id`, a wake-up (then `None`), or `ms` (then `None`).
    async fn wait_for(&self, id: &str, ms: Millis) -> Option<Reply> {
        let mailbox = Rc::new(Mailbox { id: id.to_string(), ..Mailbox::default() });
        self.waiting.borrow_mut().push(mailbox.clone());
        let _ = race(Delivery(mailbox.clone()), self.clock.sleep(ms)).await;
        self.waiting.borrow_mut().retain(|m| !Rc::ptr_eq(m, &mailbox));
        let reply = mailbox.reply.borrow_mut().take();
        reply
    }

    /// Serves a follower's request (leader only) and answers it.
    async fn answer(self: Rc<Self>, req: Request) {
        let outcome = self.serve(&req, true).await;
        self.post(&Message::Reply(Reply { id: req.id, slot: req.op.slot(), outcome }));
    }

    /// Performs `req` on localStorage (leader only), unless its deadline has passed.
    /// `record`: copies of the request may be about (it was sent on the channel): a write
    /// is then recorded as carried out, and not carried out again if it was already.
    async fn serve(&self, req: &Request, record: bool) -> Result<Answer> {
        let _guard = self.serve_lock.lock().await;
        if let Op::Load(slot) | Op::Commit(slot, ..) = &req.op {
            let i = slot.index();
            let theirs = if req.known[i] <= self.stale_mark[i].get() { 0 } else { req.known[i] };
            let target = self.known[i].get().max(theirs);
            let mut waited = 0;
            while let Some(rev) = self.direct.revision(*slot).await {
                if rev >= target {
                    break;
                }
                if waited >= CATCH_UP_MS {
                    // A stale mark (the slot was emptied): serve what is there, and stop
                    // waiting for marks up to this one.
                    self.known[i].set(rev);
                    self.stale_mark[i].set(self.stale_mark[i].get().max(target));
                    break;
                }
                self.clock.sleep(POLL_MS).await;
                waited += POLL_MS;
            }
        }
        // Everything below is synchronous underneath: no other code runs in between.
        if self.role.get() != Role::Leader {
            return Err(Error::StorageUnavailable("this tab stopped leading localStorage; try again".into()));
        }
        // A write sent again (or a copy of it) may have been carried out by a leader that
        // died before its answer got through: doing it again could bring back what a
        // discard removed, or remove what was committed since.
        let done = match &req.op {
            Op::Commit(..) | Op::Discard(_) if record => self.carried_out(&req.id).await,
            _ => None,
        };
        if req.until.is_some_and(|d| self.clock.now_ms() > d) {
            return Err(Error::StorageUnavailable("the localStorage leader was too slow to take this request; nothing was written".into()));
        }
        if let Some(commit) = done {
            // What happened then, not what the slot holds now: teaches no revision.
            return Ok(Answer::Committed(commit).answering(&req.op));
        }
        let answer = match &req.op {
            Op::Load(slot) => Answer::Loaded(self.direct.load(*slot).await?),
            Op::Commit(slot, base, value) => {
                // Also recognised: a commit that shows, which a leader of an older version
                // may have carried out without recording it.
                let landed = match self.direct.load(*slot).await {
                    Ok(Some(v)) if req.retry => v.revision == base + 1 && v.value == *value,
                    _ => false,
                };
                let commit = if landed { Commit::Committed(base + 1) } else { self.direct.commit(*slot, *base, value.clone()).await? };
                // A refusal too: a copy coming after a discard would find the base again.
                if record {
                    self.record(&req.id, commit).await?;
                }
                Answer::Committed(commit)
            }
            Op::Discard(slot) => {
                if record {
                    self.record(&req.id, Commit::Committed(0)).await?;
                }
                self.direct.discard(*slot).await?;
                self.known[slot.index()].set(0);
                self.post(&Message::Reset(*slot));
                Answer::Done
            }
            Op::Cleanup => {
                self.direct.cleanup().await?;
                Answer::Done
            }
        };
        if let Some(slot) = req.op.slot() {
            self.note(slot, answer.revision());
        }
        Ok(answer)
    }

    /// What request `id` gave if a leader carried it out lately: a commit's result, or
    /// `Committed(0)` for a discard.
    async fn carried_out(&self, id: &str) -> Option<Commit> {
        let list = self.direct.inner().get(&self.served_key).await.ok().flatten()?;
        list.split(' ').find_map(|e| match e.strip_prefix(id)?.strip_prefix(':')? {
            "-" => Some(Commit::Conflict),
            rev => rev.parse().ok().map(Commit::Committed),
        })
    }

    /// Records in localStorage what request `id` gave (`Committed(0)` for a discard): the
    /// last [`SERVED_KEPT`] as `id:rev` or `id:-` (a conflict), space-separated, under
    /// `user-memory/{agent}/served`, where the next leader finds them.
    async fn record(&self, id: &str, commit: Commit) -> Result<()> {
        let list = self.direct.inner().get(&self.served_key).await?.unwrap_or_default();
        let entries: Vec<&str> = list.split(' ').filter(|e| !e.is_empty()).collect();
        let mut out = String::new();
        for e in &entries[entries.len().saturating_sub(SERVED_KEPT - 1)..] {
            out.push_str(e);
            out.push(' ');
        }
        out.push_str(id);
        match commit {
            Commit::Committed(rev) => {
                out.push(':');
                out.push_str(&rev.to_string());
            }
            Commit::Conflict => out.push_str(":-"),
        }
        self.direct.inner().set(&self.served_key, &out).await
    }

    /// Runs `op` here if this instance leads, else through the leader.
    async fn run(&self, mut op: Op) -> Result<Answer> {
        let id = format!("{}-{}", self.id_prefix, self.next_id.get());
        self.next_id.set(self.next_id.get() + 1);
        let mut retry = false;
        let mut sent = false;
        let start = self.clock.now_ms();
        let deadline = start + (GIVE_UP_MS - DEADLINE_MARGIN_MS);
        loop {
            match self.role.get() {
                // A request already sent may still be carried out (up to its deadline):
                // say so rather than claim that nothing happened.
                Role::Closed if retry || sent => {
                    return Err(Error::StorageUnavailable(
                        "this localStorage store was closed while the leader tab had its request, which may still be carried out".into(),
                    ))
                }
                Role::Closed => return Err(Error::StorageUnavailable("this localStorage store was closed".into())),
                Role::Leader => {
                    let op = std::mem::replace(&mut op, Op::Cleanup);
                    let req = Request { id, op, known: [0; Slot::ALL.len()], retry, until: None };
                    // Copies of it sent as a follower may reach the next leader: record it.
                    let outcome = self.serve(&req, sent).await;
                    if let Ok(Answer::Committed(Commit::Committed(_))) = &outcome {
                        // Followers learn the revision (they may lead next).
                        self.post(&Message::Reply(Reply { id: String::new(), slot: req.op.slot(), outcome: outcome.clone() }));
                    }
                    return outcome;
                }
                Role::Settling => {
                    self.wait_for(&id, REQUEST_TIMEOUT_MS).await;
                }
                Role::Follower => {
                    if let Op::Cleanup = op {
                        return Ok(Answer::Done); // the leader cleans up when it takes over
                    }
                    let known = Slot::ALL.map(|slot| self.known[slot.index()].get());
                    self.post(&Message::Request(Request { id: id.clone(), op: op.clone(), known, retry, until: Some(deadline) }));
                    sent = true;
                    if let Some(reply) = self.wait_for(&id, REQUEST_TIMEOUT_MS).await {
                        return reply.outcome.map(|a| a.answering(&op));
                    }
                    retry = true;
                    // By the clock, not by counting rounds: a round cut short by a new
                    // leader's announcement must not bring the failure before the deadline.
                    if self.clock.now_ms() >= start + GIVE_UP_MS && self.role.get() == Role::Follower {
                        return Err(Error::StorageUnavailable(format!(
                            "no tab answered as the localStorage leader of \"{}\" for {} s; try again",
                            self.name,
                            GIVE_UP_MS / 1000
                        )));
                    }
                }
            }
        }
    }
}

/// Where a reply (or a wake-up) for one waiting operation lands.
#[derive(Default)]
struct Mailbox {
    id: String,
    reply: RefCell<Option<Reply>>,
    woken: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Mailbox {
    fn deliver(&self, reply: Option<Reply>) {
        if reply.is_some() {
            *self.reply.borrow_mut() = reply;
        }
        self.woken.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

/// Resolves once the mailbox got something.
struct Delivery(Rc<Mailbox>);

impl Future for Delivery {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.woken.get() {
            return Poll::Ready(());
        }
        *self.0.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Store for Protocol {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        Box::pin(async move {
            match self.run(Op::Load(slot)).await? {
                Answer::Loaded(v) => Ok(v),
                _ => Ok(None),
            }
        })
    }

    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(async move {
            match self.run(Op::Commit(slot, base, value)).await? {
                Answer::Committed(c) => Ok(c),
                _ => Ok(Commit::Conflict),
            }
        })
    }

    fn cleanup(&self) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move { self.run(Op::Cleanup).await.map(|_| ()) })
    }

    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move { self.run(Op::Discard(slot)).await.map(|_| ()) })
    }

    fn describe(&self) -> String {
        self.direct.describe()
    }
}
