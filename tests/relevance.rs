//! The incremental fact index: it must always score like an index built from scratch, and
//! only tokenise what changed.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use proptest::prelude::*;
use user_memory::document::Fact;
use user_memory::relevance::FactIndex;

fn fact(id: &str, content: &str, created_at: &str) -> Fact {
    Fact {
        id: id.into(),
        content: content.into(),
        category: "context".into(),
        confidence: 0.8,
        created_at: created_at.into(),
        source: "manual".into(),
        extra: Default::default(),
    }
}

fn scratch(facts: &[Fact]) -> FactIndex {
    let mut index = FactIndex::new();
    index.sync(facts);
    index
}

const QUERIES: &[&str] = &["redis cache 缓存", "我的兔子 rabbit", "Go microservices and Rust", "周末 weekend coffee 咖啡", ""];

fn assert_same_scores(incremental: &FactIndex, facts: &[Fact]) {
    let fresh = scratch(facts);
    assert!(incremental.is_synced_with(facts));
    assert_eq!(incremental.len(), facts.len());
    for (i, f) in facts.iter().enumerate() {
        assert_eq!(incremental.created_ms(i), fresh.created_ms(i));
        // What ranking reads from the index instead of the fact is the fact's own.
        assert_eq!(incremental.is_blank(i), f.content.trim().is_empty(), "{f:?}");
        assert_eq!(incremental.is_correction(i), f.category == "correction", "{f:?}");
        assert_eq!(incremental.confidence(i), f.confidence, "{f:?}");
        for now in [0, 1_767_225_600_000, 1_767_225_600_000 + 3 * 86_400_000, u64::MAX / 2] {
            assert_eq!(incremental.is_expired(i, now), f.is_expired(now), "{f:?} at {now}");
        }
    }
    for q in QUERIES {
        let a = incremental.similarities(q);
        let b = fresh.similarities(q);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-5, "query {q:?}: {a:?} vs {b:?}");
        }
    }
}

#[test]
fn sync_only_tokenises_added_and_changed_facts() {
    let mut facts: Vec<Fact> = (0..50).map(|i| fact(&format!("f{i}"), &format!("fact number {i} 第{i}条"), "")).collect();
    let mut index = FactIndex::new();
    index.sync(&facts);
    assert_eq!(index.tokenised(), 50);
    index.sync(&facts);
    assert_eq!(index.tokenised(), 50, "an unchanged document costs no tokenising");

    facts[7].content = "用Redis做缓存".into();
    index.sync(&facts);
    assert_eq!(index.tokenised(), 51, "one edit, one fact tokenised");

    facts.remove(3);
    facts.push(fact("new", "Writes Go microservices", ""));
    index.sync(&facts);
    assert_eq!(index.tokenised(), 52, "a removal tokenises nothing, an addition one fact");

    facts[10].created_at = "2026-02-01T00:00:00Z".into();
    facts[10].confidence = 0.1;
    index.sync(&facts);
    assert_eq!(index.tokenised(), 52, "createdAt and confidence changes need no tokenising");
    assert_same_scores(&index, &facts);

    let sims = index.similarities("redis 缓存");
    let redis = facts.iter().position(|f| f.id == "f7").unwrap();
    assert_eq!(sims[redis], 1.0, "similarities are normalised to the best match");
    assert!(sims.iter().enumerate().all(|(i, &s)| i == redis || s < 1.0));
    assert!(index.similarities("nothing matches zzz").iter().all(|&s| s == 0.0));
}

#[test]
fn duplicate_ids_are_indexed_separately() {
    let facts = vec![fact("same", "likes tea", ""), fact("same", "likes coffee", "")];
    let mut index = FactIndex::new();
    index.sync(&facts);
    assert!(index.is_synced_with(&facts));
    let sims = index.similarities("coffee");
    assert_eq!(sims, vec![0.0, 1.0]);
    index.sync(&facts[..1]);
    assert_same_scores(&index, &facts[..1]);
}

#[test]
fn the_vocabulary_of_edited_facts_does_not_grow_forever() {
    let mut facts = vec![fact("a", "x", "")];
    let mut index = FactIndex::new();
    for i in 0..3000 {
        facts[0].content = format!("word{i} other{i} 字{i}");
        index.sync(&facts);
    }
    assert!(index.vocabulary_len() < 6000, "{}", index.vocabulary_len());
    assert_same_scores(&index, &facts);
}

/// One random edit of the fact list.
#[derive(Debug, Clone)]
enum Op {
    Add(usize, String),
    Remove(usize),
    Edit(usize, String),
    Touch(usize),
    Swap(usize, usize),
    /// Category, confidence or lifetime changed, content kept.
    Meta(usize, u8),
}

fn content() -> impl Strategy<Value = String> {
    let words = prop::sample::select(vec![
        "redis",
        "cache",
        "缓存",
        "用Redis做缓存",
        "rabbit",
        "兔子",
        "汤圆",
        "go",
        "rust",
        "weekend",
        "周末",
        "coffee",
        "咖啡",
        "microservices",
        "the",
        "runs",
        "running",
        "back",
        "腰",
        "",
        "  ",
        "<b>",
    ]);
    prop::collection::vec(words, 0..6).prop_map(|w| w.join(" "))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<usize>(), content()).prop_map(|(i, c)| Op::Add(i, c)),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), content()).prop_map(|(i, c)| Op::Edit(i, c)),
        1 => any::<usize>().prop_map(Op::Touch),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Swap(a, b)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, k)| Op::Meta(i, k)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn incremental_index_scores_like_a_fresh_one(ops in prop::collection::vec(op(), 1..40)) {
        let mut facts: Vec<Fact> = Vec::new();
        let mut index = FactIndex::new();
        let mut next = 0;
        for op in ops {
            let n = facts.len();
            match op {
                Op::Add(i, c) => {
                    next += 1;
                    // Sometimes reuse an id that was removed before, sometimes duplicate a live
                    // one (imported documents are validated, but the index must not care).
                    let id = match next % 7 {
                        0 if n > 0 => facts[i % n].id.clone(),
                        3 => format!("f{}", next / 2),
                        _ => format!("f{next}"),
                    };
                    facts.insert(i % (n + 1), fact(&id, &c, ""));
                }
                Op::Remove(i) if n > 0 => { facts.remove(i % n); }
                Op::Edit(i, c) if n > 0 => facts[i % n].content = c,
                Op::Touch(i) if n > 0 => facts[i % n].created_at = format!("2026-01-{:02}T00:00:00Z", 1 + i % 28),
                Op::Swap(a, b) if n > 0 => facts.swap(a % n, b % n),
                Op::Meta(i, k) if n > 0 => {
                    let f = &mut facts[i % n];
                    match k % 5 {
                        0 => f.category = if f.category == "correction" { "context" } else { "correction" }.into(),
                        1 => f.confidence = f64::from(k) / 255.0,
                        2 => f.set_expected_valid_days(f64::from(1 + k % 3)),
                        3 => { f.extra.insert("lastConfirmedAt".into(), format!("2026-01-{:02}T00:00:00Z", 1 + k % 28).into()); }
                        _ => { f.extra.remove("expected_valid_days"); }
                    }
                }
                _ => {}
            }
            index.sync(&facts);
            assert_same_scores(&index, &facts);
        }
    }
}
