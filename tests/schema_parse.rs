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

/// A date or date-time as the prompt asks for it (any other string the schema lets through
/// drops only the date: `a_happened_at_the_parser_cannot_read_drops_only_the_date`).
fn event_time() -> impl Strategy<Value = Value> {
    (1900u32..2100, 1u32..=12, 1u32..=28, 0u32..24, 0u32..60, 0u8..3).prop_map(|(y, m, d, h, mi, form)| {
        Value::from(match form {
            0 => format!("{y}-{m:02}-{d:02}"),
            1 => format!("{y}-{m:02}-{d:02}T{h:02}:{mi:02}:00Z"),
            _ => format!("{y}-{m:02}-{d:02}T{h:02}:{mi:02}:00.000+02:00"),
        })
    })
}

fn fact() -> impl Strategy<Value = Value> {
    (text(), pick(enum_of("newFacts", "category")), 0.0f64..=1.0, or_null(text().prop_map(Value::from)), or_null(event_time())).prop_map(
        |(content, category, confidence, source_error, happened_at)| {
            json!({"content": content, "category": category, "confidence": confidence, "sourceError": source_error, "happenedAt": happened_at})
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
        for (got, sent) in parsed.new_facts.iter().zip(reply["newFacts"].as_array().into_iter().flatten()) {
            prop_assert_eq!(got.happened_at.as_deref(), sent["happenedAt"].as_str(), "the event time is kept as written");
        }
    }
}

#[test]
fn a_happened_at_the_parser_cannot_read_drops_only_the_date() {
    for (bad, why) in [
        (json!("yesterday"), "is not an ISO date"),
        (json!("2023-02-30"), "is not an ISO date"),
        (json!("07/05/2023"), "is not an ISO date"),
        (json!(20230507), "must be an ISO date string, found a number"),
    ] {
        let reply = json!({"newFacts": [
            {"content": "Went to a support group", "category": "context", "confidence": 0.9, "sourceError": null, "happenedAt": bad},
            {"content": "Painted a sunrise", "category": "context", "confidence": 0.9, "sourceError": null, "happenedAt": "2023-05-07"}
        ], "factsToRemove": [], "factsToReinforce": [], "sections": []});
        let d = parse_reply(&reply.to_string()).unwrap();
        assert_eq!(d.new_facts.len(), 2, "the fact stays: {bad}");
        assert_eq!((d.new_facts[0].happened_at.as_deref(), d.new_facts[1].happened_at.as_deref()), (None, Some("2023-05-07")));
        assert_eq!(d.skipped.len(), 1, "{:?}", d.skipped);
        assert_eq!((d.skipped[0].path.as_str(), d.skipped[0].reason.as_str()), ("newFacts[0].happenedAt", "invalid"));
        assert!(d.skipped[0].detail.contains(why), "{}", d.skipped[0].detail);
    }
    // Blank and null are "not given", not an error.
    let d = parse_reply(r#"{"newFacts": [{"content": "x", "happenedAt": " "}, {"content": "y", "happenedAt": null}]}"#).unwrap();
    assert!(d.skipped.is_empty() && d.new_facts.iter().all(|f| f.happened_at.is_none()));
}

#[test]
fn the_empty_reply_and_the_old_all_null_reply_change_nothing() {
    let d = parse_reply(r#"{"newFacts":[],"factsToRemove":[],"factsToReinforce":[],"sections":[]}"#).unwrap();
    assert!(d.is_noop() && d.skipped.is_empty());
    // What the schema before this one allowed (and small models answered every time).
    let d = parse_reply(r#"{"newFacts":null,"factsToRemove":null,"factsToReinforce":null,"user":null,"history":null}"#).unwrap();
    assert!(d.is_noop() && d.skipped.is_empty());
}
