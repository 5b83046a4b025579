//! The versioned key swap under crashes, races and full storage.

mod common;

use common::run;
use std::cell::Cell;
use std::rc::Rc;
use user_memory::error::{Error, Result};
use user_memory::storage::{Commit, KvCapabilities, KvStore, MemoryKv, Slot, Store, VersionedKv};
use user_memory::sync::LocalFuture;

/// A key-value store that "crashes" at its k-th mutating operation: from then on every
/// operation fails, as if the process had died. `after` decides whether the fatal
/// operation itself took effect first (a store can die after writing, before answering).
struct CrashingKv {
    inner: Rc<MemoryKv>,
    crash_at: usize,
    after: bool,
    ops: Cell<usize>,
    caps: KvCapabilities,
}

impl CrashingKv {
    fn step(&self) -> Result<bool> {
        let n = self.ops.get();
        self.ops.set(n + 1);
        if n > self.crash_at {
            Err(Error::StorageFailed("crashed".into()))
        } else {
            Ok(n == self.crash_at)
        }
    }
}

impl KvStore for CrashingKv {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            if self.ops.get() > self.crash_at {
                return Err(Error::StorageFailed("crashed".into()));
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
                return Err(Error::StorageFailed("crashed".into()));
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
                return Err(Error::StorageFailed("crashed".into()));
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
                return Err(Error::StorageFailed("crashed".into()));
            }
            self.inner.compare_and_set(key, expected, value).await
        })
    }
    fn describe(&self) -> String {
        "crashing store".into()
    }
}

const CAPS: [KvCapabilities; 3] = [
    KvCapabilities { keys: true, compare_and_set: true },
    KvCapabilities { keys: true, compare_and_set: false },
    KvCapabilities { keys: false, compare_and_set: false },
];

#[test]
fn a_crash_at_every_step_of_a_commit_leaves_the_old_or_the_new_value_readable() {
    run(async {
        for caps in CAPS {
            for after in [false, true] {
                let mut crash_at = 0;
                loop {
                    let mem = Rc::new(MemoryKv::new());
                    // Revision 1 exists before the crash-prone commit.
                    let setup = VersionedKv::new(mem.clone(), "a");
                    assert_eq!(setup.commit(Slot::Document, 0, "old".into()).await.unwrap(), Commit::Committed(1));
                    let crashing = Rc::new(CrashingKv { inner: mem.clone(), crash_at, after, ops: Cell::new(0), caps });
                    let store = VersionedKv::new(crashing.clone(), "a");
                    let result = store.commit(Slot::Document, 1, "new".into()).await;
                    // "Restart": a fresh store over what is left on "disk".
                    let reopened = VersionedKv::new(mem.clone(), "a");
                    let seen = reopened.load(Slot::Document).await.unwrap().expect("never empty");
                    assert!(
                        (seen.revision, seen.value.as_str()) == (1, "old") || (seen.revision, seen.value.as_str()) == (2, "new"),
                        "crash at op {crash_at} ({caps:?}, after={after}) left revision {} = {:?}",
                        seen.revision,
                        seen.value
                    );
                    if result.is_ok() {
                        assert_eq!(seen.value, "new", "a reported success must be durable");
                    }
                    // Cleanup on open removes what a crash left, and never the live value.
                    reopened.cleanup().await.unwrap();
                    let after_cleanup = reopened.load(Slot::Document).await.unwrap().unwrap();
                    assert_eq!(after_cleanup, seen);
                    if caps.keys {
                        let versions = mem.snapshot().keys().filter(|k| k.contains("/doc/v")).count();
                        assert!(versions <= 2, "at most the live version and one in-flight orphan remain");
                    }
                    if crashing.ops.get() <= crash_at {
                        break; // the commit finished before reaching the crash point
                    }
                    crash_at += 1;
                }
                assert!(crash_at >= 2, "the protocol has several mutating steps");
            }
        }
    });
}

#[test]
fn without_compare_and_set_a_write_that_landed_meanwhile_is_still_detected() {
    run(async {
        let mem = Rc::new(MemoryKv::new());
        let plain: Rc<dyn KvStore> = Rc::new(CrashingKv {
            inner: mem.clone(),
            crash_at: usize::MAX,
            after: false,
            ops: Cell::new(0),
            caps: KvCapabilities { keys: false, compare_and_set: false },
        });
        let a = VersionedKv::new(plain.clone(), "a");
        let b = VersionedKv::new(plain, "a");
        assert_eq!(a.commit(Slot::Document, 0, "A1".into()).await.unwrap(), Commit::Committed(1));
        assert_eq!(b.commit(Slot::Document, 1, "B2".into()).await.unwrap(), Commit::Committed(2));
        assert_eq!(a.commit(Slot::Document, 1, "A2".into()).await.unwrap(), Commit::Conflict);
        assert_eq!(a.load(Slot::Document).await.unwrap().unwrap().value, "B2");
    });
}

#[test]
fn a_full_store_gives_storage_quota_and_keeps_the_previous_value() {
    run(async {
        let mem = Rc::new(MemoryKv::new());
        let s = VersionedKv::new(mem.clone(), "a");
        s.commit(Slot::Document, 0, "small".into()).await.unwrap();
        mem.set_quota(Some(400));
        let err = s.commit(Slot::Document, 1, "x".repeat(1000)).await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_QUOTA");
        let v = s.load(Slot::Document).await.unwrap().unwrap();
        assert_eq!((v.revision, v.value.as_str()), (1, "small"));
        assert!(!mem.snapshot().keys().any(|k| k.contains("/doc/v2")), "no half-written version is left");
    });
}

#[test]
fn a_pointer_to_a_missing_version_is_corrupt_not_empty() {
    run(async {
        let mem = Rc::new(MemoryKv::new());
        mem.put_raw("user-memory/a/doc", r#"{"rev":3,"key":"user-memory/a/doc/v3-deadbeef"}"#);
        let s = VersionedKv::new(mem.clone(), "a");
        let err = s.load(Slot::Document).await.unwrap_err();
        assert_eq!(err.code(), "CORRUPT_MEMORY");
        assert!(err.message().contains("does not exist"));
        s.discard(Slot::Document).await.unwrap();
        assert_eq!(s.load(Slot::Document).await.unwrap(), None, "an explicit reset clears it");
    });
}

#[test]
fn orphans_of_old_revisions_are_removed_on_cleanup_but_an_in_flight_one_is_left() {
    run(async {
        let mem = Rc::new(MemoryKv::new());
        let s = VersionedKv::new(mem.clone(), "a");
        s.commit(Slot::Document, 0, "one".into()).await.unwrap();
        s.commit(Slot::Document, 1, "two".into()).await.unwrap();
        mem.put_raw("user-memory/a/doc/v1-00000000", "stale orphan");
        mem.put_raw("user-memory/a/doc/v3-11111111", "someone else's commit in flight");
        s.cleanup().await.unwrap();
        let keys: Vec<String> = mem.snapshot().keys().cloned().collect();
        assert!(!keys.iter().any(|k| k.ends_with("v1-00000000")));
        assert!(keys.iter().any(|k| k.ends_with("v3-11111111")));
        assert_eq!(s.load(Slot::Document).await.unwrap().unwrap().value, "two");
    });
}
