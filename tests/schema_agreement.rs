//! The lean delta, the JSON schema that `jsonMode: "schema"` sends (`DELTA_SCHEMA`), the
//! parser and apply agree:
//!
//! - every delta a model can mean is a valid instance of the schema when written out in
//!   strict mode's way (every key present, empty lists, `null` for a field not given), and the parser
//!   reads that instance as exactly the same delta as the lean reply that leaves those keys
//!   out (property-tested, with a validator for the schema's JSON Schema subset);
//! - the prompt's examples are lean replies the parser accepts, and their strict versions
//!   are schema-valid;
//! - an id a model copies from the prompt's example (not in the memory) is ignored and
//!   reported, while the rest of the delta applies.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use user_memory::apply::{apply_delta, ApplyConfig, ApplyContext};
use user_memory::delta::reasons;
use user_memory::ids::SequentialIds;
use user_memory::llm::schema::DELTA_SCHEMA;
use user_memory::parse::{parse_reply, KNOWN_CATEGORIES};
use user_memory::prompt::OUTPUT_FORMAT;
use user_memory::{Document, Fact, SectionId};

fn schema() -> Value {
    serde_json::from_str(DELTA_SCHEMA).unwrap()
}

/// Checks `v` against the schema node `s` (the subset DELTA_SCHEMA uses: `$ref` into
/// `$defs`, `anyOf`, `type` (one or a list), `enum`, `properties` + `required` +
/// `additionalProperties: false`, `items`). `Err` says where and why.
fn validate(root: &Value, s: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").ok_or_else(|| format!("{at}: unsupported $ref {r}"))?;
        return validate(root, &root["$defs"][name], v, at);
    }
    if let Some(branches) = s.get("anyOf").and_then(Value::as_array) {
        return if branches.iter().any(|b| validate(root, b, v, at).is_ok()) {
            Ok(())
        } else {
            Err(format!("{at}: no anyOf branch fits {v}"))
        };
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: bad type")),
        };
        let fits = |t: &str| match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        };
        if !types.iter().any(|t| fits(t)) {
            return Err(format!("{at}: {v} is not of type {t}"));
        }
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array) {
        if !allowed.contains(v) {
            return Err(format!("{at}: {v} is not one of {allowed:?}"));
        }
    }
    if let (Some(props), Some(obj)) = (s.get("properties").and_then(Value::as_object), v.as_object()) {
        for name in s["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            if !obj.contains_key(name) {
                return Err(format!("{at}: required `{name}` is missing"));
            }
        }
        for (k, x) in obj {
            match props.get(k) {
                Some(p) => validate(root, p, x, &format!("{at}.{k}"))?,
                None if s["additionalProperties"] == Value::Bool(false) => return Err(format!("{at}: `{k}` is not allowed")),
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(root, items, x, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// What a model means to say, before it is written as JSON.
#[derive(Debug, Clone)]
struct Meaning {
    /// `userSaid`: statements of the user, each kept whole by the parser.
    said: Vec<String>,
    sections: Vec<Option<String>>,
    facts: Vec<FactMeaning>,
    removals: Vec<(String, Option<u64>)>,
    reinforce: Vec<String>,
}

#[derive(Debug, Clone)]
struct FactMeaning {
    content: String,
    category: &'static str,
    confidence: f64,
    source_error: Option<String>,
    happened_at: Option<String>,
}

/// An event time in the forms the prompt asks for: a date or a UTC date-time.
fn event_time() -> impl Strategy<Value = String> {
    (1950u32..2040, 1u32..=12, 1u32..=28, proptest::option::of((0u32..24, 0u32..60))).prop_map(|(y, m, d, t)| match t {
        None => format!("{y}-{m:02}-{d:02}"),
        Some((h, mi)) => format!("{y}-{m:02}-{d:02}T{h:02}:{mi:02}:00Z"),
    })
}

fn text() -> impl Strategy<Value = String> {
    "[A-Za-z一-龥 ]{1,24}".prop_filter("not blank", |s| !s.trim().is_empty()).prop_map(|s| s.trim().to_string())
}

fn meaning() -> impl Strategy<Value = Meaning> {
    let fact = (
        text(),
        prop::sample::select(KNOWN_CATEGORIES.to_vec()),
        0u32..=100,
        proptest::option::of(text()),
        proptest::option::of(event_time()),
    )
        .prop_map(|(content, category, c, source_error, happened_at)| FactMeaning {
            content,
            category,
            confidence: f64::from(c) / 100.0,
            source_error,
            happened_at,
        });
    let said = prop::sample::select(vec!["I teach maths", "我在杭州工作", "My dog is called Biscuit", "We use Kafka"]);
    (
        prop::collection::vec(said.prop_map(String::from), 0..3),
        prop::collection::vec(proptest::option::of(text()), 6),
        prop::collection::vec(fact, 0..4),
        prop::collection::vec(("fact_[0-9a-f]{8}", proptest::option::of(0u64..4)), 0..3),
        prop::collection::vec("fact_[0-9a-f]{8}", 0..3),
    )
        .prop_map(|(said, sections, facts, removals, reinforce)| Meaning { said, sections, facts, removals, reinforce })
}

/// The meaning written as a reply: `strict` as OpenAI's strict mode demands (every key,
/// empty lists, `null` for a field not given), otherwise lean (only what is given).
fn write(m: &Meaning, strict: bool) -> Value {
    let mut top = Map::new();
    let opt = |v: Option<Value>| v.unwrap_or(Value::Null);
    let facts: Vec<Value> = m
        .facts
        .iter()
        .map(|f| {
            let mut o = Map::new();
            o.insert("content".into(), json!(f.content));
            o.insert("category".into(), json!(f.category));
            o.insert("confidence".into(), json!(f.confidence));
            if strict || f.source_error.is_some() {
                o.insert("sourceError".into(), opt(f.source_error.as_ref().map(|e| json!(e))));
            }
            if strict || f.happened_at.is_some() {
                o.insert("happenedAt".into(), opt(f.happened_at.as_ref().map(|e| json!(e))));
            }
            Value::Object(o)
        })
        .collect();
    let removals: Vec<Value> = m
        .removals
        .iter()
        .map(|(id, replacement)| {
            let mut o = Map::new();
            o.insert("id".into(), json!(id));
            if strict || replacement.is_some() {
                o.insert("replacementFactIndex".into(), opt(replacement.map(|r| json!(r))));
            }
            Value::Object(o)
        })
        .collect();
    let sections: Vec<Value> = SectionId::ALL
        .into_iter()
        .filter_map(|id| m.sections[id.index()].as_ref().map(|summary| json!({"section": id.key(), "summary": summary})))
        .collect();
    for (key, list) in [
        ("userSaid", m.said.iter().map(|s| json!(s)).collect()),
        ("newFacts", facts),
        ("factsToRemove", removals),
        ("factsToReinforce", m.reinforce.iter().map(|r| json!(r)).collect()),
        ("sections", sections),
    ] {
        if strict || !list.is_empty() {
            top.insert(key.into(), Value::Array(list));
        }
    }
    Value::Object(top)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The schema admits every delta in its strict form, and the parser reads the strict
    /// form and the lean form (keys left out) as the same delta.
    #[test]
    fn strict_and_lean_replies_of_one_meaning_are_one_delta(m in meaning()) {
        let strict = write(&m, true);
        let lean = write(&m, false);
        let root = schema();
        prop_assert_eq!(validate(&root, &root, &strict, "$"), Ok(()), "{}", strict);
        let from_strict = parse_reply(&strict.to_string()).unwrap();
        let from_lean = parse_reply(&lean.to_string()).map_err(|e| e.to_string());
        prop_assert_eq!(Ok(from_strict.clone()), from_lean, "lean: {}", lean);
        prop_assert!(from_strict.skipped.is_empty(), "{:?}", from_strict.skipped);
        prop_assert_eq!(from_strict.new_facts.len(), m.facts.len());
        let said: Vec<&str> = from_strict.section_strings.iter().map(|s| s.text.as_str()).collect();
        prop_assert_eq!(said, m.said.iter().map(String::as_str).collect::<Vec<_>>());
        for (got, want) in from_strict.new_facts.iter().zip(&m.facts) {
            prop_assert_eq!(&got.happened_at, &want.happened_at);
        }
        for id in SectionId::ALL {
            prop_assert_eq!(from_strict.section(id).map(|s| s.summary.clone()), m.sections[id.index()].clone());
        }
    }
}

#[test]
fn nothing_to_change_is_valid_in_both_forms() {
    let root = schema();
    let nothing = Meaning { said: vec![], sections: vec![None; 6], facts: vec![], removals: vec![], reinforce: vec![] };
    let strict = write(&nothing, true);
    assert_eq!(strict, json!({"userSaid": [], "newFacts": [], "factsToRemove": [], "factsToReinforce": [], "sections": []}));
    assert_eq!(validate(&root, &root, &strict, "$"), Ok(()));
    assert!(parse_reply(&strict.to_string()).unwrap().is_noop());
    assert_eq!(write(&nothing, false), json!({}));
    assert!(parse_reply("{}").unwrap().is_noop());
    // The validator itself refuses what strict mode refuses, and the schema refuses the
    // all-null "nothing about everything" a small model took as the shortest path.
    for bad in [
        json!({}),
        json!({"newFacts": [], "factsToRemove": [], "factsToReinforce": [], "sections": []}),
        json!({"userSaid": null, "newFacts": null, "factsToRemove": null, "factsToReinforce": null, "sections": null}),
        json!({"userSaid": [], "newFacts": [{"content": "x"}], "factsToRemove": [], "factsToReinforce": [], "sections": []}),
        json!({"userSaid": [], "newFacts": [], "factsToRemove": [], "factsToReinforce": [], "sections": [{"section": "mood", "summary": "x"}]}),
    ] {
        assert!(validate(&root, &root, &bad, "$").is_err(), "{bad}");
    }
}

/// The prompt's example replies (`User: … -> {…}`).
fn example_replies() -> Vec<String> {
    OUTPUT_FORMAT.lines().filter_map(|l| l.split_once(" -> ")).map(|(_, r)| r.to_string()).collect()
}

#[test]
fn the_prompt_examples_are_lean_and_their_strict_forms_fit_the_schema() {
    let root = schema();
    let replies = example_replies();
    assert_eq!(replies.len(), 4);
    for reply in &replies {
        let lean: Value = serde_json::from_str(reply).unwrap();
        let delta = parse_reply(reply).unwrap();
        let meaning = Meaning {
            said: delta.section_strings.iter().map(|s| s.text.clone()).collect(),
            sections: vec![None; 6],
            facts: delta
                .new_facts
                .iter()
                .map(|f| FactMeaning {
                    content: f.content.clone(),
                    category: KNOWN_CATEGORIES.iter().find(|c| **c == f.category).copied().unwrap(),
                    confidence: f.confidence,
                    source_error: f.source_error.clone(),
                    happened_at: f.happened_at.clone(),
                })
                .collect(),
            removals: delta.facts_to_remove.iter().map(|r| (r.id.clone(), r.replacement.map(|i| i as u64))).collect(),
            reinforce: vec![],
        };
        // "Nothing" is written `{"userSaid":[],"newFacts":[]}` (both lists, even when empty).
        let written = write(&meaning, false);
        if delta.is_noop() {
            assert_eq!(lean, json!({"userSaid": [], "newFacts": []}));
        } else {
            assert_eq!(written, lean, "the example is written lean");
        }
        let strict = write(&meaning, true);
        assert_eq!(validate(&root, &root, &strict, "$"), Ok(()));
        assert_eq!(parse_reply(&strict.to_string()).unwrap(), delta);
    }
}

#[test]
fn an_example_id_copied_into_a_real_reply_is_ignored_and_reported() {
    // A small model copies the correction example whole; the memory has no `fact_k3`.
    let reply = &example_replies()[2];
    let delta = parse_reply(reply).unwrap();
    let mut doc = Document::empty();
    doc.facts.push(Fact {
        id: "fact_00000001".into(),
        content: "Lives in Lyon".into(),
        category: "context".into(),
        confidence: 0.9,
        created_at: "2026-01-01T00:00:00Z".into(),
        source: "t0".into(),
        extra: Default::default(),
    });
    let ids = SequentialIds::starting_at(0x2000_0000);
    let cfg = ApplyConfig { threshold: 0.7, max_facts: 100, policy: Default::default() };
    let report = apply_delta(
        &mut doc,
        &delta,
        &cfg,
        &ApplyContext { now_iso: "2026-03-14T10:30:00.000Z", source: "t", ids: &ids, conversation: None, forgotten: &[], shown: None },
    );
    assert_eq!(doc.facts[0].id, "fact_00000001", "the real fact stays");
    assert_eq!(doc.facts.len(), 2, "the replacement fact applies");
    let unknown: Vec<_> = report.skipped.iter().filter(|s| s.reason == reasons::UNKNOWN_FACT).collect();
    assert_eq!(unknown.len(), 1, "{:?}", report.skipped);
    assert_eq!((unknown[0].path.as_str(), unknown[0].fact.as_deref()), ("factsToRemove[0]", Some("fact_k3")));
    assert!(report.removed.is_empty());
}
