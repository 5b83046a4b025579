//! Choosing the storage backend from the `storage` option.

use super::convert::{has_global, prop};
use super::js_store::JsKvStore;
use super::tabs::Tabs;
use crate::base::error::{Error, Result};
use crate::storage::{shared_memory_kv, Store, VersionedKv};
use std::rc::Rc;
use wasm_bindgen::JsValue;

/// Whether this is a Node.js process (also Bun and Deno, which provide `process.versions.node`).
pub(crate) fn in_node() -> bool {
    prop(&prop(&prop(&js_sys::global(), "process"), "versions"), "node").is_string()
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
    /// What `options().storage` reports: `"indexeddb"`, `"localstorage"`, `"memory"`, or an
    /// adapter's `name` (`"adapter"` if it has none).
    pub(crate) name: String,
    /// Whether no `storage` was given and the default fell back to `"memory"`.
    pub(crate) defaulted_to_memory: bool,
}

/// Opens the store for `agent` named by the `storage` option (for one-off use: `inspect`,
/// `reset`; a cross-tab session, if any, ends when the store is dropped).
pub(crate) async fn open_store(storage: &JsValue, agent: &str) -> Result<Rc<dyn Store>> {
    Ok(open_backend(storage, agent).await?.store)
}

/// Opens the store for `agent` named by the `storage` option (docs/design.md#options: default IndexedDB
/// where it exists, else memory), with its cross-tab session for the browser backends.
pub(crate) async fn open_backend(storage: &JsValue, agent: &str) -> Result<Backend> {
    if storage.is_undefined() || storage.is_null() {
        let kind = if has_global("indexedDB") { "indexeddb" } else { "memory" };
        let mut backend = named_store(kind, agent).await?;
        backend.defaulted_to_memory = kind == "memory";
        return Ok(backend);
    }
    if let Some(kind) = storage.as_string() {
        return named_store(&kind, agent).await;
    }
    if storage.is_object() {
        let kv = JsKvStore::new(storage.clone())?;
        let name = prop(storage, "name").as_string().unwrap_or_else(|| "adapter".into());
        return Ok(Backend {
            store: Rc::new(VersionedKv::new(Rc::new(kv), agent)),
            tabs: None,
            browser: false,
            name,
            defaulted_to_memory: false,
        });
    }
    Err(Error::invalid("`storage` must be \"indexeddb\", \"localstorage\", \"memory\" or a storage adapter object"))
}

async fn named_store(kind: &str, agent: &str) -> Result<Backend> {
    // The browser's own storage (IndexedDB, localStorage) is everything but "memory" here.
    let backend = |store, tabs| Backend { store, tabs, browser: kind != "memory", name: kind.to_string(), defaulted_to_memory: false };
    match kind {
        "memory" => Ok(backend(Rc::new(VersionedKv::new(shared_memory_kv(), agent)), None)),
        "indexeddb" => {
            if !has_global("indexedDB") {
                return Err(Error::StorageUnavailable(
                    "IndexedDB is not available in this runtime (Node.js and Workers have none): use storage: \"memory\" or a storage adapter".into(),
                ));
            }
            let store = super::idb::open(agent).await?;
            let (store, tabs) = Tabs::start("indexeddb", agent, store, None);
            Ok(backend(store, tabs))
        }
        "localstorage" => {
            if !has_global("localStorage") {
                return Err(Error::StorageUnavailable(
                    "localStorage is not available in this runtime (or is blocked, e.g. for an opaque origin): use storage: \"indexeddb\", \"memory\" or a storage adapter".into(),
                ));
            }
            let (store, leader) = super::local::open(agent)?;
            let (store, tabs) = Tabs::start("localstorage", agent, store, leader);
            Ok(backend(store, tabs))
        }
        other => Err(Error::invalid(format!(
            "`storage` must be \"indexeddb\", \"localstorage\", \"memory\" or a storage adapter object, found \"{other}\"{}",
            crate::base::spelling::did_you_mean(other, &["indexeddb", "localstorage", "memory"])
        ))),
    }
}
