//! Recall: choosing what memory says in the next prompt. The CJK-aware tokenizer and its
//! concept lexicon, the incremental BM25 fact index, token sets for similarity, fact vectors
//! of an embedding model and their fusion with the lexical ranking, token counting, and the
//! `<memory>` block (`inject`), its report (`explain`) and `search`.
//!
//! "Why was this fact not injected?" starts in `inject.rs` (selection and budget), then
//! `relevance.rs` (lexical similarity) and `fusion.rs` (the dense part).
//!
//! May import: `base`, `json`, `memory`, and `extract`'s sanitising of rendered text.

pub mod embed;
pub(crate) mod fusion;
pub mod inject;
pub mod relevance;
pub(crate) mod render;
pub mod search;
pub(crate) mod similar;
pub mod token_count;
pub(crate) mod tokenize;
pub mod vectors;
