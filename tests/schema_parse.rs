//! Whatever the delta's JSON schema (`DELTA_SCHEMA`, what structured outputs constrain a
//! model to) allows, the parser reads without skipping anything: generated instances with
//! every key present, empty lists and `null` wherever the schema allows them, as a strict-mode
//! model writes them.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use proptest::prelude::*;
use serde_json::{json, Value};
use user_memory::llm::schema::DELTA_SCHEMA;
use user_memory::parse::parse_reply;

fn schema() -> Value {
    serde_json::from_str(DELTA_SCHEMA).unwrap()
}

fn enum_of(list: &str, field: &str) -> Vec<Value> {
    schema()["properties"][list]["items"]["properties"][field]["enum"].as_array().unwrap().clone()
}

fn pick(values: Vec<Value>) -> impl Strategy<Value = Value> {
    proptest::sample::select(values)
}

fn or_null<S: Strategy<Value = Value> + 'static>(s: S) -> BoxedStrategy<Value> {
    prop_oneof![1 => Just(Value::Null), 2 => s].boxed()
}

fn text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 ,.'éü中文-]{1,40}".prop_filter("not blank", |s| !s.trim().is_empty())
}

fn fact() -> impl Strategy<Value = Value> {
    (text(), pick(enum_of("newFacts", "category")), 0.0f64..=1.0, or_null(text().prop_map(Value::from))).prop_map(
        |(content, category, confidence, source_error)| {
            json!({"content": content, "category": category, "confidence": confidence, "sourceError": source_error})
        },
    )
}

fn delta() -> impl Strategy<Value = Value> {
    let facts = proptest::collection::vec(fact(), 0..4);
    let ids = proptest::collection::vec("fact_[0-9a-f]{8}", 0..3);
    let sections = proptest::collection::vec((pick(enum_of("sections", "section")), text()), 0..4);
    (facts, ids.clone(), ids, sections).prop_map(|(new_facts, remove_ids, reinforce, sections)| {
        let n = new_facts.len();
        let removals: Vec<Value> = remove_ids
            .into_iter()
            .enumerate()
            .map(|(i, id)| json!({"id": id, "replacementFactIndex": if i < n { Value::from(i) } else { Value::Null }}))
            .collect();
        let sections: Vec<Value> = sections.into_iter().map(|(s, summary)| json!({"section": s, "summary": summary})).collect();
        json!({"newFacts": new_facts, "factsToRemove": removals, "factsToReinforce": reinforce, "sections": sections})
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Every schema-valid reply parses, with nothing skipped, and keeps its facts.
    #[test]
    fn every_reply_the_schema_allows_is_read_whole(reply in delta()) {
        let text = reply.to_string();
        let parsed = parse_reply(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert!(parsed.skipped.is_empty(), "skipped {:?} in {text}", parsed.skipped);
        prop_assert_eq!(parsed.new_facts.len(), reply["newFacts"].as_array().map_or(0, Vec::len));
    }
}

#[test]
fn the_empty_reply_and_the_old_all_null_reply_change_nothing() {
    let d = parse_reply(r#"{"newFacts":[],"factsToRemove":[],"factsToReinforce":[],"sections":[]}"#).unwrap();
    assert!(d.is_noop() && d.skipped.is_empty());
    // What the schema before this one allowed (and small models answered every time).
    let d = parse_reply(r#"{"newFacts":null,"factsToRemove":null,"factsToReinforce":null,"user":null,"history":null}"#).unwrap();
    assert!(d.is_noop() && d.skipped.is_empty());
}
