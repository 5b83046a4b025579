//! History, revert and undo, and forget tombstones, through the engine: every commit's entry
//! is in the record it commits, a revert restores summaries and facts exactly, replays like
//! any edit, and a forgotten fact stays forgotten.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

#[path = "support/crashing_kv.rs"]
mod crashing_kv;

use common::*;
use crashing_kv::CrashingKv;
use futures::FutureExt;
use std::cell::RefCell;
use std::rc::Rc;
use user_memory::engine::{Event, ProcessedEvent, UpdateReason};
use user_memory::error::Result;
use user_memory::history::{entry_revision, HISTORY_BYTES};
use user_memory::ids::SequentialIds;
use user_memory::json::Value;
use user_memory::record::Record;
use user_memory::storage::{Commit, KvCapabilities, MemoryKv, Slot, Store, Versioned, VersionedKv};
use user_memory::sync::LocalFuture;
use user_memory::ToJson;

fn reasons(entries: &[Value]) -> Vec<String> {
    entries.iter().map(|e| e.get("reason").and_then(Value::as_str).unwrap_or_default().to_string()).collect()
}

fn processed(rig: &Rig) -> Vec<ProcessedEvent> {
    rig.events.0.borrow().iter().filter_map(|e| if let Event::Processed(p) = e { Some(p.clone()) } else { None }).collect()
}

/// The stored record, read raw.
fn stored(kv: &Rc<MemoryKv>) -> Record {
    let v = VersionedKv::new(kv.clone(), "default").load(Slot::Document).now_or_never().unwrap().unwrap().unwrap();
    Record::from_json(&v.value, &SequentialIds::starting_at(1)).unwrap()
}

/// A document with unknown fields at every level, summaries and facts with every field.
fn rich_document() -> Value {
    json!({
        "version": "1.0", "lastUpdated": "2026-01-02T00:00:00.000Z", "customTop": {"keep": [1, 2.50]},
        "user": {"workContext": {"summary": "Backend engineer", "updatedAt": "2026-01-01T00:00:00.000Z", "sectionNote": "x"},
                 "personalContext": {"summary": "", "updatedAt": ""}, "topOfMind": {"summary": "Kafka latency", "updatedAt": "2026-01-01T00:00:00.000Z"}, "userExtra": true},
        "history": {"recentMonths": {"summary": "", "updatedAt": ""}, "earlierContext": {"summary": "", "updatedAt": ""},
                    "longTermBackground": {"summary": "Studied physics", "updatedAt": "2025-12-01T00:00:00.000Z"}},
        "facts": [
            {"id": "fact_aaaaaaaa", "content": "Writes Go microservices", "category": "knowledge", "confidence": 0.9,
             "createdAt": "2025-11-01T00:00:00.000Z", "source": "thread-1", "pinned": true, "lastConfirmedAt": "2025-12-01T00:00:00.000Z", "confirmationCount": 2},
            {"id": "fact_bbbbbbbb", "content": "Prefers dark mode", "category": "preference", "confidence": 0.8,
             "createdAt": "2025-11-02T00:00:00.000Z", "source": "manual", "note": {"deep": [1e3]}},
            {"id": "fact_cccccccc", "content": "Lives in Berlin", "category": "context", "confidence": 0.75, "createdAt": "2025-11-03T00:00:00.000Z", "source": "t2"}
        ]
    })
}

/// The document without `lastUpdated` (a revert is a new revision, so that changes).
fn without_time(doc: &user_memory::Document) -> String {
    let mut d = doc.clone();
    d.last_updated.clear();
    d.to_json()
}

#[test]
fn every_edit_and_extraction_is_an_entry_newest_first_and_a_watermark_move_is_not() {
    run(async {
        let rig = RigBuilder::new()
            .replies(vec![
                Ok(r#"{"user":{"topOfMind":{"summary":"Learning Rust","shouldUpdate":true}},"newFacts":[{"content":"Learns Rust","category":"goal","confidence":0.9}]}"#.into()),
                Ok(r#"{"newFacts":[]}"#.into()),
            ])
            .open()
            .await
            .unwrap();
        rig.engine.import(&rich_document()).await.unwrap();
        let f = rig.engine.add_fact(&json!({"content": "Uses pnpm"})).await.unwrap();
        rig.engine.update_fact(&f.id, &json!({"confidence": 0.95})).await.unwrap();
        rig.engine.update_section("personalContext", "Has a dog").await.unwrap();
        rig.engine.remove_fact("fact_cccccccc", false).await.unwrap();
        rig.engine.observe("t1", &turn("I am learning Rust", "Great")).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        let revision_before = rig.engine.revision();
        // An extraction that learns nothing moves the watermark only: no entry.
        rig.engine.observe("t2", &turn("ok so what now then", "Anything")).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        assert!(rig.engine.revision() > revision_before, "the watermark was committed");
        rig.engine.clear(false).await.unwrap();

        let all = rig.engine.history(None, None).await.unwrap();
        assert_eq!(reasons(&all), ["clear", "extraction", "removeFact", "updateSection", "updateFact", "addFact", "import"]);
        let revs: Vec<u64> = all.iter().map(entry_revision).collect();
        assert!(revs.windows(2).all(|w| w[0] > w[1]), "newest first: {revs:?}");
        assert_eq!(revs[0], rig.engine.revision());
        let extraction = &all[1];
        assert_eq!(extraction.get("threadId").and_then(Value::as_str), Some("t1"));
        assert_eq!(
            extraction.get("added").and_then(Value::as_array).unwrap()[0].get("content").and_then(Value::as_str),
            Some("Learns Rust")
        );
        let section = &extraction.get("sections").and_then(Value::as_array).unwrap()[0];
        assert_eq!(section.get("name").and_then(Value::as_str), Some("topOfMind"));
        assert_eq!(section.get("before").and_then(|b| b.get("summary")).and_then(Value::as_str), Some("Kafka latency"));
        assert_eq!(section.get("after").and_then(|b| b.get("summary")).and_then(Value::as_str), Some("Learning Rust"));
        // The edit keeps the old value; the removal the whole fact (findable after it is gone).
        let changed = &all[4].get("changed").and_then(Value::as_array).unwrap()[0];
        assert_eq!(changed.get("before").and_then(|b| b.get("confidence")).and_then(Value::as_f64), Some(0.9));
        let removed = &all[2].get("removed").and_then(Value::as_array).unwrap()[0];
        assert_eq!(removed.get("content").and_then(Value::as_str), Some("Lives in Berlin"));
        assert_eq!(all[0].get("removed").and_then(Value::as_array).unwrap().len(), 4, "clear lists every fact it removed");

        let page = rig.engine.history(Some(2), Some(revs[2])).await.unwrap();
        assert_eq!(page.iter().map(entry_revision).collect::<Vec<_>>(), revs[3..5]);
        // What the engine read is what is stored: the entry is in the same record.
        assert_eq!(stored(&rig.kv).history.entries, all);
    });
}

#[test]
fn revert_restores_summaries_and_facts_exactly_and_is_itself_revertible() {
    run(async {
        let rig = RigBuilder::new()
            .replies(vec![Ok(r#"{"user":{"workContext":{"summary":"Staff engineer","shouldUpdate":true}},"newFacts":[{"content":"Writes Go microservices daily","category":"knowledge","confidence":0.95},{"content":"Uses Neovim","category":"preference","confidence":0.9}]}"#.into())])
            .open()
            .await
            .unwrap();
        let imported = rig.engine.import(&rich_document()).await.unwrap();
        let at_import = rig.engine.revision();
        rig.engine.observe("t1", &turn("I write Go microservices daily, in Neovim", "Nice")).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        rig.engine.update_fact("fact_bbbbbbbb", &json!({"content": "Prefers light mode", "note": null, "extra": 5})).await.unwrap();
        rig.engine.remove_fact("fact_aaaaaaaa", false).await.unwrap();
        rig.engine.update_section("longTermBackground", "").await.unwrap();
        let before_revert = rig.engine.get().await.unwrap();
        assert_ne!(without_time(&before_revert), without_time(&imported));

        rig.events.clear();
        let back = rig.engine.revert(at_import).await.unwrap();
        assert_eq!(without_time(&back), without_time(&imported), "ids, timestamps, unknown fields, order: all as imported");
        assert_eq!(without_time(&rig.engine.get().await.unwrap()), without_time(&imported));
        let update = rig.events.0.borrow().iter().find_map(|e| if let Event::Update(u) = e { Some(u.clone()) } else { None }).unwrap();
        assert_eq!(update.reason, UpdateReason::Revert);
        let newest = rig.engine.history(Some(1), None).await.unwrap().remove(0);
        assert_eq!(newest.get("reason").and_then(Value::as_str), Some("revert"));
        assert_eq!(newest.get("revertedTo").and_then(Value::as_u64), Some(at_import));

        // The revert is an entry like any other: undo brings back what it replaced.
        let again = rig.engine.undo(None).await.unwrap();
        assert_eq!(without_time(&again), without_time(&before_revert));
    });
}

#[test]
fn undo_reverts_the_newest_entry_and_a_second_undo_reverts_the_undo() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        assert_eq!(rig.engine.undo(None).await.unwrap_err().code(), "NOT_FOUND", "nothing to undo yet");
        let a = rig.engine.add_fact(&json!({"content": "A"})).await.unwrap();
        rig.engine.add_fact(&json!({"content": "B"})).await.unwrap();
        let doc = rig.engine.undo(None).await.unwrap();
        assert_eq!(doc.facts, vec![a.clone()]);
        let doc = rig.engine.undo(None).await.unwrap();
        assert_eq!(doc.facts.iter().map(|f| f.content.as_str()).collect::<Vec<_>>(), ["A", "B"]);
        // The oldest entry can be undone too: memory before any commit was empty.
        let first = rig.engine.history(None, None).await.unwrap().last().map(entry_revision).unwrap();
        assert!(rig.engine.revert(first - 1).await.unwrap().facts.is_empty());
    });
}

/// Two instances undoing at once (one losing the race at every point of the commit): one
/// undo, never an undo of that undo; an explicit revision that was overtaken is refused.
#[test]
fn two_instances_undoing_at_once_undo_once_and_never_undo_the_undo() {
    for delay in 0..12 {
        run(async {
            let kv = Rc::new(MemoryKv::new());
            let clock = FakeClock::at(T0);
            let yielding = || -> Rc<dyn Store> { Rc::new(VersionedKv::new(Rc::new(YieldingKv { inner: kv.clone() }), "default")) };
            let a = RigBuilder::shared(&kv, &clock).store(yielding()).open().await.unwrap();
            let b = RigBuilder::shared(&kv, &clock).instance("B").store(yielding()).open().await.unwrap();
            a.engine.add_fact(&json!({"content": "A"})).await.unwrap();
            a.engine.add_fact(&json!({"content": "B"})).await.unwrap();
            let (ea, eb) = (a.engine.clone(), b.engine.clone());
            let (ra, rb) = futures::future::join(async move { ea.undo(None).await }, async move {
                for _ in 0..delay {
                    YieldOnce(false).await;
                }
                eb.undo(None).await
            })
            .await;
            let case = format!("second undo {delay} steps later");
            let facts: Vec<String> = a.engine.get().await.unwrap().facts.into_iter().map(|f| f.content).collect();
            assert_eq!(facts, ["A"], "{case}: B was undone once, not undone and redone ({ra:?}, {rb:?})");
            assert_eq!(reasons(&a.engine.history(None, None).await.unwrap()), ["revert", "addFact", "addFact"], "{case}: one revert entry");
            // Naming the revision: a repeat is a no-op, an overtaken one is refused.
            let undone = entry_revision(&a.engine.history(Some(1), None).await.unwrap()[0]) - 1;
            assert_eq!(b.engine.undo(Some(undone)).await.unwrap().facts.len(), 1, "{case}");
            assert_eq!(a.engine.history(None, None).await.unwrap().len(), 3, "{case}: the repeat wrote nothing");
            b.engine.add_fact(&json!({"content": "C"})).await.unwrap();
            let e = a.engine.undo(Some(undone - 1)).await.unwrap_err();
            assert_eq!(e.code(), "CONFLICT", "{case}: {}", e.message());
            assert_eq!(a.engine.undo(Some(99)).await.unwrap_err().code(), "NOT_FOUND");
            let facts: Vec<String> = a.engine.get().await.unwrap().facts.into_iter().map(|f| f.content).collect();
            assert_eq!(facts, ["A", "C"], "{case}: the refused undo wrote nothing");
        });
    }
}

#[test]
fn a_revision_no_longer_in_the_history_is_not_found_and_history_limit_zero_keeps_none() {
    run(async {
        let rig = RigBuilder::new().config(|c| c.history_limit = 3).open().await.unwrap();
        for i in 0..6 {
            rig.engine.add_fact(&json!({"content": format!("fact {i}")})).await.unwrap();
        }
        let entries = rig.engine.history(None, None).await.unwrap();
        assert_eq!(entries.iter().map(entry_revision).collect::<Vec<_>>(), [6, 5, 4]);
        assert_eq!(rig.engine.revert(3).await.unwrap().facts.len(), 3, "undoing the oldest kept entry works");
        let e = rig.engine.revert(2).await.unwrap_err();
        assert_eq!(e.code(), "NOT_FOUND");
        assert!(e.message().contains("revision 2"), "{}", e.message());
        assert_eq!(rig.engine.revert(99).await.unwrap_err().code(), "NOT_FOUND");

        let off = RigBuilder::new().config(|c| c.history_limit = 0).open().await.unwrap();
        off.engine.add_fact(&json!({"content": "x"})).await.unwrap();
        assert!(off.engine.history(None, None).await.unwrap().is_empty());
        assert!(!stored(&off.kv).to_json().contains("\"history\":{\"lastUpdated\""), "no history is written");
        assert_eq!(off.engine.undo(None).await.unwrap_err().code(), "NOT_FOUND");
    });
}

#[test]
fn a_change_by_a_writer_without_history_makes_the_entries_unusable_instead_of_wrong() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        rig.engine.add_fact(&json!({"content": "A"})).await.unwrap();
        // An older writer: rewrites the document (new lastUpdated) and keeps `history` as it found it.
        let store = VersionedKv::new(rig.kv.clone(), "default");
        let v = store.load(Slot::Document).await.unwrap().unwrap();
        let edited =
            v.value.replace("\"content\":\"A\"", "\"content\":\"A edited\"").replacen("\"lastUpdated\":\"", "\"lastUpdated\":\"9", 1);
        assert_eq!(store.commit(Slot::Document, v.revision, edited).await.unwrap(), Commit::Committed(2));
        assert_eq!(rig.engine.revert(0).await.unwrap_err().code(), "NOT_FOUND");
        // From the next commit on the history is whole again.
        rig.engine.add_fact(&json!({"content": "B"})).await.unwrap();
        assert_eq!(rig.engine.undo(None).await.unwrap().facts.iter().map(|f| f.content.as_str()).collect::<Vec<_>>(), ["A edited"]);
    });
}

/// A store that, on its first document commit, lets another writer commit first.
struct Interloper {
    inner: Rc<VersionedKv>,
    before_first_commit: RefCell<Option<Box<dyn FnOnce()>>>,
}

impl Store for Interloper {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        self.inner.load(slot)
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        if slot == Slot::Document {
            if let Some(hook) = self.before_first_commit.borrow_mut().take() {
                hook();
            }
        }
        self.inner.commit(slot, base, value)
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        "interloper".into()
    }
}

#[test]
fn a_revert_that_loses_a_race_is_replayed_on_the_newer_document() {
    run(async {
        let kv = Rc::new(MemoryKv::new());
        let clock = FakeClock::at(T0);
        let other = RigBuilder::shared(&kv, &clock).instance("B").open().await.unwrap();
        other.engine.add_fact(&json!({"content": "A"})).await.unwrap();
        let target = other.engine.revision();
        other.engine.add_fact(&json!({"content": "B"})).await.unwrap();
        let store =
            Rc::new(Interloper { inner: Rc::new(VersionedKv::new(kv.clone(), "default")), before_first_commit: RefCell::default() });
        let rig = RigBuilder::shared(&kv, &clock).store(store.clone()).open().await.unwrap();
        let b = other.engine.clone();
        *store.before_first_commit.borrow_mut() = Some(Box::new(move || {
            b.add_fact(&json!({"content": "C, added while the revert ran"})).now_or_never().unwrap().unwrap();
        }));
        let doc = rig.engine.revert(target).await.unwrap();
        assert_eq!(
            doc.facts.iter().map(|f| f.content.as_str()).collect::<Vec<_>>(),
            ["A"],
            "the document of that revision, on the newer base"
        );
        let entries = rig.engine.history(None, None).await.unwrap();
        assert_eq!(reasons(&entries)[..2], ["revert", "addFact"], "the other writer's commit came first and is kept in the history");
        assert_eq!(entries[0].get("removed").and_then(Value::as_array).unwrap().len(), 2, "the revert removed B and C");
    });
}

#[test]
fn a_crash_at_every_step_of_a_commit_leaves_old_document_and_history_or_new_and_new() {
    run(async {
        for caps in [KvCapabilities { keys: true, compare_and_set: true }, KvCapabilities { keys: false, compare_and_set: false }] {
            for after in [false, true] {
                let mut crash_at = 0;
                loop {
                    let mem = Rc::new(MemoryKv::new());
                    let setup = RigBuilder::shared(&mem, &FakeClock::at(T0)).open().await.unwrap();
                    setup.engine.add_fact(&json!({"content": "old fact"})).await.unwrap();
                    let crashing = Rc::new(CrashingKv::new(mem.clone(), crash_at, after, caps));
                    let rig = RigBuilder::shared(&mem, &FakeClock::at(T0 + 1000))
                        .store(Rc::new(VersionedKv::new(crashing.clone(), "default")))
                        .open()
                        .await
                        .unwrap();
                    let result = rig.engine.add_fact(&json!({"content": "new fact"})).await;
                    let seen = stored(&mem);
                    let facts: Vec<&str> = seen.doc.facts.iter().map(|f| f.content.as_str()).collect();
                    let entries: Vec<&str> = seen
                        .history
                        .entries
                        .iter()
                        .map(|e| e.get("added").and_then(Value::as_array).unwrap()[0].get("content").and_then(Value::as_str).unwrap())
                        .collect();
                    let case = format!("crash at op {crash_at} ({caps:?}, after={after})");
                    match facts.len() {
                        1 => assert_eq!(entries, ["old fact"], "{case}: old document, old history"),
                        _ => assert_eq!(entries, ["new fact", "old fact"], "{case}: new document, new history"),
                    }
                    if result.is_ok() {
                        assert_eq!(facts.len(), 2, "{case}: a reported success is durable");
                    }
                    if crashing.finished_before_crash() {
                        break;
                    }
                    crash_at += 1;
                }
                assert!(crash_at >= 2);
            }
        }
    });
}

#[test]
fn a_clear_of_many_facts_is_revertible_once_and_does_not_weigh_on_later_commits() {
    run(async {
        let rig = RigBuilder::new().config(|c| c.apply.max_facts = 5000).open().await.unwrap();
        let facts: Vec<serde_json::Value> = (0..3000)
            .map(|i| serde_json::json!({"id": format!("fact_{i:08x}"), "content": format!("fact number {i} about the user")}))
            .collect();
        rig.engine.import(&json!({"user": {}, "history": {}, "facts": facts})).await.unwrap();
        rig.engine.clear(false).await.unwrap();
        let big = stored(&rig.kv).to_json().len();
        assert!(big > HISTORY_BYTES, "the clear's entry holds every fact ({big} bytes)");
        assert_eq!(rig.engine.undo(None).await.unwrap().facts.len(), 3000, "the newest entry is kept whatever its size");
        rig.engine.clear(false).await.unwrap();
        rig.engine.add_fact(&json!({"content": "one more"})).await.unwrap();
        let after = stored(&rig.kv).to_json().len();
        assert!(after < HISTORY_BYTES / 4, "once it is not the newest, the big entry goes ({after} bytes)");
    });
}

#[test]
fn a_forgotten_fact_is_not_learned_again_exactly_or_in_other_words_until_unforgotten() {
    run(async {
        let reply = |c: &str| Ok(serde_json::json!({"newFacts": [{"content": c, "category": "knowledge", "confidence": 0.9}]}).to_string());
        let rig = RigBuilder::new()
            .replies(vec![
                reply("ALLERGIC to  penicillin"),
                reply("The user is allergic to penicillin"),
                reply("Is allergic to penicillin"),
            ])
            .open()
            .await
            .unwrap();
        let f = rig.engine.add_fact(&json!({"content": "Allergic to penicillin", "category": "context"})).await.unwrap();
        rig.engine.remove_fact(&f.id, true).await.unwrap();
        let tombstones = rig.engine.forgotten().await.unwrap();
        assert_eq!(tombstones.len(), 1);
        assert_eq!((tombstones[0].id.as_str(), tombstones[0].content.as_str()), (f.id.as_str(), "allergic to penicillin"));
        for (i, text) in ["I'm allergic to penicillin", "Penicillin: allergic, as I said"].iter().enumerate() {
            rig.engine.observe(&format!("t{i}"), &turn(text, "Noted")).unwrap().unwrap().await.unwrap();
            rig.engine.flush().await.unwrap();
            assert!(rig.engine.cached().facts.is_empty(), "{text}: not stored");
            let p = processed(&rig).pop().unwrap();
            assert_eq!((p.skipped[0].reason.as_str(), p.skipped[0].fact.as_deref()), ("forgotten", Some(f.id.as_str())));
        }
        // clear() keeps what the user asked to forget; unforget() lets it be learned again.
        rig.engine.clear(false).await.unwrap();
        assert_eq!(rig.engine.forgotten().await.unwrap().len(), 1);
        assert_eq!(rig.engine.unforget(&f.id).await.unwrap().id, f.id);
        assert_eq!(rig.engine.unforget(&f.id).await.unwrap_err().code(), "NOT_FOUND");
        rig.engine.observe("t9", &turn("I am allergic to penicillin", "Noted")).unwrap().unwrap().await.unwrap();
        rig.engine.flush().await.unwrap();
        assert_eq!(rig.engine.cached().facts.len(), 1);
    });
}

#[test]
fn undoing_a_forget_brings_the_fact_back_and_drops_its_tombstone_and_clear_can_drop_them_all() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        let f = rig.engine.add_fact(&json!({"content": "Has two cats", "mood": "happy"})).await.unwrap();
        let g = rig.engine.add_fact(&json!({"content": "Plays chess"})).await.unwrap();
        rig.engine.remove_fact(&f.id, true).await.unwrap();
        let entry = rig.engine.history(Some(1), None).await.unwrap().remove(0);
        assert_eq!(entry.get("forgot").and_then(Value::as_array).unwrap()[0].as_str(), Some(f.id.as_str()));
        let doc = rig.engine.undo(None).await.unwrap();
        assert_eq!(doc.facts, vec![f.clone(), g.clone()], "restored exactly, in its place");
        assert!(rig.engine.forgotten().await.unwrap().is_empty());
        rig.engine.remove_fact(&f.id, true).await.unwrap();
        rig.engine.remove_fact(&g.id, true).await.unwrap();
        assert_eq!(rig.engine.forgotten().await.unwrap().len(), 2);
        rig.engine.clear(true).await.unwrap();
        assert!(rig.engine.forgotten().await.unwrap().is_empty());
        assert!(!stored(&rig.kv).to_json().contains("two cats\",\"at\""), "no tombstone is left in storage");
    });
}
