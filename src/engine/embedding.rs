//! The embedding model in the engine: fact vectors kept in their own storage slot and
//! filled in the background, and the query vector of `inject()`, `explain()` and `search()`.
//!
//! * **Fact vectors** are computed once per fact content and model. After every change of
//!   the document (a commit here, a remote one, `open()`, a new embedder) the facts without
//!   a vector are embedded in batches by one background task, which writes them to the
//!   `vectors` slot with its own revision (a conflict there re-reads and merges, it never
//!   touches the document). Vectors of facts that are gone or were edited are dropped from
//!   the slot by the same task. Nothing here blocks or fails a commit: a failure is an
//!   `error` event with code `EMBED_FAILED` and the task is tried again after a backoff
//!   (30 s, doubling, at most 15 min), when something kicks it (a commit or a ranking).
//! * **The query** is embedded with the embedder's short query timeout. On failure the
//!   ranking is lexical and an `EMBED_FAILED` event says so; for a backoff after that
//!   (10 s, doubling, at most 5 min) queries are not embedded at all, so a dead endpoint does
//!   not cost every chat turn its timeout. The last query vector is kept (`inject()` and
//!   `explain()` of the same turn embed once).
//!
//! No user callback (the embedder, storage) runs while engine state is borrowed: what a task
//! needs is copied out (the vectors are behind an `Rc`) before every `.await`.

use super::{Engine, ErrorEvent, Event};
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::base::time::Millis;
use crate::memory::document::{normalize_content, Document};
use crate::memory::forget::{same_claim, skeleton, Tombstone, FORGET_COSINE};
use crate::recall::embed::{check_reply, EmbedPurpose, Embedder};
use crate::recall::fusion::Dense;
use crate::recall::vectors::{content_key, normalize, QueryVector, VectorSet, NO_VECTOR};
use crate::storage::{Commit, Slot};
use std::rc::Rc;

/// Runs a background task to completion (the platform's `spawn_local`).
pub trait Spawner {
    /// Starts `task`; it runs between other work on this thread.
    fn spawn(&self, task: LocalFuture<'static, ()>);
}

/// First wait after a failed fact embedding; it doubles per failure.
pub const FILL_RETRY_BASE_MS: Millis = 30_000;
/// Longest wait between two tries of the fact embedding.
pub const FILL_RETRY_MAX_MS: Millis = 900_000;
/// First pause of query embedding after a failed query; it doubles per failure.
pub const QUERY_RETRY_BASE_MS: Millis = 10_000;
/// Longest pause of query embedding.
pub const QUERY_RETRY_MAX_MS: Millis = 300_000;
/// Conflicting writes of the vectors slot before a fill gives up until its next try.
const MAX_VECTOR_REPLAYS: usize = 16;
/// Forget tombstones compared by meaning with an extraction's new facts: the newest this
/// many (older ones are matched by their words only). Each is embedded once per process and
/// model, when first needed (a tombstone stores no vector: the vectors slot is keyed by the
/// contents of current facts, and a tombstone written before this or by an instance without
/// an embedder has none).
pub(super) const MEANING_TOMBSTONES: usize = 64;

/// `base × 2^(failures − 1)`, capped.
fn backoff(base: Millis, max: Millis, failures: u32) -> Millis {
    base.saturating_mul(1 << failures.saturating_sub(1).min(20)).min(max)
}

/// The engine's embedding state (in its own `RefCell`, apart from the document state).
#[derive(Default)]
pub(super) struct EmbedState {
    embedder: Option<Rc<dyn Embedder>>,
    spawner: Option<Rc<dyn Spawner>>,
    /// The vectors of the current model, as last read from or written to storage.
    vectors: Rc<VectorSet>,
    /// Revision of the vectors slot `vectors` came from (0: never read or written).
    revision: u64,
    /// Whether the slot was read for the current model.
    loaded: bool,
    /// Per fact position of the cached document: where its vector is.
    aligned: Rc<Vec<u32>>,
    /// Facts of the cached document (non-blank) without a vector.
    missing: usize,
    /// The slot holds vectors of no current fact.
    stale: bool,
    /// A background fill is running.
    filling: bool,
    fill_failures: u32,
    fill_retry_at: Millis,
    query_failures: u32,
    query_retry_at: Millis,
    /// The last query vector: (model, text, vector).
    last_query: Option<(String, String, Rc<QueryVector>)>,
    /// Unit vectors of forget tombstones' contents: (model, normalised content, vector),
    /// at most [`MEANING_TOMBSTONES`] × 2, newest last (see [`Engine::forgotten_by_meaning`]).
    tombstone_vectors: Vec<(String, String, Vec<f32>)>,
}

impl EmbedState {
    /// Re-aligns the vectors with `doc`'s facts and counts what is missing or stale.
    fn align(&mut self, doc: &Document) {
        self.aligned = Rc::new(self.vectors.align(&doc.facts));
        let mut used = vec![false; self.vectors.len()];
        self.missing = 0;
        for (f, &slot) in doc.facts.iter().zip(self.aligned.iter()) {
            match used.get_mut(slot as usize) {
                Some(u) => *u = true,
                None => self.missing += usize::from(!f.content.trim().is_empty()),
            }
        }
        self.stale = used.iter().any(|u| !u);
    }
}

/// A query vector (when there is one) with the fact vectors it is compared with.
pub(super) struct QueryVectors {
    vectors: Rc<VectorSet>,
    aligned: Rc<Vec<u32>>,
    query: Rc<QueryVector>,
}

impl QueryVectors {
    /// The dense half of a ranking.
    pub(super) fn dense(&self) -> Dense<'_> {
        Dense { vectors: &self.vectors, aligned: &self.aligned, query: &self.query }
    }
}

/// `EMBED_FAILED` for an embedder's error (its code and message kept in the message; an
/// `EMBED_FAILED` or `CLOSED` as it is).
fn embed_error(e: Error, doing: &str) -> Error {
    match e {
        Error::EmbedFailed(m) => Error::EmbedFailed(format!("{doing}: {m}")),
        Error::Closed => Error::Closed,
        other => Error::EmbedFailed(format!("{doing}: {}", other.message())),
    }
}

impl Engine {
    fn emit_embed_error(&self, error: Error) {
        if error != Error::Closed {
            self.emit(Event::Error(ErrorEvent { error, thread_id: None, attempt: None }));
        }
    }

    /// Uses `embedder` from now on (`None`: no embedding model, lexical ranking). Vectors of
    /// another model are dropped; the slot is read and missing vectors are filled in the
    /// background through `spawner`.
    pub fn set_embedder(&self, embedder: Option<Rc<dyn Embedder>>, spawner: Rc<dyn Spawner>) {
        let model = embedder.as_ref().map(|e| e.model().to_string());
        let old = self.inner.embed.borrow_mut().embedder.take();
        // Cancelling aborts the old model's calls, which runs their abort listeners (user
        // code that may call back in): with no borrow held.
        if let Some(old) = old.filter(|old| model.as_deref() != Some(old.model())) {
            old.cancel();
        }
        {
            let mut em = self.inner.embed.borrow_mut();
            if model.as_deref() != Some(em.vectors.model()) {
                em.vectors = Rc::new(VectorSet::new(model.as_deref().unwrap_or(""), 0));
                em.revision = 0;
                em.loaded = false;
            }
            em.embedder = embedder;
            em.spawner = Some(spawner);
            (em.fill_failures, em.fill_retry_at, em.query_failures, em.query_retry_at) = (0, 0, 0, 0);
        }
        self.realign_vectors();
        self.kick_vectors();
    }

    /// Whether an embedding model is configured.
    pub fn has_embedder(&self) -> bool {
        // A build without the `embed` feature (docs/size.md) never has one: the vector
        // paths below are then dead code the compiler drops.
        cfg!(feature = "embed") && self.inner.embed.borrow().embedder.is_some()
    }

    /// Which of `texts` (an extraction's new facts, cleaned as apply cleans them) mean what a
    /// forget tombstone says: the cosine of their vectors at least [`FORGET_COSINE`] and
    /// [`same_claim`] (no negation, number or swapped word between them); each as its
    /// normalised content with that tombstone's id. Empty without an embedder. Costs a read
    /// of the record and one embedding call of the new facts (plus the tombstones not
    /// embedded yet); a failure is
    /// an `EMBED_FAILED` event and leaves the lexical test alone, never fails the extraction.
    pub(super) fn forgotten_by_meaning<'a>(&'a self, texts: &'a [String]) -> LocalFuture<'a, Vec<(String, String)>> {
        // Boxed: one state machine, not one inlined into every caller's (wasm size).
        Box::pin(async move {
            if !self.has_embedder() || texts.is_empty() {
                return Vec::new();
            }
            // The tombstones as stored now (a store error: the lexical test alone).
            let tombstones = self.refresh_record().await.map(|r| r.forgotten.list).unwrap_or_default();
            if tombstones.is_empty() {
                return Vec::new();
            }
            match self.meaning_matches(texts, &tombstones).await {
                Ok(found) => found,
                Err(e) => {
                    self.emit_embed_error(e);
                    Vec::new()
                }
            }
        })
    }

    async fn meaning_matches(&self, texts: &[String], tombstones: &[Tombstone]) -> Result<Vec<(String, String)>> {
        let Some(embedder) = self.inner.embed.borrow().embedder.clone() else { return Ok(Vec::new()) };
        let model = embedder.model().to_string();
        let newest = &tombstones[tombstones.len().saturating_sub(MEANING_TOMBSTONES)..];
        let mut wanted: Vec<String> = texts.iter().map(|t| normalize_content(t)).collect();
        let n = wanted.len();
        {
            let em = self.inner.embed.borrow();
            for t in newest {
                if !em.tombstone_vectors.iter().any(|(m, c, _)| *m == model && *c == t.content) && !wanted[n..].contains(&t.content) {
                    wanted.push(t.content.clone());
                }
            }
        }
        let doing = "comparing new facts with forgotten ones by meaning failed (they were compared by their words)";
        let mut vectors = Vec::with_capacity(wanted.len());
        for chunk in wanted.chunks(embedder.batch_size().max(1)) {
            let v = embedder.embed(chunk, EmbedPurpose::Facts).await.map_err(|e| embed_error(e, doing))?;
            check_reply(chunk.len(), &v).map_err(|e| embed_error(e, doing))?;
            vectors.extend(v);
        }
        for v in &mut vectors {
            if !normalize(v) {
                v.clear(); // no direction: compares as 0
            }
        }
        let facts: Vec<Vec<f32>> = vectors.drain(..n.min(vectors.len())).collect();
        let mut em = self.inner.embed.borrow_mut();
        em.tombstone_vectors.retain(|(m, _, _)| *m == model);
        em.tombstone_vectors.extend(wanted.drain(n..).zip(vectors).map(|(c, v)| (model.clone(), c, v)));
        let over = em.tombstone_vectors.len().saturating_sub(2 * MEANING_TOMBSTONES);
        em.tombstone_vectors.drain(..over);
        let mut found = Vec::new();
        for ((key, text), v) in wanted.iter().zip(texts).zip(&facts) {
            let words = skeleton(text);
            let near = newest.iter().rev().find(|t| {
                em.tombstone_vectors.iter().find(|(m, c, _)| *m == model && *c == t.content).is_some_and(|(_, _, tv)| {
                    tv.len() == v.len()
                        && v.iter().zip(tv).map(|(a, b)| a * b).sum::<f32>() >= FORGET_COSINE
                        && same_claim(&skeleton(&t.content), &words)
                })
            });
            if let Some(t) = near {
                found.push((key.clone(), t.id.clone()));
            }
        }
        Ok(found)
    }

    /// Aborts the embedder's calls in flight (`close()`).
    pub(super) fn cancel_embedder(&self) {
        let embedder = self.inner.embed.borrow().embedder.clone();
        if let Some(e) = embedder {
            e.cancel();
        }
    }

    /// After the cached document changed: re-align the vectors and fill what is missing.
    pub(super) fn document_changed(&self) {
        if self.has_embedder() {
            self.realign_vectors();
            self.kick_vectors();
        }
    }

    fn realign_vectors(&self) {
        let st = self.inner.state.borrow();
        self.inner.embed.borrow_mut().align(&st.doc);
    }

    /// Starts the background fill if there is something to do and nothing holds it back
    /// (closed, running already, backing off after a failure).
    fn kick_vectors(&self) {
        if !cfg!(feature = "embed") {
            return;
        }
        let now = self.now();
        let spawner = {
            let mut em = self.inner.embed.borrow_mut();
            let work = !em.loaded || em.missing > 0 || em.stale;
            if em.embedder.is_none() || em.filling || !work || now < em.fill_retry_at || self.is_closed() {
                return;
            }
            let Some(spawner) = em.spawner.clone() else { return };
            em.filling = true;
            spawner
        };
        let me = self.clone();
        spawner.spawn(Box::pin(async move {
            let result = me.fill_vectors().await;
            let now = me.now();
            let failed = {
                let mut em = me.inner.embed.borrow_mut();
                em.filling = false;
                match &result {
                    Ok(()) => {
                        em.fill_failures = 0;
                        false
                    }
                    Err(Error::Closed) => false,
                    Err(_) => {
                        em.fill_failures += 1;
                        em.fill_retry_at = now + backoff(FILL_RETRY_BASE_MS, FILL_RETRY_MAX_MS, em.fill_failures);
                        true
                    }
                }
            };
            if let Err(e) = result {
                me.emit_embed_error(e);
            }
            // The document may have changed while this ran: go again (unless failing).
            if !failed {
                me.kick_vectors();
            }
        }));
    }

    /// Re-reads the vectors slot (another tab or process wrote it) and adopts it if it holds
    /// vectors of the current model.
    pub async fn refresh_vectors(&self) -> Result<()> {
        if !cfg!(feature = "embed") {
            return Ok(());
        }
        let model = self.inner.embed.borrow().embedder.as_ref().map(|e| e.model().to_string());
        match model {
            Some(model) => self.sync_vectors(&model, None, false).await,
            None => Ok(()),
        }
    }

    /// The background fill: embed the facts that have no vector, a batch at a time, and
    /// write them (also dropping the vectors of facts that are gone). Batches are written
    /// once they add a quarter of what is stored (or at the end), so filling a large import
    /// rewrites the slot a logarithmic number of times, not once per batch.
    async fn fill_vectors(&self) -> Result<()> {
        // The newest document, so that what this instance prunes is really gone.
        self.refresh().await?;
        let Some(embedder) = self.inner.embed.borrow().embedder.clone() else { return Ok(()) };
        let model = embedder.model();
        // The first write reads what is stored (and prunes).
        self.sync_vectors(model, None, true).await?;
        let mut pending = VectorSet::new(model, 0);
        // The bound only guards against a document that keeps changing under the task.
        for _ in 0..100_000 {
            if self.is_closed() {
                return Err(Error::Closed);
            }
            let (keys, texts) = self.missing_vectors(embedder.batch_size(), &pending);
            let stored = self.inner.embed.borrow().vectors.len();
            if texts.is_empty() || pending.len() >= embedder.batch_size().max(stored / 4) {
                if !pending.is_empty() {
                    self.sync_vectors(model, Some(std::mem::replace(&mut pending, VectorSet::new(model, 0))), true).await?;
                }
                if texts.is_empty() {
                    return Ok(());
                }
            }
            let doing = format!("embedding {} new fact(s) failed; they rank lexically until it works", texts.len());
            let vectors = embedder.embed(&texts, EmbedPurpose::Facts).await.map_err(|e| embed_error(e, &doing))?;
            check_reply(texts.len(), &vectors).map_err(|e| embed_error(e, &doing))?;
            for (key, v) in keys.into_iter().zip(vectors) {
                pending.insert(key, v).map_err(|e| embed_error(e, &doing))?;
            }
        }
        Ok(())
    }

    /// Up to `n` distinct fact contents without a vector (stored or `pending`), with their
    /// keys.
    fn missing_vectors(&self, n: usize, pending: &VectorSet) -> (Vec<u64>, Vec<String>) {
        let st = self.inner.state.borrow();
        let em = self.inner.embed.borrow();
        let (mut keys, mut texts) = (Vec::new(), Vec::new());
        for (f, &slot) in st.doc.facts.iter().zip(em.aligned.iter()) {
            if texts.len() >= n.max(1) {
                break;
            }
            let key = content_key(&f.content);
            if slot == NO_VECTOR && !f.content.trim().is_empty() && !keys.contains(&key) && !pending.contains(key) {
                keys.push(key);
                texts.push(f.content.clone());
            }
        }
        (keys, texts)
    }

    /// Read-merge-write of the vectors slot: what is stored for `model`, plus `batch`, and
    /// (with `prune`) minus the vectors of no current fact; written if that differs, then
    /// adopted. On a conflict (another instance wrote) it reads and merges again. A slot of
    /// another model, or one that cannot be read as vectors, counts as empty (vectors can
    /// always be computed again; this write replaces it).
    async fn sync_vectors(&self, model: &str, batch: Option<VectorSet>, prune: bool) -> Result<()> {
        let store = self.parts().store.clone();
        for _ in 0..MAX_VECTOR_REPLAYS {
            let (raw, revision) = match store.load(Slot::Vectors).await {
                Ok(v) => v.map_or((None, 0), |v| (Some(v.value), v.revision)),
                Err(Error::CorruptMemory(_)) => {
                    // (A pointer naming nothing, say.) Derived data: start afresh.
                    store.discard(Slot::Vectors).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let stored = raw.as_deref().and_then(|t| VectorSet::from_json(t).ok()).filter(|s| s.model() == model);
            let mut next = stored.unwrap_or_else(|| VectorSet::new(model, 0));
            if let Some(batch) = &batch {
                if next.dimensions() != batch.dimensions() && !next.is_empty() {
                    // The model now answers with other dimensions: the old vectors are useless.
                    next = VectorSet::new(model, 0);
                }
                next.merge_from(batch);
            }
            if prune {
                next.retain_facts(&self.inner.state.borrow().doc.facts);
            }
            let json = next.to_json();
            let changed = raw.as_deref() != Some(json.as_str()) && !(raw.is_none() && next.is_empty());
            let revision = if changed {
                match store.commit(Slot::Vectors, revision, json).await? {
                    Commit::Committed(rev) => rev,
                    Commit::Conflict => continue,
                }
            } else {
                revision
            };
            {
                let mut em = self.inner.embed.borrow_mut();
                if em.vectors.model() != model {
                    return Ok(());
                }
                if em.revision != revision || !em.loaded || changed {
                    em.vectors = Rc::new(next);
                }
                em.revision = revision;
                em.loaded = true;
            }
            self.realign_vectors();
            return Ok(());
        }
        Err(Error::Conflict("the stored fact vectors kept changing under concurrent writers; they are written again later".into()))
    }

    /// The query's vector with the fact vectors to compare it with, or `None` (no embedder,
    /// no fact vectors yet, a blank query, a failure — reported as an event — or the pause
    /// after one). Also kicks the background fill when vectors are missing.
    pub(super) async fn query_vectors(&self, query: &str) -> Option<QueryVectors> {
        if !cfg!(feature = "embed") {
            return None;
        }
        self.kick_vectors();
        let now = self.now();
        let (embedder, vectors, aligned) = {
            let em = self.inner.embed.borrow();
            let embedder = em.embedder.clone()?;
            if query.trim().is_empty() || em.vectors.is_empty() || now < em.query_retry_at {
                return None;
            }
            let model = embedder.model();
            if let Some((_, _, q)) = em.last_query.as_ref().filter(|(m, t, _)| m == model && t == query) {
                return Some(QueryVectors { vectors: em.vectors.clone(), aligned: em.aligned.clone(), query: q.clone() });
            }
            (embedder, em.vectors.clone(), em.aligned.clone())
        };
        let texts = [query.to_string()];
        let result = embedder.embed(&texts, EmbedPurpose::Query).await.and_then(|v| {
            check_reply(1, &v)?;
            let q = v.into_iter().next().and_then(QueryVector::new);
            match q {
                Some(q) if q.dimensions() == vectors.dimensions() => Ok(q),
                Some(q) => Err(Error::EmbedFailed(format!(
                    "the query vector has {} dimensions, the stored fact vectors {}",
                    q.dimensions(),
                    vectors.dimensions()
                ))),
                None => Err(Error::EmbedFailed("the query vector has no direction".into())),
            }
        });
        let now = self.now();
        match result {
            Ok(q) => {
                let q = Rc::new(q);
                let mut em = self.inner.embed.borrow_mut();
                em.query_failures = 0;
                em.last_query = Some((embedder.model().to_string(), query.to_string(), q.clone()));
                // The vectors may have moved on while the query was embedded: use the newest.
                let current = em.vectors.model() == embedder.model() && em.vectors.dimensions() == q.dimensions();
                let (vectors, aligned) = if current { (em.vectors.clone(), em.aligned.clone()) } else { (vectors, aligned) };
                Some(QueryVectors { vectors, aligned, query: q })
            }
            Err(Error::Closed) => None,
            Err(e) => {
                let pause = {
                    let mut em = self.inner.embed.borrow_mut();
                    em.query_failures += 1;
                    let pause = backoff(QUERY_RETRY_BASE_MS, QUERY_RETRY_MAX_MS, em.query_failures);
                    em.query_retry_at = now + pause;
                    pause
                };
                self.emit_embed_error(embed_error(
                    e,
                    &format!("embedding the query failed, so facts were ranked lexically (and will be for the next {} s)", pause / 1000),
                ));
                None
            }
        }
    }

    /// How many facts of the cached document have a vector, and how many are waiting for
    /// one (distinct non-blank contents).
    pub fn vector_status(&self) -> (usize, usize) {
        let em = self.inner.embed.borrow();
        (em.aligned.iter().filter(|&&s| s != NO_VECTOR).count(), em.missing)
    }
}
