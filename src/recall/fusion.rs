//! Hybrid similarity: the lexical similarity of [`FactIndex::similarities`] fused with the
//! dense (embedding) similarity of [`VectorSet::similarities`].
//!
//! Both halves are normalised per query before they are mixed, as the lexical one already
//! is: the cosine of each fact with the query is min-max normalised over the facts that
//! have a vector (`dense = (cos − min) / (max − min)`, so the closest fact has 1 and the
//! farthest 0), and the fused similarity is `(lexical + w · dense) / (1 + w)` with
//! [`DENSE_WEIGHT`] `w`. A fact without a vector yet (its embedding is still pending) takes
//! part with its lexical similarity alone, as if its dense similarity equalled it; so do all
//! facts when fewer than two have vectors (a min-max range of one point says nothing).
//!
//! Never dense alone: on the labelled sets the embedding model by itself ranked below the
//! lexical ranker, and the fusion above both (`docs/relevance.md`, `--explore` of
//! `examples/eval_relevance.rs`, where reciprocal rank fusion and other normalisations were
//! measured too). Min-max needs no sort, so the fusion costs one pass over the facts.

use crate::recall::relevance::FactIndex;
use crate::recall::vectors::{QueryVector, VectorSet};

/// Weight of the dense similarity against the lexical one: equal (measured best together
/// with the default 0.6/0.4 score weights on the development set; 0.5–2 are within noise).
pub(crate) const DENSE_WEIGHT: f32 = 1.0;

/// The dense half of a ranking: the query's vector against the facts' stored vectors.
#[derive(Debug, Clone, Copy)]
pub struct Dense<'a> {
    /// The facts' vectors.
    pub vectors: &'a VectorSet,
    /// Per fact position: where its vector is in `vectors`
    /// ([`NO_VECTOR`](crate::recall::vectors::NO_VECTOR) if it has none), from [`VectorSet::align`].
    pub aligned: &'a [u32],
    /// The query's vector.
    pub query: &'a QueryVector,
}

/// Per fact position, the similarities of one query.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Similarities {
    /// Lexical, in `[0, 1]` (see [`FactIndex::similarities`]).
    pub lexical: Vec<f32>,
    /// Dense, min-max normalised into `[0, 1]`; `None` without a query vector, and per fact
    /// without a vector.
    pub dense: Option<Vec<Option<f32>>>,
    /// What the score uses when there is a query vector: the fusion described in the
    /// module docs; `None`: the lexical similarity alone (not copied).
    pub fused: Option<Vec<f32>>,
}

impl Similarities {
    /// Per fact position, the similarity the score uses.
    #[inline]
    pub(crate) fn used(&self) -> &[f32] {
        self.fused.as_deref().unwrap_or(&self.lexical)
    }

    /// The similarity the score uses for the fact at `pos`.
    #[inline]
    pub(crate) fn fused(&self, pos: usize) -> f32 {
        match &self.fused {
            Some(f) => f[pos],
            None => self.lexical[pos],
        }
    }
}

/// The similarities of every fact (in the order of the index's last sync) to `query`,
/// lexical only when `dense` is `None`.
pub(crate) fn similarities(index: &FactIndex, query: &str, dense: Option<&Dense>) -> Similarities {
    let lexical = index.similarities(query);
    let Some(d) = dense.filter(|d| d.aligned.len() == lexical.len()) else {
        return Similarities { fused: None, lexical, dense: None };
    };
    let cos = d.vectors.similarities(d.aligned, d.query);
    let (mut lo, mut hi, mut n) = (f32::MAX, f32::MIN, 0usize);
    for c in cos.iter().flatten() {
        lo = lo.min(*c);
        hi = hi.max(*c);
        n += 1;
    }
    if n < 2 || hi - lo <= f32::EPSILON {
        return Similarities { fused: None, lexical, dense: Some(vec![None; cos.len()]) };
    }
    let range = hi - lo;
    let mut dense = cos;
    let mut fused = lexical.clone();
    for (d, f) in dense.iter_mut().zip(fused.iter_mut()) {
        if let Some(c) = d {
            *c = (*c - lo) / range;
            *f = (*f + DENSE_WEIGHT * *c) / (1.0 + DENSE_WEIGHT);
        }
    }
    Similarities { lexical, dense: Some(dense), fused: Some(fused) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::document::{Document, Fact};
    use crate::memory::message::ChatMessage;
    use crate::recall::inject::{select, Report};
    use crate::recall::token_count::Estimate;
    use crate::recall::vectors::{content_key, NO_VECTOR};

    fn fact(id: &str, content: &str, confidence: f64) -> Fact {
        Fact::for_test(id, content, confidence)
    }

    /// Facts whose vectors are axis-aligned, so each dense similarity is known exactly.
    fn setup() -> (Document, FactIndex, VectorSet) {
        let doc = Document {
            facts: vec![
                fact("pet", "Has a dog called Rex", 0.7),
                fact("food", "Is vegetarian", 0.7),
                fact("work", "Writes Go microservices", 0.95),
                fact("new", "Plays the cello", 0.7),
            ],
            ..Document::empty()
        };
        let mut index = FactIndex::new();
        index.sync(&doc.facts);
        let mut set = VectorSet::new("m", 0);
        for (i, f) in doc.facts.iter().take(3).enumerate() {
            let mut v = vec![0.0; 4];
            v[i] = 1.0;
            v[3] = 0.5;
            set.insert(content_key(&f.content), v).unwrap();
        }
        (doc, index, set)
    }

    #[test]
    fn fusion_averages_lexical_and_min_max_dense_and_unvectored_facts_count_lexically() {
        let (doc, index, set) = setup();
        let aligned = set.align(&doc.facts);
        assert_eq!(aligned[3], NO_VECTOR);
        // The query points at the "food" fact's direction: a steakhouse question shares no word
        // with "Is vegetarian".
        let q = QueryVector::new(vec![0.1, 1.0, 0.0, 0.5]).unwrap();
        let dense = Dense { vectors: &set, aligned: &aligned, query: &q };
        let s = similarities(&index, "which steakhouse for my dog Rex", Some(&dense));
        let d = s.dense.as_ref().unwrap();
        assert_eq!(d[1], Some(1.0), "closest vector");
        assert_eq!(d[2], Some(0.0), "farthest vector");
        assert_eq!(d[3], None, "no vector yet");
        assert_eq!(s.lexical[0], 1.0, "the dog fact matches lexically");
        for (i, d) in d.iter().enumerate().take(3) {
            assert!((s.fused(i) - (s.lexical[i] + DENSE_WEIGHT * d.unwrap()) / (1.0 + DENSE_WEIGHT)).abs() < 1e-6);
        }
        assert_eq!(s.fused(3), s.lexical[3]);
        // Through explain: the vegetarian fact now ranks next to the lexical match, ahead of the
        // more confident work fact that ranked above it lexically.
        let lexical_only = select(
            &doc,
            &index,
            None,
            &[ChatMessage::user("which steakhouse for my dog Rex")],
            &crate::engine::config::Config::default().inject,
            &Estimate,
            Report::All,
        );
        let hybrid = select(
            &doc,
            &index,
            Some(&dense),
            &[ChatMessage::user("which steakhouse for my dog Rex")],
            &crate::engine::config::Config::default().inject,
            &Estimate,
            Report::All,
        );
        let ids = |e: &crate::recall::inject::Explanation| e.facts.iter().map(|f| f.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&lexical_only)[..2], ["pet", "work"]);
        assert_eq!(ids(&hybrid)[..2], ["pet", "food"]);
        let food = hybrid.facts.iter().find(|f| f.id == "food").unwrap();
        assert_eq!((food.lexical, food.dense), (0.0, Some(1.0)));
        assert!((food.similarity - 0.5).abs() < 1e-6 && (food.score - (0.6 * 0.5 + 0.4 * 0.7)).abs() < 1e-6);
        assert!(lexical_only.facts.iter().all(|f| f.dense.is_none() && f.similarity == f.lexical));
    }

    #[test]
    fn fewer_than_two_vectors_or_a_wrong_query_dimension_fall_back_to_lexical() {
        let (doc, index, mut set) = setup();
        let q = QueryVector::new(vec![0.1, 1.0, 0.0, 0.5]).unwrap();
        let mut one = set.clone();
        one.retain_facts(&doc.facts[1..2]);
        for (s, q) in [(&one, &q), (&set, &QueryVector::new(vec![1.0, 0.0]).unwrap())] {
            let aligned = s.align(&doc.facts);
            let r = similarities(&index, "dog", Some(&Dense { vectors: s, aligned: &aligned, query: q }));
            assert_eq!(r.fused, None);
        }
        // A misaligned `aligned` (another document) is ignored rather than misread.
        assert_eq!(set.retain_facts(&doc.facts), 0);
        let r = similarities(&index, "dog", Some(&Dense { vectors: &set, aligned: &[0, 1], query: &q }));
        assert_eq!((r.fused, r.dense), (None, None));
    }
}
