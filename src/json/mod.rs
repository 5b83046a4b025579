//! The library's own small JSON: a [`Value`], a strict [`parser`](Value::parse) and a
//! writer ([`Value::write`], [`ObjectWriter`], [`ArrayWriter`]).
//!
//! Not serde_json, for size: the generic serde machinery, float printing and an ordered map
//! cost about 40 KB of wasm (docs/size.md has the measurements). What this one does
//! differently:
//!
//! * A number keeps its **original text** ([`Number`]), so a field this library does not
//!   know round-trips byte for byte (`1.10` stays `1.10`, `1e3` stays `1e3`, a 30-digit
//!   integer keeps every digit). Numbers the library writes itself are integers or floats
//!   at a fixed precision ([`write_fixed`]).
//! * An object is a [`Map`]: a `Vec` of entries in insertion order. Lookups are linear,
//!   which is the right trade for the small objects of this library (a document's levels,
//!   a fact, an option set); a duplicate key keeps its first position and its last value.
//! * Writing escapes `"`, `\`, the control characters and U+2028/U+2029 (so the text is
//!   also a valid JavaScript literal); other characters are written as UTF-8.
//!
//! Most output is written straight into a `String` with [`ObjectWriter`] and
//! [`ArrayWriter`], without building a `Value` tree first.

pub(crate) mod field;
mod number;
mod parse;
mod write;

use crate::base::hash::FxMap;
pub use number::{parse_decimal, Number};
pub use parse::ParseError;

pub use write::{write_fixed, write_str, write_u64, ArrayWriter, ObjectWriter};

/// A type written as JSON straight into a `String`, without building a [`Value`] first.
pub trait ToJson {
    /// Appends the value as compact JSON.
    fn write_json(&self, out: &mut String);

    /// The value as compact JSON text.
    fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    /// The value as a JSON tree (written, then read back: what [`ToJson::to_json`] gives,
    /// as a [`Value`]).
    fn to_value(&self) -> Value {
        Value::parse(&self.to_json()).unwrap_or_default()
    }
}

impl ToJson for Value {
    fn write_json(&self, out: &mut String) {
        self.write(out);
    }
}

/// A JSON value.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, kept as written.
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, keys in insertion order.
    Object(Map),
}

impl Value {
    /// Parses JSON text strictly (RFC 8259; surrounding whitespace allowed). See
    /// [`ParseError`] for what the error says.
    pub fn parse(text: &str) -> Result<Value, ParseError> {
        parse::parse(text)
    }

    /// The member `key` of an object; `None` for other values or a missing key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object()?.get(key)
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The object, mutably, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The array, mutably, if this is one.
    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number as an `f64` (see [`Number::as_f64`]), if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    /// The number as a `u64` if it is written as a non-negative integer that fits.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Names the type for error messages: `"null"`, `"a boolean"`, `"a number"`,
    /// `"a string"`, `"an array"` or `"an object"`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Number(Number::from(n))
    }
}

impl From<Map> for Value {
    fn from(m: Map) -> Value {
        Value::Object(m)
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Value {
        Value::Array(a)
    }
}

/// A JSON object: entries in insertion order, keys unique.
///
/// Equality ignores the order of the entries, as JSON object equality does.
#[derive(Debug, Clone, Default)]
pub struct Map {
    entries: Vec<(String, Value)>,
}

/// Iterator over the entries of a [`Map`] by reference.
pub type Iter<'a> = std::iter::Map<std::slice::Iter<'a, (String, Value)>, fn(&'a (String, Value)) -> (&'a String, &'a Value)>;

impl Map {
    /// An empty object.
    pub fn new() -> Map {
        Map::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k == key)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    /// The value of `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        let i = self.position(key)?;
        Some(&mut self.entries[i].1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`: in place if the key exists (returning the old value), else
    /// at the end.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.position(&key) {
            Some(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the other entries.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.position(key)?;
        Some(self.entries.remove(i).1)
    }

    /// Keeps only the entries for which `keep` is true, in their order.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &Value) -> bool) {
        self.entries.retain(|(k, v)| keep(k, v));
    }

    /// The entries in order.
    pub fn iter(&self) -> Iter<'_> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values in order.
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Builds a map from parsed entries, which may repeat a key: the last value wins, at
    /// the position of the first (as `insert` one by one would do, without its quadratic
    /// cost on large objects).
    fn from_parsed(mut entries: Vec<(String, Value)>) -> Map {
        let n = entries.len();
        // Small objects (nearly all) are checked pairwise without allocating.
        let maybe_repeated = n > 16 || (1..n).any(|j| (0..j).any(|i| entries[i].0 == entries[j].0));
        if maybe_repeated {
            // Key → position of its first occurrence, which takes each later value.
            let mut first: FxMap<Box<str>, u32> = FxMap::default();
            let mut keep = vec![true; n];
            for j in 0..n {
                match first.get(entries[j].0.as_str()) {
                    Some(&i) => {
                        entries.swap(i as usize, j);
                        keep[j] = false;
                    }
                    None => {
                        first.insert(entries[j].0.as_str().into(), j as u32);
                    }
                }
            }
            let mut j = 0;
            entries.retain(|_| {
                j += 1;
                keep[j - 1]
            });
        }
        Map { entries }
    }
}

impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl FromIterator<(String, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Map {
        let mut m = Map::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a String, &'a Value);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

#[cfg(feature = "serde")]
mod serde_impls;

#[cfg(test)]
mod tests;
