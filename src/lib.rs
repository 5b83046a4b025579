//! # user-memory
//!
//! Long-term user-profile memory for LLM chat agents. A chat application calls
//! `observe()` after each turn and `inject()` before each model call; in between the
//! library filters the conversation, debounces it, has an LLM turn it into a structured
//! profile (six summary sections plus scored facts), commits it atomically to storage, and
//! picks the facts most relevant to the current conversation for the next prompt.
//!
//! ```text
//! observe ─▶ filter ─▶ queue (debounce) ─▶ prompt ─▶ LLM ─▶ parse ─▶ Delta ─▶ apply ─▶ commit
//! inject  ◀─ render ◀─ select (relevance index) ◀───────────────────────── Document (storage)
//! ```
//!
//! ## Layers
//!
//! * **Pure core** (everything outside `wasm`): no JS types, no I/O, tested with plain
//!   `cargo test`.
//! * **Seams**: traits for what the core needs from a platform.
//! * **Engine** ([`engine`]): the orchestration of the pipeline over those traits; async but
//!   platform-free, so it is tested natively with an in-memory store and a scripted LLM.
//! * **Platform** (`wasm`, wasm32 only): the exported JS API, fetch-based LLM
//!   transports, timers, IndexedDB, localStorage and JS storage adapters.
//!
//! The pure core is grouped by subsystem: `base` (errors, time, ids, hashing, the HTTP
//! endpoint rules), `json`, `memory` (the document, the record envelope, history, forget,
//! edits, messages), `extract` (filter, prompt, parse, delta, apply, text defences),
//! `recall` (tokenizer, index, vectors, fusion, inject, search), `llm`, `queue`, `storage`
//! (with encryption at rest) and the `leader` protocol. Each folder's `mod.rs` says what it
//! may import; the public paths below are re-exported flat from here.
//!
//! ## The public API of the rlib
//!
//! * The engine and its seams: [`engine`] ([`engine::Engine`], [`engine::Scheduler`],
//!   [`engine::EventSink`], the events), [`llm::Llm`] (with its request, reply, config and the
//!   delta's JSON schema), [`embed::Embedder`], [`time::Clock`], [`ids::IdSource`],
//!   [`tokens::TokenCounter`] (and the built-in [`tokens::Estimate`]), and
//!   [`sync::LocalFuture`] that their methods return.
//! * Storage: the traits [`storage::Store`] and [`storage::KvStore`] and the stores
//!   ([`storage::MemoryKv`], [`storage::VersionedKv`]; in the wasm build the IndexedDB,
//!   localStorage and leader-tab stores of `wasm`), and encryption at rest over any of them
//!   ([`crypto`]: [`crypto::EncryptedStore`] behind the [`crypto::Aead`] and
//!   [`crypto::CryptoProvider`] seams).
//! * Data: the memory [`document`], the LLM's [`delta`], the stored [`record`] envelope
//!   with its [`history`] entries and [`forget`] tombstones, chat [`message`]s, the fact [`vectors`] of an embedding model, [`json`] values, [`edit`]
//!   arguments, and [`Error`].
//! * Options: [`config::Config`].
//! * The pure steps a Rust user can call on their own: [`filter::filter_messages`],
//!   [`prompt`] (the extraction request), [`parse::parse_reply`], [`apply::apply_delta`],
//!   [`relevance::FactIndex`], [`inject::select`] and [`search::search`].
//!
//! Everything else (the queue state machine, the localStorage leader protocol, the fact
//! diff, tokenizer, fusion, sanitising and scrubbing, the HTTP and retry policy, hashing and
//! hex, tag blocks, sorting, lowercasing, spelling suggestions) is crate-private:
//! the parts above are built from it, and its tests live beside it.

// The size rules of clippy.toml guard the wasm; unit tests may use std's sorts, sets and
// lowercasing (as oracles, among other things).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::disallowed_types))]
// A build without some of the default features (smaller wasm, docs/size.md) leaves helpers of
// the core and of src/wasm/ unused.
#![cfg_attr(not(all(feature = "embed", feature = "encryption", feature = "http")), allow(dead_code, unused_imports))]

/// `json!` in unit tests: serde_json's macro (a dev-dependency), converted through text
/// into this crate's [`json::Value`].
#[cfg(test)]
macro_rules! json {
    ($($t:tt)+) => {
        $crate::json::Value::parse(&serde_json::json!($($t)+).to_string()).expect("serde_json writes valid JSON")
    };
}

mod base;
pub mod engine;
mod extract;
pub mod json;
mod leader;
pub mod llm;
mod memory;
mod queue;
mod recall;
pub mod storage;

#[cfg(target_arch = "wasm32")]
pub mod wasm;

// The public paths of the rlib, flat as they always were; the folders above are where the
// code lives (see HACKING.md for the map).
pub use base::{error, ids, sync, time};
pub use engine::config;
pub use extract::{apply, delta, filter, parse, prompt, signals};
pub use memory::{document, edit, forget, history, message, record};
pub use recall::token_count as tokens;
pub use recall::{embed, inject, relevance, search, vectors};
pub use storage::crypto;

pub use document::{Document, Fact, Section, SectionId};
pub use error::{Error, Result};
pub use json::ToJson;
