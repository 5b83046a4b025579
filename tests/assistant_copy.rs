//! The assistant-copy filter on a labelled set (`tests/data/assistant-copy.json`): facts a
//! model proposed after one turn, marked as copies of the assistant's answer or as what the
//! user said. At the chosen thresholds no fact the user stated is dropped and most copies
//! are. `cargo test --test assistant_copy -- --nocapture` prints the counts.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use user_memory::apply::{apply_delta, ApplyConfig, ApplyContext, Conversation, COPY_ASSISTANT_SHARE, COPY_USER_SHARE};
use user_memory::delta::{Delta, NewFact};
use user_memory::ids::SequentialIds;
use user_memory::message::ChatMessage;
use user_memory::Document;

fn cases() -> Vec<(String, String, String, bool)> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/assistant-copy.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap().to_string();
            (s("user"), s("assistant"), s("fact"), c["copy"].as_bool().unwrap())
        })
        .collect()
}

/// Whether apply drops `fact` as an assistant copy in that conversation.
fn dropped(user: &str, assistant: &str, fact: &str) -> bool {
    let mut doc = Document::empty();
    let messages = [ChatMessage::user(user), ChatMessage::assistant(assistant)];
    let delta = Delta {
        new_facts: vec![NewFact { content: fact.into(), category: "context".into(), confidence: 0.9, ..NewFact::default() }],
        ..Delta::default()
    };
    let ids = SequentialIds::starting_at(1);
    let ctx = ApplyContext {
        now_iso: "2026-03-14T10:30:00.000Z",
        source: "t",
        ids: &ids,
        conversation: Some(Conversation { messages: &messages, new_from: 0 }),
        forgotten: &[],
        shown: None,
    };
    let report = apply_delta(&mut doc, &delta, &ApplyConfig { threshold: 0.7, max_facts: 100, policy: Default::default() }, &ctx);
    report.skipped.iter().any(|s| s.reason == "assistant-copy")
}

#[test]
fn the_assistant_copy_filter_drops_copies_and_keeps_what_the_user_said() {
    let cases = cases();
    let (mut caught, mut copies, mut wrongly_dropped) = (0, 0, Vec::new());
    for (user, assistant, fact, copy) in &cases {
        let d = dropped(user, assistant, fact);
        if *copy {
            copies += 1;
            caught += usize::from(d);
            if !d {
                println!("missed copy: {fact}");
            }
        } else if d {
            wrongly_dropped.push(fact.clone());
        }
    }
    println!(
        "thresholds: assistant share ≥ {COPY_ASSISTANT_SHARE}, user share < {COPY_USER_SHARE}: {caught} of {copies} copies dropped, {} of {} user facts dropped",
        wrongly_dropped.len(),
        cases.len() - copies
    );
    assert!(cases.len() >= 30 && copies >= 12);
    assert!(wrongly_dropped.is_empty(), "facts the user stated were dropped: {wrongly_dropped:?}");
    assert!(caught * 10 >= copies * 8, "only {caught} of {copies} copies caught");
}
