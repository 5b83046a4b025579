//! The incremental fact index and similarity scoring (SPEC §8).
//!
//! [`FactIndex`] is an inverted index over the facts of one document. [`FactIndex::sync`]
//! diffs the document's facts against what is indexed (by id, content and `createdAt`) and
//! only tokenises facts that were added or changed; removed facts leave the index. Tokens
//! are interned to `u32` ids and document frequencies are the lengths of the posting lists,
//! so they stay correct after every sync without a rebuild.
//!
//! Scoring is Okapi BM25 over the tokens of [`crate::tokenize`], with the query built from
//! weighted parts (the last user message can count more than older turns) and CJK unigrams
//! weighted below words and bigrams. See [`FactIndex::similarities`] for what the returned
//! number means.

use crate::document::Fact;
use crate::time::millis_from_iso;
use crate::tokenize::{for_each_token, TokenKind, TokenizerOptions};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Tuning of tokenisation and BM25. [`Params::default`] is what was measured best on the
/// development set (`docs/relevance.md`); the evaluation example varies the fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// BM25 term-frequency saturation `k1`.
    pub k1: f32,
    /// BM25 length normalisation `b` (0 = none, 1 = full).
    pub b: f32,
    /// Query weight of a CJK unigram occurrence (words count 1).
    pub unigram_weight: f32,
    /// Query weight of a CJK bigram occurrence.
    pub bigram_weight: f32,
    /// Query weight multiplier of the last user message (older text counts 1).
    pub last_user_weight: f32,
    /// Light English normalisation.
    pub tokenizer: TokenizerOptions,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            k1: 1.2,
            b: 0.75,
            unigram_weight: 1.0,
            bigram_weight: 1.0,
            last_user_weight: 1.0,
            tokenizer: TokenizerOptions { stopwords: false, stem: false },
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
    }

    /// Tokenises `content` into slot `s` and adds its postings.
    fn link(&mut self, s: u32, content: &str) {
        let mut tf: Vec<(u32, f32)> = Vec::new();
        let mut len = 0.0f32;
        let (vocab, postings) = (&mut self.vocab, &mut self.postings);
        for_each_token(content, self.params.tokenizer, |t, kind| {
            if kind != TokenKind::CjkBigram {
                len += 1.0;
            }
            let id = match vocab.get(t) {
                Some(&id) => id,
                None => {
                    let id = postings.len() as u32;
                    postings.push(Vec::new());
                    vocab.insert(t.into(), id);
                    id
                }
            };
            tf.push((id, 1.0));
        });
        merge(&mut tf);
        for &(id, n) in &tf {
            self.postings[id as usize].push(Posting { slot: s, tf: n });
        }
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
            }
        }
        self.total_len -= f64::from(e.len);
        e.terms.clear();
        e.len = 0.0;
    }

    /// Builds the weighted query from its parts (`(text, weight)`): the weight of a term is
    /// the sum over its occurrences of part weight × kind weight.
    fn query_terms(&self, parts: &[(&str, f32)]) -> Vec<(u32, f32)> {
        let p = &self.params;
        let mut q: Vec<(u32, f32)> = Vec::new();
        for &(text, weight) in parts {
            for_each_token(text, p.tokenizer, |t, kind| {
                let Some(&id) = self.vocab.get(t) else { return };
                let w = weight
                    * match kind {
                        TokenKind::Word => 1.0,
                        TokenKind::CjkUnigram => p.unigram_weight,
                        TokenKind::CjkBigram => p.bigram_weight,
                    };
                q.push((id, w));
            });
        }
        merge(&mut q);
        q
    }

    /// Similarity of every fact (in the order of the last [`sync`]) to a query made of
    /// weighted text parts, e.g. `[(older_turns, 1.0), (last_user_message, 2.0)]`.
    ///
    /// The raw score of a fact is BM25:
    /// `Σ_t q(t) · idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len/avglen))` over the query terms
    /// `t` it contains, with `idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))` and `q(t)` the
    /// query weight of the term. Raw scores depend on query length, so they are **divided by
    /// the best score of this query**: the returned similarity is in `[0, 1]`, the best
    /// matching fact has exactly 1, a fact sharing no term has 0, and all are 0 when nothing
    /// matches (then ranking falls back to confidence).
    ///
    /// [`sync`]: FactIndex::sync
    pub fn similarities(&self, parts: &[(&str, f32)]) -> Vec<f32> {
        let mut out = vec![0.0f32; self.order.len()];
        let q = self.query_terms(parts);
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
