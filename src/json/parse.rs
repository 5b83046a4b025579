//! The strict JSON parser.

use super::number::{number_len, Number};
use super::{Map, Value};
use std::fmt;

/// How deep arrays and objects may nest (as serde_json): deeper input is an error rather
/// than a stack overflow.
const MAX_DEPTH: usize = 128;

/// Why text is not valid JSON, and where: `expected `,` or `}` at line 3 column 14`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    what: &'static str,
    line: usize,
    column: usize,
}

impl ParseError {
    /// What was wrong, e.g. ``expected `:` ``.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The line (1-based) where it went wrong.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column (1-based, in characters) where it went wrong.
    pub fn column(&self) -> usize {
        self.column
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at line {} column {}", self.what, self.line, self.column)
    }
}

impl std::error::Error for ParseError {}

type Parsed<T> = Result<T, ParseError>;

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
}

/// Parses `text` as one JSON value with optional whitespace around it.
pub(super) fn parse(text: &str) -> Parsed<Value> {
    let mut p = Parser { text, b: text.as_bytes(), i: 0, depth: 0 };
    let v = p.value()?;
    p.ws();
    if p.i < p.b.len() {
        return Err(p.error("trailing characters"));
    }
    Ok(v)
}

impl Parser<'_> {
    fn error(&self, what: &'static str) -> ParseError {
        let mut at = self.i.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        let before = &self.text[..at];
        let line_start = before.rfind('\n').map_or(0, |p| p + 1);
        ParseError { what, line: before.matches('\n').count() + 1, column: before[line_start..].chars().count() + 1 }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Parsed<Value> {
        self.ws();
        match self.peek() {
            None => Err(self.error("EOF while parsing a value")),
            Some(b'{') => self.nested(Parser::object),
            Some(b'[') => self.nested(Parser::array),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(_) => match number_len(self.b, self.i) {
                Some(n) => {
                    let text = &self.text[self.i..self.i + n];
                    self.i += n;
                    Ok(Value::Number(Number::checked(text)))
                }
                None if matches!(self.peek(), Some(b'-' | b'0'..=b'9')) => Err(self.error("invalid number")),
                None => Err(self.error("expected value")),
            },
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Parsed<Value> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.error("expected value"))
        }
    }

    fn nested(&mut self, f: fn(&mut Self) -> Parsed<Value>) -> Parsed<Value> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("recursion limit exceeded"));
        }
        self.i += 1; // the opening bracket
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn array(&mut self) -> Parsed<Value> {
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                    if self.peek() == Some(b']') {
                        return Err(self.error("trailing comma"));
                    }
                }
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                None => return Err(self.error("EOF while parsing a list")),
                Some(_) => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self) -> Parsed<Value> {
        let mut entries = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Value::Object(Map::new()));
        }
        loop {
            match self.peek() {
                Some(b'"') => {}
                Some(b'}') => return Err(self.error("trailing comma")),
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("key must be a string")),
            }
            let key = self.string()?;
            self.ws();
            match self.peek() {
                Some(b':') => self.i += 1,
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("expected `:`")),
            }
            entries.push((key, self.value()?));
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(Map::from_parsed(entries)));
                }
                None => return Err(self.error("EOF while parsing an object")),
                Some(_) => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    /// A string; `self.i` is at its opening quote.
    fn string(&mut self) -> Parsed<String> {
        self.i += 1;
        let mut out = String::new();
        let mut start = self.i;
        loop {
            let Some(c) = self.peek() else { return Err(self.error("EOF while parsing a string")) };
            match c {
                b'"' => {
                    out.push_str(&self.text[start..self.i]);
                    self.i += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[start..self.i]);
                    self.i += 1;
                    self.escape(&mut out)?;
                    start = self.i;
                }
                0..=0x1f => return Err(self.error("control character (\\u0000-\\u001F) found while parsing a string")),
                _ => self.i += 1,
            }
        }
    }

    /// One escape; `self.i` is just after the backslash.
    fn escape(&mut self, out: &mut String) -> Parsed<()> {
        let Some(c) = self.peek() else { return Err(self.error("EOF while parsing a string")) };
        self.i += 1;
        let ch = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                // A surrogate pair is one character; a lone surrogate (which JavaScript
                // strings may hold but Rust strings cannot) becomes U+FFFD, as it does when
                // such a string crosses from JS into wasm.
                if (0xD800..0xDC00).contains(&hi) && self.b[self.i..].starts_with(b"\\u") {
                    let save = self.i;
                    self.i += 2;
                    let lo = self.hex4()?;
                    if (0xDC00..0xE000).contains(&lo) {
                        let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                        return Ok(());
                    }
                    self.i = save;
                }
                char::from_u32(hi).unwrap_or('\u{fffd}')
            }
            _ => {
                self.i -= 1;
                return Err(self.error("invalid escape"));
            }
        };
        out.push(ch);
        Ok(())
    }

    fn hex4(&mut self) -> Parsed<u32> {
        let mut n = 0;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                None => return Err(self.error("EOF while parsing a string")),
                Some(_) => return Err(self.error("invalid escape")),
            };
            n = n * 16 + u32::from(d);
            self.i += 1;
        }
        Ok(n)
    }
}
