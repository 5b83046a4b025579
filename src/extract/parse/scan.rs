//! A small string-aware scanner for model replies: reasoning blocks, balanced JSON objects
//! and the light repairs that make near-JSON parse. No regex: everything is one linear pass
//! over bytes (JSON's structural characters are ASCII, so byte offsets stay on UTF-8
//! character boundaries).

use crate::extract::tags::{remove_blocks, Rules};

/// A reasoning block never closed loses only its opening tag; a closing tag with none
/// before it ends reasoning that the chat template opened.
const REASONING_RULES: Rules = Rules { unclosed_removes_rest: Some(false), orphan_close_removes_before: true, eat_line_breaks: false };

/// Tags whose content is the model's reasoning, not its answer.
const REASONING_TAGS: [&str; 3] = ["think", "thinking", "reasoning"];

/// Removes `<think>…</think>` (and `<thinking>`, `<reasoning>`) blocks, tag names ASCII
/// case-insensitive. A closing tag with no opening before it (providers that put the
/// opening tag in the chat template) drops everything before it. An opening tag that is
/// never closed is removed alone, and the second value is `true`: what follows is a mix of
/// reasoning and answer, so the caller prefers the *last* delta in it.
pub(crate) fn strip_reasoning(text: &str) -> (String, bool) {
    let mut s = text.to_string();
    let mut unclosed = false;
    for tag in REASONING_TAGS {
        let r = remove_blocks(&s, tag, REASONING_RULES);
        unclosed |= r.unclosed;
        s = r.text.into_owned();
    }
    (s, unclosed)
}

/// Whether the whole answer is an empty object, `{}`, maybe in a code fence: the lean
/// delta's "nothing changed".
pub(crate) fn is_empty_object(text: &str) -> bool {
    let t = text.trim();
    let t = t.strip_prefix("```json").or_else(|| t.strip_prefix("```")).and_then(|t| t.strip_suffix("```")).unwrap_or(t);
    t.trim().strip_prefix('{').and_then(|t| t.strip_suffix('}')).is_some_and(|inner| inner.trim().is_empty())
}

/// Whether the `{` at `start` could open a JSON object: the next non-blank character is
/// `"`, `}`, `/` (a comment) or `'` (so a Python dict gets a precise error). Skips
/// `{name}` placeholders and code blocks cheaply.
pub(crate) fn could_open_object(bytes: &[u8], start: usize) -> bool {
    bytes[start + 1..].iter().find(|b| !b.is_ascii_whitespace()).is_some_and(|&b| matches!(b, b'"' | b'}' | b'\'' | b'/'))
}

/// The end (exclusive) of the object whose `{` is at `start`: braces are counted outside
/// JSON strings (which may contain escaped quotes). `None` when it is never closed.
pub(crate) fn object_end(bytes: &[u8], start: usize) -> Option<usize> {
    scan_object(bytes, start, None)
}

/// The positions of every `{` that the object opened at `start` contains (outside JSON
/// strings, scanning like [`object_end`]), in increasing order.
pub(crate) fn nested_opens(bytes: &[u8], start: usize) -> Vec<usize> {
    let mut out = Vec::new();
    scan_object(bytes, start, Some(&mut out));
    out
}

/// The scan behind [`object_end`] and [`nested_opens`]: the object's end, and the nested
/// `{` positions into `nested` when asked for.
fn scan_object(bytes: &[u8], start: usize, mut nested: Option<&mut Vec<usize>>) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut i = start;
    while i < bytes.len() {
        let c = bytes[i];
        if in_str {
            match c {
                b'\\' => i += 1,
                b'"' => in_str = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' => {
                    if depth > 0 {
                        if let Some(v) = nested.as_deref_mut() {
                            v.push(i);
                        }
                    }
                    depth += 1;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// Light repairs of near-JSON, all outside strings unless noted:
/// * bare `NaN`, `Infinity`, `-Infinity`, `+Infinity` become the strings `"NaN"` …, which
///   the fact reader then rejects as "not a finite number";
/// * trailing commas before `}` or `]` are dropped;
/// * `// line` and `/* block */` comments are dropped;
/// * raw line breaks and tabs *inside* strings are escaped (models often emit them).
pub(crate) fn repair(json: &str) -> String {
    let b = json.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len() + 16);
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if in_str {
            match c {
                b'\\' => {
                    out.push(c);
                    if let Some(&n) = b.get(i + 1) {
                        out.push(n);
                    }
                    i += 2;
                    continue;
                }
                b'"' => in_str = false,
                b'\n' => {
                    out.extend_from_slice(b"\\n");
                    i += 1;
                    continue;
                }
                b'\r' => {
                    out.extend_from_slice(b"\\r");
                    i += 1;
                    continue;
                }
                b'\t' => {
                    out.extend_from_slice(b"\\t");
                    i += 1;
                    continue;
                }
                _ => {}
            }
            out.push(c);
            i += 1;
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += b[i..].iter().position(|&x| x == b'\n').unwrap_or(b.len() - i);
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += b[i + 2..].windows(2).position(|w| w == b"*/").map_or(b.len() - i, |p| p + 4);
                continue;
            }
            b',' => {
                let next = b[i + 1..].iter().position(|x| !x.is_ascii_whitespace()).map(|p| b[i + 1 + p]);
                if matches!(next, Some(b'}' | b']')) {
                    i += 1;
                    continue;
                }
            }
            b'N' | b'I' | b'-' | b'+' => {
                if let Some(word) = non_finite_at(&b[i..]) {
                    out.push(b'"');
                    out.extend_from_slice(word);
                    out.push(b'"');
                    i += word.len();
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    // Only ASCII was inserted or removed, at ASCII positions: still valid UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// The non-finite literal (`NaN`, `Infinity`, `-Infinity`, `+Infinity`) at the start of
/// `b`, if it is a whole word.
fn non_finite_at(b: &[u8]) -> Option<&[u8]> {
    for word in [&b"NaN"[..], b"Infinity", b"-Infinity", b"+Infinity", b"-NaN"] {
        if b.starts_with(word) && !b.get(word.len()).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            return Some(&b[..word.len()]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_blocks_are_removed_including_braces_inside() {
        let (s, open) = strip_reasoning("<think>draft {\"newFacts\": []}</think>\n{\"a\":1}");
        assert_eq!((s.trim(), open), ("{\"a\":1}", false));
        let (s, _) = strip_reasoning("<THINKING>x</Thinking>ok<reasoning>y</reasoning>!");
        assert_eq!(s, "ok!");
    }

    #[test]
    fn orphan_closing_tag_drops_what_comes_before() {
        let (s, open) = strip_reasoning("reasoning with {\"user\": {}}\n</think>\n\n{\"b\":2}");
        assert_eq!((s.trim(), open), ("{\"b\":2}", false));
    }

    #[test]
    fn unclosed_opening_tag_is_flagged() {
        let (s, open) = strip_reasoning("<think>\nstill thinking {\"x\":1}");
        assert_eq!((s.as_str(), open), ("\nstill thinking {\"x\":1}", true));
    }

    #[test]
    fn object_end_ignores_braces_in_strings() {
        let t = br#"{"a": "}{\"}", "b": {"c": 1}} tail"#;
        assert_eq!(object_end(t, 0), Some(t.len() - 5));
        assert_eq!(object_end(b"{\"a\": {", 0), None);
    }

    #[test]
    fn could_open_object_skips_placeholders() {
        assert!(could_open_object(b"{  \"a\"", 0));
        assert!(could_open_object(b"{}", 0));
        assert!(!could_open_object(b"{name}", 0));
        assert!(!could_open_object(b"{", 0));
    }

    #[test]
    fn repair_fixes_non_finite_trailing_commas_and_raw_newlines() {
        assert_eq!(repair("{\"c\": NaN, \"d\": -Infinity,\n}"), "{\"c\": \"NaN\", \"d\": \"-Infinity\"\n}");
        assert_eq!(repair("[1, 2 ,  ]"), "[1, 2   ]");
        assert_eq!(repair("{\"s\": \"a,}\nNaN\"}"), "{\"s\": \"a,}\\nNaN\"}");
        assert_eq!(repair("{\"NaNa\": NaNa}"), "{\"NaNa\": NaNa}");
        assert_eq!(repair("{\"e\": \"q\\\"\",}"), "{\"e\": \"q\\\"\"}");
        assert_eq!(repair("{\"u\": \"http://x\", // note\n /* c */\"v\": 1 /* open"), "{\"u\": \"http://x\", \n \"v\": 1 ");
    }
}
