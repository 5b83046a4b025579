//! Token sets for the write-side checks of [`crate::extract::apply`]: near-duplicate facts (token
//! Jaccard), facts copied from an assistant message (token containment) and removals the
//! user's words do not mention (token overlap).
//!
//! Tokens are the library's own CJK-aware ones ([`crate::recall::tokenize`]) with stopwords dropped
//! and English stemmed, without the lexicon: Latin words and CJK bigrams (a CJK unigram
//! would make any two Chinese sentences sharing a common character look alike). The words
//! that only say whom a fact is about (`user`, `用户`) are left out: "User prefers tabs" and
//! "Prefers tabs" say the same.

use crate::base::hash::FxMap;
use crate::recall::tokenize::{for_each_token, TokenKind, TokenizerOptions};

const OPTIONS: TokenizerOptions = TokenizerOptions { stopwords: true, stem: true, lexicon: false };

/// Tokens that name the subject of a fact rather than say anything about it.
const SUBJECT_TOKENS: [&str; 3] = ["user", "用户", "用戶"];

/// Interns tokens to small ids and builds sets of them.
#[derive(Default)]
pub(crate) struct Vocab {
    ids: FxMap<Box<str>, u32>,
    /// Per token id: the generation that last marked it (for de-duplication and overlap).
    stamp: Vec<u32>,
    generation: u32,
}

impl Vocab {
    /// An empty vocabulary.
    pub(crate) fn new() -> Vocab {
        Vocab::default()
    }

    fn next_generation(&mut self) -> u32 {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.generation = 1;
        }
        self.generation
    }

    /// The distinct tokens of `text`, in order of first occurrence.
    pub(crate) fn set(&mut self, text: &str) -> Vec<u32> {
        let generation = self.next_generation();
        let mut out = Vec::new();
        let (ids, stamp) = (&mut self.ids, &mut self.stamp);
        for_each_token(text, OPTIONS, |t, kind| {
            if kind == TokenKind::CjkUnigram || SUBJECT_TOKENS.contains(&t) {
                return;
            }
            let id = match ids.get(t) {
                Some(&id) => id,
                None => {
                    let id = stamp.len() as u32;
                    ids.insert(t.into(), id);
                    stamp.push(0);
                    id
                }
            };
            if stamp[id as usize] != generation {
                stamp[id as usize] = generation;
                out.push(id);
            }
        });
        out
    }

    /// How many tokens of `a` are also in any of `others`.
    pub(crate) fn overlap(&mut self, a: &[u32], others: &[&[u32]]) -> usize {
        let generation = self.next_generation();
        for set in others {
            for &t in *set {
                self.stamp[t as usize] = generation;
            }
        }
        a.iter().filter(|&&t| self.stamp[t as usize] == generation).count()
    }
}

/// `|a ∩ b| / |a ∪ b|` from the sizes and the intersection; 0 for two empty sets.
pub(crate) fn jaccard(a_len: usize, b_len: usize, common: usize) -> f64 {
    let union = a_len + b_len - common;
    if union == 0 {
        0.0
    } else {
        common as f64 / union as f64
    }
}

/// The smallest token set [`SetIndex::best`] compares.
pub(crate) const MIN_TOKENS: usize = 2;

/// An inverted index from tokens to the items (facts) holding them, for finding an item
/// whose token set is close to a new one without comparing it with every item.
#[derive(Default)]
pub(crate) struct SetIndex {
    postings: Vec<Vec<u32>>,
    sizes: Vec<u32>,
    counts: Vec<u32>,
}

impl SetIndex {
    /// Adds item number `item` (items are numbered 0, 1, 2 … in the order they are added)
    /// with its token set.
    pub(crate) fn add(&mut self, set: &[u32]) -> u32 {
        let item = self.sizes.len() as u32;
        for &t in set {
            let t = t as usize;
            if self.postings.len() <= t {
                self.postings.resize_with(t + 1, Vec::new);
            }
            self.postings[t].push(item);
        }
        self.sizes.push(set.len() as u32);
        self.counts.push(0);
        item
    }

    /// The item with the highest Jaccard similarity to `set` among those `accept` allows,
    /// if it reaches `threshold`. Ties go to the earliest item. Sets of fewer than
    /// [`MIN_TOKENS`] tokens never match (one shared word says nothing: "Plan A" and
    /// "Plan B" are one token each). Costs the lengths of the posting lists of `set`'s tokens.
    pub(crate) fn best(&mut self, set: &[u32], threshold: f64, mut accept: impl FnMut(u32) -> bool) -> Option<(u32, f64)> {
        if set.len() < MIN_TOKENS {
            return None;
        }
        let mut touched: Vec<u32> = Vec::new();
        for &t in set {
            for &item in self.postings.get(t as usize).map_or(&[][..], Vec::as_slice) {
                let c = &mut self.counts[item as usize];
                if *c == 0 {
                    touched.push(item);
                }
                *c += 1;
            }
        }
        let mut best: Option<(u32, f64)> = None;
        for &item in &touched {
            let common = std::mem::take(&mut self.counts[item as usize]) as usize;
            let size = self.sizes[item as usize] as usize;
            let j = jaccard(set.len(), size, common);
            if size >= MIN_TOKENS && j >= threshold && best.map_or(true, |(b, bj)| j > bj || (j == bj && item < b)) && accept(item) {
                best = Some((item, j));
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_distinct_stemmed_tokens_without_the_subject() {
        let mut v = Vocab::new();
        let a = v.set("User prefers dark themes, dark mode");
        let b = v.set("Prefers the dark theme");
        assert_eq!(a.len(), 4, "prefer, dark, theme, mode");
        assert_eq!(v.overlap(&b, &[&a]), 3);
        let zh = v.set("用户喜欢用Redis做缓存");
        assert!(zh.len() >= 4, "{zh:?}");
    }

    #[test]
    fn the_index_finds_the_closest_item_above_the_threshold() {
        let mut v = Vocab::new();
        let mut idx = SetIndex::default();
        for text in ["Lives in Berlin with two cats", "Works as a backend engineer in Go", "Likes hiking in the Alps"] {
            let s = v.set(text);
            idx.add(&s);
        }
        let q = v.set("User works as a Go backend engineer");
        assert_eq!(idx.best(&q, 0.7, |_| true).map(|b| b.0), Some(1));
        assert_eq!(idx.best(&q, 0.7, |i| i != 1), None);
        let far = v.set("Lives in Munich");
        assert_eq!(idx.best(&far, 0.7, |_| true), None);
        let a = v.set("Fact A");
        idx.add(&a);
        assert_eq!(idx.best(&v.set("Fact B"), 0.7, |_| true), None, "one-token sets never match");
        // The counters are reset after each query.
        assert_eq!(idx.best(&q, 0.7, |_| true).map(|b| b.0), Some(1));
    }
}
