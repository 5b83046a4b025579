//! What the parser makes of model replies, as entries of the reply corpus's manifest
//! (`tests/fixtures/replies/manifest.json`, read by `tests/parse_corpus.rs`). bench/models.mjs
//! runs it on the real replies it saves, so each enters the corpus with the outcome the
//! parser gives it today; a later parser change that gives another fails the corpus test.
//!
//! ```text
//! cargo run -q --example reply_outcome -- tests/fixtures/replies/a.txt …   # one JSON object per line
//! ```

// A tool run natively: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use serde_json::{json, Value};
use user_memory::parse::parse_reply;
use user_memory::SectionId;

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let entry = match parse_reply(&String::from_utf8_lossy(&bytes)) {
            // The message up to the quoted excerpt and any position: what the corpus test
            // looks for.
            Err(e) => {
                json!({ "ok": false, "error": e.message().split("; the reply starts").next().unwrap_or_default().split(" (").next() })
            }
            Ok(d) => {
                let sections: Vec<&str> = SectionId::ALL
                    .into_iter()
                    .filter(|s| d.section(*s).is_some_and(|u| u.should_update && !u.summary.trim().is_empty()))
                    .map(SectionId::key)
                    .collect();
                let mut e = json!({
                    "ok": true,
                    "newFacts": d.new_facts.len(),
                    "factsToRemove": d.facts_to_remove.len(),
                    "sectionsToUpdate": sections,
                    "skipped": d.skipped.len(),
                });
                if !d.facts_to_reinforce.is_empty() {
                    e["factsToReinforce"] = json!(d.facts_to_reinforce.len());
                }
                if !d.section_strings.is_empty() {
                    e["sectionStrings"] = json!(d.section_strings.len());
                }
                let s = |v: &Option<String>| v.as_deref().map_or(Value::Null, Value::from);
                let f = &d.new_facts;
                if f.iter().any(|f| f.labels.scope.is_some() || f.labels.durability.is_some() || f.labels.authority.is_some()) {
                    e["labelled"] =
                        f.iter().map(|f| json!([s(&f.labels.scope), s(&f.labels.durability), s(&f.labels.authority)])).collect();
                }
                if f.iter().any(|f| f.expected_valid_days.is_some()) {
                    e["validDays"] = f.iter().map(|f| f.expected_valid_days.map_or(Value::Null, |x| json!(x as u64))).collect();
                }
                if f.iter().any(|f| f.source_error.is_some()) {
                    e["sourceErrors"] = f.iter().map(|f| s(&f.source_error)).collect();
                }
                if let Some(f) = d.new_facts.first() {
                    e["firstContent"] = json!(f.content);
                    e["firstCategory"] = json!(f.category);
                }
                if d.facts_to_remove.iter().any(|r| r.replacement.is_some()) {
                    e["replacements"] =
                        Value::Array(d.facts_to_remove.iter().map(|r| r.replacement.map_or(Value::Null, |i| json!(i))).collect());
                }
                e
            }
        };
        println!("{entry}");
    }
}
