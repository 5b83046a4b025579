//! The queue's JSON form, written by hand: `{"v":1,"entries":[{threadId, messages, firstAt,
//! lastAt, version, attempts, retryAt?, claim?: {owner, until}, lastError?}]}`.
//!
//! Written by hand on the crate's own JSON ([`crate::json`]): read from a parsed value with
//! precise errors, written straight into text.

use super::{Claim, Entry, QueueFile, QUEUE_FORMAT_VERSION};
use crate::base::time::Stamp;
use crate::json::field::{missing, opt_str, opt_uint, req_str, wrong_type};
use crate::json::{ArrayWriter, ObjectWriter, Value};
use crate::memory::message::{ChatMessage, Speaker};

fn message(v: &Value) -> Result<ChatMessage, String> {
    let (Some(o), Some(role)) = (v.as_object(), v.get("role").and_then(Value::as_str)) else {
        return Err(NEEDS_ROLE.into());
    };
    let role = match role {
        "user" => Speaker::User,
        "assistant" => Speaker::Assistant,
        _ => return Err(NEEDS_ROLE.into()),
    };
    // `at`/`tz` (epoch ms, offset minutes) are absent from queues written before times were
    // kept; a malformed one counts as absent (the time is a hint for the prompt, not data).
    let at = o.get("at").and_then(Value::as_u64).map(|ms| Stamp {
        ms,
        offset_min: o.get("tz").and_then(Value::as_f64).filter(|m| m.fract() == 0.0 && m.abs() <= 1080.0).map_or(0, |m| m as i16),
    });
    Ok(ChatMessage { role, content: req_str(o, "", "content")?.to_string(), at })
}

const NEEDS_ROLE: &str = "a message needs `role` \"user\" or \"assistant\"";

/// Reads one entry; the error says which field is wrong.
pub(super) fn entry_from_value(v: &Value) -> Result<Entry, String> {
    let o = v.as_object().ok_or_else(|| wrong_type("entries[]", "an object", v))?;
    let messages = match o.get("messages") {
        Some(Value::Array(a)) => a.iter().map(message).collect::<Result<Vec<_>, _>>()?,
        other => return Err(wrong_type("messages", "an array", other.unwrap_or(&Value::Null)).into()),
    };
    let claim = match o.get("claim") {
        None | Some(Value::Null) => None,
        Some(c) => {
            let c = c.as_object().ok_or_else(|| wrong_type("claim", "an object", c))?;
            Some(Claim {
                owner: req_str(c, "claim", "owner")?.to_string(),
                until: opt_uint(c, "claim", "until")?.ok_or_else(|| missing("claim", "until"))?,
            })
        }
    };
    let attempts = opt_uint(o, "", "attempts")?.unwrap_or(0);
    Ok(Entry {
        thread_id: req_str(o, "", "threadId")?.to_string(),
        messages,
        first_at: opt_uint(o, "", "firstAt")?.ok_or_else(|| missing("", "firstAt"))?,
        last_at: opt_uint(o, "", "lastAt")?.ok_or_else(|| missing("", "lastAt"))?,
        version: req_str(o, "", "version")?.to_string(),
        attempts: u32::try_from(attempts).map_err(|_| "`attempts` is too large".to_string())?,
        retry_at: opt_uint(o, "", "retryAt")?,
        claim,
        last_error: opt_str(o, "", "lastError")?.map(str::to_string),
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
        if let Some(at) = msg.at {
            m.u64("at", at.ms);
            if at.offset_min != 0 {
                m.fixed("tz", at.offset_min.into(), 0);
            }
        }
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
