//! The localStorage backend (docs/storage.md).
//!
//! [`LocalStorageKv`] is `localStorage` as a [`KvStore`]; [`VersionedKv`] makes it atomic with
//! the versioned key swap (keys `user-memory/{agent}/…`; crash orphans are removed on open).
//!
//! localStorage is **not immediately consistent between tabs** (a tab can read a value older
//! than another tab's finished write, even inside a Web Lock), so the store is wrapped in a
//! [`LeaderStore`]: one tab per origin and agent performs every read and write, the others
//! ask it over `BroadcastChannel`. Where `navigator.locks` or `BroadcastChannel` is missing,
//! every tab uses localStorage directly through [`Verified`]: the document is never torn, and
//! a commit overwritten by another tab's commit of the same revision is detected and replayed
//! (docs/storage.md: measured, the remaining window is a write that takes longer than
//! [`VERIFY_MS`] to reach the other tab).

use super::convert::prop;
use super::error::storage_error;
use super::leader::LeaderStore;
use super::platform::JsClock;
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::base::time::{Clock, Millis};
use crate::storage::{Commit, KvCapabilities, KvStore, Slot, Store, Versioned, VersionedKv};
use std::rc::Rc;
use wasm_bindgen::JsCast;

/// `localStorage` as a [`KvStore`] (every operation is synchronous underneath).
pub struct LocalStorageKv {
    storage: web_sys::Storage,
}

impl LocalStorageKv {
    /// The global `localStorage`; `STORAGE_UNAVAILABLE` where there is none or it is blocked
    /// (opaque origins, storage disabled: its getter throws `SecurityError`).
    pub fn new() -> Result<LocalStorageKv> {
        let v = js_sys::Reflect::get(&js_sys::global(), &"localStorage".into())
            .map_err(|e| Error::StorageUnavailable(format!("localStorage is blocked here: {}", super::error::js_message(&e))))?;
        if v.is_undefined() || v.is_null() {
            return Err(Error::StorageUnavailable("there is no localStorage in this runtime".into()));
        }
        Ok(LocalStorageKv { storage: v.unchecked_into() })
    }

    fn read(&self, key: &str) -> Result<Option<String>> {
        self.storage.get_item(key).map_err(|e| storage_error(&e, "localStorage read"))
    }

    fn write(&self, key: &str, value: &str) -> Result<()> {
        // QuotaExceededError → STORAGE_QUOTA; nothing was written. The message names the limit
        // (docs/storage.md#value-size-limits).
        self.storage.set_item(key, value).map_err(|e| match storage_error(&e, "localStorage write") {
            Error::StorageQuota(m) => Error::StorageQuota(format!(
                "{m} (localStorage holds about 5 MB per site, and a commit needs room for the old and the new version: about 8 000 facts; IndexedDB holds more)"
            )),
            other => other,
        })
    }
}

impl KvStore for LocalStorageKv {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(std::future::ready(self.read(key)))
    }

    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(std::future::ready(self.write(key, value)))
    }

    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(std::future::ready(self.storage.remove_item(key).map_err(|e| storage_error(&e, "localStorage delete"))))
    }

    fn capabilities(&self) -> KvCapabilities {
        // compare_and_set is one synchronous read and write, so no other code of this tab
        // can run in between. Across tabs nothing is atomic: that is what LeaderStore is for.
        KvCapabilities { keys: true, compare_and_set: true }
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        let r = (|| {
            let n = self.storage.length().map_err(|e| storage_error(&e, "localStorage"))?;
            let mut keys = Vec::new();
            for i in 0..n {
                if let Ok(Some(k)) = self.storage.key(i) {
                    if k.starts_with(prefix) {
                        keys.push(k);
                    }
                }
            }
            Ok(keys)
        })();
        Box::pin(std::future::ready(r))
    }

    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        let r = match self.read(key) {
            Ok(now) if now.as_deref() == expected => self.write(key, value).map(|_| true),
            Ok(_) => Ok(false),
            Err(e) => Err(e),
        };
        Box::pin(std::future::ready(r))
    }

    fn describe(&self) -> String {
        "localStorage".to_string()
    }
}

/// How long a commit without a leader waits before checking that no other tab overwrote it.
/// A localStorage write of one window became visible in another after a median 3–5 ms, at
/// most 62 ms, in Chromium, Firefox and WebKitGTK (bench/engines.mjs legacy; docs/storage.md).
pub(crate) const VERIFY_MS: Millis = 200;

/// localStorage without a leader (no Web Locks or no BroadcastChannel: Safari before 15.4).
///
/// Each tab writes itself, and its view of the other tabs' writes lags by milliseconds, so two
/// tabs committing the same revision within that lag both see their revision check pass; the
/// pointer written last wins and the other commit is silently gone. Here a commit waits
/// [`VERIFY_MS`] and reads the slot again: if it now holds the same revision with another
/// value, this commit was overwritten and is reported as [`Commit::Conflict`], so the engine
/// re-reads and replays its change on top (no second LLM call). The cost is the wait, on
/// every commit, in those browsers only.
struct Verified {
    inner: Rc<VersionedKv>,
}

impl Store for Verified {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        self.inner.load(slot)
    }

    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(async move {
            let Commit::Committed(rev) = self.inner.commit(slot, base, value.clone()).await? else { return Ok(Commit::Conflict) };
            JsClock.sleep(VERIFY_MS).await;
            match self.inner.load(slot).await? {
                // Another tab's commit of the same revision landed after ours.
                Some(now) if now.revision == rev && now.value != value => Ok(Commit::Conflict),
                // Ours, or newer commits on top of it, or the slot was reset meanwhile.
                _ => Ok(Commit::Committed(rev)),
            }
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

/// Whether this runtime can elect a leader tab (`navigator.locks` and `BroadcastChannel`).
pub(crate) fn can_elect() -> bool {
    let locks = prop(&prop(&js_sys::global(), "navigator"), "locks");
    !(locks.is_undefined() || locks.is_null()) && super::convert::has_global("BroadcastChannel")
}

/// The localStorage store and, when tabs elect a leader, its [`LeaderStore`] (to close it).
pub(crate) type Opened = (Rc<dyn Store>, Option<Rc<LeaderStore>>);

/// Opens the localStorage store of `agent`: led by one tab where the browser can elect one,
/// else direct, each commit verified.
pub(crate) fn open(agent: &str) -> Result<Opened> {
    let kv = Rc::new(LocalStorageKv::new()?);
    let direct = Rc::new(VersionedKv::new(kv, agent));
    if !can_elect() {
        return Ok((Rc::new(Verified { inner: direct }), None));
    }
    let leader = LeaderStore::start(direct)?;
    Ok((leader.clone(), Some(leader)))
}
