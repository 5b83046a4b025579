//! Extraction: from a conversation to a committed change of memory. The message filter,
//! the extraction prompt, the reply parser, the delta it yields, and applying a delta to the
//! document (with its write-side gates), plus the text defences that run on what is stored:
//! sanitising (invisible characters, links), scrubbing upload mentions, tag blocks.
//!
//! May import: `base`, `json`, `memory`, `recall` (tokens, similarity, the ranker that picks
//! the facts shown to the model), `llm` (the request type).

pub mod apply;
pub mod delta;
pub mod filter;
pub mod parse;
pub mod prompt;
pub(crate) mod said;
pub(crate) mod sanitize;
pub(crate) mod scrub;
pub mod signals;
pub(crate) mod tags;
