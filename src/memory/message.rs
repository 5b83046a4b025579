//! Chat messages as applications hand them over, and as the library keeps them.
//!
//! The shapes that arrive: OpenAI style `{role, content, tool_calls?}`, LangChain/DeerFlow
//! style `{type, content, tool_calls?}`, AI SDK model messages (`content` parts such as
//! `tool-call` and `file`) and AI SDK UI messages (`{role, parts}` from `useChat`).
//! `content` is a string or a list of parts. [`InputMessage`] is the shape-independent view
//! the filter works on; [`ChatMessage`] is what survives filtering and what the queue persists.

use crate::base::time::Stamp;
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
    /// Anything else, and messages marked `additional_kwargs.hide_from_ui`; always dropped.
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

/// The flag that marks a framework message (a todo reminder, an injected notice) as hidden
/// from the UI: it is not the user's words, so it is never remembered.
pub const HIDE_FROM_UI: &str = "hide_from_ui";

/// Where a message carries [`HIDE_FROM_UI`]: LangChain/DeerFlow `additional_kwargs`, and the
/// `metadata` of AI SDK UI messages (the place apps put their own fields).
pub const HIDDEN_IN: [&str; 2] = ["additional_kwargs", "metadata"];

impl Role {
    /// [`Role::Other`] (always dropped) for a message marked hidden, else the role itself.
    pub fn unless_hidden(self, hidden: bool) -> Role {
        if hidden {
            Role::Other
        } else {
            self
        }
    }
}

/// A message as received, reduced to what filtering needs.
#[derive(Debug, Clone, PartialEq)]
pub struct InputMessage {
    /// The author.
    pub role: Role,
    /// The text: a string content as is; list content as its text parts joined by a space
    /// (only those after the last tool step, see [`InputMessage::from_parts`]).
    pub content: String,
    /// Whether the message is an intermediate step: a non-empty `tool_calls` list, or parts
    /// that end with a tool call the application runs.
    pub has_tool_calls: bool,
    /// Whether a `file` part came with it (an upload, filtered like an upload notice).
    pub has_upload: bool,
    /// When it was sent, if the message says ([`TIME_KEYS`]).
    pub at: Option<Stamp>,
}

/// The fields a message's own time is read from, first found wins: on the message itself,
/// then in the objects of [`TIME_HOLDERS`]. `createdAt` is the AI SDK's (a `Date`, or its
/// ISO string once serialised), `created_at` / `timestamp` / `date` the usual others.
pub const TIME_KEYS: [&str; 4] = ["createdAt", "timestamp", "created_at", "date"];

/// Where apps put their own fields on a message: AI SDK UI `metadata`, LangChain
/// `additional_kwargs` and `response_metadata`.
pub const TIME_HOLDERS: [&str; 3] = ["metadata", "additional_kwargs", "response_metadata"];

/// A message's time from a JSON value: an ISO string ([`Stamp::parse`]) or an epoch number
/// ([`Stamp::from_epoch`]). Anything else counts as absent.
pub fn stamp_of(v: &Value) -> Option<Stamp> {
    match v {
        Value::String(s) => Stamp::parse(s),
        Value::Number(n) => n.as_f64().and_then(Stamp::from_epoch),
        _ => None,
    }
}

/// The time of the message object `v` ([`TIME_KEYS`] on it, then in [`TIME_HOLDERS`]).
fn message_stamp(v: &Value) -> Option<Stamp> {
    let on = |o: &Value| TIME_KEYS.iter().find_map(|k| o.get(k).and_then(stamp_of));
    on(v).or_else(|| TIME_HOLDERS.iter().find_map(|h| v.get(h).and_then(on)))
}

impl InputMessage {
    /// Shorthand for a plain message without tool calls.
    pub fn new(role: Role, content: impl Into<String>) -> InputMessage {
        InputMessage { role, content: content.into(), has_tool_calls: false, has_upload: false, at: None }
    }

    /// Reads a message object of any of the shapes. Never fails: what cannot be understood
    /// becomes [`Role::Other`] or empty content, which the filter drops. A `parts` list (AI
    /// SDK UI messages) is read in preference to `content`.
    pub fn from_value(v: &Value) -> InputMessage {
        let role =
            v.get("role").and_then(Value::as_str).or_else(|| v.get("type").and_then(Value::as_str)).map(Role::parse).unwrap_or(Role::Other);
        let flag = |holder: &str| v.get(holder).and_then(|k| k.get(HIDE_FROM_UI)).and_then(Value::as_bool) == Some(true);
        let role = role.unless_hidden(HIDDEN_IN.iter().any(|h| flag(h)));
        let tool_calls = match v.get("tool_calls") {
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Null) | None => false,
            Some(_) => true,
        };
        let mut m = match (v.get("parts"), v.get("content")) {
            (Some(Value::Array(parts)), _) | (_, Some(Value::Array(parts))) => {
                InputMessage::from_parts(role, &parts.iter().map(Part::from_value).collect::<Vec<_>>(), tool_calls)
            }
            (_, content) => {
                let content = content.and_then(Value::as_str).unwrap_or_default().to_string();
                InputMessage { has_tool_calls: tool_calls, ..InputMessage::new(role, content) }
            }
        };
        m.at = message_stamp(v);
        m
    }

    /// A message whose content is a list of parts. Text parts (`text`, `input_text`,
    /// `output_text`, bare strings) are its text. A tool part (AI SDK `tool-call`,
    /// `tool-<name>`, `dynamic-tool`; Anthropic `tool_use`) starts a new step: the text
    /// before it was the model talking while it called the tool, so only the text after the
    /// last one is kept, and a message ending with a tool part is an intermediate step.
    /// Tools the provider ran itself (`providerExecuted: true`) are part of the answer and
    /// do not count. A `file` part marks an upload. Other parts (reasoning, images,
    /// sources, data) are ignored.
    pub fn from_parts(role: Role, parts: &[Part], tool_calls: bool) -> InputMessage {
        let mut out = InputMessage { has_tool_calls: tool_calls, ..InputMessage::new(role, "") };
        let mut tool_step = false;
        for p in parts {
            let kind = p.kind.as_deref().unwrap_or("text");
            if is_text_kind(kind) {
                let Some(t) = &p.text else { continue };
                if !out.content.is_empty() {
                    out.content.push(' ');
                }
                out.content.push_str(t);
                tool_step &= t.trim().is_empty();
            } else if kind == "file" {
                out.has_upload = true;
            } else if is_tool_part(kind) && !p.provider_executed {
                out.content.clear();
                tool_step = true;
            }
        }
        out.has_tool_calls |= tool_step;
        out
    }
}

/// One part of a message's `content` or `parts` list, reduced to what the filter reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Part {
    /// `type`; a part without one is text.
    pub kind: Option<String>,
    /// `text`, of text (and reasoning) parts.
    pub text: Option<String>,
    /// `providerExecuted: true`: a tool the provider ran as part of the answer.
    pub provider_executed: bool,
}

impl Part {
    /// Reads one part: an object, or a bare string (a text part).
    pub fn from_value(p: &Value) -> Part {
        let text = |key| p.get(key).and_then(Value::as_str).map(str::to_string);
        match p {
            Value::String(s) => Part { text: Some(s.clone()), ..Part::default() },
            _ => Part {
                kind: text("type"),
                text: text("text"),
                provider_executed: p.get("providerExecuted").and_then(Value::as_bool) == Some(true),
            },
        }
    }
}

/// Whether a part `type` is a text part's.
fn is_text_kind(kind: &str) -> bool {
    matches!(kind, "text" | "output_text" | "input_text")
}

/// Whether a part's `type` names a tool call or result.
fn is_tool_part(kind: &str) -> bool {
    kind.starts_with("tool-") || matches!(kind, "dynamic-tool" | "tool_use" | "tool_result" | "function_call")
}

/// The text of a text part (`{type: "text" | "input_text" | "output_text", text}`, a part
/// without `type` that has `text`, or a bare string).
fn part_text(p: &Value) -> Option<&str> {
    match p {
        Value::String(s) => Some(s.as_str()),
        Value::Object(o) => {
            if is_text_kind(o.get("type").and_then(Value::as_str).unwrap_or("text")) {
                o.get("text").and_then(Value::as_str)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Extracts the text of a `content` value: a string as is; a list of parts as the text of
/// its text parts joined by a space (for model replies; messages go through
/// [`InputMessage::from_parts`]).
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for t in parts.iter().filter_map(part_text) {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(t);
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
    /// When it was said: its own time, else the `at` of `observe()`, else when `observe()`
    /// was called; `None` only in tests and in queues written before times were kept.
    /// Not part of the message's identity (watermarks hash role and content).
    pub at: Option<Stamp>,
}

impl ChatMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: Speaker::User, content: content.into(), at: None }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: Speaker::Assistant, content: content.into(), at: None }
    }

    /// The same message, said at `at`.
    pub fn said_at(mut self, at: Option<Stamp>) -> ChatMessage {
        self.at = at;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_marked_hide_from_ui_is_dropped_in_kwargs_or_metadata_but_false_keeps_it() {
        for holder in HIDDEN_IN {
            let hidden = json!({"role": "user", "content": "todo", holder: {"hide_from_ui": true}});
            assert_eq!(InputMessage::from_value(&hidden).role, Role::Other, "{holder}");
            let shown = json!({"role": "user", "parts": [{"type": "text", "text": "todo"}], holder: {"hide_from_ui": false}});
            assert_eq!(InputMessage::from_value(&shown).role, Role::User, "{holder}");
        }
    }

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

    #[test]
    fn ui_messages_are_read_from_their_parts() {
        let m = InputMessage::from_value(&json!({"id": "m1", "role": "user", "parts": [
            {"type": "text", "text": "I moved to Porto"}, {"type": "step-start"}, {"type": "text", "text": "last week"}
        ]}));
        assert_eq!(m, InputMessage::new(Role::User, "I moved to Porto last week"));
        // parts win over a legacy `content` string
        let m = InputMessage::from_value(&json!({"role": "assistant", "content": "stale", "parts": [{"type": "text", "text": "fresh"}]}));
        assert_eq!(m.content, "fresh");
    }

    #[test]
    fn a_tool_step_keeps_only_the_text_after_it() {
        let answer = InputMessage::from_value(&json!({"role": "assistant", "parts": [
            {"type": "step-start"}, {"type": "text", "text": "Let me check the weather."},
            {"type": "tool-weather", "toolCallId": "c1", "state": "output-available", "input": {"city": "Lisbon"}, "output": {"sky": "clear"}},
            {"type": "step-start"}, {"type": "reasoning", "text": "clear sky means sunny"}, {"type": "text", "text": "It is sunny in Lisbon."}
        ]}));
        assert_eq!((answer.content.as_str(), answer.has_tool_calls), ("It is sunny in Lisbon.", false));
        for last in [
            serde_json::json!({"type": "tool-search", "state": "input-available"}),
            serde_json::json!({"type": "dynamic-tool", "toolName": "x"}),
            serde_json::json!({"type": "tool-call", "toolCallId": "c", "toolName": "x", "input": {}}),
        ] {
            let m = InputMessage::from_value(
                &json!({"role": "assistant", "content": [{"type": "text", "text": "Searching"}, last, {"type": "text", "text": " "}]}),
            );
            assert!(m.has_tool_calls && m.content.trim().is_empty(), "{m:?}");
        }
        // A tool the provider ran (web search) is part of the answer.
        let m = InputMessage::from_value(&json!({"role": "assistant", "content": [
            {"type": "text", "text": "Trains take a day."}, {"type": "tool-call", "toolName": "web_search", "providerExecuted": true}
        ]}));
        assert_eq!((m.content.as_str(), m.has_tool_calls), ("Trains take a day.", false));
    }

    #[test]
    fn file_parts_are_uploads_and_not_text() {
        let m = InputMessage::from_value(&json!({"role": "user", "parts": [
            {"type": "file", "mediaType": "application/pdf", "filename": "cv.pdf", "url": "data:application/pdf;base64,AAAA"}
        ]}));
        assert_eq!((m.content.as_str(), m.has_upload), ("", true));
        let m = InputMessage::from_value(
            &json!({"role": "user", "content": [{"type": "text", "text": "Summarise"}, {"type": "file", "data": "AAAA", "mediaType": "text/csv"}]}),
        );
        assert_eq!((m.content.as_str(), m.has_upload), ("Summarise", true));
        let m = InputMessage::from_value(&json!({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}));
        assert!(!m.has_upload, "an image is not a file upload");
    }
}
