//! The `update` event's diff, run on every commit, is linear in the number of facts (it
//! looked every fact up by scanning: an edit at 10 000 facts took a second in the wasm).
//! Measured against linear work on the same data in the same run (a copy of the document),
//! the fastest of three runs each, so the test holds on a loaded machine; the speed
//! of the whole commit path is measured by `cargo run --release --example commit_bench`
//! and `node bench/commit.mjs`, never asserted here.
//!
//! Also: the diff reports exactly what changed when facts move, appear and disappear.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Instant;
use user_memory::document::Document;
use user_memory::engine::{UpdateEvent, UpdateReason};
use user_memory::ids::SequentialIds;
use user_memory::json::Value;

fn doc_with(n: usize, tag: &str) -> Value {
    let facts: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"id": format!("fact_{i:08x}"), "content": format!("fact {i} about kafka and rust{tag}"),
                "category": "knowledge", "confidence": 0.8, "createdAt": "2026-01-01T00:00:00Z", "source": "t"})
        })
        .collect();
    Value::parse(&serde_json::json!({"version": "1.0", "user": {}, "history": {}, "facts": facts}).to_string()).unwrap()
}

/// The fastest of three runs of `f`, in seconds.
fn fastest<T>(mut f: impl FnMut() -> T) -> f64 {
    (0..3)
        .map(|_| {
            let t0 = Instant::now();
            std::hint::black_box(f());
            t0.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn the_update_diff_costs_about_as_much_as_copying_the_document() {
    // 16 000 facts; one removed near the start (so every later fact moved), one changed,
    // one added.
    let n = 16_000;
    let before = Document::from_value(&doc_with(n, ""), &SequentialIds::starting_at(1)).unwrap();
    let mut after = before.clone();
    after.facts.remove(1);
    after.facts[n / 2].content.push_str(" changed");
    let mut extra = after.facts[0].clone();
    extra.id = "fact_new".into();
    after.facts.push(extra);
    let ev = UpdateEvent::diff(UpdateReason::Import, &before, &after, 2);
    assert_eq!((ev.added.len(), ev.changed.len(), ev.removed.len()), (1, 1, 1));
    // The yardstick is linear work on the same data, measured in the same conditions: one
    // copy of the document and one comparison of the two versions. A linear diff costs a
    // small multiple of it; looking each fact up by scanning costs thousands.
    let diff = fastest(|| UpdateEvent::diff(UpdateReason::Import, &before, &after, 2));
    let linear = fastest(|| (before.clone(), before == after));
    let ratio = diff / linear;
    assert!(ratio < 40.0, "the diff of {n} facts cost {ratio:.1}× a copy and a comparison of the document ({diff:.4} s)");
}

fn parse(v: serde_json::Value) -> Document {
    Document::from_value(&Value::parse(&v.to_string()).unwrap(), &SequentialIds::starting_at(1)).unwrap()
}

fn fact(id: &str, content: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "content": content, "confidence": 0.8})
}

#[test]
fn the_diff_names_what_was_added_removed_and_changed_also_when_facts_move() {
    let before = parse(serde_json::json!({"user": {}, "history": {}, "facts": [
        fact("a", "A"), fact("b", "B"), fact("c", "C"), fact("d", "D")]}));
    // `a` moved to the end, `b` is gone, `c` changed, `d` stayed, `e` is new (at b's place).
    let after = parse(serde_json::json!({"user": {}, "history": {}, "facts": [
        fact("e", "E"), fact("c", "C changed"), fact("d", "D"), fact("a", "A")]}));
    let ev = UpdateEvent::diff(UpdateReason::Import, &before, &after, 2);
    assert_eq!(ev.added.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(), ["e"]);
    assert_eq!(ev.changed.iter().map(|f| f.content.as_str()).collect::<Vec<_>>(), ["C changed"]);
    assert_eq!(ev.removed, ["b"]);
    let same = UpdateEvent::diff(UpdateReason::Import, &after, &after, 3);
    assert!(same.added.is_empty() && same.changed.is_empty() && same.removed.is_empty());
}
