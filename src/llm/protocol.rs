//! HTTP protocol helpers. PLACEHOLDER.
