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

use crate::relevance::FactIndex;
use crate::vectors::{QueryVector, VectorSet};

/// Weight of the dense similarity against the lexical one: equal (measured best together
/// with the default 0.6/0.4 score weights on the development set; 0.5–2 are within noise).
pub const DENSE_WEIGHT: f32 = 1.0;

/// The dense half of a ranking: the query's vector against the facts' stored vectors.
#[derive(Debug, Clone, Copy)]
pub struct Dense<'a> {
    /// The facts' vectors.
    pub vectors: &'a VectorSet,
    /// Per fact position: where its vector is in `vectors`
    /// ([`NO_VECTOR`](crate::vectors::NO_VECTOR) if it has none), from [`VectorSet::align`].
    pub aligned: &'a [u32],
    /// The query's vector.
    pub query: &'a QueryVector,
}

/// Per fact position, the similarities of one query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Similarities {
    /// Lexical, in `[0, 1]` (see [`FactIndex::similarities`]).
    pub lexical: Vec<f32>,
    /// Dense, min-max normalised into `[0, 1]`; `None` without a query vector, and per fact
    /// without a vector.
    pub dense: Option<Vec<Option<f32>>>,
    /// What the score uses: the lexical similarity alone without a query vector, else the
    /// fusion described in the module docs.
    pub fused: Vec<f32>,
}

/// The similarities of every fact (in the order of the index's last sync) to `query`,
/// lexical only when `dense` is `None`.
pub fn similarities(index: &FactIndex, query: &str, dense: Option<&Dense>) -> Similarities {
    let lexical = index.similarities(query);
    let Some(d) = dense.filter(|d| d.aligned.len() == lexical.len()) else {
        return Similarities { fused: lexical.clone(), lexical, dense: None };
    };
    let cos = d.vectors.similarities(d.aligned, d.query);
    let (mut lo, mut hi, mut n) = (f32::MAX, f32::MIN, 0usize);
    for c in cos.iter().flatten() {
        lo = lo.min(*c);
        hi = hi.max(*c);
        n += 1;
    }
    if n < 2 || hi - lo <= f32::EPSILON {
        return Similarities { fused: lexical.clone(), lexical, dense: Some(vec![None; cos.len()]) };
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
    Similarities { lexical, dense: Some(dense), fused }
}
