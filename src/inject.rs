//! Rendering the `<memory>` block and selecting facts (SPEC §8). PLACEHOLDER: being written.

use crate::document::Document;
use crate::message::ChatMessage;
use crate::relevance::FactIndex;
use crate::tokens::TokenCounter;

/// Injection settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InjectOptions {
    /// `false` makes injection return `""`.
    pub enabled: bool,
    /// Budget for the whole block, tags and headers included.
    pub max_tokens: usize,
    /// At most this many facts.
    pub top_facts: usize,
    /// The query is the text of the last this many turns.
    pub recent_turns: usize,
    /// Weight of the similarity in the score.
    pub similarity_weight: f64,
    /// Weight of the confidence in the score.
    pub confidence_weight: f64,
}

/// Why a fact was or was not injected, with its numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct FactExplanation {
    /// The fact id.
    pub id: String,
    /// Similarity to the query (see README for its meaning).
    pub similarity: f64,
    /// The fact's confidence.
    pub confidence: f64,
    /// `similarity_weight × similarity + confidence_weight × confidence`.
    pub score: f64,
    /// Tokens of the rendered fact line.
    pub tokens: usize,
    /// Whether the fact is in the block.
    pub included: bool,
    /// Why (`"selected"`, `"below top facts"`, `"over token budget"` …).
    pub reason: String,
}

/// The result of a selection: the block and one explanation per fact, in score order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Explanation {
    /// The `<memory>…</memory>` block, or `""`.
    pub block: String,
    /// Tokens of the block.
    pub tokens: usize,
    /// One entry per fact, in score order.
    pub facts: Vec<FactExplanation>,
}

/// Selects facts and renders the block.
pub fn explain(
    doc: &Document,
    index: &FactIndex,
    messages: &[ChatMessage],
    opts: &InjectOptions,
    counter: &dyn TokenCounter,
) -> Explanation {
    let _ = (doc, index, messages, opts, counter);
    Explanation::default()
}
