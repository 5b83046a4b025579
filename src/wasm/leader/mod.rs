//! The localStorage leader protocol ([`crate::leader`]) on the browser's parts: leadership
//! is the Web Lock `user-memory/{agent}/leader`, requested by every instance and held until
//! `close()` (or until the tab dies: the browser then releases it); messages travel over the
//! `BroadcastChannel` of the same name; timers are `setTimeout`. Everything the protocol
//! decides is decided in the pure core; this module only moves messages, timers and locks.

mod wire;

use super::convert::{prop, set};
use super::error::storage_error;
use super::platform::JsClock;
use crate::base::error::{Error, Result};
use crate::base::ids::{IdSource, RandomIds};
use crate::base::sync::LocalFuture;
use crate::leader::{Message, Protocol, Tab};
use crate::storage::{Commit, Slot, Store, Versioned, VersionedKv};
use js_sys::{Function, Object, Promise};
use std::cell::RefCell;
use std::rc::{Rc, Weak};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::spawn_local;
use web_sys::{AbortController, BroadcastChannel};

pub use crate::leader::Role;

/// Runs `f` on the event loop. One boxed future type, so `spawn_local` is instantiated once
/// for this module, tabs.rs and persist.rs.
pub(crate) fn spawn(f: LocalFuture<'static, ()>) {
    spawn_local(f);
}

/// `Function.prototype`: a function that does nothing (for `promise.catch`).
fn noop() -> Function {
    prop(&prop(&js_sys::global(), "Function"), "prototype").unchecked_into()
}

/// The protocol's way out: the agent's `BroadcastChannel` and `spawn_local`.
struct Channel(BroadcastChannel);

impl Tab for Channel {
    fn post(&self, message: &Message) {
        let _ = self.0.post_message(&wire::to_js(message));
    }

    fn spawn(&self, task: LocalFuture<'static, ()>) {
        spawn(task);
    }
}

/// A [`Store`] over localStorage that routes every operation through the leader instance.
pub struct LeaderStore {
    protocol: Rc<Protocol>,
    channel: Rc<Channel>,
    /// Resolving it releases the lock.
    release: RefCell<Option<Function>>,
    abort: AbortController,
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
        let channel = Rc::new(Channel(BroadcastChannel::new(&name).map_err(fail)?));
        let abort = AbortController::new().map_err(fail)?;
        let protocol = Protocol::new(direct, channel.clone(), Rc::new(JsClock), name.clone(), format!("{:08x}", RandomIds.random_u32()));
        let me = Rc::new_cyclic(|weak: &Weak<LeaderStore>| {
            let on_message = {
                let weak = weak.clone();
                Closure::<dyn FnMut(JsValue)>::new(move |ev: JsValue| {
                    if let (Some(me), Some(message)) = (weak.upgrade(), wire::from_js(&prop(&ev, "data"))) {
                        me.protocol.receive(message);
                    }
                })
            };
            let weak = weak.clone();
            let on_grant = Closure::<dyn FnMut(JsValue) -> Promise>::new(move |_lock: JsValue| match weak.upgrade() {
                Some(me) if me.protocol.role() != Role::Closed => {
                    let held = Promise::new(&mut |resolve, _| *me.release.borrow_mut() = Some(resolve));
                    me.protocol.granted();
                    held
                }
                _ => Promise::resolve(&JsValue::UNDEFINED), // closed meanwhile: release at once
            });
            LeaderStore { protocol, channel, release: RefCell::default(), abort, on_message, on_grant }
        });
        me.channel.0.set_onmessage(Some(me.on_message.as_ref().unchecked_ref()));
        let locks = prop(&prop(&js_sys::global(), "navigator"), "locks");
        let request: Function =
            prop(&locks, "request").dyn_into().map_err(|_| Error::StorageUnavailable("navigator.locks.request is missing".into()))?;
        let options: JsValue = Object::new().into();
        set(&options, "signal", &me.abort.signal());
        let pending = request.call3(&locks, &JsValue::from_str(&name), &options, me.on_grant.as_ref()).map_err(fail)?;
        // It rejects with AbortError if close() withdraws the request before it is granted.
        if let Ok(catch) = prop(&pending, "catch").dyn_into::<Function>() {
            let _ = catch.call1(&pending, &noop());
        }
        Ok(me)
    }

    /// This instance's role right now.
    pub fn role(&self) -> Role {
        self.protocol.role()
    }

    /// Withdraws from the election or releases the lock (the next instance takes over),
    /// and stops listening. Idempotent; also done on drop.
    pub fn close(&self) {
        if self.protocol.role() == Role::Closed {
            return;
        }
        self.protocol.close();
        self.abort.abort();
        if let Some(release) = self.release.borrow_mut().take() {
            let _ = release.call0(&JsValue::UNDEFINED);
        }
        self.channel.0.set_onmessage(None);
        self.channel.0.close();
    }
}

impl Drop for LeaderStore {
    fn drop(&mut self) {
        self.close();
    }
}

impl Store for LeaderStore {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        self.protocol.load(slot)
    }

    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        self.protocol.commit(slot, base, value)
    }

    fn cleanup(&self) -> LocalFuture<'_, Result<()>> {
        self.protocol.cleanup()
    }

    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.protocol.discard(slot)
    }

    fn describe(&self) -> String {
        self.protocol.describe()
    }
}
