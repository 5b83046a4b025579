//! Values across the boundary. Documents and other JSON data cross as JSON text
//! (`JSON.stringify` / `JSON.parse`), which keeps key order and costs no extra code;
//! messages are read field by field (only what filtering needs, fast for `inject()`).

use crate::error::{Error, Result};
use crate::json::Value;
use crate::message::{content_text, InputMessage, Role};
use js_sys::{Array, Reflect, JSON};
use wasm_bindgen::{JsCast, JsValue};

/// A JS value as JSON. `undefined` becomes `null`; values JSON cannot represent
/// (BigInt, cycles) are `INVALID_INPUT` naming `what`.
pub(crate) fn to_json(v: &JsValue, what: &str) -> Result<Value> {
    if v.is_undefined() {
        return Ok(Value::Null);
    }
    let text =
        JSON::stringify(v).map_err(|e| Error::invalid(format!("{what} is not JSON-serialisable: {}", super::error::js_message(&e))))?;
    // A function, a symbol, or an object whose toJSON() gives undefined: no JSON at all.
    let text = text.as_string().ok_or_else(|| Error::invalid(format!("{what} must be a JSON value, not a function or a symbol")))?;
    Value::parse(&text).map_err(|e| Error::invalid(format!("{what} is not valid JSON: {e}")))
}

/// JSON text (written by this crate, so valid) as a fresh JS value.
pub(crate) fn from_json(text: &str) -> JsValue {
    JSON::parse(text).unwrap_or(JsValue::NULL)
}

/// A property of an object, `undefined` when absent or when `obj` is not an object.
pub(crate) fn prop(obj: &JsValue, key: &str) -> JsValue {
    if !obj.is_object() && !obj.is_function() {
        return JsValue::UNDEFINED;
    }
    Reflect::get(obj, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// Reads a `messages` array of either shape (SPEC §4).
pub(crate) fn messages(v: &JsValue) -> Result<Vec<InputMessage>> {
    if v.is_undefined() || v.is_null() {
        return Ok(Vec::new());
    }
    let arr = v.dyn_ref::<Array>().ok_or_else(|| Error::invalid("`messages` must be an array of { role | type, content }"))?;
    Ok(arr.iter().map(|m| message(&m)).collect())
}

fn message(m: &JsValue) -> InputMessage {
    let role = prop(m, "role").as_string().or_else(|| prop(m, "type").as_string());
    let role = role.as_deref().map_or(Role::Other, Role::parse);
    let content = prop(m, "content");
    let content = match content.as_string() {
        Some(s) => s,
        None if Array::is_array(&content) => {
            // List of parts: only the text parts matter; convert just those.
            content_text(to_json(&content, "message content").ok().as_ref())
        }
        None => String::new(),
    };
    let calls = prop(m, "tool_calls");
    let has_tool_calls = match calls.dyn_ref::<Array>() {
        Some(a) => a.length() > 0,
        None => !(calls.is_undefined() || calls.is_null()),
    };
    InputMessage { role, content, has_tool_calls }
}

/// Sets `obj[key] = value`.
pub(crate) fn set(obj: &JsValue, key: &str, value: &JsValue) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), value);
}
