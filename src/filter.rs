//! Message filtering (SPEC §4). PLACEHOLDER: being written; signatures are the contract.

use crate::message::{ChatMessage, InputMessage};

/// Keeps user messages and final assistant answers; see SPEC §4 for every rule.
pub fn filter_messages(messages: &[InputMessage]) -> Vec<ChatMessage> {
    let _ = messages;
    Vec::new()
}

/// Whether a filtered conversation is worth queueing: at least one user and one assistant
/// message.
pub fn worth_queueing(messages: &[ChatMessage]) -> bool {
    let _ = messages;
    false
}

/// The last `n` turns (a turn = one user message and the assistant answers after it).
pub fn recent_turns(messages: &[ChatMessage], n: usize) -> &[ChatMessage] {
    let _ = n;
    messages
}
