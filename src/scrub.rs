//! Scrubbing of upload mentions (SPEC §7 step 5). PLACEHOLDER: being written.
