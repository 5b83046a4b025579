//! The embedding model in the engine: fact vectors filled in the background into their own
//! slot, hybrid ranking of inject/explain/search, and every failure falling back to the
//! lexical ranking with an `EMBED_FAILED` event, never blocking or failing a commit.

// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[macro_use]
mod common;

use common::*;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use user_memory::embed::{EmbedPurpose, Embedder};
use user_memory::engine::{Spawner, FILL_RETRY_BASE_MS, QUERY_RETRY_BASE_MS};
use user_memory::error::{Error, Result};
use user_memory::search::SearchOptions;
use user_memory::storage::{KvStore, Slot, Store, VersionedKv};
use user_memory::sync::LocalFuture;
use user_memory::vectors::VectorSet;
use user_memory::ToJson;

/// Word groups that mean the same thing to the toy model: a text's vector has weight in a
/// group's dimension for every word of the group it contains.
const GROUPS: [&[&str]; 5] = [
    &["dog", "pet", "puppy", "rex", "walk"],
    &["vegetarian", "meat", "steak", "steakhouse", "restaurant", "eat"],
    &["postgres", "postgresql", "database", "sql"],
    &["cello", "music", "concert", "orchestra"],
    &["tea", "coffee", "drink"],
];

/// A deterministic embedding: one dimension per group plus a small constant one.
fn toy_vector(text: &str) -> Vec<f32> {
    let lower = text.to_lowercase();
    let mut v = vec![0.0f32; GROUPS.len() + 1];
    for (i, g) in GROUPS.iter().enumerate() {
        v[i] = g.iter().filter(|w| lower.split(|c: char| !c.is_alphanumeric()).any(|t| t == **w)).count() as f32;
    }
    v[GROUPS.len()] = 0.3;
    v
}

/// What the next call answers instead of the toy vectors.
#[derive(Clone)]
enum Answer {
    Fail(Error),
    Vectors(Vec<Vec<f32>>),
}

/// The toy model, with scripted failures; records every call.
struct ToyEmbedder {
    model: String,
    batch: usize,
    script: RefCell<VecDeque<Answer>>,
    calls: RefCell<Vec<(EmbedPurpose, Vec<String>)>>,
    cancelled: Cell<bool>,
}

impl ToyEmbedder {
    fn new(model: &str) -> Rc<ToyEmbedder> {
        Rc::new(ToyEmbedder {
            model: model.into(),
            batch: 64,
            script: RefCell::default(),
            calls: RefCell::default(),
            cancelled: Cell::new(false),
        })
    }
    fn then(&self, a: Answer) {
        self.script.borrow_mut().push_back(a);
    }
    fn calls(&self, purpose: EmbedPurpose) -> Vec<Vec<String>> {
        self.calls.borrow().iter().filter(|(p, _)| *p == purpose).map(|(_, t)| t.clone()).collect()
    }
}

impl Embedder for ToyEmbedder {
    fn model(&self) -> &str {
        &self.model
    }
    fn batch_size(&self) -> usize {
        self.batch
    }
    fn embed<'a>(&'a self, texts: &'a [String], purpose: EmbedPurpose) -> LocalFuture<'a, Result<Vec<Vec<f32>>>> {
        self.calls.borrow_mut().push((purpose, texts.to_vec()));
        let answer = self.script.borrow_mut().pop_front();
        Box::pin(async move {
            YieldOnce(false).await;
            match answer {
                Some(Answer::Fail(e)) => Err(e),
                Some(Answer::Vectors(v)) => Ok(v),
                None => Ok(texts.iter().map(|t| toy_vector(t)).collect()),
            }
        })
    }
    fn cancel(&self) {
        self.cancelled.set(true);
    }
}

/// Collects spawned tasks; `drain` runs them (and what they spawn) to the end.
#[derive(Default)]
struct Tasks(RefCell<Vec<LocalFuture<'static, ()>>>);

impl Spawner for Tasks {
    fn spawn(&self, task: LocalFuture<'static, ()>) {
        self.0.borrow_mut().push(task);
    }
}

impl Tasks {
    async fn drain(&self) -> usize {
        let mut n = 0;
        loop {
            let next = self.0.borrow_mut().pop();
            match next {
                Some(t) => {
                    t.await;
                    n += 1;
                }
                None => return n,
            }
        }
    }
}

struct EmbedRig {
    rig: Rig,
    model: Rc<ToyEmbedder>,
    tasks: Rc<Tasks>,
}

async fn open_with(builder: RigBuilder, model: &Rc<ToyEmbedder>) -> EmbedRig {
    let rig = builder.open().await.unwrap();
    let tasks = Rc::new(Tasks::default());
    rig.engine.set_embedder(Some(model.clone()), tasks.clone());
    tasks.drain().await;
    EmbedRig { rig, model: model.clone(), tasks }
}

async fn add(r: &EmbedRig, content: &str, confidence: f64) -> String {
    r.rig.engine.add_fact(&json!({"content": content, "confidence": confidence})).await.unwrap().id
}

fn stored_vectors(kv: &Rc<user_memory::storage::MemoryKv>) -> Option<VectorSet> {
    let kv: Rc<dyn KvStore> = kv.clone();
    let v = futures::FutureExt::now_or_never(VersionedKv::new(kv, "default").load(Slot::Vectors)).unwrap().unwrap()?;
    Some(VectorSet::from_json(&v.value).unwrap())
}

fn q(text: &str) -> Vec<user_memory::message::InputMessage> {
    vec![user(text)]
}

#[test]
fn facts_are_embedded_in_the_background_once_and_a_paraphrase_is_found() {
    run(async {
        let r = open_with(RigBuilder::new(), &ToyEmbedder::new("toy")).await;
        let dog = add(&r, "Has a dog called Rex", 0.7).await;
        add(&r, "Writes Go microservices", 0.95).await;
        add(&r, "Prefers short answers", 0.95).await;
        add(&r, "Plays the cello", 0.7).await;
        // The commits returned before any embedding: the fill runs as a task.
        assert!(r.model.calls(EmbedPurpose::Facts).is_empty());
        assert_eq!(r.rig.engine.vector_status(), (0, 4));
        assert!(r.tasks.drain().await >= 1);
        let batches = r.model.calls(EmbedPurpose::Facts);
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 4, "each fact embedded once: {batches:?}");
        assert_eq!(r.rig.engine.vector_status(), (4, 0));
        // The vectors are in their own slot; the document is untouched by them.
        let stored = stored_vectors(&r.rig.kv).unwrap();
        assert_eq!((stored.model(), stored.len(), stored.dimensions()), ("toy", 4, 6));
        assert!(!r.rig.engine.get().await.unwrap().to_json().contains("vectors"));

        // "my pet" shares no word with "Has a dog called Rex": lexically it ranks by
        // confidence below the two 0.95 facts; the dense half lifts it to the top.
        let e = r.rig.engine.explain(&q("what should I feed my pet")).await.0;
        assert_eq!(e.facts[0].id, dog, "{:?}", e.facts);
        let f = &e.facts[0];
        assert_eq!((f.lexical, f.dense), (0.0, Some(1.0)));
        assert!((f.similarity - 0.5).abs() < 1e-6);
        assert!(r.rig.engine.inject(&q("what should I feed my pet")).await.contains("Has a dog called Rex"));
        let hits = r.rig.engine.search("pet food", &SearchOptions::default()).await;
        assert_eq!(hits[0].1.id, dog);
        assert_eq!(hits[0].0.dense, Some(1.0));
        // One query embedding for explain + inject of the same text (cached), one for search.
        assert_eq!(r.model.calls(EmbedPurpose::Query), vec![vec!["what should I feed my pet".to_string()], vec!["pet food".to_string()]]);
        // Nothing new to embed: another commit of an unrelated change embeds only the new fact.
        add(&r, "Drinks green tea", 0.8).await;
        r.tasks.drain().await;
        assert_eq!(r.model.calls(EmbedPurpose::Facts).last().unwrap(), &vec!["Drinks green tea".to_string()]);
    });
}

#[test]
fn edited_and_removed_facts_lose_their_vectors_and_clear_empties_the_slot() {
    run(async {
        let r = open_with(RigBuilder::new(), &ToyEmbedder::new("toy")).await;
        let a = add(&r, "Has a dog called Rex", 0.7).await;
        let b = add(&r, "Plays the cello", 0.7).await;
        r.tasks.drain().await;
        assert_eq!(stored_vectors(&r.rig.kv).unwrap().len(), 2);
        r.rig.engine.update_fact(&a, &json!({"content": "Has a puppy called Rex"})).await.unwrap();
        r.tasks.drain().await;
        let calls = r.model.calls(EmbedPurpose::Facts);
        assert_eq!(calls.last().unwrap(), &vec!["Has a puppy called Rex".to_string()]);
        let stored = stored_vectors(&r.rig.kv).unwrap();
        assert_eq!(stored.len(), 2, "the old content's vector was dropped");
        assert!(!stored.contains(user_memory::vectors::content_key("Has a dog called Rex")));
        r.rig.engine.remove_fact(&b, false).await.unwrap();
        r.tasks.drain().await;
        assert_eq!(stored_vectors(&r.rig.kv).unwrap().len(), 1, "a removed fact's vector is gone from storage");
        r.rig.engine.clear(false).await.unwrap();
        r.tasks.drain().await;
        assert_eq!(stored_vectors(&r.rig.kv).unwrap().len(), 0);
        assert_eq!(r.model.calls(EmbedPurpose::Facts).len(), calls.len(), "pruning needs no embedding call");
    });
}

#[test]
fn another_model_drops_the_stored_vectors_and_embeds_again() {
    run(async {
        let r = open_with(RigBuilder::new(), &ToyEmbedder::new("toy-a")).await;
        add(&r, "Has a dog called Rex", 0.7).await;
        r.tasks.drain().await;
        assert_eq!(stored_vectors(&r.rig.kv).unwrap().model(), "toy-a");
        let b = ToyEmbedder::new("toy-b");
        r.rig.engine.set_embedder(Some(b.clone()), r.tasks.clone());
        assert_eq!(r.rig.engine.vector_status(), (0, 1), "toy-a's vectors do not count for toy-b");
        r.tasks.drain().await;
        assert_eq!(b.calls(EmbedPurpose::Facts), vec![vec!["Has a dog called Rex".to_string()]]);
        let stored = stored_vectors(&r.rig.kv).unwrap();
        assert_eq!((stored.model(), stored.len()), ("toy-b", 1));
        assert!(r.model.cancelled.get(), "the replaced embedder's calls are aborted");
        // Turned off: lexical ranking, no calls.
        r.rig.engine.set_embedder(None, r.tasks.clone());
        let before = b.calls.borrow().len();
        let e = r.rig.engine.explain(&q("my pet")).await.0;
        assert!(e.facts.iter().all(|f| f.dense.is_none()));
        assert_eq!(b.calls.borrow().len(), before);
    });
}

#[test]
fn a_failed_fact_embedding_never_fails_the_commit_is_an_event_and_is_retried_after_a_backoff() {
    run(async {
        let model = ToyEmbedder::new("toy");
        let r = open_with(RigBuilder::new(), &model).await;
        model.then(Answer::Fail(Error::LlmNetwork("could not reach http://127.0.0.1:9/v1/embeddings".into())));
        let id = add(&r, "Has a dog called Rex", 0.7).await;
        r.tasks.drain().await;
        assert_eq!(r.rig.engine.get().await.unwrap().facts[0].id, id, "committed and stored");
        let errors: Vec<String> = r
            .rig
            .events
            .0
            .borrow()
            .iter()
            .filter_map(|e| match e {
                user_memory::engine::Event::Error(e) => Some(format!("{}: {}", e.error.code(), e.error.message())),
                _ => None,
            })
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("EMBED_FAILED: embedding 1 new fact(s) failed") && errors[0].contains("127.0.0.1:9"), "{errors:?}");
        assert!(stored_vectors(&r.rig.kv).is_none());
        // Within the backoff nothing is tried, however often something kicks the fill.
        for _ in 0..5 {
            r.rig.engine.inject(&q("my pet")).await;
            r.tasks.drain().await;
        }
        assert_eq!(model.calls(EmbedPurpose::Facts).len(), 1, "no busy loop");
        assert_eq!(r.rig.events.error_codes(), vec!["EMBED_FAILED"]);
        r.rig.clock.advance(FILL_RETRY_BASE_MS);
        r.rig.engine.inject(&q("my pet")).await;
        r.tasks.drain().await;
        assert_eq!(model.calls(EmbedPurpose::Facts).len(), 2);
        assert_eq!(stored_vectors(&r.rig.kv).unwrap().len(), 1);
        // A second failure waits twice as long.
        model.then(Answer::Fail(Error::EmbedFailed("down".into())));
        add(&r, "Plays the cello", 0.7).await;
        r.tasks.drain().await;
        r.rig.clock.advance(FILL_RETRY_BASE_MS + 1);
        r.rig.engine.inject(&q("x")).await;
        r.tasks.drain().await;
        assert_eq!(model.calls(EmbedPurpose::Facts).len(), 4, "the failure count was reset by the success");
    });
}

#[test]
fn wrong_counts_dimensions_and_nan_in_fact_replies_store_nothing_and_are_events() {
    run(async {
        let model = ToyEmbedder::new("toy");
        let r = open_with(RigBuilder::new(), &model).await;
        add(&r, "Has a dog called Rex", 0.7).await;
        add(&r, "Plays the cello", 0.7).await;
        r.rig.events.clear();
        for bad in [vec![vec![1.0; 6]], vec![vec![1.0; 6], vec![1.0; 5]], vec![vec![1.0; 6], vec![f32::NAN; 6]]] {
            model.then(Answer::Vectors(bad));
            r.rig.clock.advance(FILL_RETRY_MAX_MS_PLUS);
            r.rig.engine.inject(&q("x")).await;
            r.tasks.drain().await;
        }
        let codes = r.rig.events.error_codes();
        // (The first batch was tried right after the commits, with the first bad answer.)
        assert_eq!(codes, vec!["EMBED_FAILED"; 3], "{codes:?}");
        assert!(stored_vectors(&r.rig.kv).is_none(), "nothing half-stored");
        r.rig.clock.advance(FILL_RETRY_MAX_MS_PLUS);
        r.rig.engine.inject(&q("x")).await;
        r.tasks.drain().await;
        assert_eq!(stored_vectors(&r.rig.kv).unwrap().len(), 2);
    });
}

const FILL_RETRY_MAX_MS_PLUS: u64 = user_memory::engine::FILL_RETRY_MAX_MS + 1;

#[test]
fn a_failed_query_embedding_ranks_lexically_says_so_and_pauses_query_embedding() {
    run(async {
        let model = ToyEmbedder::new("toy");
        let r = open_with(RigBuilder::new(), &model).await;
        add(&r, "Has a dog called Rex", 0.7).await;
        add(&r, "Writes Go microservices", 0.95).await;
        r.tasks.drain().await;
        let lexical = {
            let rig = RigBuilder::new().open().await.unwrap();
            rig.engine.import(&user_memory::json::Value::String(r.rig.engine.get().await.unwrap().to_json())).await.unwrap();
            rig.engine.inject(&q("what should I feed my pet")).await
        };
        r.rig.events.clear();
        for (i, bad) in [
            Answer::Fail(Error::LlmTimeout("no answer within 2000 ms (embed.queryTimeoutMs)".into())),
            Answer::Fail(Error::LlmHttp { status: 429, message: "rate limited".into() }),
            Answer::Vectors(vec![]),
            Answer::Vectors(vec![vec![1.0; 3]]),
            Answer::Vectors(vec![vec![f32::NAN; 6]]),
        ]
        .into_iter()
        .enumerate()
        {
            model.then(bad);
            let block = r.rig.engine.inject(&q(&format!("what should I feed my pet {i}"))).await;
            assert_eq!(block, lexical, "case {i}: the lexical block");
            assert_eq!(r.rig.events.error_codes().len(), i + 1, "case {i}: one event");
            // Paused: the next ranking makes no call and no event.
            let calls = model.calls(EmbedPurpose::Query).len();
            let e = r.rig.engine.explain(&q("what should I feed my pet")).await.0;
            assert!(e.facts.iter().all(|f| f.dense.is_none()));
            assert_eq!(model.calls(EmbedPurpose::Query).len(), calls, "case {i}: paused");
            r.rig.clock.advance(user_memory::engine::QUERY_RETRY_MAX_MS);
        }
        let messages: Vec<String> = r
            .rig
            .events
            .0
            .borrow()
            .iter()
            .filter_map(|e| match e {
                user_memory::engine::Event::Error(e) => Some(e.error.message()),
                _ => None,
            })
            .collect();
        assert!(messages[0].contains("ranked lexically") && messages[0].contains("queryTimeoutMs"), "{messages:?}");
        assert!(messages[2].contains("0 vectors for 1 texts"), "{messages:?}");
        assert!(messages[3].contains("3 dimensions"), "{messages:?}");
        // Working again: dense.
        let e = r.rig.engine.explain(&q("what should I feed my pet")).await.0;
        assert_eq!(e.facts[0].dense, Some(1.0));
        let _ = QUERY_RETRY_BASE_MS;
    });
}

/// A store that, right before the next commit of the vectors slot, lets "another
/// instance" commit `race` there first, so that commit meets a conflict.
struct RacingStore {
    inner: VersionedKv,
    race: RefCell<Option<String>>,
    conflicts: Cell<usize>,
    /// Commits of the vectors slot.
    vector_commits: Cell<usize>,
}

/// A fresh in-memory store and a [`RacingStore`] over it (with no race set up).
fn racing_store() -> (Rc<user_memory::storage::MemoryKv>, Rc<RacingStore>) {
    let kv = Rc::new(user_memory::storage::MemoryKv::new());
    let dyn_kv: Rc<dyn KvStore> = kv.clone();
    let store = RacingStore {
        inner: VersionedKv::new(dyn_kv, "default"),
        race: RefCell::default(),
        conflicts: Cell::new(0),
        vector_commits: Cell::new(0),
    };
    (kv, Rc::new(store))
}

impl Store for RacingStore {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<user_memory::storage::Versioned>>> {
        self.inner.load(slot)
    }
    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<user_memory::storage::Commit>> {
        Box::pin(async move {
            if slot == Slot::Vectors {
                self.vector_commits.set(self.vector_commits.get() + 1);
                let race = self.race.borrow_mut().take();
                if let Some(other) = race {
                    self.inner.commit(slot, base, other).await?;
                }
            }
            let r = self.inner.commit(slot, base, value).await?;
            if r == user_memory::storage::Commit::Conflict {
                self.conflicts.set(self.conflicts.get() + 1);
            }
            Ok(r)
        })
    }
    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        self.inner.discard(slot)
    }
    fn describe(&self) -> String {
        "racing store".into()
    }
}

#[test]
fn another_instance_adopts_stored_vectors_and_a_conflicting_write_merges() {
    run(async {
        let (kv, racing) = racing_store();
        let a = open_with(RigBuilder::shared(&kv, &FakeClock::at(T0)).store(racing.clone()), &ToyEmbedder::new("toy")).await;
        add(&a, "Has a dog called Rex", 0.7).await;
        a.tasks.drain().await;
        // B opens on the same storage: it reads A's vectors instead of embedding again.
        let b = open_with(RigBuilder::shared(&kv, &a.rig.clock).instance("B"), &ToyEmbedder::new("toy")).await;
        assert_eq!(b.rig.engine.vector_status(), (1, 0));
        assert!(b.model.calls(EmbedPurpose::Facts).is_empty());
        // B adds a fact and writes its vector while A is about to write the vector of its own
        // new fact: A's write conflicts, re-reads and merges.
        add(&b, "Drinks green tea", 0.7).await;
        let mut theirs = stored_vectors(&kv).unwrap();
        theirs.insert(user_memory::vectors::content_key("Drinks green tea"), vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0]).unwrap();
        *racing.race.borrow_mut() = Some(theirs.to_json());
        add(&a, "Plays the cello", 0.7).await;
        a.tasks.drain().await;
        assert_eq!(racing.conflicts.get(), 1);
        let stored = stored_vectors(&kv).unwrap();
        assert_eq!(stored.len(), 3, "no write lost the other's vectors");
        assert_eq!(a.model.calls(EmbedPurpose::Facts).concat(), vec!["Has a dog called Rex", "Drinks green tea", "Plays the cello"]);
        b.tasks.drain().await;
        b.rig.engine.refresh_vectors().await.unwrap();
        b.rig.engine.refresh().await.unwrap();
        assert_eq!(a.rig.engine.vector_status(), (3, 0));
        assert_eq!(b.rig.engine.vector_status(), (3, 0));
        // The document's revision was moved by the three fact commits only.
        assert_eq!(a.rig.engine.revision(), 3);
    });
}

#[test]
fn a_large_import_is_embedded_in_batches_and_written_a_logarithmic_number_of_times() {
    run(async {
        let (kv, store) = racing_store();
        let model = Rc::new(ToyEmbedder { batch: 10, ..Rc::try_unwrap(ToyEmbedder::new("toy")).ok().unwrap() });
        let r =
            open_with(RigBuilder::shared(&kv, &FakeClock::at(T0)).store(store.clone()).config(|c| c.apply.max_facts = 1000), &model).await;
        let facts: Vec<serde_json::Value> = (0..300).map(|i| serde_json::json!({"content": format!("fact number {i}")})).collect();
        let doc = serde_json::json!({"version": "1.0", "user": {}, "history": {}, "facts": facts});
        r.rig.engine.import(&user_memory::json::Value::String(doc.to_string())).await.unwrap();
        r.tasks.drain().await;
        assert_eq!(r.model.calls(EmbedPurpose::Facts).len(), 30, "batches of 10");
        assert_eq!(stored_vectors(&kv).unwrap().len(), 300);
        assert_eq!(r.rig.engine.vector_status(), (300, 0));
        let writes = store.vector_commits.get();
        assert!((5..=16).contains(&writes), "{writes} writes of the vectors slot for 30 batches");
    });
}

#[test]
fn close_aborts_the_embedder_and_stops_filling() {
    run(async {
        let r = open_with(RigBuilder::new(), &ToyEmbedder::new("toy")).await;
        add(&r, "Has a dog called Rex", 0.7).await;
        r.rig.engine.close().await.unwrap();
        assert!(r.model.cancelled.get());
        r.tasks.drain().await;
        assert!(r.model.calls(EmbedPurpose::Facts).is_empty(), "a closed instance embeds nothing");
    });
}

fn processed(rig: &Rig) -> Vec<user_memory::engine::ProcessedEvent> {
    use user_memory::engine::Event;
    rig.events.0.borrow().iter().filter_map(|e| if let Event::Processed(p) = e { Some(p.clone()) } else { None }).collect()
}

/// Before: only the words were compared, so a forgotten fact came back in other words
/// ("Owns a puppy" after forgetting "Has a dog called Rex"). With an embedder, a new fact of
/// an extraction whose vector is within FORGET_COSINE of a tombstone's (and is the same
/// claim: no negation, number or swapped word) is refused as `forgotten`, naming the
/// tombstone; the tombstone, which stores no vector, is embedded when first needed and only
/// once; an embedding failure leaves the lexical test (the fact is learned, an event says
/// why), never fails the extraction.
#[test]
fn a_new_fact_that_means_a_forgotten_one_is_refused_with_an_embedder() {
    run(async {
        let reply = |c: &str| Ok(serde_json::json!({"newFacts": [{"content": c, "category": "knowledge", "confidence": 0.9}]}).to_string());
        let replies = || vec![reply("Owns a puppy"), reply("Drinks green tea"), reply("Has a pet"), reply("Owns a puppy")];
        // Without an embedder: the paraphrase shares no word with the tombstone, it is learned.
        let plain = RigBuilder::new().replies(replies()).open().await.unwrap();
        let f = plain.engine.add_fact(&json!({"content": "Has a dog called Rex"})).await.unwrap();
        plain.engine.remove_fact(&f.id, true).await.unwrap();
        plain.engine.observe("t1", &turn("I got a puppy", "Nice")).unwrap().unwrap().await.unwrap();
        plain.engine.flush().await.unwrap();
        assert_eq!(plain.engine.cached().facts.len(), 1, "learned without an embedder");

        let r = open_with(RigBuilder::new().replies(replies()), &ToyEmbedder::new("toy")).await;
        let f = r.rig.engine.add_fact(&json!({"content": "Has a dog called Rex"})).await.unwrap();
        r.rig.engine.remove_fact(&f.id, true).await.unwrap();
        r.tasks.drain().await;
        r.rig.engine.observe("t1", &turn("I got a puppy", "Nice")).unwrap().unwrap().await.unwrap();
        r.rig.engine.flush().await.unwrap();
        assert!(r.rig.engine.cached().facts.is_empty(), "{:?}", r.rig.engine.cached().facts);
        let p = processed(&r.rig).pop().unwrap();
        assert_eq!((p.skipped[0].reason.as_str(), p.skipped[0].fact.as_deref()), ("forgotten", Some(f.id.as_str())));
        let calls = r.model.calls(EmbedPurpose::Facts);
        assert_eq!(
            calls.last().unwrap(),
            &vec!["owns a puppy".to_string(), "has a dog called rex".to_string()],
            "the tombstone embedded on demand"
        );
        // An unrelated fact is learned; the tombstone is not embedded again.
        r.rig.engine.observe("t2", &turn("I like green tea", "Nice")).unwrap().unwrap().await.unwrap();
        r.rig.engine.flush().await.unwrap();
        assert_eq!(r.rig.engine.cached().facts.len(), 1);
        assert_eq!(r.model.calls(EmbedPurpose::Facts).iter().filter(|c| c.contains(&"has a dog called rex".to_string())).count(), 1);
        // A failed embedding: the lexical test alone (learned), an EMBED_FAILED event, no failure.
        r.tasks.drain().await;
        // (Twice: the extraction prompt's ranking embeds the conversation first.)
        r.model.then(Answer::Fail(Error::EmbedFailed("down".into())));
        r.model.then(Answer::Fail(Error::EmbedFailed("down".into())));
        r.rig.engine.observe("t3", &turn("I have a pet", "Nice")).unwrap().unwrap().await.unwrap();
        r.rig.engine.flush().await.unwrap();
        assert!(
            r.rig.engine.cached().facts.iter().any(|f| f.content == "Has a pet"),
            "{:?} {:?} {:?}",
            r.rig.engine.cached().facts,
            r.model.calls.borrow(),
            processed(&r.rig).pop()
        );
        assert!(r.rig.events.error_codes().contains(&"EMBED_FAILED"));
        // unforget(): the paraphrase is learned again.
        r.rig.engine.unforget(&f.id).await.unwrap();
        r.rig.engine.observe("t4", &turn("My puppy again", "Nice")).unwrap().unwrap().await.unwrap();
        r.rig.engine.flush().await.unwrap();
        assert!(r.rig.engine.cached().facts.iter().any(|f| f.content == "Owns a puppy"));
    });
}

/// `forgotten_matching()` (`forgotten({ matching })`, what the tools check before they
/// remember a fact): before, it compared words only, so with an embedder a tool's remember
/// stored a forgotten fact said in other words ("Owns a puppy" after forgetting "Has a dog
/// called Rex"), which extraction refuses. Now it matches by meaning too, as extraction does;
/// a negation, an unrelated fact or a failed embedding (an `EMBED_FAILED` event: the words
/// alone) matches nothing.
#[test]
fn forgotten_matching_finds_a_tombstone_by_its_words_then_by_meaning_with_an_embedder() {
    run(async {
        let plain = RigBuilder::new().open().await.unwrap();
        let f = plain.engine.add_fact(&json!({"content": "Has a dog called Rex"})).await.unwrap();
        plain.engine.remove_fact(&f.id, true).await.unwrap();
        let found = |t: Option<user_memory::forget::Tombstone>| t.map(|t| t.id);
        assert_eq!(found(plain.engine.forgotten_matching("Has a dog called Rex (a beagle)").await.unwrap()), Some(f.id.clone()));
        assert_eq!(found(plain.engine.forgotten_matching("Owns a puppy").await.unwrap()), None, "words alone");

        let r = open_with(RigBuilder::new(), &ToyEmbedder::new("toy")).await;
        let f = r.rig.engine.add_fact(&json!({"content": "Has a dog called Rex"})).await.unwrap();
        r.rig.engine.add_fact(&json!({"content": "Drinks green tea"})).await.unwrap();
        r.rig.engine.remove_fact(&f.id, true).await.unwrap();
        r.tasks.drain().await;
        let e = &r.rig.engine;
        assert_eq!(found(e.forgotten_matching("Has a dog called Rex").await.unwrap()), Some(f.id.clone()));
        assert_eq!(found(e.forgotten_matching("  Owns a puppy\u{200b} ").await.unwrap()), Some(f.id.clone()), "by meaning");
        assert_eq!(found(e.forgotten_matching("Has no dog").await.unwrap()), None, "a negation is another claim");
        assert_eq!(found(e.forgotten_matching("Plays the cello").await.unwrap()), None);
        assert_eq!(found(e.forgotten_matching(" \u{200b} ").await.unwrap()), None);
        r.model.then(Answer::Fail(Error::EmbedFailed("down".into())));
        assert_eq!(found(e.forgotten_matching("Owns a puppy").await.unwrap()), None, "the words alone");
        assert!(r.rig.events.error_codes().contains(&"EMBED_FAILED"));
        assert_eq!(found(e.forgotten_matching("Owns a puppy").await.unwrap()), Some(f.id.clone()), "next time by meaning again");
    });
}
