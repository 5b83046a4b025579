//! The storage seam (docs/design.md#storage).
//!
//! Storage holds three **slots** per agent: the memory document, the pending update queue
//! and the fact vectors of the embedding model (when one is configured). Each slot is a versioned string: every successful commit advances its revision by
//! one, and a commit names the revision it was based on, so a write based on stale data is
//! refused instead of overwriting someone else's ([`Commit::Conflict`]). The caller then
//! re-reads and replays its change.
//!
//! Two traits:
//! * [`Store`] is what the engine talks to: `load` and `commit` of a slot.
//!   IndexedDB implements it directly (one `readwrite` transaction per commit).
//! * [`KvStore`] is a plain string key-value store (localStorage, a JS adapter, memory).
//!   [`VersionedKv`] turns any `KvStore` into a `Store` with the **versioned key swap**:
//!   write the new value under a fresh key, flip a small pointer key to it, delete the old
//!   one. A crash at any step leaves the old or the new value readable.

pub mod crypto;
mod memory;
mod versioned;

pub use memory::{shared_memory_kv, MemoryKv};
pub use versioned::VersionedKv;

use crate::base::error::Result;
use crate::base::sync::LocalFuture;
use std::future::ready;

/// The things stored per agent, each with its own revision (a vector write never
/// conflicts with a document commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The memory document (JSON of [`crate::Document`]).
    Document,
    /// The pending update queue (the JSON of `QueueFile`, `src/queue/codec.rs`).
    Queue,
    /// The fact vectors of the embedding model (JSON of [`crate::recall::vectors::VectorSet`]):
    /// beside the document, not inside it, so exports stay DeerFlow's `memory.json`.
    Vectors,
    /// The encryption key record (plain JSON of [`crate::storage::crypto::KeyRecord`]), only in
    /// encrypted memory.
    Key,
}

impl Slot {
    /// Every slot, in the order of [`Slot::index`]: for code that handles each slot
    /// (cleanup, reset, notifications, per-slot arrays).
    pub const ALL: [Slot; 4] = [Slot::Document, Slot::Queue, Slot::Vectors, Slot::Key];
    /// The slots holding memory data (encrypted in encrypted memory): all but [`Slot::Key`].
    pub const DATA: [Slot; 3] = [Slot::Document, Slot::Queue, Slot::Vectors];

    /// The slot's name in keys: `"doc"`, `"queue"` or `"vectors"`.
    pub fn name(self) -> &'static str {
        match self {
            Slot::Document => "doc",
            Slot::Queue => "queue",
            Slot::Vectors => "vectors",
            Slot::Key => "key",
        }
    }

    /// The slot named `name` (see [`Slot::name`]).
    pub fn from_name(name: &str) -> Option<Slot> {
        Slot::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The slot's position in [`Slot::ALL`] (for per-slot arrays).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A stored value with its revision (≥ 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The revision: 1 after the first commit, +1 per commit.
    pub revision: u64,
    /// The stored text.
    pub value: String,
}

/// The result of a commit attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Written; the slot is now at this revision.
    Committed(u64),
    /// The slot was no longer at the base revision; nothing was written.
    Conflict,
}

/// Durable, revisioned storage of the slots of one agent.
pub trait Store {
    /// Reads a slot; `None` if it was never written. Unreadable stored data is
    /// `CORRUPT_MEMORY`, never `None`.
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>>;

    /// Writes `value` if the slot is still at revision `base` (0 = never written).
    /// Atomic: afterwards the old or the new value is readable, never a mix.
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>>;

    /// Removes leftovers of interrupted commits. Called on open; best effort.
    fn cleanup(&self) -> LocalFuture<'_, Result<()>> {
        Box::pin(ready(Ok(())))
    }

    /// Deletes a slot entirely, whatever state it is in (used to drop a corrupt queue, and
    /// for an explicit reset of corrupt memory). The next commit starts from revision 0.
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>>;

    /// A short description for error messages, e.g. `IndexedDB "user-memory"`.
    fn describe(&self) -> String;
}

/// What a [`KvStore`] can do beyond get/set/delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KvCapabilities {
    /// `keys(prefix)` is available (lets [`VersionedKv`] remove crash orphans).
    pub keys: bool,
    /// `compare_and_set` is available (concurrent writers never lose an update).
    pub compare_and_set: bool,
}

/// A string key-value store: the shape of localStorage and of user storage adapters.
pub trait KvStore {
    /// The value of `key`, or `None`.
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>>;
    /// Stores `value` under `key`.
    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>>;
    /// Removes `key` (absent keys are fine).
    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>>;
    /// What the store supports beyond the basics.
    fn capabilities(&self) -> KvCapabilities;
    /// All keys starting with `prefix` (only when `capabilities().keys`).
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>>;
    /// Sets `key` to `value` only if its current value is `expected` (`None` = absent);
    /// returns whether it did (only when `capabilities().compare_and_set`).
    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>>;
    /// A short description for error messages.
    fn describe(&self) -> String;
}

impl<T: KvStore + ?Sized> KvStore for std::rc::Rc<T> {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        (**self).get(key)
    }
    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        (**self).set(key, value)
    }
    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        (**self).delete(key)
    }
    fn capabilities(&self) -> KvCapabilities {
        (**self).capabilities()
    }
    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        (**self).keys(prefix)
    }
    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        (**self).compare_and_set(key, expected, value)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}
