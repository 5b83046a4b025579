//! The versioned key swap: an atomic, revisioned [`Store`] over any [`KvStore`].
//!
//! Layout for agent `coder` (agent names are percent-encoded so one agent's keys can never
//! be a prefix of another's):
//!
//! ```text
//! user-memory/coder/doc             pointer: {"rev":7,"key":"user-memory/coder/doc/v7-1a2b3c4d"}
//! user-memory/coder/doc/v7-1a2b3c4d the document of revision 7
//! user-memory/coder/queue           pointer of the queue slot
//! user-memory/coder/queue/v3-…      the queue of revision 3
//! ```
//!
//! A commit based on revision `r`:
//! 1. read the pointer; if it is not at `r`, stop: [`Commit::Conflict`];
//! 2. write the new value under a fresh key `v{r+1}-{random}`;
//! 3. flip the pointer to it: with `compare_and_set` against the pointer read in step 1 if
//!    the store has it, else by re-reading the pointer and writing it if unchanged;
//! 4. delete the previous version (best effort).
//!
//! A version is deleted only when the pointer is known not to name it: when a flip reports
//! failure, the pointer is read back first (so an adapter that wrote but answered `false`
//! costs a retry at most, never the version it now points to).
//!
//! A crash before step 3 leaves the old pointer (an orphan value at most, removed by
//! [`Store::cleanup`]); a crash after it leaves the new one. One `set` of a small pointer is
//! the only step that changes what readers see, and stores make a single `set` atomic.

use super::{Commit, KvStore, Slot, Store, Versioned};
use crate::base::error::{Error, Result};
use crate::base::ids::{IdSource, RandomIds};
use crate::base::sync::LocalFuture;
use crate::json::{ObjectWriter, Value};
use std::rc::Rc;

/// How often a load follows a pointer that moved while it was reading.
const LOAD_RETRIES: usize = 16;

/// Makes a [`KvStore`] into a revisioned [`Store`] for one agent.
pub struct VersionedKv {
    kv: Rc<dyn KvStore>,
    namespace: String,
}

#[derive(Debug)]
struct Pointer {
    rev: u64,
    key: String,
}

impl Pointer {
    fn parse(raw: &str) -> Option<Pointer> {
        let v = Value::parse(raw).ok()?;
        Some(Pointer { rev: v.get("rev")?.as_u64()?, key: v.get("key")?.as_str()?.to_string() })
    }

    fn to_json(&self) -> String {
        let mut out = String::new();
        let mut o = ObjectWriter::new(&mut out);
        o.u64("rev", self.rev).str("key", &self.key);
        o.finish();
        out
    }
}

impl VersionedKv {
    /// Wraps `kv` for `agent`.
    pub fn new(kv: Rc<dyn KvStore>, agent: &str) -> VersionedKv {
        VersionedKv { kv, namespace: format!("user-memory/{}/", encode_agent(agent)) }
    }

    /// The wrapped key-value store.
    pub fn inner(&self) -> &Rc<dyn KvStore> {
        &self.kv
    }

    /// The pointer key of `slot`.
    pub fn pointer_key(&self, slot: Slot) -> String {
        format!("{}{}", self.namespace, slot.name())
    }

    /// The revision the pointer of `slot` shows (0 when there is none), or `None` when it
    /// is unreadable: how far this view of the store has got, without reading the value.
    pub async fn revision(&self, slot: Slot) -> Option<u64> {
        match self.kv.get(&self.pointer_key(slot)).await.ok()? {
            None => Some(0),
            Some(raw) => Value::parse(&raw).ok()?.get("rev")?.as_u64(),
        }
    }

    fn versions_prefix(&self, slot: Slot) -> String {
        format!("{}{}/v", self.namespace, slot.name())
    }

    /// Reads and parses the pointer: `(raw text, parsed)`.
    async fn read_pointer(&self, slot: Slot) -> Result<Option<(String, Pointer)>> {
        let key = self.pointer_key(slot);
        let Some(raw) = self.kv.get(&key).await? else { return Ok(None) };
        match Pointer::parse(&raw) {
            Some(p) if p.key.starts_with(&self.versions_prefix(slot)) => Ok(Some((raw, p))),
            _ => Err(Error::corrupt(format!(
                "{}: the pointer `{key}` is unreadable ({}); it was left as it is",
                self.kv.describe(),
                excerpt(&raw)
            ))),
        }
    }

    async fn load_slot(&self, slot: Slot) -> Result<Option<Versioned>> {
        let Some((mut raw, mut ptr)) = self.read_pointer(slot).await? else { return Ok(None) };
        // Another tab or process may commit between our two reads and delete the version we
        // were pointed to. That is only corruption if the pointer still names it: otherwise
        // follow the new pointer (a bounded number of times, each one a commit elsewhere).
        for _ in 0..LOAD_RETRIES {
            if let Some(value) = self.kv.get(&ptr.key).await? {
                return Ok(Some(Versioned { revision: ptr.rev, value }));
            }
            match self.read_pointer(slot).await? {
                Some((now, p)) if now != raw => (raw, ptr) = (now, p),
                Some(_) => break,
                None => return Ok(None),
            }
        }
        Err(Error::corrupt(format!("{}: `{}` points to `{}`, which does not exist", self.kv.describe(), self.pointer_key(slot), ptr.key)))
    }

    async fn commit_slot(&self, slot: Slot, base: u64, value: String) -> Result<Commit> {
        let current = self.read_pointer(slot).await?;
        let current_rev = current.as_ref().map_or(0, |(_, p)| p.rev);
        if current_rev != base {
            return Ok(Commit::Conflict);
        }
        let rev = base + 1;
        let mut new_key = self.versions_prefix(slot);
        crate::json::write_u64(&mut new_key, rev);
        new_key.push('-');
        crate::base::hex::push_hex(&mut new_key, RandomIds.random_u32().into(), 8);
        if let Err(e) = self.kv.set(&new_key, &value).await {
            let _ = self.kv.delete(&new_key).await;
            return Err(e);
        }
        let pointer = Pointer { rev, key: new_key.clone() }.to_json();
        let pointer_key = self.pointer_key(slot);
        let expected = current.as_ref().map(|(raw, _)| raw.as_str());
        let flipped = if self.kv.capabilities().compare_and_set {
            self.kv.compare_and_set(&pointer_key, expected, &pointer).await
        } else {
            match self.kv.get(&pointer_key).await {
                Ok(now) if now.as_deref() == expected => self.kv.set(&pointer_key, &pointer).await.map(|_| true),
                Ok(_) => Ok(false),
                Err(e) => Err(e),
            }
        };
        if !matches!(flipped, Ok(true)) {
            // "Not flipped" and "failed" are both claims about the pointer that may be wrong
            // (a store can fail after writing, e.g. the directory fsync after a rename; an
            // adapter's compareAndSet may write and still answer false): read it back. The
            // new value is deleted only when the pointer is known not to name it; if it
            // names it, the commit landed.
            match self.read_pointer(slot).await {
                Ok(Some((_, p))) if p.key == new_key => {}
                Ok(_) => {
                    let _ = self.kv.delete(&new_key).await;
                    return flipped.map(|_| Commit::Conflict);
                }
                // Unknown: leave the value (at worst an orphan, removed by `cleanup`).
                Err(e) => return flipped.and(Err(e)),
            }
        }
        if let Some((_, old)) = current {
            let _ = self.kv.delete(&old.key).await;
        }
        Ok(Commit::Committed(rev))
    }

    async fn cleanup_slot(&self, slot: Slot) -> Result<()> {
        if !self.kv.capabilities().keys {
            return Ok(());
        }
        let current = match self.read_pointer(slot).await {
            Ok(p) => p.map(|(_, p)| p),
            Err(_) => return Ok(()), // never touch anything next to a corrupt pointer
        };
        let prefix = self.versions_prefix(slot);
        let current_rev = current.as_ref().map_or(0, |p| p.rev);
        for key in self.kv.keys(&prefix).await? {
            if current.as_ref().is_some_and(|p| p.key == key) {
                continue;
            }
            let rev = key[prefix.len()..].split('-').next().and_then(|r| r.parse::<u64>().ok());
            // A version newer than the pointer we read may belong to a commit in flight in
            // another tab or process (which may also have committed several times since our
            // read): leave it; it becomes removable once the pointer has passed it.
            if rev.is_some_and(|r| r > current_rev) {
                continue;
            }
            self.kv.delete(&key).await?;
        }
        Ok(())
    }
}

impl Store for VersionedKv {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        Box::pin(self.load_slot(slot))
    }

    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(self.commit_slot(slot, base, value))
    }

    fn cleanup(&self) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move {
            for slot in Slot::ALL {
                self.cleanup_slot(slot).await?;
            }
            Ok(())
        })
    }

    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move {
            let pointer_key = self.pointer_key(slot);
            let target = self.read_pointer(slot).await.ok().flatten().map(|(_, p)| p.key);
            self.kv.delete(&pointer_key).await?;
            if let Some(key) = target {
                self.kv.delete(&key).await?;
            }
            if self.kv.capabilities().keys {
                for key in self.kv.keys(&self.versions_prefix(slot)).await? {
                    self.kv.delete(&key).await?;
                }
            }
            Ok(())
        })
    }

    fn describe(&self) -> String {
        self.kv.describe()
    }
}

/// Percent-encodes everything but ASCII letters, digits, `-`, `_` and `.`.
pub(crate) fn encode_agent(agent: &str) -> String {
    let mut out = String::with_capacity(agent.len());
    for b in agent.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' {
            out.push(b as char);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
    out
}

/// The first 80 characters of `s`, for error messages.
pub(crate) fn excerpt(s: &str) -> String {
    let cut: String = s.chars().take(80).collect();
    if cut.len() < s.len() {
        format!("\"{cut}…\"")
    } else {
        format!("\"{cut}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryKv;
    use futures::executor::block_on;

    #[test]
    fn agent_names_cannot_collide_through_prefixes() {
        assert_eq!(encode_agent("coder"), "coder");
        assert_eq!(encode_agent("a/doc"), "a%2Fdoc");
        assert_eq!(encode_agent("研究"), "%E7%A0%94%E7%A9%B6");
    }

    #[test]
    fn commits_advance_revisions_and_refuse_stale_bases() {
        let kv = Rc::new(MemoryKv::new());
        let s = VersionedKv::new(kv.clone(), "a");
        block_on(async {
            assert_eq!(s.load(Slot::Document).await.unwrap(), None);
            assert_eq!(s.commit(Slot::Document, 0, "one".into()).await.unwrap(), Commit::Committed(1));
            assert_eq!(s.commit(Slot::Document, 0, "stale".into()).await.unwrap(), Commit::Conflict);
            assert_eq!(s.commit(Slot::Document, 1, "two".into()).await.unwrap(), Commit::Committed(2));
            let v = s.load(Slot::Document).await.unwrap().unwrap();
            assert_eq!((v.revision, v.value.as_str()), (2, "two"));
            // Only the pointer and the current version remain: the old one was deleted.
            assert_eq!(kv.snapshot().len(), 2);
        });
    }

    /// A store that runs `hook` once, right after the first read of `key`: another
    /// writer acting between two reads of this one.
    struct Interleaved {
        kv: Rc<MemoryKv>,
        key: String,
        hook: std::cell::RefCell<Option<Box<dyn FnOnce()>>>,
    }

    impl KvStore for Interleaved {
        fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
            Box::pin(async move {
                let v = self.kv.get(key).await;
                if key == self.key {
                    if let Some(hook) = self.hook.borrow_mut().take() {
                        hook();
                    }
                }
                v
            })
        }
        fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
            self.kv.set(key, value)
        }
        fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
            self.kv.delete(key)
        }
        fn capabilities(&self) -> crate::storage::KvCapabilities {
            self.kv.capabilities()
        }
        fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
            self.kv.keys(prefix)
        }
        fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
            self.kv.compare_and_set(key, expected, value)
        }
        fn describe(&self) -> String {
            "interleaved".into()
        }
    }

    /// Commits on `kv` as another process would (MemoryKv futures are ready at once).
    fn commit_elsewhere(kv: &Rc<MemoryKv>, base: u64, value: &str) {
        use futures::FutureExt;
        let other = VersionedKv::new(kv.clone(), "a");
        let done = other.commit(Slot::Document, base, value.into()).now_or_never();
        assert_eq!(done.unwrap().unwrap(), Commit::Committed(base + 1));
    }

    #[test]
    fn a_load_racing_a_commit_elsewhere_follows_the_new_pointer() {
        let kv = Rc::new(MemoryKv::new());
        block_on(VersionedKv::new(kv.clone(), "a").commit(Slot::Document, 0, "one".into())).unwrap();
        // Between our pointer read and our version read, revision 2 is committed and the
        // version of revision 1 deleted.
        let racing = kv.clone();
        let hooked = Interleaved {
            kv: kv.clone(),
            key: "user-memory/a/doc".into(),
            hook: std::cell::RefCell::new(Some(Box::new(move || commit_elsewhere(&racing, 1, "two")))),
        };
        let s = VersionedKv::new(Rc::new(hooked), "a");
        let v = block_on(s.load(Slot::Document)).unwrap().unwrap();
        assert_eq!((v.revision, v.value.as_str()), (2, "two"));
    }

    #[test]
    fn cleanup_leaves_versions_newer_than_the_pointer_it_read() {
        let kv = Rc::new(MemoryKv::new());
        block_on(VersionedKv::new(kv.clone(), "a").commit(Slot::Document, 0, "one".into())).unwrap();
        // While our cleanup runs, another process commits revision 2 and has written the
        // value of revision 3 without flipping the pointer yet.
        let racing = kv.clone();
        let in_flight = "user-memory/a/doc/v3-0000abcd";
        let hooked = Interleaved {
            kv: kv.clone(),
            key: "user-memory/a/doc".into(),
            hook: std::cell::RefCell::new(Some(Box::new(move || {
                commit_elsewhere(&racing, 1, "two");
                racing.put_raw(in_flight, "three");
            }))),
        };
        block_on(VersionedKv::new(Rc::new(hooked), "a").cleanup()).unwrap();
        assert_eq!(kv.snapshot().get(in_flight).map(String::as_str), Some("three"), "the commit in flight keeps its value");
    }

    #[test]
    fn a_corrupt_pointer_is_reported_and_never_overwritten() {
        let kv = Rc::new(MemoryKv::new());
        kv.put_raw("user-memory/a/doc", "{not json");
        let s = VersionedKv::new(kv.clone(), "a");
        block_on(async {
            assert_eq!(s.load(Slot::Document).await.unwrap_err().code(), "CORRUPT_MEMORY");
            assert_eq!(s.commit(Slot::Document, 0, "x".into()).await.unwrap_err().code(), "CORRUPT_MEMORY");
            s.cleanup().await.unwrap();
        });
        assert_eq!(kv.snapshot().get("user-memory/a/doc").unwrap(), "{not json");
    }
}
