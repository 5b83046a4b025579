//! The engine end to end, natively: observe → debounce → LLM → parse → apply → commit,
//! with a clock moved by hand, a scripted LLM and the in-memory store.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

use common::*;
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use user_memory::engine::{Event, UpdateReason};
use user_memory::error::{Error, Result};
use user_memory::message::Speaker;
use user_memory::storage::{Commit, MemoryKv, Slot, Store, Versioned, VersionedKv};
use user_memory::sync::LocalFuture;
use user_memory::ToJson;

#[test]
fn a_burst_of_three_observes_makes_one_llm_call_with_the_newest_messages() {
    run(async {
        let rig = RigBuilder::new().replies(vec![reply_with_facts(&["Writes Go microservices"])]).open().await.unwrap();
        let mut history = turn("I write Go", "Nice");
        for i in 0..3 {
            history.extend(turn(&format!("message {i}"), "ok"));
            rig.engine.observe("t1", &history).unwrap().unwrap().await.unwrap();
            rig.clock.advance(10_000);
        }
        // 20 s after the last observe: not due yet (debounce 30 s from the last one).
        assert_eq!(rig.engine.next_due_at(), Some(T0 + 20_000 + 30_000));
        let r = rig.engine.process_due().await.unwrap();
        assert!(r.processed.is_empty());
        assert_eq!(rig.llm.calls(), 0);
        rig.clock.advance(20_000);
        let r = rig.engine.process_due().await.unwrap();
        assert_eq!(r.processed, vec!["t1".to_string()]);
        assert_eq!(rig.llm.calls(), 1);
        let prompt = rig.llm.requests.borrow()[0].prompt.clone();
        assert!(prompt.contains("message 2"), "the newest history is sent");
        assert_eq!(rig.engine.cached().facts[0].content, "Writes Go microservices");
        assert_eq!(rig.engine.cached().facts[0].source, "t1");
        assert_eq!(rig.engine.next_due_at(), None, "the queue is empty afterwards");
        assert_eq!(rig.events.names().iter().filter(|n| **n == "queued").count(), 3);
        assert_eq!(rig.events.names().iter().filter(|n| **n == "update").count(), 1);
        assert_eq!(rig.events.names().last(), Some(&"processed"), "processed comes after the update");
    });
}

#[test]
fn two_threads_make_two_calls_in_one_batch() {
    run(async {
        let rig =
            RigBuilder::new().replies(vec![reply_with_facts(&["Fact from t1"]), reply_with_facts(&["Fact from t2"])]).open().await.unwrap();
        rig.engine.observe("t1", &turn("one", "1")).unwrap().unwrap().await.unwrap();
        rig.engine.observe("t2", &turn("two", "2")).unwrap().unwrap().await.unwrap();
        rig.clock.advance(30_000);
        let r = rig.engine.process_due().await.unwrap();
        assert_eq!(r.processed, vec!["t1".to_string(), "t2".to_string()]);
        assert_eq!(rig.llm.calls(), 2);
        let sources: Vec<String> = rig.engine.cached().facts.iter().map(|f| f.source.clone()).collect();
        assert_eq!(sources, vec!["t1", "t2"]);
    });
}

#[test]
fn nothing_is_queued_without_a_user_and_an_assistant_message_or_when_paused() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        assert!(rig.engine.observe("t1", &[user("only a question")]).unwrap().is_none());
        assert!(rig.engine.observe("t1", &[]).unwrap().is_none());
        assert_eq!(rig.engine.observe("", &turn("a", "b")).err().unwrap().code(), "INVALID_INPUT");
        let paused = RigBuilder::new().config(|c| c.enabled = false).open().await.unwrap();
        assert!(paused.engine.observe("t1", &turn("a", "b")).unwrap().is_none());
        assert_eq!(rig.engine.next_due_at(), None);
    });
}

#[test]
fn malformed_model_output_leaves_memory_untouched_and_the_entry_queued_for_retry() {
    run(async {
        let rig = RigBuilder::new()
            .replies(vec![Ok("Sure! Here is what I learned about the user.".into()), reply_with_facts(&["Uses Rust"])])
            .open()
            .await
            .unwrap();
        rig.engine.add_fact(&json!({"content": "Likes tea"})).await.unwrap();
        let before = rig.engine.cached();
        rig.engine.observe("t1", &turn("I use Rust", "ok")).unwrap().unwrap().await.unwrap();
        let err = rig.engine.flush().await.unwrap_err();
        assert_eq!(err.code(), "LLM_BAD_OUTPUT");
        assert_eq!(rig.engine.cached(), before, "memory is untouched");
        assert!(rig.events.error_codes().contains(&"LLM_BAD_OUTPUT"));
        // Still queued, due after the retry delay (30 s).
        assert_eq!(rig.engine.next_due_at(), Some(T0 + 30_000));
        rig.clock.advance(30_000);
        let r = rig.engine.process_due().await.unwrap();
        assert_eq!(r.processed, vec!["t1".to_string()]);
        assert_eq!(rig.engine.cached().facts.len(), 2);
    });
}

#[test]
fn an_entry_failing_max_attempts_times_is_abandoned_with_an_event() {
    run(async {
        let rig = RigBuilder::new().config(|c| c.queue.max_attempts = 2).open().await.unwrap();
        rig.llm.push(Err(Error::LlmHttp { status: 500, message: "boom".into() }));
        rig.llm.push(Err(Error::LlmHttp { status: 500, message: "boom".into() }));
        rig.engine.observe("t1", &turn("a", "b")).unwrap().unwrap().await.unwrap();
        assert_eq!(rig.engine.flush().await.unwrap_err().code(), "LLM_HTTP");
        assert_eq!(rig.engine.flush().await.unwrap_err().code(), "LLM_HTTP");
        assert_eq!(rig.events.error_codes(), vec!["LLM_HTTP", "LLM_HTTP", "ABANDONED"]);
        let attempts: Vec<Option<u32>> =
            rig.events.0.borrow().iter().filter_map(|e| if let Event::Error(e) = e { Some(e.attempt) } else { None }).collect();
        assert_eq!(attempts, vec![Some(1), Some(2), Some(2)]);
        assert_eq!(rig.engine.next_due_at(), None);
        assert!(rig.engine.flush().await.is_ok(), "nothing left to flush");
    });
}

#[test]
fn a_second_instance_resumes_an_entry_the_first_persisted() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let a = RigBuilder::shared(&kv, &clock).instance("A").open().await.unwrap();
        a.engine.observe("t1", &turn("I live in Chengdu", "Nice city")).unwrap().unwrap().await.unwrap();
        a.engine.close().await.unwrap();
        assert_eq!(a.engine.observe("t1", &turn("x", "y")).err().unwrap().code(), "CLOSED");
        // A restart: a new instance on the same storage.
        clock.advance(60_000);
        let b = RigBuilder::shared(&kv, &clock).instance("B").replies(vec![reply_with_facts(&["Lives in Chengdu"])]).open().await.unwrap();
        assert_eq!(b.engine.next_due_at(), Some(T0 + 30_000), "resumed, and overdue");
        assert_eq!(b.scheduler.armed(), Some(T0 + 30_000), "the timer was armed on open");
        b.engine.process_due().await.unwrap();
        assert_eq!(b.engine.cached().facts[0].content, "Lives in Chengdu");
        let msgs = &b.llm.requests.borrow()[0].prompt;
        assert!(msgs.contains("I live in Chengdu"));
    });
}

#[test]
fn an_entry_claimed_by_one_instance_is_not_processed_by_another_meanwhile() {
    use futures::task::LocalSpawnExt;
    let kv = Rc::new(MemoryKv::new());
    let clock = FakeClock::at(T0);
    let mut pool = futures::executor::LocalPool::new();
    let (gated, tx) = GatedLlm::new();
    let a = pool.run_until(async {
        let mut b = RigBuilder::shared(&kv, &clock).instance("A");
        b.config.queue.debounce_ms = 0;
        let rig = b.open().await.unwrap();
        rig.engine.observe("t1", &turn("I climb", "cool")).unwrap().unwrap().await.unwrap();
        rig
    });
    // Rebuild A's engine with the gated LLM on the same storage.
    let a_engine = pool.run_until(async {
        let events = Rc::new(Recorder::default());
        user_memory::engine::Engine::open(user_memory::engine::Parts {
            config: {
                let mut c = user_memory::config::Config::default();
                c.queue.debounce_ms = 0;
                c
            },
            store: Rc::new(VersionedKv::new(kv.clone(), "default")),
            llm: gated.clone(),
            clock: clock.clone(),
            ids: Rc::new(user_memory::ids::SequentialIds::starting_at(1)),
            counter: Rc::new(user_memory::tokens::Estimate),
            scheduler: Rc::new(user_memory::engine::ManualScheduler::default()),
            events,
            instance_id: "A2".into(),
            lease_ms: 120_000,
        })
        .await
        .unwrap()
    });
    drop(a);
    let running = a_engine.clone();
    pool.spawner()
        .spawn_local(async move {
            running.process_due().await.unwrap();
        })
        .unwrap();
    pool.run_until_stalled();
    assert_eq!(gated.calls.get(), 1, "A2 claimed the entry and is waiting for its LLM");
    // B comes along while A2's call is in flight: the entry is claimed, so B leaves it.
    let b = pool.run_until(RigBuilder::shared(&kv, &clock).instance("B").open()).unwrap();
    let report = pool.run_until(b.engine.process_due()).unwrap();
    assert!(report.processed.is_empty() && report.failed.is_empty());
    assert_eq!(b.llm.calls(), 0);
    assert_eq!(b.engine.next_due_at(), Some(T0 + 120_000), "B would take over when the claim expires");
    // A2's model answers; the entry is done and B sees an empty queue.
    tx.send(reply_with_facts(&["Climbs"])).unwrap();
    pool.run();
    pool.run_until(b.engine.process_due()).unwrap();
    assert_eq!(b.engine.next_due_at(), None);
    assert_eq!(pool.run_until(b.engine.get()).unwrap().facts[0].content, "Climbs");
}

#[test]
fn observing_during_processing_keeps_the_newer_messages_queued() {
    run(async {
        let rig = RigBuilder::new().replies(vec![reply_with_facts(&["first"]), reply_with_facts(&["second"])]).open().await.unwrap();
        rig.engine.observe("t1", &turn("one", "1")).unwrap().unwrap().await.unwrap();
        // Flush (claims + processes), then a newer turn of the same thread arrives.
        rig.engine.flush().await.unwrap();
        rig.engine.observe("t1", &[user("one"), assistant("1"), user("two"), assistant("2")]).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        assert_eq!(rig.llm.calls(), 2);
        let second = &rig.llm.requests.borrow()[1].prompt;
        assert!(second.contains("two"));
        assert_eq!(rig.engine.cached().facts.len(), 2);
    });
}

/// A store that, once, lets another writer commit right before our commit lands.
struct Interfering {
    inner: VersionedKv,
    fired: Cell<bool>,
    foreign: String,
}

impl Store for Interfering {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        self.inner.load(slot)
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(async move {
            if slot == Slot::Document && !self.fired.replace(true) {
                let r = self.inner.commit(slot, base, self.foreign.clone()).await?;
                assert!(matches!(r, Commit::Committed(_)));
            }
            self.inner.commit(slot, base, value).await
        })
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        "interfering store".into()
    }
}

#[test]
fn a_commit_that_loses_a_race_replays_the_delta_on_the_newer_document_without_a_second_llm_call() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let foreign = json!({
            "version": "1.0", "lastUpdated": "", "user": {}, "history": {},
            "facts": [{"id": "fact_0000beef", "content": "Written by another tab", "category": "context", "confidence": 0.8, "createdAt": "", "source": "manual"}]
        })
        .to_string();
        let store = Rc::new(Interfering { inner: VersionedKv::new(kv.clone(), "default"), fired: Cell::new(false), foreign });
        let rig = RigBuilder::shared(&kv, &FakeClock::at(T0))
            .store(store)
            .replies(vec![reply_with_facts(&["From the LLM"])])
            .open()
            .await
            .unwrap();
        rig.engine.observe("t1", &turn("a", "b")).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        assert_eq!(rig.llm.calls(), 1, "the delta was replayed, not re-extracted");
        let contents: Vec<String> = rig.engine.get().await.unwrap().facts.iter().map(|f| f.content.clone()).collect();
        assert_eq!(contents, vec!["Written by another tab", "From the LLM"], "both writes survive");
        // Listeners saw the other writer's change as `remote`, then ours.
        let reasons: Vec<UpdateReason> =
            rig.events.0.borrow().iter().filter_map(|e| if let Event::Update(u) = e { Some(u.reason) } else { None }).collect();
        assert_eq!(reasons, vec![UpdateReason::Remote, UpdateReason::Extraction]);
    });
}

#[test]
fn corrupt_stored_memory_fails_open_and_is_kept() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let rig = RigBuilder::shared(&kv, &clock).open().await.unwrap();
        rig.engine.add_fact(&json!({"content": "x"})).await.unwrap();
        // Damage the stored document (not the pointer): valid JSON, wrong shape.
        let ptr: serde_json::Value = serde_json::from_str(&kv.snapshot()["user-memory/default/doc"]).unwrap();
        let key = ptr["key"].as_str().unwrap().to_string();
        kv.put_raw(&key, r#"{"user": "oops", "history": {}, "facts": []}"#);
        let err = match RigBuilder::shared(&kv, &clock).open().await {
            Err(e) => e,
            Ok(_) => panic!("opening corrupt memory must fail"),
        };
        assert_eq!(err.code(), "CORRUPT_MEMORY");
        assert!(err.message().contains("`user` must be an object"), "{}", err.message());
        // The instance that was already open cannot overwrite it either.
        assert_eq!(rig.engine.add_fact(&json!({"content": "y"})).await.unwrap_err().code(), "CORRUPT_MEMORY");
        assert_eq!(kv.snapshot()[&key], r#"{"user": "oops", "history": {}, "facts": []}"#);
    });
}

#[test]
fn a_corrupt_queue_entry_is_dropped_with_an_event_and_the_others_are_processed() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let a = RigBuilder::shared(&kv, &clock).open().await.unwrap();
        a.engine.observe("t1", &turn("a", "b")).unwrap().unwrap().await.unwrap();
        let ptr: serde_json::Value = serde_json::from_str(&kv.snapshot()["user-memory/default/queue"]).unwrap();
        let key = ptr["key"].as_str().unwrap().to_string();
        let mut queue: serde_json::Value = serde_json::from_str(&kv.snapshot()[&key]).unwrap();
        queue["entries"].as_array_mut().unwrap().insert(0, serde_json::json!({"threadId": "bad", "messages": "not a list"}));
        kv.put_raw(&key, &queue.to_string());
        let b = RigBuilder::shared(&kv, &clock).instance("B").replies(vec![reply_with_facts(&["ok"])]).open().await.unwrap();
        b.engine.flush().await.unwrap();
        assert_eq!(b.events.error_codes(), vec!["CORRUPT_MEMORY"]);
        assert_eq!(b.engine.cached().facts.len(), 1);
        assert_eq!(b.llm.calls(), 1);
    });
}

#[test]
fn manual_edits_emit_updates_and_unknown_ids_are_not_found() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        let f = rig.engine.add_fact(&json!({"content": "Prefers dark mode", "category": "preference"})).await.unwrap();
        let f2 = rig.engine.update_fact(&f.id, &json!({"confidence": 0.6})).await.unwrap();
        assert_eq!(f2.confidence, 0.6);
        assert_eq!(rig.engine.update_fact("fact_nope", &json!({})).await.unwrap_err().code(), "NOT_FOUND");
        assert_eq!(rig.engine.remove_fact("fact_nope", false).await.unwrap_err().code(), "NOT_FOUND");
        rig.engine.remove_fact(&f.id, false).await.unwrap();
        rig.engine.add_fact(&json!({"content": "x"})).await.unwrap();
        rig.engine.clear(false).await.unwrap();
        assert!(rig.engine.cached().is_empty());
        let reasons: Vec<UpdateReason> =
            rig.events.0.borrow().iter().filter_map(|e| if let Event::Update(u) = e { Some(u.reason) } else { None }).collect();
        use UpdateReason::*;
        assert_eq!(reasons, vec![AddFact, UpdateFact, RemoveFact, AddFact, Clear]);
    });
}

#[test]
fn import_validates_keeps_last_updated_and_unknown_fields() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        let doc = json!({"version": "1.0", "lastUpdated": "2026-01-02T03:04:05Z", "custom": true,
            "user": {}, "history": {}, "facts": [{"content": "Imported", "note": "keep me"}]});
        let d = rig.engine.import(&doc).await.unwrap();
        assert_eq!(d.last_updated, "2026-01-02T03:04:05Z");
        let exported: serde_json::Value = serde_json::from_str(&rig.engine.get().await.unwrap().to_json()).unwrap();
        assert_eq!(exported["custom"], true);
        assert_eq!(exported["facts"][0]["note"], "keep me");
        let err = rig.engine.import(&json!({"user": {}, "history": {}, "facts": "no"})).await.unwrap_err();
        assert_eq!(err.code(), "INVALID_INPUT");
        assert!(err.message().contains("`facts` must be an array"));
        assert_eq!(rig.engine.get().await.unwrap().facts[0].content, "Imported", "a rejected import changes nothing");
        // A JSON string works too.
        rig.engine.import(&user_memory::json::Value::String(doc.to_string())).await.unwrap();
    });
}

/// Before: only addFact/updateFact stripped terminal controls on store; an import (a file
/// from anywhere) or updateSection kept an OSC 52 clipboard write or a cursor move for every
/// later reader (the CLI, a model).
#[test]
fn import_and_update_section_strip_control_characters_like_add_fact() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        let osc52 = "Likes \u{1b}]52;c;ZWNobyBwd25lZA==\u{7} tea";
        let doc = json!({"version": "1.0", "user": {"workContext": {"summary": "Hides\u{1b}[2A\u{1b}[2K lines"}}, "history": {},
            "facts": [{"id": "fact_10000000", "content": osc52, "category": "pref\u{9b}31m"},
                      {"id": "fact_10000001", "content": "Two\nlines \u{200b}kept"}]});
        let d = rig.engine.import(&doc).await.unwrap();
        assert_eq!(d.facts[0].content, "Likes ]52;c;ZWNobyBwd25lZA== tea");
        assert_eq!(d.facts[0].category, "pref31m");
        assert_eq!(d.facts[1].content, "Two\nlines kept", "a line feed stays, a zero-width space goes");
        assert_eq!(d.sections[0].summary, "Hides[2A[2K lines");
        assert_eq!(rig.engine.get().await.unwrap().facts[0].content, d.facts[0].content, "stored as returned");
        // A fact of only control characters: refused, naming it, nothing written.
        let bad = json!({"user": {}, "history": {}, "facts": [{"id": "fact_20000000", "content": "\u{1b}\u{7}"}]});
        let e = rig.engine.import(&bad).await.unwrap_err();
        assert_eq!(e.code(), "INVALID_INPUT");
        assert!(e.message().contains("fact_20000000"), "{}", e.message());
        assert_eq!(rig.engine.get().await.unwrap().facts.len(), 2);
        let s = rig.engine.update_section("topOfMind", "Plans \u{1b}]8;;https://evil.example\u{1b}\\a trip").await.unwrap();
        assert_eq!(s.summary, "Plans ]8;;https://evil.example\\a trip");
        let f = rig.engine.add_fact(&json!({"content": osc52})).await.unwrap();
        assert_eq!(f.content, "Likes ]52;c;ZWNobyBwd25lZA== tea");
    });
}

#[test]
fn inject_uses_the_filtered_conversation_and_the_cached_document() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        assert_eq!(rig.engine.inject(&turn("hi", "hello")).await, "");
        rig.engine.add_fact(&json!({"content": "Has a rabbit called 汤圆", "confidence": 0.8})).await.unwrap();
        rig.engine.add_fact(&json!({"content": "Writes Go", "confidence": 0.95})).await.unwrap();
        let block = rig.engine.inject(&[user("我的兔子汤圆不吃草")]).await;
        assert!(block.starts_with("<memory>\n"));
        let rabbit = block.find("汤圆").unwrap();
        let go = block.find("Writes Go").unwrap();
        assert!(rabbit < go, "the relevant fact comes first:\n{block}");
    });
}

#[test]
fn the_persisted_queue_holds_only_filtered_messages() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        let msgs = vec![
            user("<uploaded_files>/mnt/user-data/uploads/a.pdf</uploaded_files>Summarise this"),
            assistant("<memory>\nFacts:\n- [x | 1.00] y\n</memory>Here is the summary."),
        ];
        rig.engine.observe("t1", &msgs).unwrap().unwrap().await.unwrap();
        let stored: String = rig.kv.snapshot().iter().find(|(k, _)| k.contains("/queue/v")).unwrap().1.clone();
        assert!(!stored.contains("uploaded_files") && !stored.contains("<memory>"), "{stored}");
        let q: serde_json::Value = serde_json::from_str(&stored).unwrap();
        assert_eq!(q["entries"][0]["messages"][0]["content"], "Summarise this");
        let _ = Speaker::User;
    });
}

#[test]
fn sections_can_be_edited_by_hand_and_learning_paused_at_runtime() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        let s = rig.engine.update_section("user.workContext", "  Backend engineer.  ").await.unwrap();
        assert_eq!(s.summary, "Backend engineer.");
        assert!(s.updated_at.ends_with('Z'));
        rig.engine.update_section("longTermBackground", "Ten years of Go.").await.unwrap();
        let doc = rig.engine.get().await.unwrap();
        assert_eq!(doc.section(user_memory::SectionId::LongTermBackground).summary, "Ten years of Go.");
        assert_eq!(rig.engine.update_section("history.workContext", "x").await.unwrap_err().code(), "INVALID_INPUT");
        assert_eq!(rig.engine.update_section("nope", "x").await.unwrap_err().code(), "INVALID_INPUT");

        rig.engine.configure(&json!({"enabled": false})).unwrap();
        assert!(rig.engine.observe("t1", &turn("a", "b")).unwrap().is_none(), "paused: nothing is queued");
        rig.engine.configure(&json!({"enabled": true, "debounceMs": 1000})).unwrap();
        rig.engine.observe("t1", &turn("a", "b")).unwrap().unwrap().await.unwrap();
        assert_eq!(rig.engine.next_due_at(), Some(T0 + 1000), "the new debounce applies");
        rig.engine.configure(&json!({"injectionEnabled": false})).unwrap();
        assert_eq!(rig.engine.inject(&turn("go", "ok")).await, "");
        assert_eq!(rig.engine.configure(&json!({"agent": "x"})).unwrap_err().code(), "INVALID_INPUT");
    });
}

#[test]
fn an_extraction_that_finds_nothing_new_still_reports_processed() {
    run(async {
        let rig = RigBuilder::new()
            .replies(vec![Ok(r#"{"newFacts": [{"content": "", "confidence": 0.9}, {"content": "low", "confidence": 0.2}]}"#.into())])
            .open()
            .await
            .unwrap();
        rig.engine.observe("t1", &turn("hi", "hello")).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        let events = rig.events.0.borrow();
        let processed: Vec<_> = events.iter().filter_map(|e| if let Event::Processed(p) = e { Some(p.clone()) } else { None }).collect();
        assert_eq!(processed.len(), 1);
        assert!(!processed[0].changed, "below threshold and empty facts change nothing");
        let reasons: Vec<&str> = processed[0].skipped.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(reasons, vec!["invalid", "below-threshold"], "the empty fact and the low one are reported");
        assert!(!events.iter().any(|e| matches!(e, Event::Update(_))));
    });
}

#[test]
fn processed_tells_learning_from_an_empty_extraction_and_status_counts_them() {
    run(async {
        let rig = RigBuilder::new()
            .replies(vec![
                Ok(r#"{"newFacts": [], "factsToRemove": [], "factsToReinforce": [], "sections": []}"#.into()),
                Ok(r#"{"newFacts": [{"content": "What is a good pasta recipe?", "confidence": 0.9}]}"#.into()),
                reply_with_facts(&["Writes Go microservices"]),
            ])
            .open()
            .await
            .unwrap();
        for (t, u) in [("t1", "What's a good pasta recipe?"), ("t2", "What is a good pasta recipe?"), ("t3", "I write Go microservices")] {
            rig.engine.observe(t, &turn(u, "ok")).unwrap().unwrap().await.unwrap();
            rig.engine.flush().await.unwrap();
        }
        let events = rig.events.0.borrow();
        let processed: Vec<_> = events.iter().filter_map(|e| if let Event::Processed(p) = e { Some(p.clone()) } else { None }).collect();
        let seen: Vec<(usize, usize)> = processed.iter().map(|p| (p.proposed, p.learned)).collect();
        // Nothing proposed; one fact proposed and refused (the question); one fact learned.
        assert_eq!(seen, [(0, 0), (1, 0), (1, 1)]);
        let s = rig.engine.queue_status();
        assert_eq!((s.extractions, s.empty_extractions), (3, 2));
    });
}

#[test]
fn a_run_of_empty_extractions_gets_one_debug_event_naming_the_cause() {
    run(async {
        let empty =
            || Ok::<String, Error>(r#"{"newFacts":null,"factsToRemove":null,"factsToReinforce":null,"user":null,"history":null}"#.into());
        let rig = RigBuilder::new()
            .replies((0..7).map(|_| empty()).chain([reply_with_facts(&["Plays the cello"])]).collect())
            .open()
            .await
            .unwrap();
        let notes = |rig: &Rig| -> Vec<user_memory::engine::DebugEvent> {
            rig.events
                .0
                .borrow()
                .iter()
                .filter_map(|e| if let Event::Debug(d) = e { Some(d.clone()) } else { None })
                .filter(|d| d.code == "EMPTY_EXTRACTIONS")
                .collect()
        };
        for i in 0..8 {
            rig.engine.observe(&format!("t{i}"), &turn(&format!("I play the cello, question {i}"), "ok")).unwrap().unwrap().await.unwrap();
            rig.engine.flush().await.unwrap();
            // After the fifth empty one, not before, and only once for the run.
            assert_eq!(notes(&rig).len(), usize::from(i >= 4), "after extraction {i}");
        }
        let note = &notes(&rig)[0];
        assert_eq!(note.reason, Some("nothing-proposed"));
        assert!(note.message.contains("larger") && note.message.contains("docs/local-models.md"), "{}", note.message);
        // The note follows the processed event of the fifth extraction.
        let events = rig.events.0.borrow();
        let at = events.iter().position(|e| matches!(e, Event::Debug(d) if d.code == "EMPTY_EXTRACTIONS")).unwrap();
        assert!(matches!(&events[at - 1], Event::Processed(p) if p.thread_id == "t4"));
    });
}

#[test]
fn a_run_of_refused_proposals_names_the_most_frequent_refusal() {
    run(async {
        let low = || Ok::<String, Error>(r#"{"newFacts": [{"content": "Plays the cello", "confidence": 0.4}]}"#.into());
        let rig = RigBuilder::new().replies((0..5).map(|_| low()).collect()).open().await.unwrap();
        for i in 0..5 {
            rig.engine.observe(&format!("t{i}"), &turn("I play the cello", "ok")).unwrap().unwrap().await.unwrap();
            rig.engine.flush().await.unwrap();
        }
        let events = rig.events.0.borrow();
        let note = events
            .iter()
            .find_map(|e| if let Event::Debug(d) = e { (d.code == "EMPTY_EXTRACTIONS").then(|| d.clone()) } else { None })
            .unwrap();
        assert_eq!(note.reason, Some("all-refused"));
        assert!(note.message.contains("below-threshold") && note.message.contains("factConfidenceThreshold"), "{}", note.message);
    });
}

#[test]
fn processed_reports_the_estimated_tokens_of_a_call_without_provider_usage() {
    run(async {
        let rig = RigBuilder::new().replies(vec![reply_with_facts(&["Writes Go microservices"])]).open().await.unwrap();
        rig.engine.observe("t1", &turn("I write Go services for a living", "Nice")).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        let events = rig.events.0.borrow();
        let p = events.iter().find_map(|e| if let Event::Processed(p) = e { Some(p.clone()) } else { None }).unwrap();
        let request = rig.llm.requests.borrow()[0].clone();
        let estimate = |s: &str| user_memory::tokens::TokenCounter::count(&user_memory::tokens::Estimate, s) as u64;
        assert!(!p.usage_reported, "the scripted LLM reports no usage");
        assert_eq!(p.usage.prompt_tokens, estimate(&request.system) + estimate(&request.prompt));
        let reply = reply_with_facts(&["Writes Go microservices"]).unwrap();
        assert_eq!(p.usage.completion_tokens, estimate(&reply));
        assert!(p.usage.prompt_tokens > 100, "{:?}", p.usage);
    });
}

/// A token counter that calls back into the engine it counts for, as a user's
/// `countTokens` may (`observe()` inside it trapped the wasm module: the cached document
/// was borrowed while it ran).
struct ReentrantCounter {
    engine: std::cell::RefCell<Option<user_memory::engine::WeakEngine>>,
    calls: Cell<usize>,
}

impl user_memory::tokens::TokenCounter for ReentrantCounter {
    fn count(&self, text: &str) -> usize {
        self.calls.set(self.calls.get() + 1);
        let engine = self.engine.borrow().as_ref().and_then(|w| w.upgrade());
        if let Some(engine) = engine {
            if self.calls.get() == 1 {
                let queued = engine.observe("from-counter", &turn("I grow tomatoes", "Nice")).unwrap();
                drop(queued); // the timer is armed; the write is not awaited here
                              // (Without an embedding model the selection needs no await: it is ready at once.)
                let nested = futures::FutureExt::now_or_never(engine.explain(&turn("tomatoes", "?"))).expect("ready");
                assert!(nested.0.facts.len() <= 1);
                engine.configure(&json!({"topFacts": 5})).unwrap();
            }
        }
        text.len() / 4 + 1
    }
}

#[test]
fn a_token_counter_calling_back_into_the_engine_is_served() {
    run(async {
        let counter = Rc::new(ReentrantCounter { engine: std::cell::RefCell::new(None), calls: Cell::new(0) });
        let kv = Rc::new(MemoryKv::new());
        let engine = user_memory::engine::Engine::open(user_memory::engine::Parts {
            config: user_memory::config::Config::default(),
            store: Rc::new(VersionedKv::new(kv.clone(), "default")),
            llm: ScriptedLlm::new(vec![]),
            clock: FakeClock::at(T0),
            ids: Rc::new(user_memory::ids::SequentialIds::starting_at(1)),
            counter: counter.clone(),
            scheduler: Rc::new(user_memory::engine::ManualScheduler::default()),
            events: Rc::new(Recorder::default()),
            instance_id: "A".into(),
            lease_ms: 120_000,
        })
        .await
        .unwrap();
        *counter.engine.borrow_mut() = Some(engine.downgrade());
        engine.add_fact(&json!({"content": "Grows tomatoes"})).await.unwrap();
        let block = engine.inject(&turn("tomatoes", "?")).await;
        assert!(block.contains("Grows tomatoes"), "{block}");
        assert!(counter.calls.get() > 1);
        assert_eq!(engine.queue_status().pending, vec!["from-counter".to_string()], "the re-entrant observe() was queued");
        assert_eq!(engine.options().inject.top_facts, 5, "the re-entrant configure() took effect");
    });
}

/// A store that stops answering when told to (an adapter whose promises never settle).
struct Silenced {
    inner: VersionedKv,
    silent: Cell<bool>,
}

impl Store for Silenced {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        if self.silent.get() {
            return Box::pin(std::future::pending());
        }
        self.inner.load(slot)
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        if self.silent.get() {
            return Box::pin(std::future::pending());
        }
        self.inner.commit(slot, base, value)
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        "storage adapter silent".into()
    }
}

#[test]
fn close_gives_up_on_storage_that_never_answers_and_says_which() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let store = Rc::new(Silenced { inner: VersionedKv::new(kv.clone(), "default"), silent: Cell::new(false) });
        let rig =
            RigBuilder::shared(&kv, &FakeClock::at(T0)).store(store.clone()).config(|c| c.close_timeout_ms = 2_000).open().await.unwrap();
        rig.engine.observe("t1", &turn("I keep bees", "ok")).unwrap().unwrap().await.unwrap();
        let stored = kv.snapshot();
        store.silent.set(true);
        // An observation the silent store will never get, and a write already stuck in it.
        let mut stuck = Box::pin(rig.engine.observe("t2", &turn("I keep goats", "ok")).unwrap().unwrap());
        let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(stuck.as_mut().poll(cx))).await;
        assert!(polled.is_pending(), "the write is stuck in the silent store");
        let started = rig.clock.now();
        let err = rig.engine.close().await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_UNAVAILABLE");
        assert!(err.message().contains("storage adapter silent") && err.message().contains("2000 ms"), "{}", err.message());
        assert_eq!(rig.clock.now() - started, 2_000, "after closeTimeoutMs");
        assert_eq!(rig.events.error_codes(), vec!["STORAGE_UNAVAILABLE"], "also an error event");
        // A second close() gives up the same way (the stuck write still holds the store).
        assert_eq!(rig.engine.close().await.unwrap_err().code(), "STORAGE_UNAVAILABLE");
        assert_eq!(kv.snapshot(), stored, "the stored queue is as it was");
        drop(stuck);
    });
}

/// The "now" of the extraction prompt: a message's own time in every accepted shape, else
/// the `at` of a backfill, else the time of `observe()`; and the date survives the queue.
#[test]
fn the_prompt_dates_the_conversation_from_message_times_else_the_backfill_else_observe() {
    use user_memory::message::InputMessage;
    use user_memory::time::Stamp;
    let msg = |v: serde_json::Value| InputMessage::from_value(&user_memory::json::Value::parse(&v.to_string()).unwrap());
    run(async {
        let shapes = [
            // plain / OpenAI, with an offset: the writer's own date is shown
            serde_json::json!({"role": "user", "content": "Yesterday I went to a support group", "createdAt": "2023-05-08T13:56:00+02:00"}),
            // LangChain, epoch seconds in additional_kwargs
            serde_json::json!({"type": "human", "content": "Yesterday I went to a support group", "additional_kwargs": {"timestamp": 1683546960}}),
            // AI SDK UI, metadata.createdAt in epoch ms
            serde_json::json!({"role": "user", "parts": [{"type": "text", "text": "Yesterday I went to a support group"}], "metadata": {"createdAt": 1683546960000u64}}),
            // AI SDK model message / DeerFlow-style snake case
            serde_json::json!({"role": "user", "content": [{"type": "text", "text": "Yesterday I went to a support group"}], "created_at": "2023-05-08T11:56:00Z"}),
            serde_json::json!({"role": "user", "content": "Yesterday I went to a support group", "date": "2023-05-08T11:56:00.000Z"}),
        ];
        let wanted = ["2023-05-08 (Monday) 13:56 UTC+02:00", "2023-05-08 (Monday) 11:56 UTC", "2023-05-08 (Monday) 11:56 UTC"];
        for (i, shape) in shapes.into_iter().enumerate() {
            let rig = RigBuilder::new().replies(vec![reply_with_facts(&["Went to a support group"])]).open().await.unwrap();
            let messages = [msg(shape), assistant("How was it?")];
            rig.engine.observe("t1", &messages).unwrap().unwrap().await.unwrap();
            // A second instance reads the entry from storage: the time was persisted.
            let other =
                RigBuilder::shared(&rig.kv, &rig.clock).instance("other").replies(vec![reply_with_facts(&["x"])]).open().await.unwrap();
            other.engine.flush().await.unwrap();
            let prompt = other.llm.requests.borrow()[0].prompt.clone();
            let want = wanted[i.min(2)];
            assert!(prompt.contains(&format!("New conversation (its date and time: {want}):")), "shape {i}: {prompt}");
        }
        // A backfill says when; a message's own time still wins over it.
        let rig = RigBuilder::new().replies(vec![reply_with_facts(&["x"])]).open().await.unwrap();
        let backfill = Stamp::parse("2022-01-15T09:00:00Z");
        rig.engine.observe_at("t1", &turn("Yesterday I adopted a cat", "Congrats"), backfill).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        assert!(rig.llm.requests.borrow()[0].prompt.contains("(its date and time: 2022-01-15 (Saturday) 09:00 UTC)"));
        // Without either: when observe() was called (the rig's clock).
        let rig = RigBuilder::new().replies(vec![reply_with_facts(&["x"])]).open().await.unwrap();
        rig.engine.observe("t1", &turn("Yesterday I adopted a cat", "Congrats")).unwrap().unwrap().await.unwrap();
        rig.clock.advance(3_600_000);
        rig.engine.flush().await.unwrap();
        let now = Stamp::utc(T0).describe();
        assert!(rig.llm.requests.borrow()[0].prompt.contains(&format!("(its date and time: {now})")), "{now}");
    });
}

/// Retrieval-augmented extraction: with a memory larger than `extractionMemoryTokens`, the
/// prompt shows the summaries, the facts that match the new messages (manual ones among
/// them) and recent ones within the budget, and nothing else; a removal of a fact it did not
/// show is refused (`not-shown`), while duplicates are still found in the whole memory.
#[test]
fn a_large_memory_shows_only_the_matching_facts_and_unseen_ones_cannot_be_removed() {
    run(async {
        let mut facts = Vec::new();
        for i in 0..600 {
            facts.push(
                serde_json::json!({"id": format!("fact_{i:08x}"), "content": format!("Collects vintage item number {i} from flea markets"),
                "category": "context", "confidence": 0.8, "createdAt": "2025-01-01T00:00:00Z", "source": "t0"}),
            );
        }
        facts.push(serde_json::json!({"id": "fact_aaaaaaa1", "content": "Plays the cello in an amateur orchestra", "category": "context",
            "confidence": 0.9, "createdAt": "2024-01-01T00:00:00Z", "source": "manual"}));
        facts.push(serde_json::json!({"id": "fact_aaaaaaa2", "content": "Lives in Porto with a dog named Bolt", "category": "context",
            "confidence": 0.9, "createdAt": "2024-01-01T00:00:00Z", "source": "t0"}));
        let reply = json!({"newFacts": [
            {"content": "Lives in Lisbon", "category": "context", "confidence": 0.9},
            {"content": "Collects vintage item number 7 from flea markets", "category": "context", "confidence": 0.9}
        ], "factsToRemove": [
            {"id": "fact_aaaaaaa2", "replacementFactIndex": 0},
            {"id": "fact_00000003", "replacementFactIndex": null}
        ]});
        let rig = RigBuilder::new().replies(vec![Ok(reply.to_string())]).config(|c| c.apply.max_facts = 10_000).open().await.unwrap();
        rig.engine
            .import(&json!({"user": {"workContext": {"summary": "Cellist and archivist"}}, "history": {}, "facts": facts}))
            .await
            .unwrap();
        let processed = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        rig.engine
            .observe("t1", &turn("I moved from Porto to Lisbon with my dog Bolt, and I still play the cello.", "Great move!"))
            .unwrap()
            .unwrap()
            .await
            .unwrap();
        rig.engine.flush().await.unwrap();
        let prompt = rig.llm.requests.borrow()[0].prompt.clone();
        let memory = &prompt[..prompt.find("</current_memory>").unwrap()];
        assert!(memory.contains("Cellist and archivist"), "the summaries are always shown");
        assert!(memory.contains("fact_aaaaaaa2") && memory.contains("fact_aaaaaaa1"), "the matching facts (one manual) are shown");
        let shown = memory.matches("\"id\":").count();
        assert!((20..200).contains(&shown), "{shown} of 602 facts shown");
        let tokens = user_memory::tokens::TokenCounter::count(&user_memory::tokens::Estimate, memory);
        assert!(tokens < 2600, "{tokens} tokens");
        for e in rig.events.0.borrow().iter() {
            if let Event::Processed(p) = e {
                processed.borrow_mut().extend(p.skipped.iter().map(|s| (s.path.clone(), s.reason.clone(), s.fact.clone())));
            }
        }
        let doc = rig.engine.cached();
        assert!(doc.fact("fact_aaaaaaa2").is_none(), "a shown fact is replaced");
        let skipped = processed.borrow().clone();
        assert!(!memory.contains("\"fact_00000003\"") && !memory.contains("\"fact_00000007\""), "old, unrelated facts are not shown");
        assert!(doc.fact("fact_00000003").is_some(), "an unseen fact stays");
        assert!(skipped.contains(&("factsToRemove[1]".into(), "not-shown".into(), Some("fact_00000003".into()))), "{skipped:?}");
        assert!(
            skipped.iter().any(|(p, r, f)| p == "newFacts[1]" && r == "duplicate" && f.as_deref() == Some("fact_00000007")),
            "{skipped:?}"
        );
        assert_eq!(doc.facts.iter().filter(|f| f.content.starts_with("Collects vintage item number 7 ")).count(), 1);
    });
}
