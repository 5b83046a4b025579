//! The shared base: what every subsystem may use and that uses nothing of theirs. The error
//! type, time and ids (the injectable clock and id source), single-threaded async helpers,
//! hashing, hex, sorting, lowercasing, spelling suggestions for option names, and the pure
//! rules of talking to an HTTP endpoint (LLM and embedder alike).
//!
//! May import: `json`. Nothing else of the crate.

pub(crate) mod base64;
pub mod error;
pub(crate) mod hash;
pub(crate) mod hex;
pub(crate) mod http;
pub mod ids;
pub(crate) mod sort;
pub(crate) mod spelling;
pub mod sync;
pub mod time;
pub(crate) mod unicode;
