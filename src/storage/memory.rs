//! The in-memory key-value store: tests, ephemeral agents, and `storage: "memory"`.

use super::{KvCapabilities, KvStore};
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use std::cell::{Cell, RefCell};
use std::future::ready;
use std::rc::Rc;

/// A [`KvStore`] in memory, with `keys` and `compare_and_set`, and an optional byte quota
/// (to exercise `STORAGE_QUOTA` handling).
///
/// The entries are a plain `Vec` searched linearly: an agent keeps a handful of keys (two
/// pointers, their versions, a commit in flight), and a `BTreeMap` would add ~5 KB of wasm
/// for ordering no caller needs (`keys` returns them in no particular order).
#[derive(Debug, Default)]
pub struct MemoryKv {
    entries: RefCell<Vec<(String, String)>>,
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

    /// A copy of everything stored, sorted by key (for tests and debugging).
    #[allow(clippy::disallowed_types)] // for tests; never reached from the wasm
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, String> {
        self.entries.borrow().iter().cloned().collect()
    }

    /// Stores `value` under `key` directly (for tests that plant data).
    pub fn put_raw(&self, key: &str, value: &str) {
        self.insert(key, value);
    }

    fn read(&self, key: &str) -> Option<String> {
        self.entries.borrow().iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    fn insert(&self, key: &str, value: &str) {
        let mut entries = self.entries.borrow_mut();
        match entries.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value.to_string(),
            None => entries.push((key.to_string(), value.to_string())),
        }
    }

    fn write(&self, key: &str, value: &str) -> Result<()> {
        if let Some(limit) = self.quota.get() {
            let used: usize = self.entries.borrow().iter().filter(|(k, _)| k != key).map(|(k, v)| k.len() + v.len()).sum();
            if used + key.len() + value.len() > limit {
                return Err(Error::StorageQuota(format!("in-memory store is full ({limit} bytes); the previous data is intact")));
            }
        }
        self.insert(key, value);
        Ok(())
    }
}

impl KvStore for MemoryKv {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        let v = self.read(key);
        Box::pin(ready(Ok(v)))
    }

    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        let r = self.write(key, value);
        Box::pin(ready(r))
    }

    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        self.entries.borrow_mut().retain(|(k, _)| k != key);
        Box::pin(ready(Ok(())))
    }

    fn capabilities(&self) -> KvCapabilities {
        KvCapabilities { keys: true, compare_and_set: true }
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        let keys = self.entries.borrow().iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, _)| k.clone()).collect();
        Box::pin(ready(Ok(keys)))
    }

    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        let current = self.read(key);
        let r = if current.as_deref() == expected { self.write(key, value).map(|_| true) } else { Ok(false) };
        Box::pin(ready(r))
    }

    fn describe(&self) -> String {
        "in-memory store".to_string()
    }
}
