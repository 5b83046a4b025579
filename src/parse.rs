//! Robust parsing of model replies into a [`Delta`]. PLACEHOLDER: being written.

use crate::delta::Delta;
use crate::error::{Error, Result};

/// Finds the delta in a model reply (SPEC §6, §11 Parsing).
pub fn parse_reply(text: &str) -> Result<Delta> {
    let _ = text;
    Err(Error::LlmBadOutput("parser not written yet".into()))
}
