//! Cross-tab updates for the browser backends.
//!
//! After every successful commit an instance posts `{agent, slot, revision, storage}` on the
//! `BroadcastChannel` `"user-memory"`. Every other instance with the same agent and storage
//! (other tabs, workers, or other instances of the same page) re-reads: the document with
//! [`Engine::refresh`] (which emits `update` with reason `remote`), the queue with
//! [`Engine::refresh_queue`] (which re-arms the timer), the fact vectors with
//! [`Engine::refresh_vectors`]. Without `BroadcastChannel` (workerd)
//! there are no notifications; instances still see each other's changes at their next read.
//!
//! A [`Tabs`] session also owns the localStorage [`LeaderStore`], so `close()` gives up the
//! leadership.

use super::convert::{prop, set};
use super::leader::LeaderStore;
use crate::base::error::Result;
use crate::base::sync::LocalFuture;
use crate::engine::WeakEngine;
use crate::storage::{Commit, Slot, Store, Versioned};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::BroadcastChannel;

/// The channel every instance of every agent listens on.
pub(crate) const CHANNEL: &str = "user-memory";

/// What a notification makes an instance do: re-read one slot, at most one re-read running
/// per slot (a burst of notifications coalesces into one more).
struct Listener {
    agent: String,
    kind: &'static str,
    engine: RefCell<Option<WeakEngine>>,
    busy: [Cell<bool>; Slot::ALL.len()],
    dirty: [Cell<bool>; Slot::ALL.len()],
}

impl Listener {
    fn on_message(self: &Rc<Self>, data: &JsValue) {
        if prop(data, "agent").as_string().as_deref() != Some(&self.agent)
            || prop(data, "storage").as_string().as_deref() != Some(self.kind)
        {
            return;
        }
        let Some(slot) = prop(data, "slot").as_string().as_deref().and_then(Slot::from_name) else { return };
        let i = slot.index();
        self.dirty[i].set(true);
        self.kick(i);
    }

    /// Re-reads slot `i` while it is dirty (one loop per slot at a time). A notification
    /// that arrives before the engine is connected (while it opens) stays dirty, and
    /// [`Tabs::connect`] kicks it.
    fn kick(self: &Rc<Self>, i: usize) {
        if self.busy[i].replace(true) {
            return;
        }
        let me = self.clone();
        super::leader::spawn(Box::pin(async move {
            loop {
                let Some(engine) = me.engine.borrow().as_ref().and_then(WeakEngine::upgrade) else { break };
                if engine.is_closed() || !me.dirty[i].replace(false) {
                    break;
                }
                // A failed re-read (e.g. storage gone) is retried at the next notification.
                let _ = match Slot::ALL[i] {
                    Slot::Document => engine.refresh().await.map(|_| ()),
                    Slot::Queue => engine.refresh_queue().await,
                    Slot::Vectors => engine.refresh_vectors().await,
                    // A rotated key record wraps the same data key: nothing to re-read.
                    Slot::Key => Ok(()),
                };
            }
            me.busy[i].set(false);
        }));
    }
}

struct Shared {
    channel: BroadcastChannel,
    listener: Rc<Listener>,
    closed: Cell<bool>,
    leader: Option<Rc<LeaderStore>>,
    _on_message: Closure<dyn FnMut(JsValue)>,
}

impl Shared {
    fn announce(&self, slot: Slot, revision: u64) {
        if self.closed.get() {
            return;
        }
        let m: JsValue = js_sys::Object::new().into();
        set(&m, "agent", &JsValue::from_str(&self.listener.agent));
        set(&m, "slot", &JsValue::from_str(slot.name()));
        set(&m, "revision", &JsValue::from_f64(revision as f64));
        set(&m, "storage", &JsValue::from_str(self.listener.kind));
        let _ = self.channel.post_message(&m);
    }

    fn close(&self) {
        if self.closed.replace(true) {
            return;
        }
        self.channel.set_onmessage(None);
        self.channel.close();
        if let Some(leader) = &self.leader {
            leader.close();
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.close();
    }
}

/// One instance's cross-tab session: commit notifications in both directions and, for
/// localStorage, the leader election.
#[derive(Clone)]
pub(crate) struct Tabs(Rc<Shared>);

impl Tabs {
    /// Starts a session for `agent` on backend `kind` (`"indexeddb"` or `"localstorage"`):
    /// returns `store` wrapped so its commits are announced, and the session. Without
    /// `BroadcastChannel` the store is returned as it is, with no session.
    pub(crate) fn start(
        kind: &'static str,
        agent: &str,
        store: Rc<dyn Store>,
        leader: Option<Rc<LeaderStore>>,
    ) -> (Rc<dyn Store>, Option<Tabs>) {
        if !super::convert::has_global("BroadcastChannel") {
            return (store, None);
        }
        let Ok(channel) = BroadcastChannel::new(CHANNEL) else { return (store, None) };
        let listener = Rc::new(Listener {
            agent: agent.to_string(),
            kind,
            engine: RefCell::new(None),
            busy: Default::default(),
            dirty: Default::default(),
        });
        let on_message = {
            let listener = listener.clone();
            Closure::<dyn FnMut(JsValue)>::new(move |ev: JsValue| listener.on_message(&prop(&ev, "data")))
        };
        channel.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        let shared = Rc::new(Shared { channel, listener, closed: Cell::new(false), leader, _on_message: on_message });
        (Rc::new(Announcing { inner: store, tabs: shared.clone() }), Some(Tabs(shared)))
    }

    /// Starts re-reading into `engine` when other instances commit, beginning with what was
    /// announced while it opened.
    pub(crate) fn connect(&self, engine: WeakEngine) {
        *self.0.listener.engine.borrow_mut() = Some(engine);
        for i in 0..Slot::ALL.len() {
            if self.0.listener.dirty[i].get() {
                self.0.listener.kick(i);
            }
        }
    }

    /// Stops listening and announcing, and gives up the localStorage leadership.
    pub(crate) fn close(&self) {
        self.0.close();
    }
}

/// A store whose successful commits are announced to the other instances.
struct Announcing {
    inner: Rc<dyn Store>,
    tabs: Rc<Shared>,
}

impl Store for Announcing {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        self.inner.load(slot)
    }

    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(async move {
            let r = self.inner.commit(slot, base, value).await;
            if let Ok(Commit::Committed(rev)) = r {
                self.tabs.announce(slot, rev);
            }
            r
        })
    }

    fn cleanup(&self) -> LocalFuture<'_, Result<()>> {
        self.inner.cleanup()
    }

    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}
