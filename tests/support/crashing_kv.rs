//! A key-value store that "crashes" at its k-th mutating operation, shared by the native
//! (tests/storage.rs) and the browser (tests/wasm_browser.rs) crash-injection tests.
//!
//! From the crash on, every operation fails, as if the process or tab had been killed;
//! `after` decides whether the fatal operation itself took effect first (a store can die
//! after writing, before answering).

#![allow(unreachable_pub, dead_code)]

use std::cell::Cell;
use std::rc::Rc;
use user_memory::error::{Error, Result};
use user_memory::storage::{KvCapabilities, KvStore, Versioned};
use user_memory::sync::LocalFuture;

/// See the module docs.
pub struct CrashingKv {
    /// The real store underneath.
    pub inner: Rc<dyn KvStore>,
    /// The index of the fatal mutating operation (0-based); `usize::MAX` never crashes.
    pub crash_at: usize,
    /// Whether the fatal operation is applied before the crash.
    pub after: bool,
    /// Mutating operations so far.
    pub ops: Cell<usize>,
    /// What the store claims to support.
    pub caps: KvCapabilities,
}

impl CrashingKv {
    /// A store over `inner` that crashes at mutating operation `crash_at`.
    pub fn new(inner: Rc<dyn KvStore>, crash_at: usize, after: bool, caps: KvCapabilities) -> CrashingKv {
        CrashingKv { inner, crash_at, after, ops: Cell::new(0), caps }
    }

    fn crashed() -> Error {
        Error::StorageFailed("crashed".into())
    }

    /// Counts a mutating operation: `Err` if already crashed, `Ok(true)` if this one is fatal.
    fn step(&self) -> Result<bool> {
        let n = self.ops.get();
        self.ops.set(n + 1);
        if n > self.crash_at {
            Err(Self::crashed())
        } else {
            Ok(n == self.crash_at)
        }
    }

    /// Whether the commit under test got past the crash point (it finished before it).
    pub fn finished_before_crash(&self) -> bool {
        self.ops.get() <= self.crash_at
    }
}

/// Checks what a reopened store shows after a crash while committing "new" (revision 2)
/// over "old" (revision 1): one or the other, never anything else, and "new" whenever the
/// commit reported success. `case` names the crash point in the failure message.
pub fn assert_old_or_new(seen: &Versioned, committed: bool, case: &str) {
    let state = (seen.revision, seen.value.as_str());
    assert!(state == (1, "old") || state == (2, "new"), "{case} left revision {} = {:?}", seen.revision, seen.value);
    if committed {
        assert_eq!(seen.value, "new", "{case}: a reported success must be durable");
    }
}

impl KvStore for CrashingKv {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            if self.ops.get() > self.crash_at {
                return Err(Self::crashed());
            }
            self.inner.get(key).await
        })
    }
    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            if self.step()? {
                if self.after {
                    self.inner.set(key, value).await?;
                }
                return Err(Self::crashed());
            }
            self.inner.set(key, value).await
        })
    }
    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            if self.step()? {
                if self.after {
                    self.inner.delete(key).await?;
                }
                return Err(Self::crashed());
            }
            self.inner.delete(key).await
        })
    }
    fn capabilities(&self) -> KvCapabilities {
        self.caps
    }
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        self.inner.keys(prefix)
    }
    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        Box::pin(async move {
            if self.step()? {
                if self.after {
                    self.inner.compare_and_set(key, expected, value).await?;
                }
                return Err(Self::crashed());
            }
            self.inner.compare_and_set(key, expected, value).await
        })
    }
    fn describe(&self) -> String {
        format!("crashing {}", self.inner.describe())
    }
}
