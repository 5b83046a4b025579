//! Signal hints on real text (docs/pipeline.md#signal-hints):
//!
//! - no false alarm: of the user messages in the repository's data sets (the extraction
//!   corpus, the relevance sets, the long-horizon set's sessions), none of those that are
//!   neither a correction nor a confirmation raises a hint, and the few that are raise the
//!   right one (listed below, each read by hand);
//! - the hint reaches the extraction prompt only for a signal in the *new* messages (one
//!   already processed is context), and costs a few tokens
//!   (`cargo test --test signals -- --nocapture` prints the cost).

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use serde_json::Value;
use user_memory::message::ChatMessage;
use user_memory::prompt::{build_request, PromptOptions};
use user_memory::signals::{detect, Signals, CORRECTION_HINT, REINFORCEMENT_HINT};
use user_memory::tokens::{Estimate, TokenCounter};
use user_memory::Document;

fn load(name: &str) -> Value {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Every user message of the data sets, with where it comes from.
fn user_messages() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let texts = |v: &Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter(|m| m["role"] == "user").filter_map(|m| m["content"].as_str().map(String::from)).collect()
    };
    for c in load("conversations.json")["conversations"].as_array().unwrap() {
        // The conversations marked with a signal are checked on their own (below).
        if c.get("signal").is_none() {
            out.extend(texts(&c["messages"]).into_iter().map(|t| (format!("conversations/{}", c["id"]), t)));
        }
    }
    for c in load("assistant-copy.json")["cases"].as_array().unwrap() {
        out.push(("assistant-copy".into(), c["user"].as_str().unwrap().into()));
    }
    for set in ["relevance-dev.json", "relevance-sample.json", "relevance-check.json"] {
        for p in load(set)["personas"].as_array().unwrap() {
            for c in p["cases"].as_array().unwrap() {
                out.extend(texts(&c["messages"]).into_iter().map(|t| (format!("{set}/{}", c["id"]), t)));
            }
        }
    }
    for u in load("longhorizon.json")["users"].as_array().unwrap() {
        for s in u["sessions"].as_array().unwrap() {
            out.extend(texts(&s["turns"]).into_iter().map(|t| (format!("longhorizon/{}", s["id"]), t)));
        }
        for q in u["questions"].as_array().unwrap() {
            out.push((format!("longhorizon/{}", q["id"]), q["question"].as_str().unwrap().into()));
            out.extend(texts(&q["context"]).into_iter().map(|t| (format!("longhorizon/{}", q["id"]), t)));
        }
    }
    out
}

/// The user messages of the data sets that are a correction or a confirmation, read by
/// hand: (where, the start of the message, the signals).
const EXPECTED: [(&str, &str, Signals); 1] = [
    // "Oh no wait (不对), I don't drink it myself: it's for the customers." A self-correction.
    (
        "longhorizon/\"wang-s32\"",
        "夏天生意淡一点，我准备推冰粉和冰镇啤酒。哦不对，我自己不喝，",
        Signals { correction: true, reinforcement: false },
    ),
];

#[test]
fn no_false_alarm_on_the_data_sets() {
    let messages = user_messages();
    assert!(messages.len() > 1000, "{} messages", messages.len());
    let mut found = Vec::new();
    for (src, text) in &messages {
        let s = detect(&[ChatMessage::user(text.as_str())]);
        if s != Signals::default() {
            println!("{src}: {s:?}: {text}");
            found.push((src.clone(), text.clone(), s));
        }
    }
    println!("{} hints in {} user messages", found.len(), messages.len());
    let expected: Vec<_> = EXPECTED.iter().map(|(src, start, s)| (src.to_string(), start.to_string(), *s)).collect();
    let got: Vec<_> = found.iter().map(|(src, text, s)| (src.clone(), text.chars().take(30).collect::<String>(), *s)).collect();
    assert_eq!(got, expected);
}

fn turn(user: &str, assistant: &str) -> [ChatMessage; 2] {
    [ChatMessage::user(user), ChatMessage::assistant(assistant)]
}

#[test]
fn a_hint_is_added_for_a_signal_in_the_new_messages_only() {
    let doc = Document::empty();
    let opts = PromptOptions::default();
    let first = turn("Which command starts the dev server?", "Run npm start.");
    let fix = turn("That's wrong, use make dev instead.", "Right: make dev.");
    let thanks = turn("Yes, exactly! That's what I needed. Now, how do I run the tests?", "make test.");
    let plain = build_request(&doc, &first, 0, &opts).prompt;
    assert!(!plain.contains("Hint:"), "{plain}");
    assert!(plain.ends_with("</conversation>\n\nAnswer with the JSON delta only."), "no signal, no change: {plain}");

    let corrected = build_request(&doc, &[first.clone(), fix.clone()].concat(), 0, &opts).prompt;
    assert!(corrected.contains(&format!("</conversation>\n\n{CORRECTION_HINT}\nAnswer with")), "{corrected}");
    assert!(!corrected.contains(REINFORCEMENT_HINT));

    // The correction was processed already: it is context now, and only the confirmation is new.
    let later = build_request(&doc, &[first, fix, thanks].concat(), 4, &opts).prompt;
    assert!(later.contains(&format!("</conversation>\n\n{REINFORCEMENT_HINT}\nAnswer with")), "{later}");
    assert!(!later.contains(CORRECTION_HINT), "a processed correction is not hinted again: {later}");
}

#[test]
fn the_chinese_examples_get_their_hints_in_the_prompt() {
    let doc = Document::empty();
    let opts = PromptOptions::default();
    let fixed = build_request(&doc, &turn("不对，改用 make dev", "好的，用 make dev。"), 0, &opts).prompt;
    assert!(fixed.contains(CORRECTION_HINT), "{fixed}");
    let confirmed = build_request(&doc, &turn("对，就是这样", "好的。"), 0, &opts).prompt;
    assert!(confirmed.contains(REINFORCEMENT_HINT), "{confirmed}");
}

#[test]
fn a_hint_costs_a_few_tokens() {
    let doc = Document::empty();
    let request = build_request(&doc, &turn("Which command starts the dev server?", "Run npm start."), 0, &PromptOptions::default());
    let base = Estimate.count(&request.system) + Estimate.count(&request.prompt);
    let (c, r) = (Estimate.count(CORRECTION_HINT), Estimate.count(REINFORCEMENT_HINT));
    println!("hint tokens (built-in estimate): correction {c}, reinforcement {r}; a one-turn request with empty memory: {base}");
    assert!(c + r < base / 10, "both hints are under a tenth of the smallest request ({c} + {r} of {base})");
}

#[test]
fn the_conversations_marked_with_a_signal_raise_it_and_only_it() {
    let mut marked = 0;
    for c in load("conversations.json")["conversations"].as_array().unwrap() {
        let Some(signal) = c["signal"].as_str() else { continue };
        let messages: Vec<ChatMessage> = c["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let text = m["content"].as_str().unwrap();
                if m["role"] == "user" {
                    ChatMessage::user(text)
                } else {
                    ChatMessage::assistant(text)
                }
            })
            .collect();
        let expected = Signals { correction: signal == "correction", reinforcement: signal == "reinforcement" };
        assert_eq!(detect(&messages), expected, "{}", c["id"]);
        marked += 1;
    }
    assert_eq!(marked, 4);
}
