//! The extraction prompt (SPEC §6). PLACEHOLDER: being written.

use crate::document::Document;
use crate::llm::LlmRequest;
use crate::message::ChatMessage;

/// User control over the prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptOptions {
    /// Replaces the built-in instructions entirely.
    pub instructions: Option<String>,
    /// Appended to the (built-in or replaced) instructions.
    pub append: Option<String>,
}

/// Builds the extraction request for one conversation.
pub fn build_request(doc: &Document, conversation: &[ChatMessage], opts: &PromptOptions) -> LlmRequest {
    let _ = (doc, conversation, opts);
    LlmRequest { system: String::new(), prompt: String::new() }
}
