//! The queue's JSON form, written by hand: `{"v":1,"entries":[{threadId, messages, firstAt,
//! lastAt, version, attempts, retryAt?, claim?: {owner, until}, lastError?}]}`.
//!
//! Hand-written rather than derived: derived deserializers pull serde's generic error
//! formatting (including float printing) into the wasm, for no benefit here.

use super::{Claim, Entry, QueueFile, QUEUE_FORMAT_VERSION};
use crate::document::type_name;
use crate::message::{ChatMessage, Speaker};
use serde_json::{json, Map, Value};

fn millis(v: Option<&Value>, key: &str) -> Result<Option<u64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| format!("`{key}` must be a whole number ≥ 0")),
        Some(other) => Err(format!("`{key}` must be a number, found {}", type_name(other))),
    }
}

fn string(v: Option<&Value>, key: &str) -> Result<String, String> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        None => Err(format!("`{key}` is missing")),
        Some(other) => Err(format!("`{key}` must be a string, found {}", type_name(other))),
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
    let o = v.as_object().ok_or_else(|| format!("an entry must be an object, found {}", type_name(v)))?;
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

fn entry_to_value(e: &Entry) -> Value {
    let mut m = Map::new();
    m.insert("threadId".into(), json!(e.thread_id));
    m.insert(
        "messages".into(),
        Value::Array(
            e.messages
                .iter()
                .map(|msg| {
                    let role = match msg.role {
                        Speaker::User => "user",
                        Speaker::Assistant => "assistant",
                    };
                    json!({"role": role, "content": msg.content})
                })
                .collect(),
        ),
    );
    m.insert("firstAt".into(), json!(e.first_at));
    m.insert("lastAt".into(), json!(e.last_at));
    m.insert("version".into(), json!(e.version));
    m.insert("attempts".into(), json!(e.attempts));
    if let Some(t) = e.retry_at {
        m.insert("retryAt".into(), json!(t));
    }
    if let Some(c) = &e.claim {
        m.insert("claim".into(), json!({"owner": c.owner, "until": c.until}));
    }
    if let Some(err) = &e.last_error {
        m.insert("lastError".into(), json!(err));
    }
    Value::Object(m)
}

/// The whole queue as JSON.
pub(super) fn queue_to_value(q: &QueueFile) -> Value {
    json!({"v": QUEUE_FORMAT_VERSION, "entries": q.entries.iter().map(entry_to_value).collect::<Vec<_>>()})
}
