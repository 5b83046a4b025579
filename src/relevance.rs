//! The incremental fact index and similarity scoring. PLACEHOLDER: being written.

use crate::document::Fact;

/// An index over the facts of one document, kept up to date incrementally.
#[derive(Debug, Default, Clone)]
pub struct FactIndex {}

impl FactIndex {
    /// An empty index.
    pub fn new() -> FactIndex {
        FactIndex {}
    }

    /// Brings the index in line with `facts`, re-tokenising only changed facts.
    pub fn sync(&mut self, facts: &[Fact]) {
        let _ = facts;
    }
}
