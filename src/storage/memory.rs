//! The in-memory key-value store: tests, ephemeral agents, and `storage: "memory"`.

use super::{KvCapabilities, KvStore};
use crate::error::{Error, Result};
use crate::sync::LocalFuture;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// A [`KvStore`] in a map, with `keys` and `compare_and_set`, and an optional byte quota
/// (to exercise `STORAGE_QUOTA` handling).
#[derive(Debug, Default)]
pub struct MemoryKv {
    map: RefCell<BTreeMap<String, String>>,
    quota: Cell<Option<usize>>,
}

thread_local! {
    static SHARED: Rc<MemoryKv> = Rc::new(MemoryKv::default());
}

/// The process-wide store behind `storage: "memory"`: every instance of one process (or
/// wasm module) with the same agent shares it, as tabs share localStorage.
pub fn shared_memory_kv() -> Rc<MemoryKv> {
    SHARED.with(Rc::clone)
}

impl MemoryKv {
    /// An empty store.
    pub fn new() -> MemoryKv {
        MemoryKv::default()
    }

    /// Limits the total size (keys + values, in bytes); writes beyond it fail with
    /// `STORAGE_QUOTA`. `None` removes the limit.
    pub fn set_quota(&self, bytes: Option<usize>) {
        self.quota.set(bytes);
    }

    /// A copy of everything stored (for tests and debugging).
    pub fn snapshot(&self) -> BTreeMap<String, String> {
        self.map.borrow().clone()
    }

    /// Stores `value` under `key` directly (for tests that plant data).
    pub fn put_raw(&self, key: &str, value: &str) {
        self.map.borrow_mut().insert(key.to_string(), value.to_string());
    }

    fn write(&self, key: &str, value: &str) -> Result<()> {
        let mut map = self.map.borrow_mut();
        if let Some(limit) = self.quota.get() {
            let used: usize = map.iter().filter(|(k, _)| *k != key).map(|(k, v)| k.len() + v.len()).sum();
            if used + key.len() + value.len() > limit {
                return Err(Error::StorageQuota(format!(
                    "in-memory store is full ({limit} bytes); the previous data is intact"
                )));
            }
        }
        map.insert(key.to_string(), value.to_string());
        Ok(())
    }
}

impl KvStore for MemoryKv {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        let v = self.map.borrow().get(key).cloned();
        Box::pin(async move { Ok(v) })
    }

    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        let r = self.write(key, value);
        Box::pin(async move { r })
    }

    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        self.map.borrow_mut().remove(key);
        Box::pin(async { Ok(()) })
    }

    fn capabilities(&self) -> KvCapabilities {
        KvCapabilities { keys: true, compare_and_set: true }
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        let keys = self.map.borrow().keys().filter(|k| k.starts_with(prefix)).cloned().collect();
        Box::pin(async move { Ok(keys) })
    }

    fn compare_and_set<'a>(
        &'a self,
        key: &'a str,
        expected: Option<&'a str>,
        value: &'a str,
    ) -> LocalFuture<'a, Result<bool>> {
        let current = self.map.borrow().get(key).cloned();
        let r = if current.as_deref() == expected { self.write(key, value).map(|_| true) } else { Ok(false) };
        Box::pin(async move { r })
    }

    fn describe(&self) -> String {
        "in-memory store".to_string()
    }
}
