//! The incremental fact index and similarity scoring (docs/relevance.md).
//!
//! [`FactIndex`] is an inverted index over the facts of one document. [`FactIndex::sync`]
//! diffs the document's facts against what is indexed (by id, content and `createdAt`) and
//! only tokenises facts that were added or changed; removed facts leave the index. Tokens
//! are interned to `u32` ids and document frequencies are the lengths of the posting lists,
//! so they stay correct after every sync without a rebuild.
//!
//! Scoring is Okapi BM25 over the terms of `for_each_term` (`src/recall/tokenize.rs`) (words, CJK
//! unigrams and bigrams, bilingual lexicon concepts), CJK unigrams weighted below words and
//! bigrams in the query. See [`FactIndex::similarities`] for what the returned number means
//! and `docs/relevance.md` for the measurements behind every choice.

use crate::base::hash::FxMap;
use crate::base::time::millis_from_iso;
use crate::extract::sanitize::safe_category;
use crate::json::Value;
use crate::memory::document::{Fact, CORRECTION, DAY_MS, DEFAULT_CATEGORY, HAPPENED_AT};
use crate::recall::render::{clean, fact_date, push_confidence, push_value};
use crate::recall::token_count::Estimate;
use crate::recall::tokenize::{for_each_term, Term, TokenKind};

/// How text is cut into terms ([`Params::tokenizer`]).
pub use crate::recall::tokenize::TokenizerOptions;

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
        Params { k1: 1.2, b: 0.75, unigram_weight: 0.5, bigram_weight: 1.0, concept_weight: 1.0, tokenizer: TokenizerOptions::default() }
    }
}

/// One posting: a fact (its position in the facts of the last sync), how often the term
/// occurs in it, and the fact's length (copied here so scoring reads one array).
#[derive(Debug, Clone, Copy)]
struct Posting {
    pos: u32,
    tf: f32,
    len: f32,
    /// The BM25 term-frequency factor `tf·(k1+1) / (tf + k1·(1 − b + b·len/avglen))` at the
    /// average length of the last sync, so a query multiplies instead of dividing per
    /// posting (see [`FactIndex::reweigh`]).
    w: f32,
}

/// An indexed fact, kept in the order of the facts of the last sync.
#[derive(Debug, Clone, Default)]
struct Entry {
    /// The key under which it is found in `by_id` (the id, suffixed for duplicate ids).
    key: Box<str>,
    content: Box<str>,
    created_at: Box<str>,
    /// Length in words and CJK characters (grams and CJK-derived concepts do not count).
    len: f32,
    /// The content as the block renders it with links neutralised, when that differs from
    /// the content itself (`None`: the content is rendered as it is, with or without
    /// neutralising). Computed when the content is tokenised, so once per content.
    rendered: Option<Box<str>>,
    /// [`Estimate::eighths`] of a space and the rendering with links neutralised: the
    /// content's share of its fact line's built-in token estimate.
    eighths: u32,
    /// The line's head as the block renders it; `None` until rendered, and again when the
    /// fact's `createdAt` changed (re-rendered at the end of the same sync).
    head: Option<LineHead>,
}

/// A content's rendering as the index prepared it ([`FactIndex::rendered`]).
pub(crate) struct Rendered<'a> {
    /// The content with links neutralised, escaped, whitespace collapsed.
    pub(crate) text: &'a str,
    /// Whether `text` is the content itself (so it is rendered so without neutralising too).
    pub(crate) as_is: bool,
    /// [`Estimate::eighths`] of a space and `text`.
    pub(crate) eighths: usize,
}

/// A fact line's head as the block renders it, `- [category | 0.90 | 2023-05-07`, prepared
/// at sync ([`FactIndex::head`]).
pub(crate) struct Head<'a> {
    /// The head without its closing `]`, with or without the date as asked.
    pub(crate) text: &'a str,
    /// [`Estimate::eighths`] of `text` and the closing `]`.
    pub(crate) eighths: usize,
}

/// A fact's prepared line head and what it was made from, in one string: the head
/// `..date` without the date, `..to` with it, then the category up to `cat` and `happenedAt`
/// (as a string) to the end; with the confidence (and the entry's `createdAt`) the values
/// it shows, and the [`Estimate::eighths`] of both heads with their `]`.
#[derive(Debug, Clone)]
struct LineHead {
    text: Box<str>,
    date: u32,
    to: u32,
    cat: u32,
    confidence: f64,
    eighths: [u32; 2],
}

impl LineHead {
    /// Renders the head of `f`'s line (category, confidence, date) as `inject()` would on
    /// every call; `scratch` is a buffer to reuse.
    fn new(f: &Fact, scratch: &mut String) -> LineHead {
        let h = scratch;
        h.clear();
        h.push_str("- [");
        let category = safe_category(&f.category);
        h.push_str(if category.is_empty() { DEFAULT_CATEGORY } else { &category });
        h.push_str(" | ");
        push_confidence(h, f.confidence);
        let date = h.len();
        if let Some(d) = fact_date(f) {
            h.push_str(" | ");
            h.push_str(d);
        }
        let to = h.len();
        let mut eighths = [0u32; 2];
        for (e, end) in eighths.iter_mut().zip([date, to]) {
            // The head ends in a digit (the confidence or the date) and `]` is a piece of its
            // own after a digit, so the line's estimate is the sum of the two.
            *e = u32::try_from(Estimate::eighths(&h[..end]) + Estimate::eighths("]")).unwrap_or(u32::MAX);
        }
        h.push_str(&f.category);
        let cat = h.len();
        h.push_str(happened_src(f));
        let at = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        LineHead { text: h.as_str().into(), date: at(date), to: at(to), cat: at(cat), confidence: f.confidence, eighths }
    }

    /// Whether this head was made from `f`'s category, confidence and `happenedAt` (the
    /// caller compares `createdAt`).
    fn shows(&self, f: &Fact) -> bool {
        let src = self.text.get(self.to as usize..).unwrap_or_default();
        let (category, happened) = src.split_at_checked(self.cat.saturating_sub(self.to) as usize).unwrap_or_default();
        category == f.category && self.confidence.to_bits() == f.confidence.to_bits() && happened == happened_src(f)
    }
}

/// [`FactIndex::flags`]: the content is blank.
pub(crate) const BLANK: u8 = 1;
/// [`FactIndex::flags`]: the category is `correction`.
pub(crate) const IS_CORRECTION: u8 = 2;

/// Where an entry of the previous sync went.
const DROPPED: u32 = u32::MAX;

/// An inverted index over the facts of one document, kept up to date incrementally.
#[derive(Debug, Default, Clone)]
pub struct FactIndex {
    params: Params,
    vocab: FxMap<Box<str>, u32>,
    /// Per term id: the facts containing it (so `df` is the length).
    postings: Vec<Vec<Posting>>,
    /// Per position of the facts of the last sync.
    entries: Vec<Entry>,
    /// Per position: `createdAt` in epoch ms (0 if unknown).
    created: Vec<u64>,
    /// Per position: [`BLANK`] and [`IS_CORRECTION`].
    flags: Vec<u8>,
    /// Per position: the confidence (read here so ranking touches no `Fact`).
    conf: Vec<f64>,
    /// Per position: when the fact's lifetime is over (epoch ms, `INFINITY` without one).
    expires: Vec<f64>,
    /// Entry key → position.
    by_id: FxMap<Box<str>, u32>,
    total_len: f64,
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
        self.entries.len()
    }

    /// Whether no fact is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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

    /// A cheap sanity check that the index was last synced with `facts`: same number of
    /// facts and the same ids at 17 or 18 evenly spread positions (first and last
    /// included). It costs O(1); it does not see content edits, which only [`sync`] does.
    ///
    /// [`sync`]: FactIndex::sync
    pub fn is_synced_with(&self, facts: &[Fact]) -> bool {
        let n = facts.len();
        if n != self.entries.len() {
            return false;
        }
        let step = n.saturating_sub(1) / 16 + 1;
        (0..n).step_by(step).chain(n.checked_sub(1)).all(|pos| key_matches(&self.entries[pos].key, &facts[pos].id))
    }

    /// This index if it [`is_synced_with`](FactIndex::is_synced_with) `facts`, else a fresh
    /// one built from them into `temp` (for callers handed an index of other facts).
    pub fn synced_or_temp<'a>(&'a self, facts: &[Fact], temp: &'a mut Option<FactIndex>) -> &'a FactIndex {
        if self.is_synced_with(facts) {
            return self;
        }
        temp.insert({
            let mut t = FactIndex::with_params(self.params);
            t.sync(facts);
            t
        })
    }

    /// `createdAt` of the fact at `position` (of the last sync) in epoch ms; 0 if unknown.
    pub fn created_ms(&self, position: usize) -> u64 {
        self.created.get(position).copied().unwrap_or(0)
    }

    /// Whether the fact at `position` (of the last sync) has blank content.
    pub fn is_blank(&self, position: usize) -> bool {
        self.flags.get(position).map_or(true, |f| f & BLANK != 0)
    }

    /// Whether the fact at `position` (of the last sync) is of category `correction`.
    pub fn is_correction(&self, position: usize) -> bool {
        self.flags.get(position).is_some_and(|f| f & IS_CORRECTION != 0)
    }

    /// Per position (of the last sync): the confidences, for a ranking loop over slices.
    pub(crate) fn confidences(&self) -> &[f64] {
        &self.conf
    }

    /// Per position (of the last sync): [`BLANK`] and [`IS_CORRECTION`].
    pub(crate) fn flags(&self) -> &[u8] {
        &self.flags
    }

    /// The confidence of the fact at `position` (of the last sync); 0 if out of range.
    pub fn confidence(&self, position: usize) -> f64 {
        self.conf.get(position).copied().unwrap_or(0.0)
    }

    /// Whether the lifetime (`expected_valid_days` from the last confirmation) of the fact at
    /// `position` (of the last sync) is over at `now_ms`; see [`Fact::is_expired`].
    pub fn is_expired(&self, position: usize, now_ms: u64) -> bool {
        self.expires.get(position).is_some_and(|&at| at <= now_ms as f64)
    }

    /// How the block renders `content`, the content of the fact at `position`, with links
    /// neutralised: its prepared rendering, whether that is `content` itself (so it is
    /// rendered so with or without neutralising), and the [`Estimate::eighths`] of a space
    /// and that rendering; `None` when the index holds other content at `position` (it was
    /// not synced since), so the caller renders it.
    pub(crate) fn rendered<'a>(&'a self, position: usize, content: &'a str) -> Option<Rendered<'a>> {
        let e = self.entries.get(position).filter(|e| *e.content == *content)?;
        let (text, as_is) = e.rendered.as_deref().map_or((content, true), |r| (r, false));
        Some(Rendered { text, as_is, eighths: e.eighths as usize })
    }

    /// Brings the index in line with `facts`, re-tokenising only added or changed facts
    /// (compared by id and content); facts no longer present leave the index, and a changed
    /// `createdAt` is just recorded.
    ///
    /// When nothing changed this is one comparison pass (no allocation). Otherwise the
    /// posting lists are renumbered to the new positions in one pass (skipped when the old
    /// facts kept their positions, e.g. after appending), which is much cheaper than
    /// re-tokenising.
    pub fn sync(&mut self, facts: &[Fact]) {
        if facts.len() == self.entries.len()
            && facts
                .iter()
                .zip(&self.entries)
                .all(|(f, e)| key_matches(&e.key, &f.id) && *e.content == *f.content && *e.created_at == *f.created_at)
        {
            self.read_fields(facts);
            return;
        }
        let mut old = std::mem::take(&mut self.entries);
        // Old position → new position, or DROPPED (removed, or changed and re-tokenised).
        let mut remap = vec![DROPPED; old.len()];
        let mut claimed = vec![false; old.len()];
        let mut fresh = Vec::new();
        for (pos, f) in facts.iter().enumerate() {
            let mut key: Option<String> = None;
            let mut dup = 0u32;
            let found = loop {
                match self.by_id.get(key.as_deref().unwrap_or(&f.id)) {
                    Some(&o) if claimed[o as usize] => {
                        dup += 1;
                        key = Some(format!("{}\u{0}{dup}", f.id));
                    }
                    found => break found.copied(),
                }
            };
            let mut entry = match found {
                Some(o) if *old[o as usize].content == *f.content => {
                    claimed[o as usize] = true;
                    remap[o as usize] = pos as u32;
                    std::mem::take(&mut old[o as usize])
                }
                other => {
                    if let Some(o) = other {
                        claimed[o as usize] = true;
                    }
                    fresh.push(pos);
                    let key = key.map_or_else(|| f.id.as_str().into(), String::into_boxed_str);
                    Entry { key, content: f.content.as_str().into(), ..Entry::default() }
                }
            };
            if *entry.created_at != *f.created_at {
                entry.created_at = f.created_at.as_str().into();
                entry.head = None;
            }
            self.entries.push(entry);
        }
        // Drop what left or changed (a changed fact keeps its key), renumber the rest.
        for (o, e) in old.iter().enumerate() {
            if remap[o] == DROPPED {
                self.total_len -= f64::from(e.len);
            }
            if !claimed[o] {
                self.by_id.remove(&e.key);
            }
        }
        if remap.iter().enumerate().any(|(o, &r)| r != o as u32) {
            for p in &mut self.postings {
                let was = !p.is_empty();
                p.retain_mut(|x| {
                    x.pos = remap[x.pos as usize];
                    x.pos != DROPPED
                });
                self.live_terms -= usize::from(was && p.is_empty());
            }
        }
        for (pos, e) in self.entries.iter().enumerate() {
            match self.by_id.get_mut(&e.key) {
                Some(p) => *p = pos as u32,
                None => {
                    self.by_id.insert(e.key.clone(), pos as u32);
                }
            }
        }
        for pos in fresh {
            self.link(pos);
        }
        self.reweigh();
        self.created = self.entries.iter().map(|e| millis_from_iso(&e.created_at).unwrap_or(0)).collect();
        self.read_fields(facts);
        // Terms of edited and removed facts stay interned; rebuild once they dominate.
        if self.vocab.len() > 4 * self.live_terms + 4096 {
            let tokenised = self.tokenised;
            *self = FactIndex::with_params(self.params);
            self.sync(facts);
            self.tokenised += tokenised;
        }
    }

    /// What ranking reads of every fact besides its terms: blank, correction, confidence and
    /// the end of its lifetime; and each line's head, rendered again only when what it shows
    /// changed. One pass over the facts (no allocation when their number and heads are
    /// unchanged); a timestamp is parsed only for a fact with a lifetime.
    fn read_fields(&mut self, facts: &[Fact]) {
        self.flags.clear();
        self.conf.clear();
        self.expires.clear();
        let mut scratch = String::new();
        for (f, e) in facts.iter().zip(&mut self.entries) {
            if !e.head.as_ref().is_some_and(|h| h.shows(f)) {
                e.head = Some(LineHead::new(f, &mut scratch));
            }
            let blank = if f.content.trim().is_empty() { BLANK } else { 0 };
            let correction = if f.category == CORRECTION { IS_CORRECTION } else { 0 };
            self.flags.push(blank | correction);
            self.conf.push(f.confidence);
            let expires = f.expected_valid_days().and_then(|days| Some(f.confirmed_ms()? as f64 + days * DAY_MS));
            self.expires.push(expires.unwrap_or(f64::INFINITY));
        }
    }

    /// The head of the line of `f`, the fact at `position`, as prepared at sync (with the
    /// date when `dates`); `None` when the index was synced with other values of what the
    /// head shows (category, confidence, `createdAt`, `happenedAt`), so the caller renders it.
    pub(crate) fn head(&self, position: usize, f: &Fact, dates: bool) -> Option<Head<'_>> {
        let e = self.entries.get(position).filter(|e| *e.created_at == *f.created_at)?;
        let h = e.head.as_ref().filter(|h| h.shows(f))?;
        let text = h.text.get(..if dates { h.to } else { h.date } as usize)?;
        Some(Head { text, eighths: h.eighths[usize::from(dates)] as usize })
    }

    /// Tokenises the content of the entry at `pos` and adds its postings.
    fn link(&mut self, pos: usize) {
        let mut tf: Vec<(u32, f32)> = Vec::new();
        let mut len = 0.0f32;
        let (vocab, postings) = (&mut self.vocab, &mut self.postings);
        for_each_term(&self.entries[pos].content, self.params.tokenizer, |term| {
            let id = match term {
                Term::Token(t, kind) => {
                    len += if kind == TokenKind::CjkBigram { 0.0 } else { 1.0 };
                    intern(vocab, postings, t)
                }
                Term::Concept { id, word } => {
                    len += if word { 1.0 } else { 0.0 };
                    intern(vocab, postings, concept_key(id, &mut [0; 8]))
                }
                Term::Broader(id) => intern(vocab, postings, concept_key(id, &mut [0; 8])),
            };
            tf.push((id, 1.0));
        });
        merge(&mut tf);
        for &(id, n) in &tf {
            let p = &mut self.postings[id as usize];
            self.live_terms += usize::from(p.is_empty());
            p.push(Posting { pos: pos as u32, tf: n, len, w: 0.0 });
        }
        self.tokenised += 1;
        let e = &mut self.entries[pos];
        e.len = len;
        let mut out = String::with_capacity(e.content.len() + 1);
        out.push(' ');
        push_value(&mut out, &clean(&e.content, true));
        e.eighths = u32::try_from(Estimate::eighths(&out)).unwrap_or(u32::MAX);
        e.rendered = (out[1..] != *e.content).then(|| out[1..].into());
        self.total_len += f64::from(len);
    }

    /// Recomputes every posting's term-frequency factor for the current average length: one
    /// pass over the postings per sync that changed something, instead of a division per
    /// posting in every query.
    fn reweigh(&mut self) {
        let n = self.entries.len();
        if n == 0 {
            return;
        }
        let avg = (self.total_len / n as f64).max(1e-6) as f32;
        let (k1, b) = (self.params.k1, self.params.b);
        for post in &mut self.postings {
            for p in post {
                let norm = k1 * (1.0 - b + b * p.len / avg);
                p.w = p.tf * (k1 + 1.0) / (p.tf + norm);
            }
        }
    }

    /// The query's known terms with their weights: the sum over occurrences of the kind
    /// weight (word 1, CJK unigram, CJK bigram, concept as in [`Params`]).
    fn query_terms(&self, query: &str) -> Vec<(u32, f32)> {
        let p = &self.params;
        let mut q: Vec<(u32, f32)> = Vec::with_capacity(32);
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
                Term::Concept { id, .. } => (self.vocab.get(concept_key(id, &mut [0; 8])), p.concept_weight),
                // A query's "typescript" is not a question about languages in general.
                Term::Broader(_) => return,
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
        let mut out = vec![0.0f32; self.entries.len()];
        let q = self.query_terms(query);
        let n = self.entries.len() as f32;
        if q.is_empty() || n == 0.0 {
            return out;
        }
        for &(t, w) in &q {
            let post = &self.postings[t as usize];
            if post.is_empty() {
                continue;
            }
            let df = post.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            let wi = w * idf;
            for p in post {
                if let Some(x) = out.get_mut(p.pos as usize) {
                    *x += wi * p.w;
                }
            }
        }
        let mut best = 0.0f32;
        for &x in &out {
            if x > best {
                best = x;
            }
        }
        if best > 0.0 {
            for x in &mut out {
                *x /= best;
            }
        }
        out
    }
}

/// What of `happenedAt` a line's date depends on: the value when it is a string, else `""`
/// (which shows no date either).
fn happened_src(f: &Fact) -> &str {
    f.extra.get(HAPPENED_AT).and_then(Value::as_str).unwrap_or("")
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

/// The vocabulary key of lexicon concept `c`: `\0` and one private-use character (no real
/// token contains `\0`), written into `buf`.
fn concept_key(c: u32, buf: &mut [u8; 8]) -> &str {
    buf[0] = 0;
    let ch = char::from_u32(0xF_0000 + (c & 0xFFFF)).unwrap_or('\u{F0000}');
    let n = ch.encode_utf8(&mut buf[1..]).len();
    std::str::from_utf8(&buf[..1 + n]).unwrap_or("\0")
}

/// Whether an entry key belongs to `id` (duplicate ids are suffixed with `\0n`).
fn key_matches(key: &str, id: &str) -> bool {
    key.len() >= id.len() && key.as_bytes()[..id.len()] == *id.as_bytes() && (key.len() == id.len() || key.as_bytes()[id.len()] == 0)
}

/// Sorts `(term, weight)` pairs by term and sums the weights of equal terms.
fn merge(v: &mut Vec<(u32, f32)>) {
    crate::base::sort::sort_by(v, |a, b| a.0 < b.0);
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
