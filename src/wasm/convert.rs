//! Values across the boundary. Documents and other JSON data cross as JSON text
//! (`JSON.stringify` / `JSON.parse`), which keeps key order and costs no extra code;
//! messages are read field by field (only what filtering needs, fast for `inject()`).
//!
//! Everything that reads a value the user handed in goes through a call that catches what
//! JS throws: a Proxy's traps, a getter, a revoked Proxy can throw from any property read,
//! and an exception crossing the wasm leaves Rust state half-updated (inside a promise it
//! even stops every other promise of the module). Hence `prop`, `items` and `keys` here
//! instead of js-sys's `Array::iter`, `Array::is_array` and `Object::keys`.

use crate::base::error::{Error, Result};
use crate::base::time::Stamp;
use crate::json::Value;
use crate::memory::message::{InputMessage, Part, Role, HIDDEN_IN, HIDE_FROM_UI, TIME_HOLDERS, TIME_KEYS};
use js_sys::{Array, Function, Promise, Reflect, JSON};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};

#[wasm_bindgen]
extern "C" {
    /// `Object.keys(v)`, catching what a Proxy's `ownKeys` trap throws.
    #[wasm_bindgen(catch, js_namespace = Object, js_name = keys)]
    fn object_keys(v: &JsValue) -> std::result::Result<Array, JsValue>;
    /// `Array.isArray(v)`, which throws for a revoked Proxy.
    #[wasm_bindgen(catch, js_namespace = Array, js_name = isArray)]
    fn array_is_array(v: &JsValue) -> std::result::Result<bool, JsValue>;
}

/// Most items read from one array handed in (a Proxy can claim any `length`).
const MAX_ITEMS: u32 = 1 << 20;

/// Whether `v` is an array (a revoked Proxy is not).
pub(crate) fn is_array(v: &JsValue) -> bool {
    array_is_array(v).unwrap_or(false)
}

/// The items of `v` if it is an array, read one by one (each read may throw: a getter, a
/// Proxy). `INVALID_INPUT` naming `what` if a read throws or it claims over 2^20 items.
pub(crate) fn items(v: &JsValue, what: &str) -> Result<Option<Vec<JsValue>>> {
    if !is_array(v) {
        return Ok(None);
    }
    let unreadable = |e: JsValue| Error::invalid(format!("{what} could not be read: {}", super::error::js_message(&e)));
    let len = Reflect::get(v, &JsValue::from_str("length")).map_err(unreadable)?.as_f64().unwrap_or(0.0);
    if !(0.0..=f64::from(MAX_ITEMS)).contains(&len) {
        return Err(Error::invalid(format!("{what} has more than {MAX_ITEMS} items")));
    }
    (0..len as u32).map(|i| Reflect::get_u32(v, i).map_err(unreadable)).collect::<Result<Vec<_>>>().map(Some)
}

/// The own enumerable keys of object `v` (`INVALID_INPUT` naming `what` if reading throws).
pub(crate) fn keys(v: &JsValue, what: &str) -> Result<Vec<String>> {
    let keys = object_keys(v).map_err(|e| Error::invalid(format!("{what} could not be read: {}", super::error::js_message(&e))))?;
    // `Object.keys` made this array: reading it runs no user code.
    Ok(keys.iter().filter_map(|k| k.as_string()).collect())
}

/// `v` as a genuine promise: a thenable is adopted, and whatever its `then` does (a getter
/// that throws, a promise with an own `then`) becomes a rejection, never an exception here.
pub(crate) fn promise_of(v: &JsValue) -> Promise {
    Promise::new(&mut |resolve: Function, _| {
        let _ = resolve.call1(&JsValue::UNDEFINED, v);
    })
}

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

/// Reads a `messages` array (any of the shapes `InputMessage` knows).
pub(crate) fn messages(v: &JsValue) -> Result<Vec<InputMessage>> {
    if v.is_undefined() || v.is_null() {
        return Ok(Vec::new());
    }
    let arr = items(v, "`messages`")?.ok_or_else(|| Error::invalid("`messages` must be an array of { role | type, content }"))?;
    Ok(arr.iter().map(message).collect())
}

/// A time handed in: a `Date`, an ISO string or epoch milliseconds / seconds; `None` for
/// anything else (an invalid `Date` too).
pub(crate) fn stamp(v: &JsValue) -> Option<Stamp> {
    if let Some(d) = v.dyn_ref::<js_sys::Date>() {
        return Stamp::from_epoch(d.get_time());
    }
    match v.as_string() {
        Some(s) => Stamp::parse(&s),
        None => v.as_f64().and_then(Stamp::from_epoch),
    }
}

/// A message's own time: [`TIME_KEYS`] on it, then in its [`TIME_HOLDERS`].
fn message_stamp(m: &JsValue) -> Option<Stamp> {
    let on = |o: &JsValue| TIME_KEYS.iter().find_map(|k| stamp(&prop(o, k)));
    on(m).or_else(|| TIME_HOLDERS.iter().find_map(|h| on(&prop(m, h))))
}

fn message(m: &JsValue) -> InputMessage {
    let at = message_stamp(m);
    InputMessage { at, ..message_text(m) }
}

fn message_text(m: &JsValue) -> InputMessage {
    let role = prop(m, "role").as_string().or_else(|| prop(m, "type").as_string());
    let hidden = HIDDEN_IN.iter().any(|h| prop(&prop(m, h), HIDE_FROM_UI).as_bool() == Some(true));
    let role = role.as_deref().map_or(Role::Other, Role::parse).unless_hidden(hidden);
    let calls = prop(m, "tool_calls");
    let has_tool_calls = if is_array(&calls) {
        prop(&calls, "length").as_f64().is_some_and(|n| n > 0.0)
    } else {
        !(calls.is_undefined() || calls.is_null())
    };
    let content = prop(m, "content");
    let parts = prop(m, "parts");
    let list = if is_array(&parts) { parts } else { content.clone() };
    // A list whose items cannot be read (a hostile Proxy) holds no text.
    if let Ok(Some(list)) = items(&list, "message parts") {
        return InputMessage::from_parts(role, &list.iter().map(part).collect::<Vec<_>>(), has_tool_calls);
    }
    InputMessage { content: content.as_string().unwrap_or_default(), has_tool_calls, ..InputMessage::new(role, "") }
}

/// One content part reduced to what [`InputMessage::from_parts`] reads (`type`, `text`,
/// `providerExecuted`), so tool outputs and a file's data URL never cross the boundary.
fn part(p: &JsValue) -> Part {
    match p.as_string() {
        Some(s) => Part { text: Some(s), ..Part::default() },
        None => Part {
            kind: prop(p, "type").as_string(),
            text: prop(p, "text").as_string(),
            provider_executed: prop(p, "providerExecuted").as_bool() == Some(true),
        },
    }
}

/// Sets `obj[key] = value`.
pub(crate) fn set(obj: &JsValue, key: &str, value: &JsValue) {
    let _ = Reflect::set(obj, &JsValue::from_str(key), value);
}

/// Whether a global (`indexedDB`, `localStorage`, …) exists and can be read here.
pub(crate) fn has_global(name: &str) -> bool {
    let v = prop(&js_sys::global(), name);
    !(v.is_undefined() || v.is_null())
}

/// Rejects numbers JSON cannot carry (`NaN`, `±Infinity`) anywhere in an options value,
/// because `JSON.stringify` would silently turn them into `null` (= "use the default").
/// Objects nested deeper than any option (a cycle, or an SDK client passed by mistake) are
/// `INVALID_INPUT` too, rather than a stack overflow.
pub(crate) fn check_finite(v: &JsValue, path: &str) -> Result<()> {
    check_finite_at(v, path, 0)
}

fn check_finite_at(v: &JsValue, path: &str, depth: usize) -> Result<()> {
    if let Some(x) = v.as_f64() {
        if !x.is_finite() {
            return Err(Error::invalid(format!("`{path}` must be a finite number")));
        }
    } else if v.is_object() && !v.is_function() && !is_array(v) {
        if depth >= 16 {
            return Err(Error::invalid(format!("`{path}` is nested too deeply (a cycle?); options are plain JSON-like values")));
        }
        for k in keys(v, &format!("`{path}`"))? {
            check_finite_at(&prop(v, &k), &format!("{path}.{k}"), depth + 1)?;
        }
    }
    Ok(())
}
