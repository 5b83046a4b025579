//! The pure pipeline end to end on realistic conversations: raw messages (LangChain /
//! DeerFlow `type` shape and OpenAI `role` shape) → filter → prompt → a model reply →
//! parse → apply.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use user_memory::apply::{apply_delta, ApplyConfig, ApplyContext};
use user_memory::filter::{filter_messages, recent_turns, worth_queueing};
use user_memory::ids::SequentialIds;
use user_memory::json::Value;
use user_memory::message::{ChatMessage, InputMessage};
use user_memory::parse::parse_reply;
use user_memory::prompt::{build_request, PromptOptions};
use user_memory::ToJson;
use user_memory::{Document, SectionId};

/// serde_json's `json!`, converted through text into the crate's own [`Value`].
macro_rules! json {
    ($($t:tt)+) => {
        user_memory::json::Value::parse(&serde_json::json!($($t)+).to_string()).expect("valid JSON")
    };
}

const NOW: &str = "2026-03-14T10:30:00.000Z";

fn inputs(v: Value) -> Vec<InputMessage> {
    v.as_array().unwrap().iter().map(InputMessage::from_value).collect()
}

/// A DeerFlow thread: an upload-only turn with tool calls, a real turn with list content,
/// the library's own memory block injected into a human message, and a summary system
/// message.
fn deerflow_thread() -> Value {
    json!([
        {"type": "system", "content": "You are DeerFlow, a deep-research agent."},
        {"type": "human", "content": "<uploaded_files>\nThe following files were uploaded:\n- /mnt/user-data/uploads/q3_sales.xlsx (48 KB)\n</uploaded_files>"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "read_file", "args": {"path": "/mnt/user-data/uploads/q3_sales.xlsx"}, "id": "call_1"}]},
        {"type": "tool", "content": "Sheet1: region,revenue\nEMEA,1.2M", "tool_call_id": "call_1"},
        {"type": "ai", "content": "I've read q3_sales.xlsx: EMEA revenue is 1.2M."},
        {"type": "human", "content": [
            {"type": "text", "text": "<memory>\nFacts:\n- [context | 0.90] Works at Northwind\n</memory>"},
            {"type": "text", "text": "I'm the head of sales ops at Northwind Traders in Lyon. I always want numbers in euros, and I'm learning SQL so I can stop asking the data team."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        ]},
        {"type": "ai", "content": "", "tool_calls": [{"name": "web_search", "args": {"q": "SQL course"}, "id": "call_2"}]},
        {"type": "tool", "content": "[results]", "tool_call_id": "call_2"},
        {"type": "ai", "content": [{"type": "text", "text": "Great goal! Mode's SQL tutorial is a good start. I'll report figures in EUR from now on."}]},
    ])
}

fn openai_thread() -> Value {
    json!([
        {"role": "system", "content": "You are a helpful assistant.\n<memory>\nUser Context:\n- Work: Backend engineer\n</memory>"},
        {"role": "user", "content": "Quick one: for this PR, don't touch the public API. Also, FYI I switched from Python to Go at work last month."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "api.go:12"},
        {"role": "assistant", "content": "Understood, I'll keep the API intact. How is Go going?"},
        {"role": "user", "content": "Loving it. I use Go 1.22 with sqlc."},
        {"role": "assistant", "content": "Nice combination."}
    ])
}

#[test]
fn deerflow_thread_is_filtered_like_deerflow() {
    let kept = filter_messages(&inputs(deerflow_thread()));
    assert_eq!(kept.len(), 2, "{kept:#?}");
    assert_eq!(kept[0].role, user_memory::message::Speaker::User);
    assert!(kept[0].content.starts_with("I'm the head of sales ops at Northwind Traders"));
    assert!(!kept[0].content.contains("<memory>") && !kept[0].content.contains("Works at Northwind\n"));
    assert!(kept[1].content.starts_with("Great goal!"));
    assert!(!kept.iter().any(|m| m.content.contains("q3_sales")), "the upload turn and its answer are gone");
    assert!(worth_queueing(&kept));
}

#[test]
fn openai_thread_is_filtered_and_worth_queueing() {
    let kept = filter_messages(&inputs(openai_thread()));
    let roles: Vec<&str> = kept.iter().map(|m| if m.role == user_memory::message::Speaker::User { "user" } else { "assistant" }).collect();
    assert_eq!(roles, vec!["user", "assistant", "user", "assistant"]);
    assert!(worth_queueing(&kept));
    assert_eq!(recent_turns(&kept, 1), &kept[2..]);
}

#[test]
fn a_thread_with_only_uploads_is_not_queued() {
    let kept = filter_messages(&inputs(json!([
        {"type": "human", "content": "<uploaded_files>/mnt/user-data/uploads/a.pdf</uploaded_files>"},
        {"type": "ai", "content": "Got the PDF."}
    ])));
    assert!(kept.is_empty());
    assert!(!worth_queueing(&kept));
}

#[test]
fn the_prompt_shows_the_filtered_conversation_only() {
    let kept = filter_messages(&inputs(deerflow_thread()));
    let req = build_request(&Document::empty(), &kept, 0, &PromptOptions::default());
    assert!(req.prompt.contains("User: I'm the head of sales ops"));
    assert!(req.prompt.contains("Assistant: Great goal!"));
    assert!(!req.prompt.contains("uploads/q3_sales") && !req.prompt.contains("<memory>"));
}

#[test]
fn deerflow_thread_end_to_end() {
    let mut doc = Document::empty();
    doc.facts.push(user_memory::Fact {
        id: "fact_0a0a0a0a".into(),
        content: "Reports figures in USD".into(),
        category: "preference".into(),
        confidence: 0.8,
        created_at: "2026-01-02T08:00:00Z".into(),
        source: "thread-1".into(),
        extra: Default::default(),
    });
    let kept = filter_messages(&inputs(deerflow_thread()));
    let _request = build_request(&doc, &kept, 0, &PromptOptions::default());

    // What a thinking model answers to that request.
    let reply = r#"<think>The user runs sales ops; USD preference is outdated → remove fact_0a0a0a0a.
Not recording the spreadsheet upload.</think>
```json
{
  "user": {
    "workContext": {"summary": "Head of sales operations at Northwind Traders in Lyon.", "shouldUpdate": true},
    "personalContext": {"summary": "", "shouldUpdate": false},
    "topOfMind": {"summary": "Learning SQL to query sales data without the data team. Reviewing Q3 figures; uploaded q3_sales.xlsx file for analysis.", "shouldUpdate": true}
  },
  "history": {"recentMonths": {"summary": "", "shouldUpdate": false}},
  "newFacts": [
    {"content": "Head of sales ops at Northwind Traders in Lyon", "category": "context", "confidence": 0.95},
    {"content": "Wants figures reported in euros", "category": "preference", "confidence": 0.9},
    {"content": "Is learning SQL", "category": "goal", "confidence": 0.85},
    {"content": "Uploaded q3_sales.xlsx file", "category": "context", "confidence": 0.9},
    {"content": "Might enjoy dashboards", "category": "preference", "confidence": 0.55}
  ],
  "factsToRemove": ["fact_0a0a0a0a"]
}
```"#;
    let delta = parse_reply(reply).unwrap();
    let ids = SequentialIds::starting_at(1);
    let report = apply_delta(
        &mut doc,
        &delta,
        &ApplyConfig { threshold: 0.7, max_facts: 100, policy: Default::default() },
        &ApplyContext { now_iso: NOW, source: "thread-7", ids: &ids, conversation: None, forgotten: &[], shown: None },
    );
    let contents: Vec<&str> = doc.facts.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(contents, vec!["Head of sales ops at Northwind Traders in Lyon", "Wants figures reported in euros", "Is learning SQL"]);
    assert!(doc.facts.iter().all(|f| f.source == "thread-7" && f.created_at == NOW));
    assert_eq!(report.removed, vec!["fact_0a0a0a0a"]);
    assert_eq!(report.added.len(), 3);
    assert_eq!(doc.section(SectionId::WorkContext).summary, "Head of sales operations at Northwind Traders in Lyon.");
    assert_eq!(
        doc.section(SectionId::TopOfMind).summary,
        "Learning SQL to query sales data without the data team.",
        "the upload sentence is scrubbed"
    );
    assert_eq!(report.updated_sections, vec![SectionId::WorkContext, SectionId::TopOfMind]);
    // Valid memory that survives a round trip through JSON.
    let again = Document::from_value(&doc.to_value(), &ids).unwrap();
    assert_eq!(again, doc);
}

#[test]
fn replaying_a_delta_on_a_newer_document_keeps_both_changes() {
    let kept: Vec<ChatMessage> = filter_messages(&inputs(openai_thread()));
    assert!(worth_queueing(&kept));
    let delta = parse_reply(
        r#"{"newFacts": [{"content": "Switched from Python to Go at work", "category": "correction", "confidence": 0.9},
                         {"content": "Uses Go 1.22 with sqlc", "category": "knowledge", "confidence": 0.9}],
            "factsToRemove": []}"#,
    )
    .unwrap();
    let cfg = ApplyConfig { threshold: 0.7, max_facts: 100, policy: Default::default() };
    let ids = SequentialIds::starting_at(100);
    // Another tab committed a fact meanwhile; the same delta is applied to that document.
    let mut newer = Document::empty();
    newer.facts.push(user_memory::Fact {
        id: "fact_000000ff".into(),
        content: "uses go 1.22 with SQLC".into(),
        category: "knowledge".into(),
        confidence: 0.9,
        created_at: NOW.into(),
        source: "other-tab".into(),
        extra: Default::default(),
    });
    let report = apply_delta(
        &mut newer,
        &delta,
        &cfg,
        &ApplyContext { now_iso: NOW, source: "t", ids: &ids, conversation: None, forgotten: &[], shown: None },
    );
    assert_eq!(report.added.len(), 1, "the duplicate of the other tab's fact is not added twice");
    assert_eq!(newer.facts.len(), 2);
}
