//! Robust parsing of model replies into a [`Delta`] (docs/design.md#parsing).
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
//!    `history`, `newFacts`, `factsToRemove`, `factsToReinforce` **and reads as a valid
//!    delta** — the *last* one when an unclosed `<think>` mixes reasoning and answer. A
//!    decoy (`Example: {"user": "alice"}`) is passed over, and so is a valid but empty
//!    example when a delta that proposes something follows. An object nested inside an
//!    object that is never closed (a reply cut off by its token limit) is never taken: its
//!    inner objects are fragments of the cut delta;
//! 4. reads it leniently (the delta is *lean*: a missing key or section proposes nothing,
//!    a section given with a summary and no `shouldUpdate` is an update, and a reply that
//!    is only `{}` is the empty delta): an invalid fact or section is skipped and recorded in
//!    [`Delta::skipped`] (reason `invalid`), while structural garbage (`newFacts` not a
//!    list …) makes the candidate invalid; when no candidate is valid the reply is an
//!    [`Error::LlmBadOutput`] that leaves memory untouched.
//!
//! It never panics, whatever the input.

mod scan;

use crate::base::error::{Error, Result};
use crate::extract::delta::{cat, path, reasons, Delta, Labels, NewFact, Removal, SectionString, SectionUpdate, Skipped};
use crate::extract::said::stated_parts;
use crate::json::field::{missing, wrong_type};
use crate::json::{Map, Value};
use crate::memory::document::{read_confidence, SectionId, DEFAULT_CATEGORY};

/// Only this many bytes of a reply are considered.
pub const MAX_REPLY_BYTES: usize = 1 << 20;
/// At most this many `{` positions that lead nowhere (never closed, or invalid JSON that
/// mentions a delta key) are tried; only these rescan text, so the search stays linear.
pub const MAX_CANDIDATES: usize = 64;
/// The key of the list of what the user said about themself, in their words.
pub const USER_SAID: &str = "userSaid";
/// The keys that make an object a delta candidate.
pub const DELTA_KEYS: [&str; 7] = ["userSaid", "newFacts", "factsToRemove", "factsToReinforce", "sections", "user", "history"];

/// The fact categories the prompt names; others are kept as given.
pub const KNOWN_CATEGORIES: [&str; 6] = ["preference", "knowledge", "context", "behavior", "goal", "correction"];
const EXCERPT_CHARS: usize = 200;

/// Finds the delta in a model reply (docs/design.md#parsing).
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
    if scan::is_empty_object(&answer) {
        // The lean delta's "nothing changed" (what the prompt asks for then).
        return Ok(Delta::default());
    }
    find_delta(&answer, prefer_last)
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
    /// Not valid JSON: the parse error and where.
    invalid_json: Option<(String, usize)>,
    /// Valid JSON with a delta key that is not a delta: why and where.
    not_a_delta: Option<(String, usize)>,
    unclosed: Option<usize>,
}

/// The valid deltas found so far: the first (or last) that proposes something, and the
/// first (or last) empty one as a fallback.
#[derive(Default)]
struct Found {
    real: Option<Delta>,
    empty: Option<Delta>,
}

/// Finds the delta in `text` (reasoning already removed).
fn find_delta(text: &str, prefer_last: bool) -> Result<Delta> {
    let bytes = text.as_bytes();
    let mut found = Found::default();
    let mut diag = Diagnosis::default();
    let keys = key_positions(text);
    // Sorted positions of the `{` inside objects that are never closed.
    let mut nested_in_unclosed: Vec<usize> = Vec::new();
    let mut tried = 0;
    let mut from = 0;
    while tried < MAX_CANDIDATES {
        let Some(rel) = text.get(from..).and_then(|t| t.find('{')) else { break };
        let start = from + rel;
        from = start + 1;
        if !scan::could_open_object(bytes, start) || nested_in_unclosed.binary_search(&start).is_ok() {
            continue;
        }
        // A delta needs one of its keys inside it: with none left in the text, stop.
        if !mentions_delta_key(&keys, start, text.len()) {
            break;
        }
        let Some(end) = scan::object_end(bytes, start) else {
            diag.unclosed.get_or_insert(start);
            nested_in_unclosed = merge_sorted(&nested_in_unclosed, &scan::nested_opens(bytes, start));
            tried += 1;
            continue;
        };
        match Value::parse(&scan::repair(&text[start..end])) {
            Ok(v) => {
                let mut candidates = Vec::new();
                qualifying(&v, 0, &mut candidates);
                for obj in candidates {
                    match delta_from_object(obj) {
                        Ok(d) => {
                            let slot = if d.is_noop() { &mut found.empty } else { &mut found.real };
                            if prefer_last || slot.is_none() {
                                *slot = Some(d);
                            }
                        }
                        Err(why) => {
                            diag.not_a_delta.get_or_insert((why, start));
                        }
                    }
                }
                if found.real.is_some() && !prefer_last {
                    break;
                }
                from = end;
            }
            Err(e) => {
                if mentions_delta_key(&keys, start, end) {
                    // An object nested inside may still be the delta: try the next `{`.
                    diag.invalid_json.get_or_insert_with(|| (e.to_string(), start));
                    tried += 1;
                } else {
                    from = end;
                }
            }
        }
    }
    if let Some(d) = found.real.or(found.empty) {
        return Ok(d);
    }
    Err(match (diag.not_a_delta, diag.invalid_json, diag.unclosed) {
        (Some((why, at)), _, _) => bad(&why, &text[at..]),
        (None, Some((why, at)), _) => bad(&format!("the reply's memory JSON is not valid JSON ({why})"), &text[at..]),
        (None, None, Some(at)) => bad("the reply's memory JSON is cut off (an object is never closed)", &text[at..]),
        _ => bad(
            "the reply holds no JSON object with any of `user`, `history`, `newFacts`, `factsToRemove`, `factsToReinforce`",
            text.trim_start(),
        ),
    })
}

/// The union of two sorted lists, each value once.
fn merge_sorted(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let x = if j == b.len() || (i < a.len() && a[i] <= b[j]) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    out
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

/// Every object at or below `v` that has a delta key, in document order. The search does
/// not descend into a qualifying object: its parts are not deltas of their own.
fn qualifying<'a>(v: &'a Value, depth: usize, out: &mut Vec<&'a Map>) {
    if depth > 16 || out.len() >= MAX_CANDIDATES {
        return;
    }
    match v {
        Value::Object(m) => {
            if DELTA_KEYS.iter().any(|k| m.contains_key(k)) {
                out.push(m);
                return;
            }
            m.values().for_each(|x| qualifying(x, depth + 1, out));
        }
        Value::Array(a) => a.iter().for_each(|x| qualifying(x, depth + 1, out)),
        _ => {}
    }
}

/// Reads the delta object. `Err` is a structural problem; invalid single parts are skipped.
fn delta_from_object(obj: &Map) -> Result<Delta, String> {
    let mut delta = Delta::default();
    for group in ["user", "history"] {
        match obj.get(group) {
            None | Some(Value::Null) => {}
            Some(Value::Object(sections)) => read_sections(group, sections, &mut delta),
            Some(other) => return Err(wrong_type(group, "an object", other).into()),
        }
    }
    match obj.get("sections") {
        None | Some(Value::Null) => {}
        // The schema's list of updates: [{"section": "workContext", "summary": "…"}].
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if let Err(detail) = read_listed_section(item, &mut delta) {
                    delta.skipped.push(Skipped::new(path("sections", i), reasons::INVALID, &detail));
                }
            }
        }
        Some(Value::Object(sections)) => read_sections("sections", sections, &mut delta),
        Some(other) => return Err(wrong_type("sections", "an array of {section, summary}", other).into()),
    }
    // The user's own words, first in the schema.
    match obj.get(USER_SAID) {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                read_user_said(path(USER_SAID, i), item, &mut delta);
            }
        }
        Some(other) => return Err(wrong_type(USER_SAID, "an array of strings", other).into()),
    }
    match obj.get("newFacts") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match read_fact(item) {
                    Ok((f, bad_time)) => {
                        if let Some(detail) = bad_time {
                            let at = cat(&[&path("newFacts", i), ".happenedAt"]);
                            delta.skipped.push(Skipped::new(at, reasons::INVALID, &detail));
                        }
                        delta.new_facts.push(f)
                    }
                    Err(detail) => delta.skipped.push(Skipped::new(path("newFacts", i), reasons::INVALID, &detail)),
                }
            }
        }
        Some(other) => return Err(wrong_type("newFacts", "an array", other).into()),
    }
    match obj.get("factsToRemove") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match read_removal(item) {
                    Ok(r) => push_removal(&mut delta.facts_to_remove, r),
                    Err(detail) => delta.skipped.push(Skipped::new(path("factsToRemove", i), reasons::INVALID, &detail)),
                }
            }
        }
        Some(item @ (Value::String(_) | Value::Object(_))) => match read_removal(item) {
            Ok(r) => push_removal(&mut delta.facts_to_remove, r),
            Err(detail) => delta.skipped.push(Skipped::new("factsToRemove".into(), reasons::INVALID, &detail)),
        },
        Some(other) => return Err(wrong_type("factsToRemove", "an array of fact ids", other).into()),
    }
    match obj.get("factsToReinforce") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ids)) => {
            for (i, id) in ids.iter().enumerate() {
                match id {
                    Value::String(s) => push_id(&mut delta.facts_to_reinforce, s),
                    other => {
                        let at = path("factsToReinforce", i);
                        let detail = wrong_type(&at, "a fact id (a string)", other).0;
                        delta.skipped.push(Skipped::new(at, reasons::INVALID, &detail));
                    }
                }
            }
        }
        Some(Value::String(id)) => push_id(&mut delta.facts_to_reinforce, id),
        Some(other) => return Err(wrong_type("factsToReinforce", "an array of fact ids", other).into()),
    }
    Ok(delta)
}

/// One `userSaid` string: its statements become candidate facts that apply gates like
/// section strings; a string with none (a question or request alone) is skipped.
fn read_user_said(at: String, item: &Value, delta: &mut Delta) {
    match item {
        Value::String(s) => {
            let parts = stated_parts(s);
            if parts.is_empty() && !s.trim().is_empty() {
                let detail = "no statement about the user, only a question, request or acknowledgement";
                delta.skipped.push(Skipped::new(at.clone(), reasons::TASK_RESIDUE, detail));
            }
            for part in parts {
                delta.section_strings.push(SectionString { path: at.clone(), text: part.to_string() });
            }
        }
        other => {
            let detail = wrong_type(&at, "a string", other).0;
            delta.skipped.push(Skipped::new(at, reasons::INVALID, &detail));
        }
    }
}

fn push_id(ids: &mut Vec<String>, id: &str) {
    let id = id.trim();
    if !id.is_empty() && !ids.iter().any(|x| x == id) {
        ids.push(id.to_string());
    }
}

/// Adds a removal unless its id is blank or already listed (the first mention counts).
fn push_removal(list: &mut Vec<Removal>, r: Option<Removal>) {
    if let Some(r) = r {
        if !list.iter().any(|x| x.id == r.id) {
            list.push(r);
        }
    }
}

/// One `factsToRemove` entry: a fact id, or `{id, reason?, scope?, replacementFactIndex?}`.
/// `Ok(None)` for a blank id.
fn read_removal(v: &Value) -> Result<Option<Removal>, String> {
    let obj = match v {
        Value::String(s) => return Ok(Some(Removal::id(s.trim())).filter(|r| !r.id.is_empty())),
        Value::Object(o) => o,
        other => return Err(wrong_type("removal", "a fact id or {id, replacementFactIndex?}", other).into()),
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) | None | Some(Value::Null) => return Err(missing("", "id").into()),
        Some(other) => return Err(wrong_type("id", "a string", other).into()),
    };
    let bad_index = || "`replacementFactIndex` must be a whole number ≥ 0".to_string();
    let replacement = match obj.get("replacementFactIndex") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(n.as_u64().ok_or_else(bad_index)? as usize),
        Some(Value::String(s)) => Some(Value::parse(s.trim()).ok().and_then(|v| v.as_u64()).ok_or_else(bad_index)? as usize),
        Some(other) => return Err(wrong_type("replacementFactIndex", "a number", other).into()),
    };
    Ok(Some(Removal { id, scope: label(obj, "scope")?, replacement }))
}

/// An optional label, trimmed and lower-cased; blank counts as absent.
fn label(obj: &Map, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(crate::base::unicode::lowercase(s.trim()))),
        Some(other) => Err(wrong_type(key, "a string", other).into()),
    }
}

/// The `scope`, `durability` and `authority` labels of a fact or section update.
fn read_labels(obj: &Map) -> Result<Labels, String> {
    Ok(Labels { scope: label(obj, "scope")?, durability: label(obj, "durability")?, authority: label(obj, "authority")? })
}

/// Reads the sections of `user` or `history`. A known section key is accepted in either
/// group (models sometimes misplace them); unknown keys are ignored.
fn read_sections(group: &str, sections: &Map, delta: &mut Delta) {
    for (key, value) in sections {
        let Some(id) = SectionId::ALL.into_iter().find(|s| s.key() == key) else { continue };
        if delta.sections[id.index()].is_some() {
            continue;
        }
        match value {
            // Not a summary, but maybe the user's own words: apply decides.
            Value::String(s) if !s.trim().is_empty() => {
                delta.section_strings.push(SectionString { path: cat(&[group, ".", key]), text: s.trim().to_string() })
            }
            Value::String(_) => {}
            _ => match read_section(value) {
                Ok(update) => delta.sections[id.index()] = update,
                Err(detail) => delta.skipped.push(Skipped::new(cat(&[group, ".", key]), reasons::INVALID, &detail)),
            },
        }
    }
}

/// One entry of the `sections` list: `{"section": <key>, "summary": "…"}` (with optional
/// labels). A section already given keeps its first proposal.
fn read_listed_section(item: &Value, delta: &mut Delta) -> Result<(), String> {
    let obj = item.as_object().ok_or_else(|| String::from(wrong_type("section update", "an object {section, summary}", item)))?;
    let key = match obj.get("section") {
        Some(Value::String(s)) => s.trim(),
        None | Some(Value::Null) => return Err(missing("", "section").into()),
        Some(other) => return Err(wrong_type("section", "a section name", other).into()),
    };
    let id = SectionId::ALL.into_iter().find(|s| s.key() == key).ok_or_else(|| cat(&["unknown section \"", key, "\""]))?;
    if delta.sections[id.index()].is_none() {
        delta.sections[id.index()] = read_section(item)?;
    }
    Ok(())
}

/// One section proposal. `Ok(None)` = nothing proposed (null, or no summary and no update).
fn read_section(v: &Value) -> Result<Option<SectionUpdate>, String> {
    let obj = match v {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        other => return Err(wrong_type("section", "an object {summary, shouldUpdate}", other).into()),
    };
    // A lean delta lists only changed sections: a summary without `shouldUpdate` is an
    // update; an explicit `false` keeps the old summary.
    let should_update = match obj.get("shouldUpdate") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("true") => Some(true),
        Some(Value::String(s)) if s.trim().eq_ignore_ascii_case("false") => Some(false),
        Some(other) => return Err(wrong_type("shouldUpdate", "true or false", other).into()),
    };
    let labels = read_labels(obj)?;
    match obj.get("summary") {
        Some(Value::String(s)) => Ok(Some(SectionUpdate { summary: s.clone(), should_update: should_update.unwrap_or(true), labels })),
        None | Some(Value::Null) if should_update != Some(true) => Ok(None),
        None | Some(Value::Null) => Err(missing("", "summary").into()),
        Some(other) => Err(wrong_type("summary", "a string", other).into()),
    }
}

/// One new fact, validated. A malformed `happenedAt` does not lose the fact: it is dropped
/// and described in the second value (the caller reports it as skipped).
fn read_fact(v: &Value) -> Result<(NewFact, Option<String>), String> {
    let obj = match v {
        Value::Object(o) => o,
        other => return Err(wrong_type("fact", "an object {content, category, confidence}", other).into()),
    };
    let content = match obj.get("content") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) => return Err("`content` must not be empty".into()),
        None | Some(Value::Null) => return Err(missing("", "content").into()),
        Some(other) => return Err(wrong_type("content", "a string", other).into()),
    };
    let category = match obj.get("category") {
        None | Some(Value::Null) => DEFAULT_CATEGORY.to_string(),
        Some(Value::String(s)) => normalize_category(s),
        Some(other) => return Err(wrong_type("category", "a string", other).into()),
    };
    let confidence = read_confidence(obj.get("confidence"))
        .map_err(|why| cat(&["`confidence` ", why]))?
        .unwrap_or(crate::memory::document::DEFAULT_CONFIDENCE);
    let expected_valid_days = match obj.get("expected_valid_days").or_else(|| obj.get("expectedValidDays")) {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => crate::json::parse_decimal(s),
        _ => None,
    }
    .filter(|d| d.is_finite() && *d > 0.0);
    let source_error = match obj.get("sourceError").or_else(|| obj.get("source_error")) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    };
    let (happened_at, bad_time) = match obj.get("happenedAt").or_else(|| obj.get("happened_at")) {
        None | Some(Value::Null) => (None, None),
        Some(Value::String(s)) if s.trim().is_empty() => (None, None),
        Some(Value::String(s)) if crate::base::time::event_days(s).is_some() => (Some(s.trim().to_string()), None),
        Some(Value::String(s)) => {
            let detail = cat(&["`happenedAt` \"", excerpt(s).as_str(), "\" is not an ISO date (2023-05-07) or date-time; dropped"]);
            (None, Some(detail))
        }
        Some(other) => (None, Some(wrong_type("happenedAt", "an ISO date string", other).0)),
    };
    let labels = read_labels(obj)?;
    let fact = NewFact { content, category, confidence, labels, expected_valid_days, source_error, happened_at };
    Ok((fact, bad_time))
}

/// Trims a category; a known one in any letter case becomes lower case, a blank one
/// `context`, an unknown one is kept reduced to letters, digits, `_` and `-` (so it cannot
/// forge the `[category | confidence]` prefix when rendered).
fn normalize_category(s: &str) -> String {
    let s = s.trim();
    if let Some(k) = KNOWN_CATEGORIES.iter().find(|k| k.eq_ignore_ascii_case(s)) {
        return k.to_string();
    }
    let safe = crate::extract::sanitize::safe_category(s);
    if safe.is_empty() {
        DEFAULT_CATEGORY.to_string()
    } else {
        safe.into_owned()
    }
}

#[cfg(test)]
mod tests;
