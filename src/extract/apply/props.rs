//! Property tests of the pure pipeline: the parser never panics on anything and round-trips
//! well-formed deltas wrapped in model noise; applying a delta keeps the document's
//! invariants and is deterministic.

use super::{apply_delta, ApplyConfig, ApplyContext, ApplyReport, EvictionPolicy};
use crate::base::ids::SequentialIds;
use crate::extract::delta::{Delta, NewFact, Removal, SectionUpdate};
use crate::extract::parse::parse_reply;
use crate::extract::scrub::mentions_upload;
use crate::memory::document::normalize_content;
use crate::{Document, Fact};
use proptest::prelude::*;
use std::collections::HashSet;

/// Pieces that steer random text into the parser's deeper paths: candidate objects, the
/// delta keys, repairs, reasoning tags and fences.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    "\\",
    ",",
    ":",
    " ",
    "\n",
    "\r\n",
    "\t",
    "'",
    "\"newFacts\"",
    "\"user\"",
    "\"history\"",
    "\"factsToRemove\"",
    "\"workContext\"",
    "\"topOfMind\"",
    "\"recentMonths\"",
    "\"summary\"",
    "\"shouldUpdate\"",
    "\"content\"",
    "\"confidence\"",
    "\"category\"",
    "\"fact_0000abcd\"",
    "NaN",
    "Infinity",
    "-Infinity",
    "-NaN",
    "true",
    "false",
    "\"true\"",
    "null",
    "0.9",
    "\"0.9\"",
    "1e999",
    "-0",
    "12345678901234567890",
    "\"Likes Go\"",
    "\"中文内容\"",
    "<think>",
    "</think>",
    "<thinking>",
    "```json",
    "```",
    "//",
    "/*",
    "*/",
    "\u{feff}",
    "é",
    "😀",
    "Here is the JSON:",
    "[]",
    "{}",
    "\"\\u0000\"",
    "\"\\ud800\"",
];

fn fragment_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..120).prop_map(|v| v.concat())
}

/// Keys that make random JSON trees look like (broken) deltas.
const KEYS: &[&str] = &[
    "user",
    "history",
    "newFacts",
    "factsToRemove",
    "workContext",
    "personalContext",
    "topOfMind",
    "recentMonths",
    "earlierContext",
    "longTermBackground",
    "summary",
    "shouldUpdate",
    "content",
    "category",
    "confidence",
    "result",
    "id",
    "x",
];

/// Random JSON trees over delta keys, with leaves of every type, printed as JSON, then
/// roughened: marker strings become bare `NaN` / `-Infinity`, some arrays get trailing
/// commas. These reach the delta reader with every kind of wrong type.
fn delta_like_json() -> impl Strategy<Value = String> {
    use serde_json::Value;
    let leaf = prop::sample::select(vec![
        Value::Null,
        serde_json::json!(true),
        serde_json::json!(false),
        serde_json::json!(0.9),
        serde_json::json!(0.3),
        serde_json::json!(1.5),
        serde_json::json!(-1),
        serde_json::json!(1e300),
        serde_json::json!(""),
        serde_json::json!("  "),
        serde_json::json!("Likes Go"),
        serde_json::json!("true"),
        serde_json::json!("FALSE"),
        serde_json::json!("0.8"),
        serde_json::json!("high"),
        serde_json::json!("fact_0000abcd"),
        serde_json::json!("__NAN__"),
        serde_json::json!("__INF__"),
        serde_json::json!("中文"),
    ]);
    let tree = leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    });
    let top = prop::collection::vec((prop::sample::select(&KEYS[..4]), tree), 1..4)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    (top, any::<bool>()).prop_map(|(v, commas)| {
        let text = v.to_string().replace("\"__NAN__\"", "NaN").replace("\"__INF__\"", "-Infinity");
        if commas {
            text.replace(']', ",]")
        } else {
            text
        }
    })
}

/// Whatever the parser returns, a delta it accepts is clean.
fn assert_clean(d: &Delta) {
    for f in &d.new_facts {
        assert!(f.confidence.is_finite() && (0.0..=1.0).contains(&f.confidence), "{f:?}");
        assert!(!f.content.trim().is_empty(), "{f:?}");
        assert!(!f.category.trim().is_empty(), "{f:?}");
    }
    for r in &d.facts_to_remove {
        assert!(!r.id.trim().is_empty());
    }
}

fn fact_strategy() -> impl Strategy<Value = (String, String, f64)> {
    (
        "[A-Za-z][A-Za-z0-9 ,'-]{0,40}|[一-龥]{1,12}",
        prop::sample::select(&["preference", "knowledge", "context", "behavior", "goal", "correction"][..]).prop_map(str::to_string),
        (0u32..=100).prop_map(|c| f64::from(c) / 100.0),
    )
}

const WRAPPERS: &[(&str, &str)] = &[
    ("", ""),
    ("```json\n", "\n```"),
    ("Here is the update:\n\n```json\n", "\n```\nLet me know {if} you need more."),
    ("<think>\nDraft {\"newFacts\": [{\"content\": \"draft\"}]} hmm {\n</think>\n", ""),
    ("Example: {\"name\": \"x\"}\n", "\n\nNote: done."),
    ("\u{feff}", "\r\n"),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics_on_arbitrary_text(s in any::<String>()) {
        if let Ok(d) = parse_reply(&s) { assert_clean(&d) }
    }

    #[test]
    fn parser_never_panics_on_arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(d) = parse_reply(&String::from_utf8_lossy(&b)) { assert_clean(&d) }
    }

    #[test]
    fn parser_never_panics_on_json_like_soup(s in fragment_soup()) {
        if let Ok(d) = parse_reply(&s) { assert_clean(&d) }
    }

    #[test]
    fn parser_reads_delta_like_trees_without_panicking(s in delta_like_json(), wrapper in prop::sample::select(WRAPPERS)) {
        if let Ok(d) = parse_reply(&format!("{}{}{}", wrapper.0, s, wrapper.1)) { assert_clean(&d) }
    }

    #[test]
    fn parser_never_panics_on_mutated_deltas(
        facts in prop::collection::vec(fact_strategy(), 0..6),
        cut in any::<prop::sample::Index>(),
        insert in prop::sample::select(FRAGMENTS),
    ) {
        let v = serde_json::json!({
            "newFacts": facts.iter().map(|(c, k, x)| serde_json::json!({"content": c, "category": k, "confidence": x})).collect::<Vec<_>>(),
            "factsToRemove": ["fact_0000abcd"],
        });
        let text = v.to_string();
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) { at -= 1; }
        let mutated = format!("{}{}{}", &text[..at], insert, &text[at..]);
        if let Ok(d) = parse_reply(&mutated) { assert_clean(&d) }
        if let Ok(d) = parse_reply(&text[..at]) { assert_clean(&d) }
    }

    #[test]
    fn wrapped_well_formed_deltas_round_trip(
        facts in prop::collection::vec(fact_strategy(), 0..8),
        remove in prop::collection::vec("fact_[0-9a-f]{8}", 0..4),
        wrapper in prop::sample::select(WRAPPERS),
        pretty in any::<bool>(),
    ) {
        let v = serde_json::json!({
            "user": {"topOfMind": {"summary": "Focus", "shouldUpdate": true}},
            "newFacts": facts.iter().map(|(c, k, x)| serde_json::json!({"content": c, "category": k, "confidence": x})).collect::<Vec<_>>(),
            "factsToRemove": remove,
        });
        let body = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
        let d = parse_reply(&format!("{}{}{}", wrapper.0, body, wrapper.1)).unwrap();
        let got: Vec<(String, String, f64)> = d.new_facts.iter().map(|f| (f.content.clone(), f.category.clone(), f.confidence)).collect();
        let want: Vec<(String, String, f64)> = facts.iter().map(|(c, k, x)| (c.trim().to_string(), k.clone(), *x)).filter(|f| !f.0.is_empty()).collect();
        prop_assert_eq!(got, want);
        let unique: Vec<String> = remove.iter().fold(Vec::new(), |mut acc, id| { if !acc.contains(id) { acc.push(id.clone()) } acc });
        let removed: Vec<String> = d.facts_to_remove.iter().map(|r| r.id.clone()).collect();
        prop_assert_eq!(&removed, &unique);
        prop_assert!(d.skipped.is_empty());
    }
}

// ------------------------------------------------------------------------------- apply

const WORDS: &[&str] = &["Go", "Rust", "likes tea", "LIKES  tea", "lives in Oslo", "uploaded a PDF file", "CSV files"];
const TIMES: &[&str] = &["", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00.000Z", "2026-02-01T00:00:00.000000Z", "garbage"];

fn doc_strategy() -> impl Strategy<Value = Document> {
    prop::collection::vec((prop::sample::select(WORDS), 0u32..=10, prop::sample::select(TIMES)), 0..15).prop_map(|facts| {
        let mut doc = Document::empty();
        for (i, (content, c, t)) in facts.into_iter().enumerate() {
            doc.facts.push(Fact {
                id: format!("fact_{:08x}", i * 7),
                content: format!("{content} {}", i % 3),
                category: "context".into(),
                confidence: f64::from(c) / 10.0,
                created_at: t.to_string(),
                source: "old".into(),
                extra: Default::default(),
            });
        }
        doc
    })
}

fn delta_strategy() -> impl Strategy<Value = Delta> {
    let confidence = prop_oneof![
        8 => (0u32..=10).prop_map(|c| f64::from(c) / 10.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(1.5),
        1 => Just(-0.5),
    ];
    let new_fact = (prop::sample::select(WORDS), 0u32..3, confidence).prop_map(|(w, n, confidence)| NewFact {
        content: format!(" {w} {n} "),
        category: "goal".into(),
        confidence,
        ..NewFact::default()
    });
    (
        prop::collection::vec(new_fact, 0..12),
        prop::collection::vec(
            ((0usize..20).prop_map(|i| format!("fact_{:08x}", i * 7)), prop::option::of(0usize..14))
                .prop_map(|(id, replacement)| Removal { id, replacement, ..Removal::default() }),
            0..6,
        ),
        prop::collection::vec(prop::option::of(("[a-z ]{0,12}", any::<bool>())), 6),
    )
        .prop_map(|(new_facts, facts_to_remove, sections)| {
            let mut d = Delta { new_facts, facts_to_remove, ..Delta::default() };
            for (i, s) in sections.into_iter().enumerate() {
                d.sections[i] = s.map(|(summary, should_update)| SectionUpdate { summary, should_update, labels: Default::default() });
            }
            d
        })
}

fn run(doc: &Document, delta: &Delta, cfg: &ApplyConfig) -> (Document, ApplyReport) {
    let mut doc = doc.clone();
    // New ids never collide with the ids the delta strategy removes (< 0x100).
    let ids = SequentialIds::starting_at(0x1000_0000);
    let report = apply_delta(
        &mut doc,
        delta,
        cfg,
        &ApplyContext { now_iso: "2026-03-14T10:30:00.000Z", source: "t", ids: &ids, conversation: None, forgotten: &[], shown: None },
    );
    (doc, report)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn apply_keeps_the_invariants(
        doc in doc_strategy(),
        delta in delta_strategy(),
        max_facts in 0usize..20,
        threshold in (0u32..=10).prop_map(|t| f64::from(t) / 10.0),
    ) {
        let cfg = ApplyConfig { threshold, max_facts, policy: Default::default() };
        let (after, report) = run(&doc, &delta, &cfg);

        let ids: HashSet<&str> = after.facts.iter().map(|f| f.id.as_str()).collect();
        prop_assert_eq!(ids.len(), after.facts.len(), "ids are unique");
        prop_assert!(after.facts.len() <= max_facts);
        for f in &after.facts {
            prop_assert!(f.confidence.is_finite() && (0.0..=1.0).contains(&f.confidence));
            prop_assert!(!mentions_upload(&f.content), "upload facts are scrubbed: {}", f.content);
            prop_assert_eq!(f.content.trim(), f.content.as_str());
        }
        // New facts never duplicate another fact.
        let mut seen = HashSet::new();
        for f in after.facts.iter().filter(|f| f.source == "t") {
            prop_assert!(seen.insert(normalize_content(&f.content)));
        }
        let old_keys: HashSet<String> = after.facts.iter().filter(|f| f.source == "old").map(|f| normalize_content(&f.content)).collect();
        prop_assert!(seen.is_disjoint(&old_keys));
        // Survivors keep their relative order.
        let before: Vec<&str> = doc.facts.iter().map(|f| f.id.as_str()).collect();
        let kept: Vec<&str> = after.facts.iter().filter(|f| f.source == "old").map(|f| f.id.as_str()).collect();
        let positions: Vec<usize> = kept.iter().map(|id| before.iter().position(|b| b == id).unwrap()).collect();
        prop_assert!(positions.windows(2).all(|w| w[0] < w[1]));
        // The report matches the change.
        for id in &report.added { prop_assert!(ids.contains(id.as_str()) && !before.contains(&id.as_str())); }
        for id in &report.removed { prop_assert!(!ids.contains(id.as_str()) && before.contains(&id.as_str())); }
        prop_assert_eq!(report.added.len() + kept.len(), after.facts.len());
        prop_assert_eq!(report.removed.len() + kept.len(), doc.facts.len());
        prop_assert_eq!(&after.last_updated, &doc.last_updated);
    }

    #[test]
    fn apply_is_deterministic(doc in doc_strategy(), delta in delta_strategy(), max_facts in 1usize..20) {
        let cfg = ApplyConfig { threshold: 0.5, max_facts, policy: Default::default() };
        // Debug strings, because NaN confidences (a hand-made delta) are not equal to themselves.
        let snapshot = format!("{delta:?}");
        prop_assert_eq!(run(&doc, &delta, &cfg), run(&doc, &delta, &cfg));
        prop_assert_eq!(format!("{delta:?}"), snapshot);
    }

    /// The same delta applied again (a reply processed twice, say after a settle write
    /// failed) changes nothing the second time. Exactly so while the cap does not bind:
    /// under a binding cap the survivors of the first application compete again without
    /// the pairing that ranked a replacement last, so only "nothing is added twice" holds.
    #[test]
    fn applying_twice_changes_nothing(doc in doc_strategy(), delta in delta_strategy(), max_facts in 1usize..20, hybrid in any::<bool>()) {
        let policy = if hybrid { EvictionPolicy::Hybrid } else { EvictionPolicy::Confidence };
        let roomy = ApplyConfig { threshold: 0.5, max_facts: 100, policy };
        let (once, _) = run(&doc, &delta, &roomy);
        let (twice, report) = run(&once, &delta, &roomy);
        prop_assert!(report.added.is_empty(), "{:?}", report);
        prop_assert_eq!(twice, once);
        let tight = ApplyConfig { max_facts, ..roomy };
        let (once, _) = run(&doc, &delta, &tight);
        let (twice, _) = run(&once, &delta, &tight);
        let keys: Vec<String> = twice.facts.iter().map(|f| normalize_content(&f.content)).collect();
        let unique: HashSet<&String> = keys.iter().collect();
        let before: HashSet<String> = doc.facts.iter().map(|f| normalize_content(&f.content)).collect();
        let dup_before = doc.facts.len() - before.len();
        prop_assert!(keys.len() - unique.len() <= dup_before, "a second application added a duplicate");
    }

    /// Fail closed: a removal paired with a replacement applies only if the replacement's
    /// content is in memory afterwards; a removal in a delta whose new facts were all
    /// refused applies not at all.
    #[test]
    fn a_removal_never_applies_without_its_replacement(
        doc in doc_strategy(),
        delta in delta_strategy(),
        max_facts in 1usize..20,
        threshold in (0u32..=10).prop_map(|t| f64::from(t) / 10.0),
        hybrid in any::<bool>(),
    ) {
        let policy = if hybrid { EvictionPolicy::Hybrid } else { EvictionPolicy::Confidence };
        let cfg = ApplyConfig { threshold, max_facts, policy };
        let (after, report) = run(&doc, &delta, &cfg);
        let evicted: HashSet<&str> = report.evicted.iter().map(|f| f.id.as_str()).collect();
        let keys: HashSet<String> = after.facts.iter().map(|f| normalize_content(&f.content)).collect();
        // A new fact that passed the gates (it may still have been evicted by the cap).
        let refused = ["invalid", "below-threshold", "scope-gated", "assistant-copy", "upload"];
        let any_new_placed = (0..delta.new_facts.len())
            .any(|i| !report.skipped.iter().any(|s| s.path == format!("newFacts[{i}]") && refused.contains(&s.reason.as_str())));
        for (k, r) in delta.facts_to_remove.iter().enumerate() {
            if delta.facts_to_remove[..k].iter().any(|x| x.id == r.id) {
                continue; // the first mention of an id counts
            }
            let scrubbed = doc.facts.iter().any(|f| f.id == r.id && mentions_upload(&f.content));
            let removed_by_delta = report.removed.contains(&r.id) && !evicted.contains(r.id.as_str()) && !scrubbed;
            if !removed_by_delta {
                continue;
            }
            match r.replacement {
                Some(i) => {
                    let replacement = delta.new_facts.get(i).map(|f| normalize_content(f.content.trim()));
                    prop_assert!(replacement.is_some_and(|k| keys.contains(&k)), "{} removed without newFacts[{}]: {:?}", r.id, i, report);
                }
                None => prop_assert!(delta.new_facts.is_empty() || any_new_placed, "{} removed though every new fact was refused", r.id),
            }
        }
    }
}
