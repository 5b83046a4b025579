//! Chat messages as applications hand them over, and as the library keeps them.
//!
//! Two shapes arrive (SPEC §4): OpenAI style `{role, content, tool_calls?}` and
//! LangChain/DeerFlow style `{type, content, tool_calls?}`. `content` is a string or a list
//! of parts. [`InputMessage`] is the shape-independent view the filter works on;
//! [`ChatMessage`] is what survives filtering and what the queue persists.

use crate::json::Value;

/// Who wrote a message, after mapping both naming schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `role: "user"` or `type: "human"`.
    User,
    /// `role: "assistant"` or `type: "ai"`.
    Assistant,
    /// `role: "tool"` / `type: "tool"` (also `function`).
    Tool,
    /// `role: "system"` / `type: "system"` (also `developer`).
    System,
    /// Anything else; always dropped.
    Other,
}

impl Role {
    /// Maps a `role` or `type` string.
    pub fn parse(s: &str) -> Role {
        match s {
            "user" | "human" => Role::User,
            "assistant" | "ai" => Role::Assistant,
            "tool" | "function" => Role::Tool,
            "system" | "developer" => Role::System,
            _ => Role::Other,
        }
    }
}

/// A message as received, reduced to what filtering needs.
#[derive(Debug, Clone, PartialEq)]
pub struct InputMessage {
    /// The author.
    pub role: Role,
    /// The text: a string content as is, list content as its text parts joined by a space.
    pub content: String,
    /// Whether the message carries a non-empty `tool_calls` list (an intermediate step).
    pub has_tool_calls: bool,
}

impl InputMessage {
    /// Shorthand for a plain message without tool calls.
    pub fn new(role: Role, content: impl Into<String>) -> InputMessage {
        InputMessage { role, content: content.into(), has_tool_calls: false }
    }

    /// Reads a message object of either shape. Never fails: what cannot be understood
    /// becomes [`Role::Other`] or empty content, which the filter drops.
    pub fn from_value(v: &Value) -> InputMessage {
        let role =
            v.get("role").and_then(Value::as_str).or_else(|| v.get("type").and_then(Value::as_str)).map(Role::parse).unwrap_or(Role::Other);
        let has_tool_calls = match v.get("tool_calls") {
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Null) | None => false,
            Some(_) => true,
        };
        InputMessage { role, content: content_text(v.get("content")), has_tool_calls }
    }
}

/// Extracts the text of a `content` value: a string as is; a list of parts as the text of
/// its `{type: "text", text}` parts (and bare strings) joined by a space.
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for p in parts {
                let text = match p {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) => {
                        let kind = o.get("type").and_then(Value::as_str).unwrap_or("text");
                        if kind == "text" || kind == "output_text" || kind == "input_text" {
                            o.get("text").and_then(Value::as_str)
                        } else {
                            None
                        }
                    }
                    _ => None,
                };
                if let Some(t) = text {
                    if !out.is_empty() {
                        out.push(' ');
                    }
                    out.push_str(t);
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// The speaker of a kept message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum Speaker {
    /// The user.
    User,
    /// The assistant's final answer.
    Assistant,
}

/// A message that survived filtering: the unit of conversation the library stores and
/// sends to the extraction LLM.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ChatMessage {
    /// Who said it.
    pub role: Speaker,
    /// What was said, with upload blocks and the library's own `<memory>` block removed.
    pub content: String,
}

impl ChatMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: Speaker::User, content: content.into() }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: Speaker::Assistant, content: content.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_shapes_and_list_content() {
        let m = InputMessage::from_value(&json!({"role": "user", "content": "hi"}));
        assert_eq!(m, InputMessage::new(Role::User, "hi"));
        let m = InputMessage::from_value(&json!({"type": "ai", "content": [
            {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "b"}
        ]}));
        assert_eq!(m, InputMessage::new(Role::Assistant, "a b"));
        let m = InputMessage::from_value(&json!({"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]}));
        assert!(m.has_tool_calls);
        assert_eq!(m.content, "");
        let m = InputMessage::from_value(&json!({"role": "assistant", "content": "x", "tool_calls": []}));
        assert!(!m.has_tool_calls);
        assert_eq!(InputMessage::from_value(&json!(42)).role, Role::Other);
    }
}
