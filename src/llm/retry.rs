//! Retry policy. PLACEHOLDER.
