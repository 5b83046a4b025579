//! One writer per origin for localStorage (docs/storage.md#several-tabs).
//!
//! localStorage is not immediately consistent between tabs: measured in headless Chromium, a
//! tab that takes a Web Lock right after another tab wrote and released it reads the old
//! value about one time in ten, so "lock, re-read, compare" loses updates. Within one tab,
//! though, localStorage is perfectly consistent. So exactly one instance per origin and agent,
//! the **leader**, touches localStorage; every other instance (a **follower**, in another tab
//! or the same one) sends it its `load`/`commit`/`discard` over a `BroadcastChannel` and waits
//! for the answer.
//!
//! * Leadership is a Web Lock, `user-memory/{agent}/leader`, requested by every instance and
//!   held until `close()` (or until the tab dies: the browser then releases it). The next
//!   instance in the lock's queue becomes leader.
//! * A new leader first waits [`SETTLE_MS`] so that writes of the previous leader reach this
//!   tab's view of localStorage (measured: they arrive within one task), and it does not
//!   serve a request while its view is older than a revision that any tab has already heard
//!   of (every answer carries the revision, and every request the highest revision its sender
//!   knows), waiting up to [`CATCH_UP_MS`] for it.
//!   If the view never gets there (localStorage was cleared, or `reset()` ran), the leader
//!   serves what it sees and from then on ignores marks up to the one that timed out, so
//!   followers that heard of the old revisions do not make every request wait again.
//! * A request that is not answered within [`REQUEST_TIMEOUT_MS`] is sent again (the leader
//!   may have died before answering, or be busy). The leader serves each request id once:
//!   a copy of one it is serving is ignored, a copy of one it answered gets the same answer
//!   again. A commit sent again to a *new* leader is recognised if it already landed (the
//!   slot is at base + 1 with exactly that value); otherwise it gets `Conflict` and the
//!   engine re-reads and replays its change, which is safe.
//! * After [`GIVE_UP_MS`] without any answer the operation fails with `STORAGE_UNAVAILABLE`
//!   (the engine keeps the work queued and retries later). Every request carries a deadline
//!   a little before that moment, and the leader never starts one whose deadline has passed,
//!   so an operation reported as failed has not happened and will not happen later.

mod wire;

use super::convert::{prop, set};
use super::error::storage_error;
use crate::error::{Error, Result};
use crate::ids::{IdSource, RandomIds};
use crate::storage::{Commit, Slot, Store, Versioned, VersionedKv};
use crate::sync::{AsyncLock, LocalFuture};
use js_sys::{Function, Object, Promise};
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};
use web_sys::{AbortController, BroadcastChannel};
use wire::{answer_of, mark_key, message, num, result_message, slot_of, Answer, Op};

/// How long a new leader waits before it serves anything.
pub(crate) const SETTLE_MS: i32 = 50;
/// How long a follower waits for an answer before sending its request again.
pub(crate) const REQUEST_TIMEOUT_MS: i32 = 1000;
/// How long a follower keeps trying without any answer before it fails.
pub(crate) const GIVE_UP_MS: i32 = 30_000;
/// A request's deadline is this long before its sender gives up.
const DEADLINE_MARGIN_MS: i32 = 2000;
/// How many answered request ids the leader remembers (to answer copies the same way).
const ANSWERED: usize = 64;
/// How long the leader waits for its view of localStorage to reach a revision another tab
/// has heard of; after that it serves what it sees (a `reset` restarts revisions at 0).
pub(crate) const CATCH_UP_MS: i32 = 2000;
const POLL_MS: i32 = 10;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &Function, ms: i32) -> JsValue;
}

/// Resolves after `ms` milliseconds (global `setTimeout`).
pub(crate) async fn sleep(ms: i32) {
    let _ = JsFuture::from(Promise::new(&mut |resolve, _| {
        set_timeout(&resolve, ms);
    }))
    .await;
}

/// Runs `f` on the event loop. One boxed future type, so `spawn_local` is instantiated once
/// for this module and tabs.rs.
pub(crate) fn spawn(f: LocalFuture<'static, ()>) {
    spawn_local(f);
}

/// `Function.prototype`: a function that does nothing (for `promise.catch`).
fn noop() -> Function {
    prop(&prop(&js_sys::global(), "Function"), "prototype").unchecked_into()
}

/// Which part this instance plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends its operations to the leader.
    Follower,
    /// Holds the lock and waits [`SETTLE_MS`] before serving.
    Settling,
    /// Performs every operation on localStorage.
    Leader,
    /// Closed: operations fail, the lock is released.
    Closed,
}

/// A [`Store`] over localStorage that routes every operation through the leader instance.
pub struct LeaderStore {
    direct: Rc<VersionedKv>,
    name: String,
    channel: BroadcastChannel,
    role: Cell<Role>,
    /// The highest revision of each slot this instance has heard of.
    known: [Cell<u64>; Slot::ALL.len()],
    /// Per slot, the highest mark the view did not reach within [`CATCH_UP_MS`] (the slot
    /// was emptied): requests' marks up to it are stale and ignored.
    stale_mark: [Cell<u64>; Slot::ALL.len()],
    /// Requests being served (`None`) or answered (their answer), by id, oldest first.
    served: RefCell<Vec<(String, Option<JsValue>)>>,
    /// Operations waiting for an answer (or a wake-up): id → the promise's resolve.
    waiting: RefCell<Vec<(String, Function)>>,
    /// Resolving it releases the lock.
    release: RefCell<Option<Function>>,
    abort: AbortController,
    serve_lock: AsyncLock,
    id_prefix: String,
    next_id: Cell<u32>,
    on_message: Closure<dyn FnMut(JsValue)>,
    on_grant: Closure<dyn FnMut(JsValue) -> Promise>,
}

impl LeaderStore {
    /// Joins the election for `direct`'s agent: requests the leader lock and listens on the
    /// agent's channel. Needs `navigator.locks` and `BroadcastChannel`.
    pub fn start(direct: Rc<VersionedKv>) -> Result<Rc<LeaderStore>> {
        // "user-memory/{encoded agent}/leader", the lock and channel name.
        let doc_key = direct.pointer_key(Slot::Document);
        let name = format!("{}leader", &doc_key[..doc_key.len() - Slot::Document.name().len()]);
        let fail = |e: JsValue| storage_error(&e, "cannot coordinate localStorage between tabs");
        let channel = BroadcastChannel::new(&name).map_err(fail)?;
        let abort = AbortController::new().map_err(fail)?;
        let me = Rc::new_cyclic(|weak: &Weak<LeaderStore>| {
            let on_message = {
                let weak = weak.clone();
                Closure::<dyn FnMut(JsValue)>::new(move |ev: JsValue| {
                    if let Some(me) = weak.upgrade() {
                        me.on_message(prop(&ev, "data"));
                    }
                })
            };
            let weak = weak.clone();
            let on_grant = Closure::<dyn FnMut(JsValue) -> Promise>::new(move |_lock: JsValue| match weak.upgrade() {
                Some(me) if me.role.get() != Role::Closed => me.granted(),
                _ => Promise::resolve(&JsValue::UNDEFINED), // closed meanwhile: release at once
            });
            LeaderStore {
                direct,
                name,
                channel,
                role: Cell::new(Role::Follower),
                known: Default::default(),
                stale_mark: Default::default(),
                served: RefCell::default(),
                waiting: RefCell::default(),
                release: RefCell::default(),
                abort,
                serve_lock: AsyncLock::new(),
                id_prefix: format!("{:08x}", RandomIds.random_u32()),
                next_id: Cell::new(0),
                on_message,
                on_grant,
            }
        });
        me.channel.set_onmessage(Some(me.on_message.as_ref().unchecked_ref()));
        let locks = prop(&prop(&js_sys::global(), "navigator"), "locks");
        let request: Function =
            prop(&locks, "request").dyn_into().map_err(|_| Error::StorageUnavailable("navigator.locks.request is missing".into()))?;
        let options: JsValue = Object::new().into();
        set(&options, "signal", &me.abort.signal());
        let pending = request.call3(&locks, &JsValue::from_str(&me.name), &options, me.on_grant.as_ref()).map_err(fail)?;
        // It rejects with AbortError if close() withdraws the request before it is granted.
        if let Ok(catch) = prop(&pending, "catch").dyn_into::<Function>() {
            let _ = catch.call1(&pending, &noop());
        }
        Ok(me)
    }

    /// This instance's role right now.
    pub fn role(&self) -> Role {
        self.role.get()
    }

    /// Withdraws from the election or releases the lock (the next instance takes over),
    /// and stops listening. Idempotent; also done on drop.
    pub fn close(&self) {
        if self.role.replace(Role::Closed) == Role::Closed {
            return;
        }
        self.abort.abort();
        if let Some(release) = self.release.borrow_mut().take() {
            let _ = release.call0(&JsValue::UNDEFINED);
        }
        self.channel.set_onmessage(None);
        self.channel.close();
        self.wake_all();
    }

    /// The lock was granted: settle, clean up crash orphans, then serve.
    fn granted(self: &Rc<Self>) -> Promise {
        let held = Promise::new(&mut |resolve, _| *self.release.borrow_mut() = Some(resolve));
        self.role.set(Role::Settling);
        let weak: Weak<LeaderStore> = Rc::downgrade(self);
        spawn(Box::pin(async move {
            sleep(SETTLE_MS).await;
            let Some(me) = weak.upgrade() else { return };
            if me.role.get() != Role::Settling {
                return;
            }
            me.role.set(Role::Leader);
            let _ = me.serve(&Op::Cleanup, [0; Slot::ALL.len()], false, None).await;
            me.post(&message("leader"));
            me.wake_all();
        }));
        held
    }

    fn post(&self, msg: &JsValue) {
        if self.role.get() != Role::Closed {
            let _ = self.channel.post_message(msg);
        }
    }

    fn note(&self, slot: Slot, rev: u64) {
        let k = &self.known[slot.index()];
        k.set(k.get().max(rev));
    }

    fn wake_all(&self) {
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        for (_, resolve) in waiting {
            let _ = resolve.call0(&JsValue::UNDEFINED);
        }
    }

    /// Waits for the answer to `id`, a wake-up, or `ms` (then `undefined`).
    async fn wait_for(&self, id: &str, ms: i32) -> JsValue {
        let mut resolve = None;
        let p = Promise::new(&mut |res, _| resolve = Some(res));
        if let Some(resolve) = resolve {
            set_timeout(&resolve, ms);
            self.waiting.borrow_mut().push((id.to_string(), resolve));
        }
        let v = JsFuture::from(p).await.unwrap_or(JsValue::UNDEFINED);
        self.waiting.borrow_mut().retain(|(i, _)| i != id);
        v
    }

    fn on_message(self: &Rc<Self>, data: JsValue) {
        match prop(&data, "t").as_string().as_deref() {
            Some("req") if self.role.get() == Role::Leader => {
                let me = self.clone();
                spawn(Box::pin(async move { me.answer_request(data).await }));
            }
            Some("res") => {
                if let Some(slot) = slot_of(&data) {
                    self.note(slot, num(&data, "rev"));
                }
                let id = prop(&data, "id").as_string().unwrap_or_default();
                let found = self.waiting.borrow().iter().find(|(i, _)| *i == id).map(|(_, r)| r.clone());
                if let Some(resolve) = found {
                    let _ = resolve.call1(&JsValue::UNDEFINED, &data);
                }
            }
            Some("reset") => {
                if let Some(slot) = slot_of(&data) {
                    self.known[slot.index()].set(0);
                }
            }
            // A new leader: send what is waiting again now rather than at the timeout.
            Some("leader") => self.wake_all(),
            _ => {}
        }
    }

    async fn answer_request(self: Rc<Self>, data: JsValue) {
        let slot = slot_of(&data);
        let op = match (prop(&data, "op").as_string().as_deref(), slot) {
            (Some("load"), Some(s)) => Op::Load(s),
            (Some("commit"), Some(s)) => Op::Commit(s, num(&data, "base"), prop(&data, "value").as_string().unwrap_or_default()),
            (Some("discard"), Some(s)) => Op::Discard(s),
            _ => return,
        };
        let id = prop(&data, "id").as_string().unwrap_or_default();
        {
            // A copy sent again because the answer was slow: serve each request once.
            let mut served = self.served.borrow_mut();
            if let Some((_, answer)) = served.iter().find(|(i, _)| *i == id) {
                if let Some(answer) = answer {
                    self.post(answer);
                }
                return;
            }
            if served.len() >= ANSWERED {
                served.remove(0);
            }
            served.push((id.clone(), None));
        }
        let known = Slot::ALL.map(|slot| num(&data, mark_key(slot)));
        let deadline = prop(&data, "until").as_f64();
        let result = self.serve(&op, known, prop(&data, "retry").is_truthy(), deadline).await;
        let answer = result_message(&id, &op, &result);
        if let Some(entry) = self.served.borrow_mut().iter_mut().find(|(i, _)| *i == id) {
            entry.1 = Some(answer.clone());
        }
        self.post(&answer);
    }

    /// The revision this tab's localStorage shows for `slot` (`None` if unreadable).
    async fn view(&self, slot: Slot) -> Option<u64> {
        let raw = self.direct.inner().get(&self.direct.pointer_key(slot)).await.ok()?;
        match raw {
            None => Some(0),
            Some(raw) => crate::json::Value::parse(&raw).ok()?.get("rev")?.as_u64(),
        }
    }

    /// Performs `op` on localStorage (leader only), unless `deadline` (epoch ms) has passed.
    async fn serve(&self, op: &Op, known: [u64; Slot::ALL.len()], retry: bool, deadline: Option<f64>) -> Result<Answer> {
        let _guard = self.serve_lock.lock().await;
        if let Op::Load(slot) | Op::Commit(slot, ..) = op {
            let i = slot.index();
            let theirs = if known[i] <= self.stale_mark[i].get() { 0 } else { known[i] };
            let target = self.known[i].get().max(theirs);
            let mut waited = 0;
            while let Some(rev) = self.view(*slot).await {
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
                sleep(POLL_MS).await;
                waited += POLL_MS;
            }
        }
        // Everything below is synchronous underneath: no other code runs in between.
        if self.role.get() != Role::Leader {
            return Err(Error::StorageUnavailable("this tab stopped leading localStorage; try again".into()));
        }
        if deadline.is_some_and(|d| js_sys::Date::now() > d) {
            return Err(Error::StorageUnavailable("the localStorage leader was too slow to take this request; nothing was written".into()));
        }
        let answer = match op {
            Op::Load(slot) => Answer::Loaded(self.direct.load(*slot).await?),
            Op::Commit(slot, base, value) => {
                let landed = match self.direct.load(*slot).await {
                    Ok(Some(v)) if retry => v.revision == base + 1 && v.value == *value,
                    _ => false,
                };
                if landed {
                    Answer::Committed(Commit::Committed(base + 1))
                } else {
                    Answer::Committed(self.direct.commit(*slot, *base, value.clone()).await?)
                }
            }
            Op::Discard(slot) => {
                self.direct.discard(*slot).await?;
                self.known[slot.index()].set(0);
                let m = message("reset");
                set(&m, "slot", &JsValue::from_str(slot.name()));
                self.post(&m);
                Answer::Done
            }
            Op::Cleanup => {
                self.direct.cleanup().await?;
                Answer::Done
            }
        };
        match (op.slot(), &answer) {
            (Some(slot), Answer::Loaded(Some(v))) => self.note(slot, v.revision),
            (Some(slot), Answer::Committed(Commit::Committed(rev))) => self.note(slot, *rev),
            _ => {}
        }
        Ok(answer)
    }

    fn request(&self, id: &str, op: &Op, retry: bool, deadline: f64) -> JsValue {
        let m = message("req");
        set(&m, "id", &JsValue::from_str(id));
        set(&m, "until", &JsValue::from_f64(deadline));
        let (name, slot) = match op {
            Op::Load(s) => ("load", s),
            Op::Commit(s, base, value) => {
                set(&m, "base", &JsValue::from_f64(*base as f64));
                set(&m, "value", &JsValue::from_str(value));
                ("commit", s)
            }
            Op::Discard(s) => ("discard", s),
            Op::Cleanup => ("cleanup", &Slot::Document),
        };
        set(&m, "op", &JsValue::from_str(name));
        set(&m, "slot", &JsValue::from_str(slot.name()));
        for slot in Slot::ALL {
            set(&m, mark_key(slot), &JsValue::from_f64(self.known[slot.index()].get() as f64));
        }
        set(&m, "retry", &JsValue::from_bool(retry));
        m
    }

    /// Runs `op` here if this instance leads, else through the leader.
    async fn run(&self, op: Op) -> Result<Answer> {
        let id = format!("{}-{}", self.id_prefix, self.next_id.get());
        self.next_id.set(self.next_id.get() + 1);
        let mut retry = false;
        let mut unanswered = 0;
        let deadline = js_sys::Date::now() + f64::from(GIVE_UP_MS - DEADLINE_MARGIN_MS);
        loop {
            match self.role.get() {
                Role::Closed => return Err(Error::StorageUnavailable("this localStorage store was closed".into())),
                Role::Leader => {
                    let r = self.serve(&op, [0; Slot::ALL.len()], retry, None).await;
                    if let (Some(_), Ok(Answer::Committed(Commit::Committed(_)))) = (op.slot(), &r) {
                        // Followers learn the revision (they may lead next).
                        self.post(&result_message("", &op, &r));
                    }
                    return r;
                }
                Role::Settling => {
                    self.wait_for(&id, REQUEST_TIMEOUT_MS).await;
                }
                Role::Follower => {
                    if let Op::Cleanup = op {
                        return Ok(Answer::Done); // the leader cleans up when it takes over
                    }
                    self.post(&self.request(&id, &op, retry, deadline));
                    let reply = self.wait_for(&id, REQUEST_TIMEOUT_MS).await;
                    if !reply.is_undefined() {
                        return answer_of(&op, &reply);
                    }
                    retry = true;
                    unanswered += REQUEST_TIMEOUT_MS;
                    if unanswered >= GIVE_UP_MS {
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

impl Drop for LeaderStore {
    fn drop(&mut self) {
        self.close();
    }
}

impl Store for LeaderStore {
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
