//! Applying a delta to a document (SPEC §7). PLACEHOLDER: being written.

use crate::delta::Delta;
use crate::document::{Document, SectionId};
use crate::ids::IdSource;

/// Limits applied while merging a delta.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApplyConfig {
    /// New facts need at least this confidence (default 0.7).
    pub threshold: f64,
    /// At most this many facts are kept (default 100).
    pub max_facts: usize,
}

/// Where the applied changes come from.
pub struct ApplyContext<'a> {
    /// The one timestamp of this update (ISO-8601 UTC).
    pub now_iso: &'a str,
    /// `source` of new facts: the thread id.
    pub source: &'a str,
    /// Fresh fact ids.
    pub ids: &'a dyn IdSource,
}

/// What an application of a delta changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApplyReport {
    /// Ids of the facts added (and still present after eviction).
    pub added: Vec<String>,
    /// Ids of the facts removed (by the delta, eviction or scrubbing).
    pub removed: Vec<String>,
    /// Sections whose summary was replaced.
    pub updated_sections: Vec<SectionId>,
}

/// Applies `delta` to `doc` (SPEC §7).
pub fn apply_delta(doc: &mut Document, delta: &Delta, cfg: &ApplyConfig, ctx: &ApplyContext<'_>) -> ApplyReport {
    let _ = (doc, delta, cfg, ctx);
    ApplyReport::default()
}
