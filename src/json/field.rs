//! Reading the fields of JSON that comes from outside (options, documents to import, the
//! stored queue, model replies): one reader, and one style of message naming the field's
//! path, ``"`llm.timeoutMs` must be a number, found a string"``.
//!
//! A missing field and `null` both read as `None`. Errors are [`FieldError`]s, which `?`
//! turns into an [`Error::InvalidInput`] or into the plain message where a caller collects
//! messages (a document's or a queue entry's reader decides itself what the error becomes).

use super::{Map, Value};
use crate::base::error::Error;

/// A field of the wrong type or out of range; the message names its path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError(pub(crate) String);

impl From<FieldError> for String {
    fn from(e: FieldError) -> String {
        e.0
    }
}

impl From<FieldError> for Error {
    fn from(e: FieldError) -> Error {
        Error::InvalidInput(e.0)
    }
}

/// The message for `path` holding `found` where `want` was expected:
/// ``"`path` must be want, found a number"``.
pub(crate) fn wrong_type(path: &str, want: &str, found: &Value) -> FieldError {
    FieldError(cat(&["`", path, "` must be ", want, ", found ", found.type_name()]))
}

/// A field's path for messages: `parent.key`, or `key` at the top level.
fn path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        cat(&[parent, ".", key])
    }
}

/// The value of `key`, `None` when it is missing or `null`.
fn present<'a>(obj: &'a Map, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// An optional string.
pub(crate) fn opt_str<'a>(obj: &'a Map, parent: &str, key: &str) -> Result<Option<&'a str>, FieldError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(wrong_type(&path(parent, key), "a string", other)),
    }
}

/// `v` as an object, or the message that `path` must be one.
pub(crate) fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map, FieldError> {
    v.as_object().ok_or_else(|| wrong_type(path, "an object", v))
}

/// The message for a required field that is missing: ``"`parent.key` is missing"``.
pub(crate) fn missing(parent: &str, key: &str) -> FieldError {
    FieldError(cat(&["`", &path(parent, key), "` is missing"]))
}

/// A required string.
pub(crate) fn req_str<'a>(obj: &'a Map, parent: &str, key: &str) -> Result<&'a str, FieldError> {
    opt_str(obj, parent, key)?.ok_or_else(|| missing(parent, key))
}

/// An optional non-blank string, trimmed; a blank one is an error.
pub(crate) fn opt_text(obj: &Map, parent: &str, key: &str) -> Result<Option<String>, FieldError> {
    match opt_str(obj, parent, key)? {
        None => Ok(None),
        Some(s) if s.trim().is_empty() => Err(FieldError(cat(&["`", &path(parent, key), "` must not be empty"]))),
        Some(s) => Ok(Some(s.trim().to_string())),
    }
}

/// An optional boolean.
pub(crate) fn opt_bool(obj: &Map, parent: &str, key: &str) -> Result<Option<bool>, FieldError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(&path(parent, key), "a boolean", other)),
    }
}

/// An optional finite number ≥ 0.
pub(crate) fn opt_f64(obj: &Map, parent: &str, key: &str) -> Result<Option<f64>, FieldError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(FieldError(cat(&["`", &path(parent, key), "` must be a finite number ≥ 0"]))),
        },
        Some(other) => Err(wrong_type(&path(parent, key), "a number", other)),
    }
}

/// An optional whole number ≥ 0 (a count, a duration or a time in milliseconds), at most
/// 2^53 − 1 (what a JS number holds exactly).
pub(crate) fn opt_uint(obj: &Map, parent: &str, key: &str) -> Result<Option<u64>, FieldError> {
    match opt_f64(obj, parent, key)? {
        None => Ok(None),
        Some(x) if x.fract() == 0.0 && x <= 9_007_199_254_740_991.0 => Ok(Some(x as u64)),
        Some(_) => Err(FieldError(cat(&["`", &path(parent, key), "` must be a whole number ≥ 0"]))),
    }
}

/// `list[i]`, e.g. `newFacts[2]`: a path in the reply (written without `format!`, whose
/// machinery costs code at every call site).
pub fn index_path(list: &str, i: usize) -> String {
    let mut s = String::with_capacity(list.len() + 4);
    s.push_str(list);
    s.push('[');
    super::write_u64(&mut s, i as u64);
    s.push(']');
    s
}

/// The pieces joined into one string (without `format!`, see [`index_path`]).
pub fn cat(pieces: &[&str]) -> String {
    let mut s = String::new();
    for p in pieces {
        s.push_str(p);
    }
    s
}

/// `INVALID_INPUT` naming the first key of the `option` object `obj` that is in none of the
/// `known` lists, and listing them all (a typo such as `baseURL` would otherwise be ignored).
pub(crate) fn check_known_keys(option: &str, obj: &Map, known: &[&[&str]]) -> Result<(), Error> {
    let all = || known.iter().flat_map(|k| k.iter());
    let Some(k) = obj.keys().find(|k| !all().any(|n| n == k)) else { return Ok(()) };
    let names: Vec<&str> = all().copied().collect();
    let mut msg = format!("unknown option `{option}.{k}`{} (known:", crate::base::spelling::did_you_mean(k, &names));
    for (i, name) in all().enumerate() {
        msg.push_str(if i == 0 { " " } else { ", " });
        msg.push_str(name);
    }
    msg.push(')');
    Err(Error::invalid(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Map {
        Value::parse(text).unwrap().as_object().unwrap().clone()
    }

    #[test]
    fn fields_read_with_one_style_of_message_naming_the_path() {
        let o = obj(r#"{"s": "x", "b": true, "n": 2, "f": 0.5, "nul": null, "neg": -1, "big": 1e300}"#);
        assert_eq!(opt_str(&o, "", "s"), Ok(Some("x")));
        assert_eq!(opt_str(&o, "", "nul"), Ok(None));
        assert_eq!(opt_str(&o, "", "gone"), Ok(None));
        assert_eq!(opt_bool(&o, "", "b"), Ok(Some(true)));
        assert_eq!(opt_uint(&o, "", "n"), Ok(Some(2)));
        assert_eq!(opt_f64(&o, "", "f"), Ok(Some(0.5)));
        assert_eq!(opt_str(&o, "llm", "n").unwrap_err().0, "`llm.n` must be a string, found a number");
        assert_eq!(opt_bool(&o, "", "s").unwrap_err().0, "`s` must be a boolean, found a string");
        assert_eq!(opt_f64(&o, "", "s").unwrap_err().0, "`s` must be a number, found a string");
        assert_eq!(opt_f64(&o, "", "neg").unwrap_err().0, "`neg` must be a finite number ≥ 0");
        assert_eq!(opt_uint(&o, "", "f").unwrap_err().0, "`f` must be a whole number ≥ 0");
        assert_eq!(opt_uint(&o, "", "big").unwrap_err().0, "`big` must be a whole number ≥ 0");
        assert_eq!(req_str(&o, "claim", "owner").unwrap_err().0, "`claim.owner` is missing");
        assert_eq!(Error::from(wrong_type("x", "an object", &Value::Null)).code(), "INVALID_INPUT");
    }
}
