//! The incremental fact index and similarity scoring (SPEC §8).
//!
//! [`FactIndex`] is an inverted index over the facts of one document. [`FactIndex::sync`]
//! diffs the document's facts against what is indexed (by id, content and `createdAt`) and
//! only tokenises facts that were added or changed; removed facts leave the index. Tokens
//! are interned to `u32` ids and document frequencies are the lengths of the posting lists,
//! so they stay correct after every sync without a rebuild.
//!
//! Scoring is Okapi BM25 over the terms of [`crate::tokenize::for_each_term`] (words, CJK
//! unigrams and bigrams, bilingual lexicon concepts), CJK unigrams weighted below words and
//! bigrams in the query. See [`FactIndex::similarities`] for what the returned number means
//! and `docs/relevance.md` for the measurements behind every choice.

use crate::document::Fact;
use crate::time::millis_from_iso;
use crate::tokenize::{for_each_term, Term, TokenKind, TokenizerOptions};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Tuning of tokenisation and BM25. [`Params::default`] is what measured best on the
/// development set (`docs/relevance.md`); the evaluation example varies the fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// BM25 term-frequency saturation `k1` (default 1.2).
    pub k1: f32,
    /// BM25 length normalisation `b`, 0 = none, 1 = full (default 0.75).
    pub b: f32,
    /// Query weight of a CJK unigram occurrence; words count 1 (default 0.5).
    pub unigram_weight: f32,
    /// Query weight of a CJK bigram occurrence (default 1).
    pub bigram_weight: f32,
    /// Query weight of a lexicon concept occurrence (default 1).
    pub concept_weight: f32,
    /// Stopwords, stemming and the bilingual lexicon (all on by default).
    pub tokenizer: TokenizerOptions,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            k1: 1.2,
            b: 0.75,
            unigram_weight: 0.5,
            bigram_weight: 1.0,
            concept_weight: 1.0,
            tokenizer: TokenizerOptions::default(),
        }
    }
}

/// FxHash: a fast non-cryptographic hash for the intern tables (keys are not adversarial
/// in a way that matters here: a user's own facts).
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// One posting: a fact slot and how often the term occurs in it.
#[derive(Debug, Clone, Copy)]
struct Posting {
    slot: u32,
    tf: f32,
}

/// An indexed fact.
#[derive(Debug, Clone, Default)]
struct Entry {
    /// The key under which it is found in `by_id` (the id, suffixed for duplicate ids).
    key: Box<str>,
    content: Box<str>,
    created_at: Box<str>,
    created_ms: u64,
    /// Distinct term ids of the content.
    terms: Vec<u32>,
    /// Length in tokens (a CJK character counts once, not once per gram).
    len: f32,
    /// Position in the facts of the last sync.
    pos: u32,
    /// Sync generation that last claimed it; 0 = free slot.
    mark: u32,
}

/// An inverted index over the facts of one document, kept up to date incrementally.
#[derive(Debug, Default, Clone)]
pub struct FactIndex {
    params: Params,
    vocab: FxMap<Box<str>, u32>,
    postings: Vec<Vec<Posting>>,
    entries: Vec<Entry>,
    free: Vec<u32>,
    by_id: FxMap<Box<str>, u32>,
    /// Slot of each position of the facts of the last sync.
    order: Vec<u32>,
    total_len: f64,
    generation: u32,
    /// Terms with a non-empty posting list.
    live_terms: usize,
    /// Facts tokenised since creation.
    tokenised: u64,
}

impl FactIndex {
    /// An empty index with the default [`Params`].
    pub fn new() -> FactIndex {
        FactIndex::with_params(Params::default())
    }

    /// An empty index with explicit tuning.
    pub fn with_params(params: Params) -> FactIndex {
        FactIndex { params, ..FactIndex::default() }
    }

    /// The tuning in use.
    pub fn params(&self) -> Params {
        self.params
    }

    /// Number of facts indexed.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// How many facts were tokenised since the index was created (diagnostics and tests:
    /// a sync after editing one fact tokenises one fact).
    pub fn tokenised(&self) -> u64 {
        self.tokenised
    }

    /// Number of interned terms, live or dead (diagnostics and tests).
    pub fn vocabulary_len(&self) -> usize {
        self.vocab.len()
    }

    /// Whether no fact is indexed.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Whether the index was last synced with facts that have these ids in this order (a
    /// cheap check that it belongs to `facts`; content edits are only seen by [`sync`]).
    ///
    /// [`sync`]: FactIndex::sync
    pub fn is_synced_with(&self, facts: &[Fact]) -> bool {
        facts.len() == self.order.len()
            && facts.iter().zip(&self.order).all(|(f, &s)| key_matches(&self.entries[s as usize].key, &f.id))
    }

    /// `createdAt` of the fact at `position` (of the last sync) in epoch ms; 0 if unknown.
    pub fn created_ms(&self, position: usize) -> u64 {
        self.order.get(position).map_or(0, |&s| self.entries[s as usize].created_ms)
    }

    /// Brings the index in line with `facts`, re-tokenising only added or changed facts
    /// (compared by id, content and `createdAt`); facts no longer present are removed.
    pub fn sync(&mut self, facts: &[Fact]) {
        if facts.len() == self.order.len()
            && facts.iter().zip(&self.order).all(|(f, &s)| {
                let e = &self.entries[s as usize];
                key_matches(&e.key, &f.id) && *e.content == *f.content && *e.created_at == *f.created_at
            })
        {
            return;
        }
        self.generation = self.generation.wrapping_add(1).max(1);
        let gen = self.generation;
        let mut order = Vec::with_capacity(facts.len());
        for (pos, f) in facts.iter().enumerate() {
            let mut key: Option<String> = None;
            let mut dup = 0u32;
            let slot = loop {
                match self.by_id.get(key.as_deref().unwrap_or(&f.id)) {
                    Some(&s) if self.entries[s as usize].mark == gen => {
                        dup += 1;
                        key = Some(format!("{}\u{0}{dup}", f.id));
                    }
                    Some(&s) => break Some(s),
                    None => break None,
                }
            };
            let slot = match slot {
                Some(s) => {
                    let e = &self.entries[s as usize];
                    if *e.content != *f.content {
                        self.unlink(s);
                        self.link(s, &f.content);
                    }
                    let e = &mut self.entries[s as usize];
                    if *e.created_at != *f.created_at {
                        e.created_at = f.created_at.as_str().into();
                        e.created_ms = millis_from_iso(&f.created_at).unwrap_or(0);
                    }
                    s
                }
                None => {
                    let s = self.free.pop().unwrap_or_else(|| {
                        self.entries.push(Entry::default());
                        (self.entries.len() - 1) as u32
                    });
                    let e = &mut self.entries[s as usize];
                    let key: Box<str> = key.map_or_else(|| f.id.as_str().into(), String::into_boxed_str);
                    e.key = key.clone();
                    e.created_at = f.created_at.as_str().into();
                    e.created_ms = millis_from_iso(&f.created_at).unwrap_or(0);
                    self.by_id.insert(key, s);
                    self.link(s, &f.content);
                    s
                }
            };
            let e = &mut self.entries[slot as usize];
            e.mark = gen;
            e.pos = pos as u32;
            order.push(slot);
        }
        let old = std::mem::replace(&mut self.order, order);
        for s in old {
            let e = &self.entries[s as usize];
            if e.mark != gen && e.mark != 0 {
                self.unlink(s);
                let e = &mut self.entries[s as usize];
                self.by_id.remove(&e.key);
                *e = Entry::default();
                self.free.push(s);
            }
        }
        // Terms of edited and removed facts stay interned; rebuild once they dominate.
        if self.vocab.len() > 4 * self.live_terms + 4096 {
            let tokenised = self.tokenised;
            *self = FactIndex::with_params(self.params);
            self.sync(facts);
            self.tokenised += tokenised;
        }
    }

    /// Tokenises `content` into slot `s` and adds its postings.
    fn link(&mut self, s: u32, content: &str) {
        let mut tf: Vec<(u32, f32)> = Vec::new();
        let mut len = 0.0f32;
        let (vocab, postings) = (&mut self.vocab, &mut self.postings);
        for_each_term(content, self.params.tokenizer, |term| {
            let id = match term {
                Term::Token(t, kind) => {
                    len += if kind == TokenKind::CjkBigram { 0.0 } else { 1.0 };
                    intern(vocab, postings, t)
                }
                Term::Concept { id, word } => {
                    len += if word { 1.0 } else { 0.0 };
                    intern(vocab, postings, &concept_key(id))
                }
            };
            tf.push((id, 1.0));
        });
        merge(&mut tf);
        for &(id, n) in &tf {
            let p = &mut self.postings[id as usize];
            self.live_terms += usize::from(p.is_empty());
            p.push(Posting { slot: s, tf: n });
        }
        self.tokenised += 1;
        let e = &mut self.entries[s as usize];
        e.content = content.into();
        e.terms = tf.into_iter().map(|(id, _)| id).collect();
        e.len = len;
        self.total_len += f64::from(len);
    }

    /// Removes the postings of slot `s`.
    fn unlink(&mut self, s: u32) {
        let e = &mut self.entries[s as usize];
        for &t in &e.terms {
            let p = &mut self.postings[t as usize];
            if let Some(i) = p.iter().position(|x| x.slot == s) {
                p.swap_remove(i);
                self.live_terms -= usize::from(p.is_empty());
            }
        }
        self.total_len -= f64::from(e.len);
        e.terms.clear();
        e.len = 0.0;
    }

    /// The query's known terms with their weights: the sum over occurrences of the kind
    /// weight (word 1, CJK unigram, CJK bigram, concept as in [`Params`]).
    fn query_terms(&self, query: &str) -> Vec<(u32, f32)> {
        let p = &self.params;
        let mut q: Vec<(u32, f32)> = Vec::new();
        for_each_term(query, p.tokenizer, |term| {
            let (id, w) = match term {
                Term::Token(t, kind) => (
                    self.vocab.get(t),
                    match kind {
                        TokenKind::Word => 1.0,
                        TokenKind::CjkUnigram => p.unigram_weight,
                        TokenKind::CjkBigram => p.bigram_weight,
                    },
                ),
                Term::Concept { id, .. } => (self.vocab.get(concept_key(id).as_str()), p.concept_weight),
            };
            if let Some(&id) = id {
                q.push((id, w));
            }
        });
        merge(&mut q);
        q
    }

    /// Similarity of every fact (in the order of the last [`sync`]) to `query`.
    ///
    /// The raw score of a fact is Okapi BM25:
    /// `Σ_t q(t) · idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len/avglen))` over the query terms
    /// `t` it contains, with `idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))`, `q(t)` the query
    /// weight of the term and `len` the fact's length in words and CJK characters. Raw scores
    /// grow with the query's length, so they are **divided by the best score of this query**:
    /// the returned similarity is in `[0, 1]`, the best matching fact has exactly 1, a fact
    /// sharing no term has 0, and all are 0 when no query term occurs in any fact.
    ///
    /// Cost: one pass over the postings of the query's terms plus one `f32` per fact; facts
    /// are never re-tokenised here.
    ///
    /// [`sync`]: FactIndex::sync
    pub fn similarities(&self, query: &str) -> Vec<f32> {
        let mut out = vec![0.0f32; self.order.len()];
        let q = self.query_terms(query);
        let n = self.order.len() as f32;
        if q.is_empty() || n == 0.0 {
            return out;
        }
        let avg = (self.total_len / f64::from(n)).max(1e-6) as f32;
        let (k1, b) = (self.params.k1, self.params.b);
        for &(t, w) in &q {
            let post = &self.postings[t as usize];
            if post.is_empty() {
                continue;
            }
            let df = post.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for p in post {
                let e = &self.entries[p.slot as usize];
                let norm = k1 * (1.0 - b + b * e.len / avg);
                out[e.pos as usize] += w * idf * p.tf * (k1 + 1.0) / (p.tf + norm);
            }
        }
        let best = out.iter().copied().fold(0.0f32, f32::max);
        if best > 0.0 {
            for x in &mut out {
                *x /= best;
            }
        }
        out
    }
}

/// The term id of token `t`, interning it if new.
fn intern(vocab: &mut FxMap<Box<str>, u32>, postings: &mut Vec<Vec<Posting>>, t: &str) -> u32 {
    if let Some(&id) = vocab.get(t) {
        return id;
    }
    let id = postings.len() as u32;
    postings.push(Vec::new());
    vocab.insert(t.into(), id);
    id
}

/// The vocabulary key of lexicon concept `c` (no real token contains `\0`).
fn concept_key(c: u32) -> String {
    format!("\u{0}{c}")
}

/// Whether an entry key belongs to `id` (duplicate ids are suffixed with `\0n`).
fn key_matches(key: &str, id: &str) -> bool {
    key.len() >= id.len()
        && key.as_bytes()[..id.len()] == *id.as_bytes()
        && (key.len() == id.len() || key.as_bytes()[id.len()] == 0)
}

/// Sorts `(term, weight)` pairs by term and sums the weights of equal terms.
fn merge(v: &mut Vec<(u32, f32)>) {
    v.sort_unstable_by_key(|&(t, _)| t);
    let mut w = 0;
    for r in 0..v.len() {
        if w > 0 && v[w - 1].0 == v[r].0 {
            v[w - 1].1 += v[r].1;
        } else {
            v[w] = v[r];
            w += 1;
        }
    }
    v.truncate(w);
}
