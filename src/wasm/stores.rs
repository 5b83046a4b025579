//! Choosing the storage backend from the `storage` option.

use super::convert::prop;
use super::js_store::JsKvStore;
use super::tabs::Tabs;
use crate::error::{Error, Result};
use crate::storage::{shared_memory_kv, Store, VersionedKv};
use std::rc::Rc;
use wasm_bindgen::JsValue;

/// Whether a global (`indexedDB`, `localStorage`, …) exists and can be read here.
pub(crate) fn has_global(name: &str) -> bool {
    let v = prop(&js_sys::global(), name);
    !(v.is_undefined() || v.is_null())
}

/// What [`open_backend`] opened.
pub(crate) struct Backend {
    /// The store the engine uses.
    pub(crate) store: Rc<dyn Store>,
    /// For IndexedDB and localStorage: the instance's cross-tab session (commit
    /// notifications, the localStorage leader). `close()` must close it.
    pub(crate) tabs: Option<Tabs>,
    /// Whether this is the browser's own storage (IndexedDB, localStorage), which the browser
    /// may evict and `navigator.storage.persist()` protects.
    pub(crate) browser: bool,
}

/// Opens the store for `agent` named by the `storage` option (for one-off use: `inspect`,
/// `reset`; a cross-tab session, if any, ends when the store is dropped).
pub(crate) async fn open_store(storage: &JsValue, agent: &str) -> Result<Rc<dyn Store>> {
    Ok(open_backend(storage, agent).await?.store)
}

/// Opens the store for `agent` named by the `storage` option (SPEC §11: default IndexedDB
/// where it exists, else memory), with its cross-tab session for the browser backends.
pub(crate) async fn open_backend(storage: &JsValue, agent: &str) -> Result<Backend> {
    if storage.is_undefined() || storage.is_null() {
        let kind = if has_global("indexedDB") { "indexeddb" } else { "memory" };
        return named_store(kind, agent).await;
    }
    if let Some(kind) = storage.as_string() {
        return named_store(&kind, agent).await;
    }
    if storage.is_object() {
        let kv = JsKvStore::new(storage.clone())?;
        return Ok(Backend { store: Rc::new(VersionedKv::new(Rc::new(kv), agent)), tabs: None, browser: false });
    }
    Err(Error::invalid("`storage` must be \"indexeddb\", \"localstorage\", \"memory\" or a storage adapter object"))
}

async fn named_store(kind: &str, agent: &str) -> Result<Backend> {
    match kind {
        "memory" => Ok(Backend { store: Rc::new(VersionedKv::new(shared_memory_kv(), agent)), tabs: None, browser: false }),
        "indexeddb" => {
            if !has_global("indexedDB") {
                return Err(Error::StorageUnavailable(
                    "IndexedDB is not available in this runtime (Node.js and Workers have none): use storage: \"memory\" or a storage adapter".into(),
                ));
            }
            let store = super::idb::open(agent).await?;
            let (store, tabs) = Tabs::start("indexeddb", agent, store, None);
            Ok(Backend { store, tabs, browser: true })
        }
        "localstorage" => {
            if !has_global("localStorage") {
                return Err(Error::StorageUnavailable(
                    "localStorage is not available in this runtime (or is blocked, e.g. for an opaque origin): use storage: \"indexeddb\", \"memory\" or a storage adapter".into(),
                ));
            }
            let (store, leader) = super::local::open(agent)?;
            let (store, tabs) = Tabs::start("localstorage", agent, store, leader);
            Ok(Backend { store, tabs, browser: true })
        }
        other => Err(Error::invalid(format!(
            "`storage` must be \"indexeddb\", \"localstorage\", \"memory\" or a storage adapter object, found \"{other}\""
        ))),
    }
}
