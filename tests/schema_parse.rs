//! Whatever the delta's JSON schema (`DELTA_SCHEMA`, what structured outputs constrain a
//! model to) allows, the parser reads without skipping anything: generated instances with
//! every key present and `null` wherever the schema allows it, as a strict-mode model writes
//! them.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use proptest::prelude::*;
use serde_json::{json, Value};
use user_memory::llm::schema::DELTA_SCHEMA;
use user_memory::parse::parse_reply;

fn schema() -> Value {
    serde_json::from_str(DELTA_SCHEMA).unwrap()
}

/// The allowed values of an enum in the schema's `$defs` (or `None` for `null`).
fn enum_of(def: &str) -> Vec<Value> {
    schema()["$defs"][def]["enum"].as_array().unwrap().clone()
}

fn categories() -> Vec<Value> {
    schema()["properties"]["newFacts"]["anyOf"][0]["items"]["properties"]["category"]["enum"].as_array().unwrap().clone()
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

fn labels() -> impl Strategy<Value = (Value, Value, Value)> {
    (pick(enum_of("scope")), pick(enum_of("durability")), pick(enum_of("authority")))
}

fn fact() -> impl Strategy<Value = Value> {
    (text(), pick(categories()), 0.0f64..=1.0, labels(), or_null((1i64..3650).prop_map(Value::from)), or_null(text().prop_map(Value::from)))
        .prop_map(|(content, category, confidence, (scope, durability, authority), days, source_error)| {
            json!({"content": content, "category": category, "confidence": confidence, "scope": scope,
                   "durability": durability, "authority": authority, "expected_valid_days": days, "sourceError": source_error})
        })
}

fn section() -> BoxedStrategy<Value> {
    or_null((text(), any::<bool>(), labels()).prop_map(|(summary, should_update, (scope, durability, authority))| {
        json!({"summary": summary, "shouldUpdate": should_update, "scope": scope, "durability": durability, "authority": authority})
    }))
}

fn delta() -> impl Strategy<Value = Value> {
    let facts = or_null(proptest::collection::vec(fact(), 0..4).prop_map(Value::from));
    let user =
        or_null((section(), section(), section()).prop_map(|(w, p, t)| json!({"workContext": w, "personalContext": p, "topOfMind": t})));
    let history = or_null(
        (section(), section(), section()).prop_map(|(r, e, l)| json!({"recentMonths": r, "earlierContext": e, "longTermBackground": l})),
    );
    let ids = proptest::collection::vec("fact_[0-9a-f]{8}", 0..3);
    (facts, ids.clone(), any::<bool>(), or_null(ids.prop_map(Value::from)), user, history, pick(enum_of("scope")), text()).prop_map(
        |(new_facts, remove_ids, as_objects, reinforce, user, history, scope, reason)| {
            let n = new_facts.as_array().map_or(0, Vec::len);
            let removals: Vec<Value> = remove_ids
                .into_iter()
                .enumerate()
                .map(|(i, id)| {
                    if as_objects {
                        let replacement = if i < n { Value::from(i) } else { Value::Null };
                        json!({"id": id, "reason": reason, "scope": scope, "replacementFactIndex": replacement})
                    } else {
                        Value::from(id)
                    }
                })
                .collect();
            let removals = if removals.is_empty() && !as_objects { Value::Null } else { Value::from(removals) };
            json!({"newFacts": new_facts, "factsToRemove": removals, "factsToReinforce": reinforce, "user": user, "history": history})
        },
    )
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
fn the_all_null_reply_is_a_delta_that_changes_nothing() {
    let d = parse_reply(r#"{"newFacts":null,"factsToRemove":null,"factsToReinforce":null,"user":null,"history":null}"#).unwrap();
    assert!(d.is_noop() && d.skipped.is_empty());
}
