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
//! * **Pure core** (everything outside `wasm`): the [`document`] model, [`filter`],
//!   the [`queue`] state machine, [`prompt`], [`parse`], [`apply`], [`tokenize`],
//!   [`relevance`], [`inject`] and [`search`]. No JS types, no I/O, tested with plain `cargo test`.
//! * **Seams**: traits for what the core needs from a platform: [`storage::Store`] /
//!   [`storage::KvStore`], [`llm::Llm`], [`time::Clock`], [`ids::IdSource`],
//!   [`tokens::TokenCounter`], [`engine::Scheduler`] and [`engine::EventSink`].
//! * **Engine** ([`engine`]): the orchestration of the pipeline over those traits; async but
//!   platform-free, so it is tested natively with an in-memory store and a scripted LLM.
//! * **Platform** (`wasm`, wasm32 only): the exported JS API, fetch-based LLM
//!   transports, timers, IndexedDB, localStorage and JS storage adapters.

// The size rules of clippy.toml guard the wasm; unit tests may use std's sorts, sets and
// lowercasing (as oracles, among other things).
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::disallowed_types))]

/// `json!` in unit tests: serde_json's macro (a dev-dependency), converted through text
/// into this crate's [`json::Value`].
#[cfg(test)]
macro_rules! json {
    ($($t:tt)+) => {
        $crate::json::Value::parse(&serde_json::json!($($t)+).to_string()).expect("serde_json writes valid JSON")
    };
}

pub mod apply;
pub mod config;
pub mod delta;
pub mod document;
pub mod edit;
pub mod embed;
pub mod engine;
pub mod error;
pub mod filter;
pub mod fusion;
pub mod http;
pub mod ids;
pub mod inject;
pub mod json;
pub mod llm;
pub mod message;
pub mod parse;
pub mod prompt;
pub mod queue;
pub mod record;
pub mod relevance;
pub mod sanitize;
pub mod scrub;
pub mod search;
pub mod similar;
pub mod sort;
pub mod spelling;
pub mod storage;
pub mod sync;
pub mod time;
pub mod tokenize;
pub mod tokens;
pub mod unicode;
pub mod vectors;

#[cfg(target_arch = "wasm32")]
pub mod wasm;

pub use document::{Document, Fact, Section, SectionId};
pub use error::{Error, Result};
pub use json::ToJson;
