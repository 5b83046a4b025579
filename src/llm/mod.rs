//! The extraction LLM: the request the core builds, the trait a platform implements, and
//! the pure parts of the HTTP protocols (request bodies, reply extraction, retry policy).
//!
//! The transports themselves (fetch, timeouts, sleeping between retries) live in the
//! platform layer; everything here is deterministic and tested natively.

pub mod config;
pub mod protocol;
pub mod retry;

use crate::error::Result;
use crate::sync::LocalFuture;

pub use config::{LlmConfig, Provider};

/// One extraction call: a system prompt (the instructions) and a user prompt (the current
/// memory and the conversation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmRequest {
    /// Instructions: what to extract and the output format.
    pub system: String,
    /// The current memory and the conversation to process.
    pub prompt: String,
}

/// Tokens one call used, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Tokens of the request (system + prompt).
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
}

/// The model's answer to one [`LlmRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LlmReply {
    /// The reply text (where the delta is).
    pub text: String,
    /// What the provider says the call used, when it says (OpenAI's `usage.prompt_tokens` /
    /// `completion_tokens`, Anthropic's `usage.input_tokens` / `output_tokens`).
    pub usage: Option<Usage>,
}

impl LlmReply {
    /// A reply without usage figures.
    pub fn text(text: impl Into<String>) -> LlmReply {
        LlmReply { text: text.into(), usage: None }
    }
}

/// Something that answers an [`LlmRequest`] with the model's text.
///
/// Implementations retry transient transport failures themselves (SPEC §11: "within one
/// attempt the transport retries …"); an `Err` is final for this attempt.
pub trait Llm {
    /// Sends the request and returns the reply.
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>>;

    /// Called once by `close()`: abort calls in flight and the waits between retries, so
    /// nothing keeps the process alive; those calls and any later ones fail with `CLOSED`.
    /// The default does nothing (the call in flight, if any, runs to its end).
    fn cancel(&self) {}
}
