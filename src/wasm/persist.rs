//! Durable storage: whether the browser may evict this origin's IndexedDB and localStorage,
//! and, with `persist: true`, asking it not to (`navigator.storage.persist()`).
//!
//! Browsers keep origin storage "best-effort" by default and may delete it under storage
//! pressure; Safari's tracking prevention also deletes script-writable storage of a site the
//! user has not visited for 7 days of browser use. A "persistent" origin is exempt from
//! eviction under pressure. Chromium and Safari grant or refuse `persist()` by their own
//! heuristics at once; Firefox asks the user, and the promise stays pending until the user
//! answers, so `open()` never waits for it: the answer updates [`Persistence`] when it comes.

use super::convert::prop;
use js_sys::{Function, Promise};
use std::cell::Cell;
use std::rc::Rc;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// What the browser says about this origin's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// Kept until the user deletes it (`navigator.storage.persisted()` is true).
    Persistent,
    /// The browser may evict it (under storage pressure, or Safari's 7-day rule).
    BestEffort,
    /// Not known: no `navigator.storage` (older Safari, WebKitGTK, insecure contexts), or
    /// storage that is not the browser's (memory, a storage adapter).
    Unknown,
}

impl Persistence {
    /// The value `status()` and `options()` report.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Persistence::Persistent => "persistent",
            Persistence::BestEffort => "best-effort",
            Persistence::Unknown => "unknown",
        }
    }
}

/// `navigator.storage`, where there is one.
fn storage_manager() -> Option<JsValue> {
    let manager = prop(&prop(&js_sys::global(), "navigator"), "storage");
    (!manager.is_undefined() && !manager.is_null()).then_some(manager)
}

/// Calls `navigator.storage[method]()` and awaits its boolean; `None` if it is missing,
/// throws, rejects or answers something else.
async fn ask(manager: &JsValue, method: &str) -> Option<bool> {
    let f: Function = prop(manager, method).dyn_into().ok()?;
    let p = f.call0(manager).ok()?;
    JsFuture::from(Promise::resolve(&p)).await.ok()?.as_bool()
}

/// The persistence of the browser's storage for an instance: read once at `open()` and, with
/// `request`, updated when the browser answers `persist()`.
pub(crate) async fn start(browser_storage: bool, request: bool) -> Rc<Cell<Persistence>> {
    let state = Rc::new(Cell::new(Persistence::Unknown));
    let Some(manager) = storage_manager().filter(|_| browser_storage) else { return state };
    state.set(match ask(&manager, "persisted").await {
        Some(true) => Persistence::Persistent,
        Some(false) => Persistence::BestEffort,
        None => Persistence::Unknown,
    });
    if request && state.get() != Persistence::Persistent {
        let state = state.clone();
        super::leader::spawn(Box::pin(async move {
            if ask(&manager, "persist").await == Some(true) {
                state.set(Persistence::Persistent);
            }
        }));
    }
    state
}
