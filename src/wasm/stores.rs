//! Choosing the storage backend from the `storage` option.

use super::convert::prop;
use super::js_store::JsKvStore;
use crate::error::{Error, Result};
use crate::storage::{shared_memory_kv, Store, VersionedKv};
use std::rc::Rc;
use wasm_bindgen::JsValue;

/// Whether a global (`indexedDB`, `localStorage`, …) exists and can be read here.
pub(crate) fn has_global(name: &str) -> bool {
    let v = prop(&js_sys::global(), name);
    !(v.is_undefined() || v.is_null())
}

/// Opens the store for `agent` named by the `storage` option (SPEC §11: default IndexedDB
/// where it exists, else memory).
pub(crate) async fn open_store(storage: &JsValue, agent: &str) -> Result<Rc<dyn Store>> {
    if storage.is_undefined() || storage.is_null() {
        let kind = if has_global("indexedDB") { "indexeddb" } else { "memory" };
        return named_store(kind, agent).await;
    }
    if let Some(kind) = storage.as_string() {
        return named_store(&kind, agent).await;
    }
    if storage.is_object() {
        let kv = JsKvStore::new(storage.clone())?;
        return Ok(Rc::new(VersionedKv::new(Rc::new(kv), agent)));
    }
    Err(Error::invalid("`storage` must be \"indexeddb\", \"localstorage\", \"memory\" or a storage adapter object"))
}

async fn named_store(kind: &str, agent: &str) -> Result<Rc<dyn Store>> {
    match kind {
        "memory" => Ok(Rc::new(VersionedKv::new(shared_memory_kv(), agent))),
        "indexeddb" => {
            if !has_global("indexedDB") {
                return Err(Error::StorageUnavailable(
                    "IndexedDB is not available in this runtime (Node.js and Workers have none): use storage: \"memory\" or a storage adapter".into(),
                ));
            }
            super::idb::open(agent).await
        }
        "localstorage" => {
            if !has_global("localStorage") {
                return Err(Error::StorageUnavailable(
                    "localStorage is not available in this runtime (or is blocked, e.g. for an opaque origin): use storage: \"indexeddb\", \"memory\" or a storage adapter".into(),
                ));
            }
            super::local::open(agent).await
        }
        other => Err(Error::invalid(format!(
            "`storage` must be \"indexeddb\", \"localstorage\", \"memory\" or a storage adapter object, found \"{other}\""
        ))),
    }
}
