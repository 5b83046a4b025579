//! Values across the boundary. Documents and other JSON data cross as JSON text
//! (`JSON.stringify` / `JSON.parse`), which keeps key order and costs no extra code;
//! messages are read field by field (only what filtering needs, fast for `inject()`), and
//! for `inject()` only the last ones, as many as its query needs.
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
use crate::recall::inject::tail_decides_query;
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
    let Some(len) = array_len(v, what)? else { return Ok(None) };
    (0..len).map(|i| item(v, i, what)).collect::<Result<Vec<_>>>().map(Some)
}

/// The `length` of `v` if it is an array; `INVALID_INPUT` naming `what` if reading it throws
/// or it claims over 2^20 items.
fn array_len(v: &JsValue, what: &str) -> Result<Option<u32>> {
    if !is_array(v) {
        return Ok(None);
    }
    let len = Reflect::get(v, &JsValue::from_str("length")).map_err(|e| unreadable(what, &e))?.as_f64().unwrap_or(0.0);
    if !(0.0..=f64::from(MAX_ITEMS)).contains(&len) {
        return Err(Error::invalid(format!("{what} has more than {MAX_ITEMS} items")));
    }
    Ok(Some(len as u32))
}

/// Item `i` of array `v` (`INVALID_INPUT` naming `what` if reading it throws).
fn item(v: &JsValue, i: u32, what: &str) -> Result<JsValue> {
    Reflect::get_u32(v, i).map_err(|e| unreadable(what, &e))
}

fn unreadable(what: &str, e: &JsValue) -> Error {
    Error::invalid(format!("{what} could not be read: {}", super::error::js_message(e)))
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

/// Reads a `messages` array (any of the shapes `InputMessage` knows), with each message's time.
pub(crate) fn messages(v: &JsValue) -> Result<Vec<InputMessage>> {
    let Some(len) = messages_len(v)? else { return Ok(Vec::new()) };
    KEYS.with(|k| (0..len).map(|i| Ok(message(&item(v, i, "`messages`")?, k))).collect())
}

/// The messages `inject()` and `explain()` rank by: the last ones, as many as decide the
/// query ([`tail_decides_query`]: more user turns than `recent_turns`), read from the end
/// without their times. A chat hands over its whole history on every turn, and each
/// message costs a dozen property reads across the boundary; the query needs its end.
pub(crate) fn query_messages(v: &JsValue, recent_turns: usize) -> Result<Vec<InputMessage>> {
    let Some(len) = messages_len(v)? else { return Ok(Vec::new()) };
    KEYS.with(|k| {
        let (mut start, mut chunk, mut tail) = (len, 8u32, Vec::new());
        while start > 0 {
            let from = start.saturating_sub(chunk);
            let mut read = (from..start).map(|i| Ok(message_text(&item(v, i, "`messages`")?, k))).collect::<Result<Vec<_>>>()?;
            read.append(&mut tail);
            (tail, start, chunk) = (read, from, chunk.saturating_mul(2));
            if start > 0 && tail_decides_query(&tail, recent_turns) {
                break;
            }
        }
        Ok(tail)
    })
}

/// The length of a `messages` array, `None` for `undefined` / `null`, `INVALID_INPUT` for
/// anything else than an array.
fn messages_len(v: &JsValue) -> Result<Option<u32>> {
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    array_len(v, "`messages`")?.map(Some).ok_or_else(|| Error::invalid("`messages` must be an array of { role | type, content }"))
}

/// The property names messages are read by, made JS strings once: building one per read
/// (`JsValue::from_str` decodes it from the wasm memory) was a tenth of the boundary's
/// share of `inject()` at 500 facts (`node bench/inject-profile.mjs 500`).
struct Keys {
    role: JsValue,
    kind: JsValue,
    content: JsValue,
    parts: JsValue,
    tool_calls: JsValue,
    length: JsValue,
    text: JsValue,
    provider_executed: JsValue,
    hide_from_ui: JsValue,
    hidden_in: [JsValue; HIDDEN_IN.len()],
    time: [JsValue; TIME_KEYS.len()],
    holders: [JsValue; TIME_HOLDERS.len()],
}

thread_local! {
    static KEYS: Keys = Keys {
        role: "role".into(),
        kind: "type".into(),
        content: "content".into(),
        parts: "parts".into(),
        tool_calls: "tool_calls".into(),
        length: "length".into(),
        text: "text".into(),
        provider_executed: "providerExecuted".into(),
        hide_from_ui: HIDE_FROM_UI.into(),
        hidden_in: HIDDEN_IN.map(JsValue::from_str),
        time: TIME_KEYS.map(JsValue::from_str),
        holders: TIME_HOLDERS.map(JsValue::from_str),
    };
}

/// [`prop`] by a key made once ([`Keys`]).
fn get(obj: &JsValue, key: &JsValue) -> JsValue {
    // Most holders (`metadata`, `additional_kwargs`) are absent: one check for those.
    if obj.is_undefined() || (!obj.is_object() && !obj.is_function()) {
        return JsValue::UNDEFINED;
    }
    Reflect::get(obj, key).unwrap_or(JsValue::UNDEFINED)
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
fn message_stamp(m: &JsValue, k: &Keys) -> Option<Stamp> {
    let on = |o: &JsValue| k.time.iter().find_map(|key| stamp(&get(o, key)));
    on(m).or_else(|| k.holders.iter().find_map(|h| on(&get(m, h))))
}

fn message(m: &JsValue, k: &Keys) -> InputMessage {
    let at = message_stamp(m, k);
    InputMessage { at, ..message_text(m, k) }
}

fn message_text(m: &JsValue, k: &Keys) -> InputMessage {
    if !m.is_object() && !m.is_function() {
        return InputMessage::new(Role::Other, "");
    }
    // `m` is an object: its properties are read without checking it again.
    let read = |key: &JsValue| Reflect::get(m, key).unwrap_or(JsValue::UNDEFINED);
    let role = read(&k.role).as_string().or_else(|| read(&k.kind).as_string());
    let hidden = k.hidden_in.iter().any(|h| get(&read(h), &k.hide_from_ui).as_bool() == Some(true));
    let role = role.as_deref().map_or(Role::Other, Role::parse).unless_hidden(hidden);
    let calls = read(&k.tool_calls);
    let has_tool_calls = if is_array(&calls) {
        get(&calls, &k.length).as_f64().is_some_and(|n| n > 0.0)
    } else {
        !(calls.is_undefined() || calls.is_null())
    };
    let (content, parts) = (read(&k.content), read(&k.parts));
    let text = content.as_string();
    // A `parts` list (AI SDK UI) wins over `content`; a string content is no list.
    let list = if is_array(&parts) { Some(&parts) } else { text.is_none().then_some(&content) };
    // A list whose items cannot be read (a hostile Proxy) holds no text.
    if let Some(msg) = list.and_then(|l| from_list(role, l, has_tool_calls, k)) {
        return msg;
    }
    InputMessage { content: text.unwrap_or_default(), has_tool_calls, ..InputMessage::new(role, "") }
}

/// A message whose text is the parts list `list`; `None` when `list` is no array or its
/// items cannot be read (a hostile Proxy: no text).
fn from_list(role: Role, list: &JsValue, has_tool_calls: bool, k: &Keys) -> Option<InputMessage> {
    let list = items(list, "message parts").ok()??;
    Some(InputMessage::from_parts(role, &list.iter().map(|p| part(p, k)).collect::<Vec<_>>(), has_tool_calls))
}

/// One content part reduced to what [`InputMessage::from_parts`] reads (`type`, `text`,
/// `providerExecuted`), so tool outputs and a file's data URL never cross the boundary.
fn part(p: &JsValue, k: &Keys) -> Part {
    match p.as_string() {
        Some(s) => Part { text: Some(s), ..Part::default() },
        None => Part {
            kind: get(p, &k.kind).as_string(),
            text: get(p, &k.text).as_string(),
            provider_executed: get(p, &k.provider_executed).as_bool() == Some(true),
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
