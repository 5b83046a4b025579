//! The reply corpus: real-looking model output (`tests/fixtures/replies/`), each file with
//! its expected outcome in `manifest.json`:
//!
//! ```json
//! "file.txt": { "ok": true, "newFacts": 3, "factsToRemove": 1,
//!               "sectionsToUpdate": ["workContext"], "skipped": 1, "sectionStrings": 2,
//!               "firstContent": "…", "firstCategory": "…", "firstConfidence": 0.5,
//!               "factsToReinforce": 2, "replacements": [0, null],
//!               "labelled": [["user", "durable", "descriptive"], [null, null, null]],
//!               "validDays": [45, null], "sourceErrors": [null, "…"] }
//! "bad.txt":  { "ok": false, "error": "substring of the message" }
//! ```
//!
//! `sectionsToUpdate` lists the sections that would be replaced (shouldUpdate true and a
//! non-blank summary); `sectionStrings` counts the sections given as bare strings, which
//! apply judges as candidate facts (tests/small_models.rs). The `first*` keys are optional checks on the first new fact; the
//! lists check every new fact's (or removal's) DeerFlow HEAD fields.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use user_memory::parse::parse_reply;
use user_memory::SectionId;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/replies");

fn manifest() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(Path::new(DIR).join("manifest.json")).expect("manifest.json");
    match serde_json::from_str(&text).expect("manifest is JSON") {
        Value::Object(m) => m,
        _ => panic!("manifest must be an object"),
    }
}

fn read_reply(name: &str) -> String {
    let bytes = std::fs::read(Path::new(DIR).join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Checks one fixture; returns a description of every mismatch.
fn check(name: &str, expect: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut differ = |what: &str, want: &dyn std::fmt::Debug, got: &dyn std::fmt::Debug| {
        problems.push(format!("{name}: {what}: expected {want:?}, got {got:?}"));
    };
    let reply = read_reply(name);
    let result = parse_reply(&reply);
    let want_ok = expect["ok"].as_bool().expect("`ok` is a boolean");
    match (want_ok, result) {
        (true, Err(e)) => differ("outcome", &"ok", &e.to_string()),
        (false, Ok(d)) => differ("outcome", &"error", &d),
        (false, Err(e)) => {
            assert_eq!(e.code(), "LLM_BAD_OUTPUT", "{name}");
            let want = expect["error"].as_str().unwrap_or("");
            if !e.message().contains(want) {
                differ("error message", &want, &e.message());
            }
            if let Some(quoted) = e.message().split("the reply starts: \"").nth(1) {
                if quoted.chars().count() > 201 {
                    differ("excerpt length", &"≤ 200", &quoted.chars().count());
                }
            }
        }
        (true, Ok(d)) => {
            let count = |key: &str| expect.get(key).and_then(Value::as_u64).unwrap_or(0) as usize;
            if d.new_facts.len() != count("newFacts") {
                differ("newFacts", &count("newFacts"), &d.new_facts);
            }
            if d.facts_to_remove.len() != count("factsToRemove") {
                differ("factsToRemove", &count("factsToRemove"), &d.facts_to_remove);
            }
            if d.skipped.len() != count("skipped") {
                differ("skipped", &count("skipped"), &d.skipped);
            }
            if d.section_strings.len() != count("sectionStrings") {
                differ("sectionStrings", &count("sectionStrings"), &d.section_strings);
            }
            let want: BTreeSet<&str> = expect
                .get("sectionsToUpdate")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let got: BTreeSet<&str> = SectionId::ALL
                .into_iter()
                .filter(|s| d.section(*s).is_some_and(|u| u.should_update && !u.summary.trim().is_empty()))
                .map(SectionId::key)
                .collect();
            if want != got {
                differ("sectionsToUpdate", &want, &got);
            }
            for f in &d.new_facts {
                assert!(f.confidence.is_finite() && (0.0..=1.0).contains(&f.confidence), "{name}: {f:?}");
                assert!(!f.content.trim().is_empty() && !f.category.is_empty(), "{name}: {f:?}");
            }
            if d.facts_to_reinforce.len() != count("factsToReinforce") {
                differ("factsToReinforce", &count("factsToReinforce"), &d.facts_to_reinforce);
            }
            let opt_list = |key: &str| expect.get(key).and_then(Value::as_array).cloned();
            if let Some(want) = opt_list("replacements") {
                let got: Vec<Value> = d.facts_to_remove.iter().map(|r| r.replacement.map_or(Value::Null, Value::from)).collect();
                if got != want {
                    differ("replacements", &want, &got);
                }
            }
            if let Some(want) = opt_list("labelled") {
                let s = |v: &Option<String>| v.as_deref().map_or(Value::Null, Value::from);
                let got: Vec<Value> = d
                    .new_facts
                    .iter()
                    .map(|f| Value::Array(vec![s(&f.labels.scope), s(&f.labels.durability), s(&f.labels.authority)]))
                    .collect();
                if got != want {
                    differ("labels", &want, &got);
                }
            }
            if let Some(want) = opt_list("validDays") {
                let got: Vec<Value> =
                    d.new_facts.iter().map(|f| f.expected_valid_days.map_or(Value::Null, |x| Value::from(x as u64))).collect();
                if got != want {
                    differ("expected_valid_days", &want, &got);
                }
            }
            if let Some(want) = opt_list("sourceErrors") {
                let got: Vec<Value> = d.new_facts.iter().map(|f| f.source_error.as_deref().map_or(Value::Null, Value::from)).collect();
                if got != want {
                    differ("sourceError", &want, &got);
                }
            }
            let first = d.new_facts.first();
            if let Some(c) = expect.get("firstScope").and_then(Value::as_str) {
                if first.and_then(|f| f.labels.scope.as_deref()) != Some(c) {
                    differ("first scope", &c, &first);
                }
            }
            if let Some(c) = expect.get("firstContent").and_then(Value::as_str) {
                if first.map(|f| f.content.as_str()) != Some(c) {
                    differ("first content", &c, &first);
                }
            }
            if let Some(c) = expect.get("firstCategory").and_then(Value::as_str) {
                if first.map(|f| f.category.as_str()) != Some(c) {
                    differ("first category", &c, &first);
                }
            }
            if let Some(c) = expect.get("firstConfidence").and_then(Value::as_f64) {
                if first.map(|f| f.confidence) != Some(c) {
                    differ("first confidence", &c, &first);
                }
            }
        }
    }
    problems
}

#[test]
fn every_fixture_parses_as_its_manifest_says() {
    let manifest = manifest();
    let problems: Vec<String> = manifest.iter().flat_map(|(name, expect)| check(name, expect)).collect();
    assert!(problems.is_empty(), "{} of {} fixtures differ:\n{}", problems.len(), manifest.len(), problems.join("\n"));
}

#[test]
fn the_corpus_is_large_and_the_manifest_complete() {
    let manifest = manifest();
    let files: BTreeSet<String> = std::fs::read_dir(DIR)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "manifest.json")
        .collect();
    let listed: BTreeSet<String> = manifest.keys().cloned().collect();
    assert_eq!(files, listed, "every reply file needs a manifest entry and vice versa");
    assert!(files.len() >= 60, "only {} fixtures", files.len());
    let failing = manifest.values().filter(|v| v["ok"] == Value::Bool(false)).count();
    assert!(failing >= 15 && manifest.len() - failing >= 40, "keep a mix of good and malformed replies");
}

#[test]
fn parsing_is_deterministic() {
    for name in manifest().keys() {
        let reply = read_reply(name);
        assert_eq!(parse_reply(&reply), parse_reply(&reply), "{name}");
    }
}
