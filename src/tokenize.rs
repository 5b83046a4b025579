//! Tokenisation for relevance. PLACEHOLDER: being written.
