//! Token counting. PLACEHOLDER: being written.

/// Counts tokens the way the target model would (approximately).
pub trait TokenCounter {
    /// The number of tokens of `text`.
    fn count(&self, text: &str) -> usize;
}

/// The built-in CJK-aware estimate.
#[derive(Debug, Default, Clone, Copy)]
pub struct Estimate;

impl TokenCounter for Estimate {
    fn count(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }
}
