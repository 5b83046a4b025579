//! The memory and its edits: the DeerFlow-format document (sections and scored facts,
//! unknown fields kept), the stored record envelope with per-thread watermarks, history
//! entries and forget tombstones, manual edits, the diff between two versions of the facts,
//! and the chat messages the library reads.
//!
//! May import: `base`, `json`, and `recall`'s token sets (a tombstone matches like a
//! near-duplicate).

pub(crate) mod diff;
pub mod document;
pub mod edit;
pub mod forget;
pub mod history;
pub mod message;
pub mod record;
