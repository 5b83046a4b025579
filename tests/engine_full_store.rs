//! Deletions on a full store: `removeFact()` and `clear()` must always succeed. Their history
//! entry makes the new record as large as the old one (and the key swap holds both at once),
//! so on `STORAGE_QUOTA` a deletion is written with fewer history entries, down to none, and
//! a `HISTORY_DROPPED` debug event says so. Other edits still fail with `STORAGE_QUOTA`.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

use common::*;
use futures::FutureExt;
use std::rc::Rc;
use user_memory::engine::{DebugEvent, Event};
use user_memory::ids::SequentialIds;
use user_memory::record::Record;
use user_memory::storage::{MemoryKv, Slot, Store, VersionedKv};

/// Bytes the store holds now (what its quota counts).
fn used(kv: &Rc<MemoryKv>) -> usize {
    kv.snapshot().iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// The stored record, read raw.
fn stored(kv: &Rc<MemoryKv>) -> Record {
    let v = VersionedKv::new(kv.clone(), "default").load(Slot::Document).now_or_never().unwrap().unwrap().unwrap();
    Record::from_json(&v.value, &SequentialIds::starting_at(1)).unwrap()
}

fn dropped_notes(rig: &Rig) -> Vec<DebugEvent> {
    rig.events
        .0
        .borrow()
        .iter()
        .filter_map(|e| if let Event::Debug(d) = e { (d.code == "HISTORY_DROPPED").then(|| d.clone()) } else { None })
        .collect()
}

/// The length of the stored record's JSON.
fn record_len(kv: &Rc<MemoryKv>) -> usize {
    VersionedKv::new(kv.clone(), "default").load(Slot::Document).now_or_never().unwrap().unwrap().unwrap().value.len()
}

/// A memory of 40 facts with 40 history entries, on a store whose free room is half the
/// record: a commit that keeps the history cannot be written (the key swap writes the new
/// record beside the old one), one without most of it can.
async fn full_rig() -> (Rig, Vec<String>) {
    let rig = RigBuilder::new().open().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..40 {
        let content = format!("Fact number {i}: the user described a long project with many details, tools and people");
        ids.push(rig.engine.add_fact(&json!({ "content": content })).await.unwrap().id);
    }
    assert_eq!(stored(&rig.kv).history.entries.len(), 40);
    rig.kv.set_quota(Some(used(&rig.kv) + record_len(&rig.kv) / 2));
    (rig, ids)
}

#[test]
fn remove_fact_on_a_full_store_succeeds_by_dropping_the_oldest_history_and_says_so() {
    run(async {
        let (rig, ids) = full_rig().await;
        // An addition does not fit: it fails as before and changes nothing.
        let err = rig.engine.add_fact(&json!({"content": "One more thing"})).await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_QUOTA");
        let before = stored(&rig.kv);
        assert_eq!(before.doc.facts.len(), 40);

        let removed = rig.engine.remove_fact(&ids[3], true).await.unwrap();
        let after = stored(&rig.kv);
        assert_eq!(after.doc.facts.len(), 39, "the deletion is stored");
        assert!(!after.doc.facts.iter().any(|f| f.id == removed.id));
        assert_eq!(after.forgotten.list.len(), 1, "its tombstone is stored with it");
        let kept = after.history.entries.len();
        assert!(kept < 41, "history entries were dropped: {kept}");
        // The newest entries are the ones kept, the deletion's own first when there is one.
        let newest_old: Vec<_> = before.history.entries.iter().take(kept.saturating_sub(1)).cloned().collect();
        if kept > 0 {
            assert_eq!(after.history.entries[0].get("reason").and_then(|r| r.as_str()), Some("removeFact"));
            assert_eq!(after.history.entries[1..], newest_old[..]);
        }
        let notes = dropped_notes(&rig);
        assert_eq!(notes.len(), 1, "one HISTORY_DROPPED note");
        assert_eq!(notes[0].reason, Some("storage-full"));
        assert!(notes[0].message.contains("removeFact()") && notes[0].message.contains("of 41 history entries"), "{}", notes[0].message);
        assert!(rig.events.names().contains(&"update"), "the removal is an update like any other");
    });
}

#[test]
fn clear_on_a_full_store_succeeds_and_keeps_the_tombstones() {
    run(async {
        let (rig, ids) = full_rig().await;
        rig.kv.set_quota(None);
        rig.engine.remove_fact(&ids[0], true).await.unwrap();
        rig.kv.set_quota(Some(used(&rig.kv) + record_len(&rig.kv) / 2));
        rig.events.clear();
        rig.engine.clear(false).await.unwrap();
        let after = stored(&rig.kv);
        assert!(after.doc.facts.is_empty());
        assert_eq!(after.forgotten.list.len(), 1);
        assert_eq!(dropped_notes(&rig).len(), 1);
        // Once room is made, other edits work again.
        rig.engine.add_fact(&json!({"content": "A fresh start"})).await.unwrap();
    });
}

#[test]
fn a_deletion_that_fits_keeps_its_history_and_says_nothing() {
    run(async {
        let rig = RigBuilder::new().open().await.unwrap();
        let f = rig.engine.add_fact(&json!({"content": "Keeps bees"})).await.unwrap();
        rig.engine.remove_fact(&f.id, false).await.unwrap();
        assert_eq!(stored(&rig.kv).history.entries.len(), 2);
        assert!(dropped_notes(&rig).is_empty());
    });
}

#[test]
fn a_deletion_that_does_not_fit_even_without_history_fails_and_changes_nothing() {
    run(async {
        let (rig, ids) = full_rig().await;
        let store = VersionedKv::new(rig.kv.clone(), "default");
        let revision = store.load(Slot::Document).await.unwrap().unwrap().revision;
        rig.kv.set_quota(Some(used(&rig.kv)));
        let err = rig.engine.remove_fact(&ids[0], false).await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_QUOTA");
        assert_eq!(store.load(Slot::Document).await.unwrap().unwrap().revision, revision);
        assert_eq!(stored(&rig.kv).doc.facts.len(), 40);
        assert!(dropped_notes(&rig).is_empty());
    });
}
