//! The versioned key swap under crashes, races and full storage.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::run;
use std::rc::Rc;
use user_memory::error::Result;
use user_memory::storage::{Commit, KvCapabilities, KvStore, MemoryKv, Slot, Store, VersionedKv};
use user_memory::sync::LocalFuture;

#[path = "support/crashing_kv.rs"]
mod crashing_kv;

use crashing_kv::{assert_old_or_new, CrashingKv};

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
                    let crashing = Rc::new(CrashingKv::new(mem.clone(), crash_at, after, caps));
                    let store = VersionedKv::new(crashing.clone(), "a");
                    let result = store.commit(Slot::Document, 1, "new".into()).await;
                    // "Restart": a fresh store over what is left on "disk".
                    let reopened = VersionedKv::new(mem.clone(), "a");
                    let seen = reopened.load(Slot::Document).await.unwrap().expect("never empty");
                    assert_old_or_new(&seen, result.is_ok(), &format!("crash at op {crash_at} ({caps:?}, after={after})"));
                    // Cleanup on open removes what a crash left, and never the live value.
                    reopened.cleanup().await.unwrap();
                    let after_cleanup = reopened.load(Slot::Document).await.unwrap().unwrap();
                    assert_eq!(after_cleanup, seen);
                    if caps.keys {
                        let versions = mem.snapshot().keys().filter(|k| k.contains("/doc/v")).count();
                        assert!(versions <= 2, "at most the live version and one in-flight orphan remain");
                    }
                    if crashing.finished_before_crash() {
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
        let plain: Rc<dyn KvStore> =
            Rc::new(CrashingKv::new(mem.clone(), usize::MAX, false, KvCapabilities { keys: false, compare_and_set: false }));
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

/// An adapter whose `compareAndSet` writes and then answers `false` (or throws) anyway: a
/// buggy adapter, or one whose answer was lost on the way back.
struct LyingCas {
    inner: Rc<MemoryKv>,
    /// What the next `compare_and_set` of a pointer reports after writing.
    answer: std::cell::Cell<Option<bool>>,
}

impl KvStore for LyingCas {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        self.inner.get(key)
    }
    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        self.inner.set(key, value)
    }
    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        self.inner.delete(key)
    }
    fn capabilities(&self) -> KvCapabilities {
        KvCapabilities { keys: true, compare_and_set: true }
    }
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        self.inner.keys(prefix)
    }
    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        Box::pin(async move {
            let wrote = self.inner.compare_and_set(key, expected, value).await?;
            match self.answer.take() {
                Some(false) if wrote => Ok(false),
                None if wrote => Err(user_memory::Error::StorageFailed("the answer was lost".into())),
                _ => Ok(wrote),
            }
        })
    }
    fn describe(&self) -> String {
        "lying adapter".into()
    }
}

#[test]
fn a_compare_and_set_that_wrote_but_said_false_never_costs_the_version_the_pointer_names() {
    run(async {
        for lie in [Some(false), None] {
            let mem = Rc::new(MemoryKv::new());
            let liar = Rc::new(LyingCas { inner: mem.clone(), answer: std::cell::Cell::new(Some(true)) });
            let s = VersionedKv::new(liar.clone(), "a");
            assert_eq!(s.commit(Slot::Document, 0, "one".into()).await.unwrap(), Commit::Committed(1));
            liar.answer.set(lie);
            // The pointer now names revision 2; the commit says so instead of deleting it.
            let r = s.commit(Slot::Document, 1, "two".into()).await;
            assert_eq!(r.unwrap(), Commit::Committed(2), "{lie:?}");
            // A correct adapter over the same data reads revision 2, and the old version is gone.
            let honest = VersionedKv::new(mem.clone(), "a");
            let v = honest.load(Slot::Document).await.unwrap().unwrap();
            assert_eq!((v.revision, v.value.as_str()), (2, "two"), "{lie:?}");
            assert_eq!(mem.snapshot().keys().filter(|k| k.contains("/doc/v")).count(), 1, "{lie:?}");
            assert_eq!(honest.commit(Slot::Document, 2, "three".into()).await.unwrap(), Commit::Committed(3));
        }
    });
}
