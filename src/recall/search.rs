//! `search(query, { limit, minScore })`: the ranking of `inject()` applied to an arbitrary
//! text (an agent's tool call, a settings page's search box), returning the matching facts
//! with their numbers instead of a block.
//!
//! The score is the one `inject()` ranks by (`similarityWeight × similarity +
//! confidenceWeight × confidence`, ties as there), so a fact that `search()` puts first is
//! the one `inject()` would pick for the same text. Only **matches** are returned: a fact
//! whose similarity to the query is 0 is left out, however confident, and so are facts with
//! blank content and, as in `inject()`, facts whose lifetime (`expected_valid_days`) is over
//! at `weights.now_ms`. Lexically that is a fact sharing no term with the query; with an embedding
//! model nearly every fact with a vector has some similarity, so `limit` and `min_score` do
//! the cutting. A blank query matches nothing.

use crate::base::error::{Error, Result};
use crate::json::field::{opt_f64, opt_uint};
use crate::json::{Map, Value};
use crate::memory::document::Document;
use crate::recall::fusion::{similarities, Dense};
use crate::recall::inject::{top_k, InjectOptions, Ranked};
use crate::recall::relevance::FactIndex;

/// `limit` when none is given.
pub const DEFAULT_LIMIT: usize = 10;

/// The options of one search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOptions {
    /// At most this many hits (≥ 1; default [`DEFAULT_LIMIT`]).
    pub limit: usize,
    /// Hits scoring below this are left out (default 0: every match).
    pub min_score: f64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { limit: DEFAULT_LIMIT, min_score: 0.0 }
    }
}

impl SearchOptions {
    /// Validates `{ limit?, minScore? }` (`null` means the defaults). An unknown key is
    /// `INVALID_INPUT` naming it, like every option.
    pub fn from_value(v: &Value) -> Result<SearchOptions> {
        let empty = Map::new();
        let obj = match v {
            Value::Null => &empty,
            Value::Object(o) => o,
            other => return Err(crate::json::field::wrong_type("options", "an object { limit?, minScore? }", other).into()),
        };
        if let Some(k) = obj.keys().find(|k| *k != "limit" && *k != "minScore") {
            let hint = crate::base::spelling::did_you_mean(k, &["limit", "minScore"]);
            return Err(Error::invalid(format!("unknown search option `{k}`{hint} (known: limit, minScore)")));
        }
        let mut o = SearchOptions::default();
        if let Some(n) = opt_uint(obj, "", "limit")? {
            if n == 0 {
                return Err(Error::invalid("`limit` must be at least 1"));
            }
            o.limit = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(x) = opt_f64(obj, "", "minScore")? {
            o.min_score = x;
        }
        Ok(o)
    }
}

/// One matching fact and its numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// Where the fact is in `Document::facts`.
    pub position: usize,
    /// The lexical similarity in `[0, 1]` (BM25 divided by the best BM25 of this query).
    pub lexical: f64,
    /// The dense (embedding) similarity in `[0, 1]`; `None` without a query vector or when
    /// the fact has no vector yet.
    pub dense: Option<f64>,
    /// The similarity the score uses, in `[0, 1]`.
    pub similarity: f64,
    /// `similarity_weight × similarity + confidence_weight × confidence`.
    pub score: f64,
}

/// The facts of `doc` matching `query`, best first: at most `opts.limit`, each scoring at
/// least `opts.min_score`, ranked lexically or, with `dense`, by the hybrid similarity of
/// `src/recall/fusion.rs`. `weights` are the options `inject()` ranks with (the two weights,
/// and `now_ms` for fact lifetimes: a fact `inject()` leaves out as expired is no hit either).
///
/// `index` should have been [`FactIndex::sync`]ed with `doc.facts`; if it visibly was not
/// (other ids), a temporary index is built for this call.
pub fn search(
    doc: &Document,
    index: &FactIndex,
    dense: Option<&Dense>,
    query: &str,
    opts: &SearchOptions,
    weights: &InjectOptions,
) -> Vec<SearchHit> {
    if query.trim().is_empty() || doc.facts.is_empty() {
        return Vec::new();
    }
    let mut temp = None;
    let index = index.synced_or_temp(&doc.facts, &mut temp);
    let sims = similarities(index, query, dense);
    let rank = |pos: usize| {
        let sim = f64::from(sims.fused(pos));
        let conf = index.confidence(pos);
        Ranked { pos, sim, conf, score: weights.similarity_weight * sim + weights.confidence_weight * conf, created: index.created_ms(pos) }
    };
    let expired = |p: usize| weights.now_ms.is_some_and(|now| index.is_expired(p, now));
    let matches = (0..doc.facts.len()).filter(|&p| sims.fused(p) > 0.0 && !index.is_blank(p) && !expired(p));
    top_k(matches, rank, opts.limit.min(doc.facts.len()))
        .into_iter()
        .filter(|r| r.score >= opts.min_score)
        .map(|r| SearchHit {
            position: r.pos,
            lexical: f64::from(sims.lexical[r.pos]),
            dense: sims.dense.as_ref().and_then(|d| d[r.pos]).map(f64::from),
            similarity: r.sim,
            score: r.score,
        })
        .collect()
}
