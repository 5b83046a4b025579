//! Fact vectors (`src/vectors.rs`) and the hybrid similarity (`src/fusion.rs`).

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

use common::fact;
use user_memory::document::Document;
use user_memory::fusion::{similarities, Dense, DENSE_WEIGHT};
use user_memory::inject::explain_hybrid;
use user_memory::message::ChatMessage;
use user_memory::relevance::FactIndex;
use user_memory::tokens::Estimate;
use user_memory::vectors::{content_key, QueryVector, VectorSet, NO_VECTOR};

/// A deterministic pseudo-random vector.
fn vector(seed: u64, dims: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..dims)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let n = |v: &[f32]| v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    dot / (n(a) * n(b))
}

#[test]
fn int8_cosines_stay_within_a_hundredth_of_the_float_ones() {
    let mut set = VectorSet::new("m", 0);
    let facts: Vec<Vec<f32>> = (0..200).map(|i| vector(i, 384)).collect();
    for (i, v) in facts.iter().enumerate() {
        set.insert(i as u64, v.clone()).unwrap();
    }
    let aligned: Vec<u32> = (0..200).collect();
    let q = vector(999, 384);
    let got = set.similarities(&aligned, &QueryVector::new(q.clone()).unwrap());
    let worst = facts.iter().zip(&got).map(|(f, g)| (cosine(f, &q) - f64::from(g.unwrap())).abs()).fold(0.0, f64::max);
    assert!(worst < 0.01, "worst error {worst}");
}

#[test]
fn the_slot_json_round_trips_and_costs_what_the_docs_say() {
    let mut set = VectorSet::new("multilingual-e5-small", 0);
    for i in 0..10u64 {
        set.insert(content_key(&format!("fact {i}")), vector(i, 384)).unwrap();
    }
    let json = set.to_json();
    let back = VectorSet::from_json(&json).unwrap();
    assert_eq!(back, set);
    assert_eq!(back.model(), "multilingual-e5-small");
    assert_eq!(back.dimensions(), 384);
    // 520 base64 characters and a 16-digit key (with quotes, colon and comma: 542) per fact.
    let empty = VectorSet::new("multilingual-e5-small", 384).to_json().len();
    assert_eq!((json.len() - empty + 1) / 10, 542, "{}", json.len());
}

#[test]
fn unreadable_slots_are_corrupt_memory_naming_the_problem() {
    let good = {
        let mut s = VectorSet::new("m", 3);
        s.insert(7, vec![1.0, 0.0, 0.0]).unwrap();
        s.to_json()
    };
    for (bad, why) in [
        ("not json".to_string(), "unreadable"),
        (good.replace("\"version\":1", "\"version\":9"), "version"),
        (good.replace("\"dimensions\":3", "\"dimensions\":4"), "dimensions"),
        (good.replace("0000000000000007", "7"), "16 hex"),
        (good.replace("\"model\":\"m\",", ""), "model"),
    ] {
        let e = VectorSet::from_json(&bad).unwrap_err();
        assert_eq!(e.code(), "CORRUPT_MEMORY");
        assert!(e.message().contains(why), "{why}: {}", e.message());
    }
}

#[test]
fn wrong_dimensions_nan_and_zero_vectors_are_refused_with_embed_failed() {
    let mut set = VectorSet::new("m", 0);
    set.insert(1, vec![0.5, 0.5]).unwrap();
    for bad in [vec![1.0, 2.0, 3.0], vec![f32::NAN, 1.0], vec![0.0, 0.0], vec![f32::INFINITY, 0.0]] {
        assert_eq!(set.insert(2, bad).unwrap_err().code(), "EMBED_FAILED");
    }
    assert_eq!(set.len(), 1);
    assert!(QueryVector::new(vec![f32::NAN, 1.0]).is_none());
    assert!(QueryVector::new(vec![0.0; 4]).is_none());
}

#[test]
fn retain_drops_stale_vectors_and_merge_adds_only_missing_ones_of_the_same_model() {
    let mut a = VectorSet::new("m", 0);
    for k in 0..6 {
        a.insert(k, vector(k, 8)).unwrap();
    }
    assert_eq!(a.retain_slots(&[true, false, true, false, true, false]), 3);
    assert!(a.contains(0) && !a.contains(1) && a.contains(4));
    let mut b = VectorSet::new("m", 0);
    b.insert(4, vector(40, 8)).unwrap();
    b.insert(9, vector(9, 8)).unwrap();
    a.merge_from(&b);
    assert_eq!(a.len(), 4);
    let q = QueryVector::new(vector(4, 8)).unwrap();
    let aligned = [0, 1, 2, 3];
    // Key 4 kept its own vector (nearly identical to the query), not b's.
    assert!(a.similarities(&aligned, &q)[2].unwrap() > 0.99);
    let other = {
        let mut o = VectorSet::new("another model", 0);
        o.insert(11, vector(11, 8)).unwrap();
        o
    };
    a.merge_from(&other);
    assert!(!a.contains(11));
}

/// Facts whose vectors are axis-aligned, so each dense similarity is known exactly.
fn setup() -> (Document, FactIndex, VectorSet) {
    let doc = Document {
        facts: vec![
            fact("pet", "Has a dog called Rex", 0.7),
            fact("food", "Is vegetarian", 0.7),
            fact("work", "Writes Go microservices", 0.95),
            fact("new", "Plays the cello", 0.7),
        ],
        ..Document::empty()
    };
    let mut index = FactIndex::new();
    index.sync(&doc.facts);
    let mut set = VectorSet::new("m", 0);
    for (i, f) in doc.facts.iter().take(3).enumerate() {
        let mut v = vec![0.0; 4];
        v[i] = 1.0;
        v[3] = 0.5;
        set.insert(content_key(&f.content), v).unwrap();
    }
    (doc, index, set)
}

#[test]
fn fusion_averages_lexical_and_min_max_dense_and_unvectored_facts_count_lexically() {
    let (doc, index, set) = setup();
    let aligned = set.align(&doc.facts);
    assert_eq!(aligned[3], NO_VECTOR);
    // The query points at the "food" fact's direction: a steakhouse question shares no word
    // with "Is vegetarian".
    let q = QueryVector::new(vec![0.1, 1.0, 0.0, 0.5]).unwrap();
    let dense = Dense { vectors: &set, aligned: &aligned, query: &q };
    let s = similarities(&index, "which steakhouse for my dog Rex", Some(&dense));
    let d = s.dense.as_ref().unwrap();
    assert_eq!(d[1], Some(1.0), "closest vector");
    assert_eq!(d[2], Some(0.0), "farthest vector");
    assert_eq!(d[3], None, "no vector yet");
    assert_eq!(s.lexical[0], 1.0, "the dog fact matches lexically");
    for (i, d) in d.iter().enumerate().take(3) {
        assert!((s.fused[i] - (s.lexical[i] + DENSE_WEIGHT * d.unwrap()) / (1.0 + DENSE_WEIGHT)).abs() < 1e-6);
    }
    assert_eq!(s.fused[3], s.lexical[3]);
    // Through explain: the vegetarian fact now ranks next to the lexical match, ahead of the
    // more confident work fact that ranked above it lexically.
    let lexical_only = explain_hybrid(
        &doc,
        &index,
        None,
        &[ChatMessage::user("which steakhouse for my dog Rex")],
        &user_memory::config::Config::default().inject,
        &Estimate,
    );
    let hybrid = explain_hybrid(
        &doc,
        &index,
        Some(&dense),
        &[ChatMessage::user("which steakhouse for my dog Rex")],
        &user_memory::config::Config::default().inject,
        &Estimate,
    );
    let ids = |e: &user_memory::inject::Explanation| e.facts.iter().map(|f| f.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&lexical_only)[..2], ["pet", "work"]);
    assert_eq!(ids(&hybrid)[..2], ["pet", "food"]);
    let food = hybrid.facts.iter().find(|f| f.id == "food").unwrap();
    assert_eq!((food.lexical, food.dense), (0.0, Some(1.0)));
    assert!((food.similarity - 0.5).abs() < 1e-6 && (food.score - (0.6 * 0.5 + 0.4 * 0.7)).abs() < 1e-6);
    assert!(lexical_only.facts.iter().all(|f| f.dense.is_none() && f.similarity == f.lexical));
}

#[test]
fn fewer_than_two_vectors_or_a_wrong_query_dimension_fall_back_to_lexical() {
    let (doc, index, mut set) = setup();
    let q = QueryVector::new(vec![0.1, 1.0, 0.0, 0.5]).unwrap();
    let mut one = set.clone();
    one.retain_facts(&doc.facts[1..2]);
    for (s, q) in [(&one, &q), (&set, &QueryVector::new(vec![1.0, 0.0]).unwrap())] {
        let aligned = s.align(&doc.facts);
        let r = similarities(&index, "dog", Some(&Dense { vectors: s, aligned: &aligned, query: q }));
        assert_eq!(r.fused, r.lexical);
    }
    // A misaligned `aligned` (another document) is ignored rather than misread.
    assert_eq!(set.retain_facts(&doc.facts), 0);
    let r = similarities(&index, "dog", Some(&Dense { vectors: &set, aligned: &[0, 1], query: &q }));
    assert_eq!((r.fused, r.dense), (r.lexical.clone(), None));
}
