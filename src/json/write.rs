//! Writing JSON text into a `String`, with no `core::fmt` and no float printing.

use super::{Map, ToJson, Value};

/// Appends `s` as a JSON string: quoted, with `"`, `\` and the control characters escaped,
/// and U+2028/U+2029 too (JSON allows them raw, JavaScript source before ES2019 did not).
pub fn write_str(out: &mut String, s: &str) {
    let b = s.as_bytes();
    out.push('"');
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let (escape, len): (&str, usize) = match c {
            b'"' => ("\\\"", 1),
            b'\\' => ("\\\\", 1),
            b'\n' => ("\\n", 1),
            b'\r' => ("\\r", 1),
            b'\t' => ("\\t", 1),
            0x08 => ("\\b", 1),
            0x0c => ("\\f", 1),
            0..=0x1f => ("", 1),
            0xe2 if b.get(i + 1) == Some(&0x80) && b.get(i + 2) == Some(&0xa8) => ("\\u2028", 3),
            0xe2 if b.get(i + 1) == Some(&0x80) && b.get(i + 2) == Some(&0xa9) => ("\\u2029", 3),
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            crate::base::hex::push_hex(out, c.into(), 2);
        } else {
            out.push_str(escape);
        }
        i += len;
        start = i;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends `n` in decimal.
pub fn write_u64(out: &mut String, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[i..] {
        out.push(char::from(d));
    }
}

/// Appends `x` rounded to `decimals` decimals (at most 9), trailing zeros dropped but one
/// decimal kept: `0.3`, `1.0`, `0.1235`. Integer arithmetic only, so no float printing is
/// linked in. Beyond 10¹⁸ fewer decimals are kept, and the digits become an exponent form
/// (`123456789012345678e3`); NaN and infinities, which JSON cannot carry, become `null`.
pub fn write_fixed(out: &mut String, x: f64, decimals: u32) {
    if !x.is_finite() {
        out.push_str("null");
        return;
    }
    let mut a = x.abs();
    let mut d = decimals.min(9);
    while d > 0 && a * 10f64.powi(d as i32) >= 1e18 {
        d -= 1;
    }
    let mut exp = 0;
    while a >= 1e18 {
        a /= 10.0;
        exp += 1;
    }
    let unit = 10u64.pow(d);
    let scaled = (a * unit as f64).round() as u64;
    if x < 0.0 && scaled != 0 {
        out.push('-');
    }
    write_u64(out, scaled / unit);
    if d > 0 {
        out.push('.');
        let start = out.len();
        let mut frac = scaled % unit;
        let mut div = unit / 10;
        while div > 0 {
            out.push(char::from(b'0' + (frac / div) as u8));
            frac %= div;
            div /= 10;
        }
        while out.len() > start + 1 && out.ends_with('0') {
            out.pop();
        }
    }
    if exp > 0 {
        out.push('e');
        write_u64(out, exp);
    }
}

impl Value {
    /// Appends the value as compact JSON.
    pub fn write(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(n.as_str()),
            Value::String(s) => write_str(out, s),
            Value::Array(items) => {
                let mut w = ArrayWriter::new(out);
                for v in items {
                    v.write(w.item());
                }
                w.finish();
            }
            Value::Object(m) => {
                let mut w = ObjectWriter::new(out);
                w.entries(m, &[]);
                w.finish();
            }
        }
    }
}

/// Compact JSON text, as [`ToJson::to_json`].
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// Writes a JSON object member by member, straight into a `String`:
///
/// ```
/// # use user_memory::json::ObjectWriter;
/// let mut out = String::new();
/// let mut o = ObjectWriter::new(&mut out);
/// o.str("id", "fact_1").u64("tokens", 12).opt_str("note", None);
/// o.finish();
/// assert_eq!(out, r#"{"id":"fact_1","tokens":12,"note":null}"#);
/// ```
pub struct ObjectWriter<'a> {
    out: &'a mut String,
    empty: bool,
}

impl<'a> ObjectWriter<'a> {
    /// Opens an object (writes `{`).
    pub fn new(out: &'a mut String) -> ObjectWriter<'a> {
        out.push('{');
        ObjectWriter { out, empty: true }
    }

    /// Writes `"key":` and returns the output for the caller to write the value.
    pub fn key(&mut self, key: &str) -> &mut String {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        write_str(self.out, key);
        self.out.push(':');
        self.out
    }

    /// A string member.
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        write_str(self.key(key), value);
        self
    }

    /// A string member, `null` when `None`.
    pub fn opt_str(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        match value {
            Some(s) => write_str(self.key(key), s),
            None => self.key(key).push_str("null"),
        }
        self
    }

    /// An integer member.
    pub fn u64(&mut self, key: &str, value: u64) -> &mut Self {
        write_u64(self.key(key), value);
        self
    }

    /// An integer member, `null` when `None`.
    pub fn opt_u64(&mut self, key: &str, value: Option<u64>) -> &mut Self {
        match value {
            Some(n) => write_u64(self.key(key), n),
            None => self.key(key).push_str("null"),
        }
        self
    }

    /// A float member at `decimals` decimals (see [`write_fixed`]).
    pub fn fixed(&mut self, key: &str, value: f64, decimals: u32) -> &mut Self {
        write_fixed(self.key(key), value, decimals);
        self
    }

    /// A boolean member.
    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key).push_str(if value { "true" } else { "false" });
        self
    }

    /// A member holding `value`.
    pub fn value(&mut self, key: &str, value: &Value) -> &mut Self {
        value.write(self.key(key));
        self
    }

    /// Every entry of `map` whose key is not in `skip` (the known fields already written,
    /// so a stray duplicate in `map` cannot make a second member of the same name).
    pub fn entries(&mut self, map: &Map, skip: &[&str]) -> &mut Self {
        for (k, v) in map {
            if !skip.contains(&k.as_str()) {
                self.value(k, v);
            }
        }
        self
    }

    /// Closes the object (writes `}`).
    pub fn finish(self) {
        self.out.push('}');
    }
}

/// Writes a JSON array item by item, straight into a `String`.
pub struct ArrayWriter<'a> {
    out: &'a mut String,
    empty: bool,
}

impl<'a> ArrayWriter<'a> {
    /// Opens an array (writes `[`).
    pub fn new(out: &'a mut String) -> ArrayWriter<'a> {
        out.push('[');
        ArrayWriter { out, empty: true }
    }

    /// Starts the next item and returns the output for the caller to write it.
    pub fn item(&mut self) -> &mut String {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        self.out
    }

    /// A string item.
    pub fn str(&mut self, value: &str) -> &mut Self {
        write_str(self.item(), value);
        self
    }

    /// Closes the array (writes `]`).
    pub fn finish(self) {
        self.out.push(']');
    }
}
