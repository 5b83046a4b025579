//! The protocol's [`Message`]s as the plain objects that travel over the
//! `BroadcastChannel` (structured clone): `{t: "req" | "res" | "reset" | "leader", …}`.

use super::super::convert::{prop, set};
use super::super::error::storage_error_of;
use crate::leader::{Answer, Message, Op, Reply, Request};
use crate::storage::{Commit, Slot, Versioned};
use js_sys::Object;
use wasm_bindgen::JsValue;

/// The slot named in a message.
fn slot_of(data: &JsValue) -> Option<Slot> {
    Slot::from_name(&prop(data, "slot").as_string()?)
}

/// The request field carrying the highest revision of `slot` the sender has heard of.
fn mark_key(slot: Slot) -> &'static str {
    match slot {
        Slot::Document => "kd",
        Slot::Queue => "kq",
        Slot::Vectors => "kv",
        Slot::Key => "kk",
    }
}

/// A numeric field of a message (0 when absent).
fn num(data: &JsValue, key: &str) -> u64 {
    prop(data, key).as_f64().map_or(0, |n| n as u64)
}

fn str_field(data: &JsValue, key: &str) -> String {
    prop(data, key).as_string().unwrap_or_default()
}

/// A message of type `t`.
fn message(t: &str) -> JsValue {
    let m: JsValue = Object::new().into();
    set(&m, "t", &JsValue::from_str(t));
    m
}

fn set_slot(m: &JsValue, slot: Slot) {
    set(m, "slot", &JsValue::from_str(slot.name()));
}

/// `message` as a plain object.
pub(super) fn to_js(message: &Message) -> JsValue {
    match message {
        Message::Request(req) => request(req),
        Message::Reply(reply) => reply_of(reply),
        Message::Reset(slot) => {
            let m = self::message("reset");
            set_slot(&m, *slot);
            m
        }
        Message::Leader => self::message("leader"),
    }
}

fn request(req: &Request) -> JsValue {
    let m = message("req");
    set(&m, "id", &JsValue::from_str(&req.id));
    if let Some(until) = req.until {
        set(&m, "until", &JsValue::from_f64(until as f64));
    }
    let (name, slot) = match &req.op {
        Op::Load(s) => ("load", *s),
        Op::Commit(s, base, value) => {
            set(&m, "base", &JsValue::from_f64(*base as f64));
            set(&m, "value", &JsValue::from_str(value));
            ("commit", *s)
        }
        Op::Discard(s) => ("discard", *s),
        Op::Cleanup => ("cleanup", Slot::Document),
    };
    set(&m, "op", &JsValue::from_str(name));
    set_slot(&m, slot);
    for slot in Slot::ALL {
        set(&m, mark_key(slot), &JsValue::from_f64(req.known[slot.index()] as f64));
    }
    set(&m, "retry", &JsValue::from_bool(req.retry));
    m
}

fn reply_of(reply: &Reply) -> JsValue {
    let m = message("res");
    set(&m, "id", &JsValue::from_str(&reply.id));
    match &reply.outcome {
        Err(e) => {
            set(&m, "code", &JsValue::from_str(e.code()));
            set(&m, "message", &JsValue::from_str(&e.message()));
        }
        Ok(answer) => {
            set(&m, "ok", &JsValue::TRUE);
            if let Some(slot) = reply.slot {
                set_slot(&m, slot);
            }
            match answer {
                Answer::Loaded(Some(v)) => set(&m, "value", &JsValue::from_str(&v.value)),
                Answer::Committed(Commit::Conflict) => set(&m, "conflict", &JsValue::TRUE),
                _ => {}
            }
            set(&m, "rev", &JsValue::from_f64(answer.revision() as f64));
        }
    }
    m
}

/// A plain object read as a message; `None` for anything else (another version's message,
/// a stranger on the channel).
pub(super) fn from_js(data: &JsValue) -> Option<Message> {
    let slot = slot_of(data);
    Some(match prop(data, "t").as_string()?.as_str() {
        "req" => {
            let op = match (prop(data, "op").as_string()?.as_str(), slot?) {
                ("load", s) => Op::Load(s),
                ("commit", s) => Op::Commit(s, num(data, "base"), str_field(data, "value")),
                ("discard", s) => Op::Discard(s),
                _ => return None,
            };
            Message::Request(Request {
                id: str_field(data, "id"),
                op,
                known: Slot::ALL.map(|slot| num(data, mark_key(slot))),
                retry: prop(data, "retry").is_truthy(),
                until: prop(data, "until").as_f64().map(|d| d as u64),
            })
        }
        "res" => {
            let rev = num(data, "rev");
            let outcome = if !prop(data, "ok").is_truthy() {
                Err(storage_error_of(data, "localStorage (through the leader tab)"))
            } else if prop(data, "conflict").is_truthy() {
                Ok(Answer::Committed(Commit::Conflict))
            } else if let Some(value) = prop(data, "value").as_string() {
                Ok(Answer::Loaded(Some(Versioned { revision: rev, value })))
            } else {
                // What it answers (a load of nothing, a commit, a discard) is known to the
                // requester only: `Reply::revision` and the requester's reading agree.
                Ok(Answer::Committed(Commit::Committed(rev)))
            };
            Message::Reply(Reply { id: str_field(data, "id"), slot, outcome })
        }
        "reset" => Message::Reset(slot?),
        "leader" => Message::Leader,
        _ => return None,
    })
}
