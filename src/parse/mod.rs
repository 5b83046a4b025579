//! Robust parsing of model replies into a [`Delta`] (SPEC §6, §11 Parsing).
//!
//! Real models wrap their JSON in code fences and prose, think aloud in `<think>` blocks
//! (with braces and draft JSON inside), write `NaN`, leave trailing commas and quote their
//! numbers. The parser:
//!
//! 1. looks at the first 1 MB of the trimmed reply and removes reasoning blocks;
//! 2. tries each `{` that could open an object, finds its balanced end with a
//!    string-aware scan, repairs near-JSON and parses it strictly with [`crate::json`] (valid decoys
//!    are skipped whole; at most [`MAX_CANDIDATES`] dead ends are retried from inside);
//! 3. takes the first object (the outer one or one nested in it) that has any of `user`,
//!    `history`, `newFacts`, `factsToRemove` — the *last* one when an unclosed `<think>`
//!    mixes reasoning and answer;
//! 4. reads it leniently: an invalid fact or section is skipped and recorded in
//!    [`Delta::skipped`], while structural garbage (`newFacts` not a list …) is an
//!    [`Error::LlmBadOutput`] that leaves memory untouched.
//!
//! It never panics, whatever the input.

mod scan;

use crate::delta::{Delta, NewFact, SectionUpdate, Skipped};
use crate::document::{read_confidence, SectionId, DEFAULT_CATEGORY};
use crate::error::{Error, Result};
use crate::json::{Map, Value};

/// Only this many bytes of a reply are considered.
pub const MAX_REPLY_BYTES: usize = 1 << 20;
/// At most this many `{` positions that lead nowhere (never closed, or invalid JSON that
/// mentions a delta key) are tried; only these rescan text, so the search stays linear.
pub const MAX_CANDIDATES: usize = 64;
/// The keys that make an object the delta.
pub const DELTA_KEYS: [&str; 4] = ["user", "history", "newFacts", "factsToRemove"];

/// The fact categories the prompt names; others are kept as given.
pub const KNOWN_CATEGORIES: [&str; 6] = ["preference", "knowledge", "context", "behavior", "goal", "correction"];
const EXCERPT_CHARS: usize = 200;

/// Finds the delta in a model reply (SPEC §6, §11 Parsing).
///
/// Errors are [`Error::LlmBadOutput`] with a message that says what was wrong and quotes
/// a short excerpt of the reply.
pub fn parse_reply(text: &str) -> Result<Delta> {
    let text = cap(text.trim_start_matches('\u{feff}').trim(), MAX_REPLY_BYTES);
    if text.is_empty() {
        return Err(Error::LlmBadOutput("the model's reply is empty".into()));
    }
    let (answer, prefer_last) = scan::strip_reasoning(text);
    if answer.trim().is_empty() {
        return Err(bad("the model's reply holds only a reasoning (<think>) block and no answer", text));
    }
    let (object, start) = find_delta_object(&answer, prefer_last)?;
    delta_from_object(&object).map_err(|why| bad(&why, &answer[start..]))
}

/// Cuts `text` to at most `max` bytes on a character boundary.
fn cap(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// An `LLM_BAD_OUTPUT` error quoting the start of `source`.
fn bad(why: &str, source: &str) -> Error {
    Error::LlmBadOutput(format!("{why}; the reply starts: \"{}\"", excerpt(source)))
}

/// At most [`EXCERPT_CHARS`] characters of `s`, whitespace runs collapsed.
fn excerpt(s: &str) -> String {
    let mut out = String::new();
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(cap(word, EXCERPT_CHARS * 4));
        if out.len() >= EXCERPT_CHARS {
            break;
        }
    }
    if out.chars().count() > EXCERPT_CHARS {
        out = out.chars().take(EXCERPT_CHARS - 1).collect();
        out.push('…');
    }
    out
}

/// What went wrong with the candidates, for the error message.
#[derive(Default)]
struct Diagnosis {
    invalid: Option<(String, usize)>,
    unclosed: Option<usize>,
}

/// Finds the delta object in `text` (reasoning already removed) and the byte offset of the
/// candidate it came from.
fn find_delta_object(text: &str, prefer_last: bool) -> Result<(Map, usize)> {
    let bytes = text.as_bytes();
    let mut found: Option<(Map, usize)> = None;
    let mut diag = Diagnosis::default();
    let keys = key_positions(text);
    let mut tried = 0;
    let mut from = 0;
    while tried < MAX_CANDIDATES {
        let Some(rel) = text.get(from..).and_then(|t| t.find('{')) else { break };
        let start = from + rel;
        from = start + 1;
        if !scan::could_open_object(bytes, start) {
            continue;
        }
        // A delta needs one of its keys inside it: with none left in the text, stop.
        if !mentions_delta_key(&keys, start, text.len()) {
            break;
        }
        let Some(end) = scan::object_end(bytes, start) else {
            diag.unclosed.get_or_insert(start);
            tried += 1;
            continue;
        };
        let slice = &text[start..end];
        match Value::parse(&scan::repair(slice)) {
            Ok(v) => {
                if let Some(obj) = qualifying(&v, 0) {
                    found = Some((obj.clone(), start));
                    if !prefer_last {
                        break;
                    }
                }
                from = end;
            }
            Err(e) => {
                if mentions_delta_key(&keys, start, end) {
                    // An object nested inside may still be the delta: try the next `{`.
                    diag.invalid.get_or_insert_with(|| (e.to_string(), start));
                    tried += 1;
                } else {
                    from = end;
                }
            }
        }
    }
    if let Some(hit) = found {
        return Ok(hit);
    }
    Err(match (diag.invalid, diag.unclosed) {
        (Some((why, at)), _) => bad(&format!("the reply's memory JSON is not valid JSON ({why})"), &text[at..]),
        (None, Some(at)) => bad("the reply's memory JSON is cut off (an object is never closed)", &text[at..]),
        _ => bad("the reply holds no JSON object with any of `user`, `history`, `newFacts`, `factsToRemove`", text.trim_start()),
    })
}

/// Sorted byte offsets of every quoted delta key (`"newFacts"`, `'user'` …) in `text`, so
/// "does this candidate mention one" is a binary search, not a rescan. One pass; like a
/// search per quoted key, a match never overlaps an earlier match of the same quoted key.
fn key_positions(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    // Per key and quote (double, single): where its last match ended.
    let mut ends = [[0usize; 2]; DELTA_KEYS.len()];
    let mut at = Vec::new();
    for (i, &q) in b.iter().enumerate() {
        let quote = match q {
            b'"' => 0,
            b'\'' => 1,
            _ => continue,
        };
        let rest = &b[i + 1..];
        for (k, key) in DELTA_KEYS.iter().enumerate() {
            if i >= ends[k][quote] && rest.starts_with(key.as_bytes()) && rest.get(key.len()) == Some(&q) {
                ends[k][quote] = i + key.len() + 2;
                at.push(i);
                break;
            }
        }
    }
    at
}

/// Whether a key position lies within `start..end`.
fn mentions_delta_key(keys: &[usize], start: usize, end: usize) -> bool {
    let i = keys.partition_point(|&p| p < start);
    keys.get(i).is_some_and(|&p| p < end)
}

/// The first object, in document order, at or below `v` that has a delta key.
fn qualifying(v: &Value, depth: usize) -> Option<&Map> {
    if depth > 16 {
        return None;
    }
    match v {
        Value::Object(m) => {
            if DELTA_KEYS.iter().any(|k| m.contains_key(k)) {
                return Some(m);
            }
            m.values().find_map(|x| qualifying(x, depth + 1))
        }
        Value::Array(a) => a.iter().find_map(|x| qualifying(x, depth + 1)),
        _ => None,
    }
}

/// Reads the delta object. `Err` is a structural problem; invalid single parts are skipped.
fn delta_from_object(obj: &Map) -> Result<Delta, String> {
    let mut delta = Delta::default();
    for group in ["user", "history"] {
        match obj.get(group) {
            None | Some(Value::Null) => {}
            Some(Value::Object(sections)) => read_sections(group, sections, &mut delta),
            Some(other) => return Err(format!("`{group}` must be an object, found {}", other.type_name())),
        }
    }
    match obj.get("newFacts") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match read_fact(item) {
                    Ok(f) => delta.new_facts.push(f),
                    Err(reason) => delta.skipped.push(Skipped { path: format!("newFacts[{i}]"), reason }),
                }
            }
        }
        Some(other) => return Err(format!("`newFacts` must be an array, found {}", other.type_name())),
    }
    match obj.get("factsToRemove") {
        None | Some(Value::Null) => {}
        Some(Value::String(id)) => push_id(&mut delta.facts_to_remove, id),
        Some(Value::Array(ids)) => {
            for (i, id) in ids.iter().enumerate() {
                match id {
                    Value::String(s) => push_id(&mut delta.facts_to_remove, s),
                    other => delta.skipped.push(Skipped {
                        path: format!("factsToRemove[{i}]"),
                        reason: format!("a fact id must be a string, found {}", other.type_name()),
                    }),
                }
            }
        }
        Some(other) => return Err(format!("`factsToRemove` must be an array of fact ids, found {}", other.type_name())),
    }
    Ok(delta)
}

fn push_id(ids: &mut Vec<String>, id: &str) {
    let id = id.trim();
    if !id.is_empty() && !ids.iter().any(|x| x == id) {
        ids.push(id.to_string());
    }
}

/// Reads the sections of `user` or `history`. A known section key is accepted in either
/// group (models sometimes misplace them); unknown keys are ignored.
fn read_sections(group: &str, sections: &Map, delta: &mut Delta) {
    for (key, value) in sections {
        let Some(id) = SectionId::ALL.into_iter().find(|s| s.key() == key) else { continue };
        if delta.sections[id.index()].is_some() {
            continue;
        }
        match read_section(value) {
            Ok(update) => delta.sections[id.index()] = update,
            Err(reason) => delta.skipped.push(Skipped { path: format!("{group}.{key}"), reason }),
        }
    }
}

/// One section proposal. `Ok(None)` = nothing proposed (null, or no summary and no update).
fn read_section(v: &Value) -> Result<Option<SectionUpdate>, String> {
    let obj = match v {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        other => return Err(format!("must be an object {{summary, shouldUpdate}}, found {}", other.type_name())),
    };
    let should_update = match obj.get("shouldUpdate") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("false") => false,
        Some(other) => return Err(format!("shouldUpdate must be true or false, found {}", other.type_name())),
    };
    match obj.get("summary") {
        Some(Value::String(s)) => Ok(Some(SectionUpdate { summary: s.clone(), should_update })),
        None | Some(Value::Null) if !should_update => Ok(None),
        None | Some(Value::Null) => Err("summary is missing".into()),
        Some(other) => Err(format!("summary must be a string, found {}", other.type_name())),
    }
}

/// One new fact, validated.
fn read_fact(v: &Value) -> Result<NewFact, String> {
    let obj = match v {
        Value::Object(o) => o,
        other => return Err(format!("a fact must be an object {{content, category, confidence}}, found {}", other.type_name())),
    };
    let content = match obj.get("content") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) => return Err("content is empty".into()),
        None | Some(Value::Null) => return Err("content is missing".into()),
        Some(other) => return Err(format!("content must be a string, found {}", other.type_name())),
    };
    let category = match obj.get("category") {
        None | Some(Value::Null) => DEFAULT_CATEGORY.to_string(),
        Some(Value::String(s)) => normalize_category(s),
        Some(other) => return Err(format!("category must be a string, found {}", other.type_name())),
    };
    let confidence =
        read_confidence(obj.get("confidence")).map_err(|why| format!("confidence {why}"))?.unwrap_or(crate::document::DEFAULT_CONFIDENCE);
    Ok(NewFact { content, category, confidence })
}

/// Trims a category; a known one in any letter case becomes lower case, a blank one
/// `context`, an unknown one is kept as given.
fn normalize_category(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() {
        return DEFAULT_CATEGORY.to_string();
    }
    KNOWN_CATEGORIES.iter().find(|k| k.eq_ignore_ascii_case(s)).map_or_else(|| s.to_string(), |k| k.to_string())
}

#[cfg(test)]
mod tests;
