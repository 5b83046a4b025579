//! The memory document: DeerFlow round trip, validation errors, ids, number parsing.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use user_memory::document::{normalize_content, parse_decimal, Document};
use user_memory::ids::{is_canonical_fact_id, RandomIds, SequentialIds};
use user_memory::json::Value;
use user_memory::ToJson;

/// serde_json's `json!`, converted through text into the crate's own [`Value`].
macro_rules! json {
    ($($t:tt)+) => {
        user_memory::json::Value::parse(&serde_json::json!($($t)+).to_string()).expect("valid JSON")
    };
}

/// A DeerFlow `memory.json` as the Python code writes it, with fields this library does
/// not know at every level (top level, `user`, `history`, a section, a fact).
fn deerflow_doc() -> Value {
    json!({
        "version": "1.0",
        "lastUpdated": "2026-03-14T10:30:00.123456Z",
        "revision": 7,
        "owner": {"userId": "u-1", "tags": ["a", "b"]},
        "user": {
            "workContext": {"summary": "Backend engineer at 字节跳动 working on DeerFlow.", "updatedAt": "2026-03-14T10:30:00.123456Z", "sourceThreads": ["t1"]},
            "personalContext": {"summary": "Bilingual (Chinese/English).", "updatedAt": "2026-03-01T08:00:00Z"},
            "topOfMind": {"summary": "", "updatedAt": ""},
            "mood": "curious"
        },
        "history": {
            "recentMonths": {"summary": "Explored LangGraph.", "updatedAt": "2026-03-14T10:30:00Z"},
            "earlierContext": {"summary": "", "updatedAt": ""},
            "longTermBackground": {"summary": "Ten years of Go.", "updatedAt": "2025-12-01T00:00:00Z"},
            "archive": [1, 2, 3]
        },
        "facts": [
            {"id": "fact_3f9a1c2e", "content": "Writes Go microservices", "category": "knowledge", "confidence": 0.9,
             "createdAt": "2026-03-14T10:30:00.123456Z", "source": "thread-42",
             "sourceError": null, "topics": ["go"], "expected_valid_days": 365},
            {"id": "fact_00000001", "content": "偏好简洁的回答", "category": "correction", "confidence": 0.95,
             "createdAt": "2026-03-15T00:00:00Z", "source": "manual"}
        ]
    })
}

#[test]
fn a_deerflow_document_with_unknown_fields_at_every_level_round_trips_unchanged() {
    let input = deerflow_doc();
    let doc = Document::from_value(&input, &RandomIds).unwrap();
    assert_eq!(doc.to_value(), input, "export must equal the imported document");
    // And again through text, as storage does.
    let again = Document::from_json(&doc.to_json(), &RandomIds).unwrap();
    assert_eq!(again, doc);
    // Known fields come first, in DeerFlow's order.
    let keys: Vec<String> = doc.to_value().as_object().unwrap().keys().cloned().collect();
    assert_eq!(&keys[..5], ["version", "lastUpdated", "user", "history", "facts"]);
}

#[test]
fn each_invalid_shape_is_rejected_with_the_field_named() {
    let cases: Vec<(Value, &str)> = vec![
        (json!("memory"), "memory must be a JSON object, found a string"),
        (json!(null), "found null"),
        (json!([]), "found an array"),
        (json!({"history": {}, "facts": []}), "`user` is missing"),
        (json!({"user": {}, "facts": []}), "`history` is missing"),
        (json!({"user": {}, "history": {}}), "`facts` is missing"),
        (json!({"user": "x", "history": {}, "facts": []}), "`user` must be an object"),
        (json!({"user": {}, "history": {}, "facts": {}}), "`facts` must be an array, found an object"),
        (
            json!({"user": {"workContext": {"summary": 5}}, "history": {}, "facts": []}),
            "`user.workContext.summary` must be a string, found a number",
        ),
        (json!({"user": {"topOfMind": "busy"}, "history": {}, "facts": []}), "`user.topOfMind` must be an object"),
        (
            json!({"user": {}, "history": {"recentMonths": {"updatedAt": 1}}, "facts": []}),
            "`history.recentMonths.updatedAt` must be a string",
        ),
        (json!({"user": {}, "history": {}, "facts": ["x"]}), "`facts[0]` must be an object"),
        (json!({"user": {}, "history": {}, "facts": [{"content": "a"}, {"id": "f"}]}), "`facts[1].content` is missing"),
        (json!({"user": {}, "history": {}, "facts": [{"content": 3}]}), "`facts[0].content` must be a string, found a number"),
        (json!({"user": {}, "history": {}, "facts": [{"content": "a", "confidence": "high"}]}), "`facts[0].confidence` is not a number"),
        (json!({"user": {}, "history": {}, "facts": [{"content": "a", "confidence": []}]}), "`facts[0].confidence` must be a number"),
        (json!({"user": {}, "history": {}, "facts": [{"content": "a", "category": 1}]}), "`facts[0].category` must be a string"),
        (
            json!({"user": {}, "history": {}, "facts": [{"id": "f", "content": "a"}, {"id": "f", "content": "b"}]}),
            "`facts[1].id` \"f\" is used twice",
        ),
        (json!({"version": 1, "user": {}, "history": {}, "facts": []}), "`memory.version` must be a string"),
    ];
    for (input, expected) in cases {
        let err = Document::from_value(&input, &RandomIds).unwrap_err();
        assert!(err.contains(expected), "for {input}: got {err:?}, expected it to contain {expected:?}");
    }
    assert!(Document::from_json("{not json", &RandomIds).unwrap_err().starts_with("not valid JSON"));
}

#[test]
fn unknown_numbers_round_trip_exactly_as_written() {
    let text = r#"{"version":"1.0","lastUpdated":"","user":{"workContext":{"summary":"","updatedAt":"","weight":1.10},"personalContext":{"summary":"","updatedAt":""},"topOfMind":{"summary":"","updatedAt":""}},"history":{"recentMonths":{"summary":"","updatedAt":""},"earlierContext":{"summary":"","updatedAt":""},"longTermBackground":{"summary":"","updatedAt":""}},"facts":[{"id":"fact_00000001","content":"a","category":"context","confidence":0.3,"createdAt":"","source":"manual","big":123456789012345678901234567890,"exp":1E+3,"neg":-0.000}],"score":5e-324}"#;
    let doc = Document::from_json(text, &RandomIds).unwrap();
    assert_eq!(doc.to_json(), text);
}

#[test]
fn missing_parts_get_the_documented_defaults() {
    let input = json!({"user": {}, "history": {"earlierContext": null}, "facts": [
        {"content": "Uses Vim"},
        {"content": "Likes tea", "category": "  ", "confidence": "0.8"},
        {"content": "Overconfident", "confidence": 7},
    ]});
    let doc = Document::from_value(&input, &SequentialIds::starting_at(0x10)).unwrap();
    assert_eq!(doc.version, "1.0");
    assert_eq!(doc.last_updated, "");
    assert!(doc.sections.iter().all(|s| s.summary.is_empty() && s.updated_at.is_empty()));
    let f = &doc.facts;
    assert_eq!(
        (f[0].id.as_str(), f[0].category.as_str(), f[0].confidence, f[0].source.as_str()),
        ("fact_00000010", "context", 0.5, "unknown")
    );
    assert_eq!((f[1].category.as_str(), f[1].confidence), ("context", 0.8));
    assert_eq!(f[2].confidence, 1.0, "confidences are clamped to [0, 1]");
}

#[test]
fn ids_are_unique_over_ten_thousand_facts() {
    let mut doc = Document::empty();
    for i in 0..10_000 {
        let id = doc.fresh_id(&RandomIds);
        assert!(is_canonical_fact_id(&id));
        doc.facts.push(user_memory::Fact {
            id,
            content: format!("fact {i}"),
            category: "context".into(),
            confidence: 0.5,
            created_at: String::new(),
            source: "test".into(),
            extra: Default::default(),
        });
    }
    let unique: std::collections::HashSet<_> = doc.facts.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(unique.len(), 10_000);
}

#[test]
fn fresh_ids_skip_ids_already_taken() {
    // The sequence would hand out fact_00000001 first; it is taken, so the next is used.
    let input = json!({"user": {}, "history": {}, "facts": [{"id": "fact_00000001", "content": "a"}, {"content": "b"}]});
    let doc = Document::from_value(&input, &SequentialIds::starting_at(1)).unwrap();
    assert_eq!(doc.facts[1].id, "fact_00000002");
}

#[test]
fn content_normalisation_ignores_case_and_whitespace() {
    assert_eq!(normalize_content("  Writes\tGo   MICROservices \n"), "writes go microservices");
    assert_eq!(normalize_content("喜欢 Rust"), "喜欢 rust");
}

#[test]
fn decimal_strings_parse_like_numbers() {
    for (s, v) in [("0.9", 0.9), (" 1 ", 1.0), (".75", 0.75), ("-2.5", -2.5), ("1e-1", 0.1), ("3.", 3.0), ("+4", 4.0)] {
        let got = parse_decimal(s).unwrap();
        assert!((got - v).abs() < 1e-12, "{s} → {got}");
    }
    for s in ["", "abc", "0.9x", ".", "1e", "NaN", "inf", "--1", "1.2.3"] {
        assert_eq!(parse_decimal(s), None, "{s:?}");
    }
}

#[test]
fn happened_at_is_an_extra_fact_field_read_only_when_it_is_a_date() {
    let input = json!({
        "version": "1.0", "lastUpdated": "", "user": {}, "history": {},
        "facts": [
            {"id": "fact_00000001", "content": "Went to a support group", "category": "context", "confidence": 0.9,
             "createdAt": "2023-05-08T13:56:00Z", "source": "t1", "happenedAt": "2023-05-07", "topics": ["lgbtq"]},
            {"id": "fact_00000002", "content": "Moved to Berlin", "category": "context", "confidence": 0.9,
             "createdAt": "2023-05-08T13:56:00Z", "source": "t1", "happenedAt": "the day before"},
            {"id": "fact_00000003", "content": "Born in Lyon", "category": "context", "confidence": 0.9,
             "createdAt": "2023-05-08T13:56:00Z", "source": "t1", "happenedAt": 1965}
        ]
    });
    let doc = Document::from_value(&input, &RandomIds).unwrap();
    let got: Vec<Option<&str>> = doc.facts.iter().map(|f| f.happened_at()).collect();
    assert_eq!(got, vec![Some("2023-05-07"), None, None], "a malformed value counts as absent");
    assert_eq!(doc.facts[0].happened_days(), Some(19_484));
    assert_eq!(doc.to_value().get("facts"), input.get("facts"), "and every value, malformed or not, is written back as it was");
}
