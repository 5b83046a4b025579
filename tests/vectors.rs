//! Fact vectors (`src/recall/vectors.rs`); the hybrid similarity is tested in `src/recall/fusion.rs`.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

use user_memory::vectors::{content_key, QueryVector, VectorSet};

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
