//! The messages between followers and the leader: what an operation is, what its answer
//! is, and how both travel over the `BroadcastChannel` as plain objects.

use super::super::convert::{prop, set};
use super::super::error::storage_error;
use crate::error::Result;
use crate::storage::{Commit, Slot, Versioned};
use js_sys::Object;
use wasm_bindgen::JsValue;

/// A storage operation, done by the leader.
pub(super) enum Op {
    /// `Store::load`.
    Load(Slot),
    /// `Store::commit`.
    Commit(Slot, u64, String),
    /// `Store::discard`.
    Discard(Slot),
    /// `Store::cleanup`.
    Cleanup,
}

impl Op {
    /// The slot the operation is about (none for cleanup).
    pub(super) fn slot(&self) -> Option<Slot> {
        match self {
            Op::Load(s) | Op::Commit(s, ..) | Op::Discard(s) => Some(*s),
            Op::Cleanup => None,
        }
    }
}

/// What an operation gave.
pub(super) enum Answer {
    /// Of a load.
    Loaded(Option<Versioned>),
    /// Of a commit.
    Committed(Commit),
    /// Of a discard or cleanup.
    Done,
}

/// The request field carrying the highest revision of `slot` the sender has heard of.
pub(super) fn mark_key(slot: Slot) -> &'static str {
    match slot {
        Slot::Document => "kd",
        Slot::Queue => "kq",
        Slot::Vectors => "kv",
        Slot::Key => "kk",
    }
}

/// The slot named in a message.
pub(super) fn slot_of(data: &JsValue) -> Option<Slot> {
    Slot::from_name(&prop(data, "slot").as_string()?)
}

/// A numeric field of a message (0 when absent).
pub(super) fn num(data: &JsValue, key: &str) -> u64 {
    prop(data, key).as_f64().map_or(0, |n| n as u64)
}

/// A message of type `t`.
pub(super) fn message(t: &str) -> JsValue {
    let m: JsValue = Object::new().into();
    set(&m, "t", &JsValue::from_str(t));
    m
}

/// The leader's answer to request `id`.
pub(super) fn result_message(id: &str, op: &Op, result: &Result<Answer>) -> JsValue {
    let m = message("res");
    set(&m, "id", &JsValue::from_str(id));
    match result {
        Err(e) => {
            set(&m, "code", &JsValue::from_str(e.code()));
            set(&m, "message", &JsValue::from_str(&e.message()));
        }
        Ok(answer) => {
            set(&m, "ok", &JsValue::TRUE);
            if let Some(slot) = op.slot() {
                set(&m, "slot", &JsValue::from_str(slot.name()));
            }
            let rev = match answer {
                Answer::Loaded(Some(v)) => {
                    set(&m, "value", &JsValue::from_str(&v.value));
                    v.revision
                }
                Answer::Committed(Commit::Committed(rev)) => *rev,
                Answer::Committed(Commit::Conflict) => {
                    set(&m, "conflict", &JsValue::TRUE);
                    0
                }
                _ => 0,
            };
            set(&m, "rev", &JsValue::from_f64(rev as f64));
        }
    }
    m
}

/// A follower's reading of the leader's answer.
pub(super) fn answer_of(op: &Op, reply: &JsValue) -> Result<Answer> {
    if !prop(reply, "ok").is_truthy() {
        return Err(storage_error(reply, "localStorage (through the leader tab)"));
    }
    let rev = num(reply, "rev");
    Ok(match op {
        Op::Load(_) => Answer::Loaded(prop(reply, "value").as_string().map(|value| Versioned { revision: rev, value })),
        Op::Commit(..) if prop(reply, "conflict").is_truthy() => Answer::Committed(Commit::Conflict),
        Op::Commit(..) => Answer::Committed(Commit::Committed(rev)),
        _ => Answer::Done,
    })
}
