//! The queue's JSON form, written by hand: `{"v":1,"entries":[{threadId, messages, firstAt,
//! lastAt, version, attempts, retryAt?, claim?: {owner, until}, lastError?}]}`.
//!
//! Written by hand on the crate's own JSON ([`crate::json`]): read from a parsed value with
//! precise errors, written straight into text.

use super::{Claim, Entry, QueueFile, QUEUE_FORMAT_VERSION};
use crate::json::{ArrayWriter, ObjectWriter, Value};
use crate::message::{ChatMessage, Speaker};

fn millis(v: Option<&Value>, key: &str) -> Result<Option<u64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| format!("`{key}` must be a whole number ≥ 0")),
        Some(other) => Err(format!("`{key}` must be a number, found {}", other.type_name())),
    }
}

fn string(v: Option<&Value>, key: &str) -> Result<String, String> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        None => Err(format!("`{key}` is missing")),
        Some(other) => Err(format!("`{key}` must be a string, found {}", other.type_name())),
    }
}

fn message(v: &Value) -> Result<ChatMessage, String> {
    let role = match v.get("role").and_then(Value::as_str) {
        Some("user") => Speaker::User,
        Some("assistant") => Speaker::Assistant,
        _ => return Err("a message needs `role` \"user\" or \"assistant\"".into()),
    };
    Ok(ChatMessage { role, content: string(v.get("content"), "content")? })
}

/// Reads one entry; the error says which field is wrong.
pub(super) fn entry_from_value(v: &Value) -> Result<Entry, String> {
    let o = v.as_object().ok_or_else(|| format!("an entry must be an object, found {}", v.type_name()))?;
    let messages = match o.get("messages") {
        Some(Value::Array(a)) => a.iter().map(message).collect::<Result<Vec<_>, _>>()?,
        _ => return Err("`messages` must be an array".into()),
    };
    let claim = match o.get("claim") {
        None | Some(Value::Null) => None,
        Some(c) => Some(Claim {
            owner: string(c.get("owner"), "claim.owner")?,
            until: millis(c.get("until"), "claim.until")?.ok_or("`claim.until` is missing")?,
        }),
    };
    let attempts = millis(o.get("attempts"), "attempts")?.unwrap_or(0);
    Ok(Entry {
        thread_id: string(o.get("threadId"), "threadId")?,
        messages,
        first_at: millis(o.get("firstAt"), "firstAt")?.ok_or("`firstAt` is missing")?,
        last_at: millis(o.get("lastAt"), "lastAt")?.ok_or("`lastAt` is missing")?,
        version: string(o.get("version"), "version")?,
        attempts: u32::try_from(attempts).map_err(|_| "`attempts` is too large".to_string())?,
        retry_at: millis(o.get("retryAt"), "retryAt")?,
        claim,
        last_error: match o.get("lastError") {
            None | Some(Value::Null) => None,
            other => Some(string(other, "lastError")?),
        },
    })
}

fn write_entry(out: &mut String, e: &Entry) {
    let mut o = ObjectWriter::new(out);
    o.str("threadId", &e.thread_id);
    let mut messages = ArrayWriter::new(o.key("messages"));
    for msg in &e.messages {
        let role = match msg.role {
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
        };
        let mut m = ObjectWriter::new(messages.item());
        m.str("role", role).str("content", &msg.content);
        m.finish();
    }
    messages.finish();
    o.u64("firstAt", e.first_at).u64("lastAt", e.last_at).str("version", &e.version).u64("attempts", e.attempts.into());
    if let Some(t) = e.retry_at {
        o.u64("retryAt", t);
    }
    if let Some(c) = &e.claim {
        let mut claim = ObjectWriter::new(o.key("claim"));
        claim.str("owner", &c.owner).u64("until", c.until);
        claim.finish();
    }
    if let Some(err) = &e.last_error {
        o.str("lastError", err);
    }
    o.finish();
}

/// The whole queue as JSON text.
pub(super) fn queue_to_json(q: &QueueFile) -> String {
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.u64("v", QUEUE_FORMAT_VERSION.into());
    let mut entries = ArrayWriter::new(o.key("entries"));
    for e in &q.entries {
        write_entry(entries.item(), e);
    }
    entries.finish();
    o.finish();
    out
}
