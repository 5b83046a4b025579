//! Manual edits. PLACEHOLDER: being written.
