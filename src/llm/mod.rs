//! The extraction LLM: the request the core builds, the trait a platform implements, and
//! the pure parts of the HTTP protocols (request bodies, reply extraction, retry policy).
//!
//! The transports themselves (fetch, timeouts, sleeping between retries) live in the
//! platform layer; everything here is deterministic and tested natively.

pub mod config;
pub(crate) mod protocol;
pub mod repetition;
pub(crate) mod retry;
pub mod schema;
pub(crate) mod stream;

use crate::base::error::{Error, Result};
use crate::base::http::Secrets;
use crate::base::sync::LocalFuture;
use crate::extract::delta::{reasons, Delta, Skipped};
use crate::extract::parse::parse_reply;
use crate::memory::document::SectionId;

pub use config::{LlmConfig, OutputMode, Provider};

/// One extraction call: a system prompt (the instructions) and a user prompt (the current
/// memory and the conversation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmRequest {
    /// Instructions: what to extract and the output format.
    pub system: String,
    /// The current memory and the conversation to process.
    pub prompt: String,
}

/// Tokens one call used, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Tokens of the request (system + prompt).
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
}

/// The model's answer to one [`LlmRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LlmReply {
    /// The reply text (where the delta is).
    pub text: String,
    /// What the provider says the call used, when it says (OpenAI's `usage.prompt_tokens` /
    /// `completion_tokens`, Anthropic's `usage.input_tokens` / `output_tokens`).
    pub usage: Option<Usage>,
}

impl LlmReply {
    /// A reply without usage figures.
    pub fn text(text: impl Into<String>) -> LlmReply {
        LlmReply { text: text.into(), usage: None }
    }
}

/// Something that answers an [`LlmRequest`] with the model's text.
///
/// Implementations retry transient transport failures themselves, within one attempt
/// (docs/design.md#queue-and-failures); an `Err` is final for this attempt.
pub trait Llm {
    /// Sends the request and returns the reply.
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>>;

    /// Called once by `close()`: abort calls in flight and the waits between retries, so
    /// nothing keeps the process alive; those calls and any later ones fail with `CLOSED`.
    /// The default does nothing (the call in flight, if any, runs to its end).
    fn cancel(&self) {}

    /// What must never leave the configuration through a reply: the API key and header
    /// values the transport sends. The engine masks them in every message quoting the reply
    /// and keeps them out of the document. None by default (a JS function has no key of
    /// ours).
    fn secrets(&self) -> &Secrets {
        &NO_SECRETS
    }
}

static NO_SECRETS: Secrets = Secrets::NONE;

/// The delta in a reply ([`parse_reply`]) with the configuration's `secrets` kept out of
/// it: the error, when there is no delta, quotes the reply with them masked (masked before
/// the excerpt is cut, so none is cut in half); a valid delta loses every part that would
/// store one ([`withhold_secrets`]).
pub fn parse_delta(text: &str, secrets: &Secrets) -> Result<Delta> {
    match parse_reply(text) {
        Err(e) if secrets.found_in(text) => Err(match parse_reply(&secrets.mask(text)) {
            Err(masked) => masked,
            Ok(_) => Error::LlmBadOutput(secrets.mask(&e.message())),
        }),
        Ok(mut delta) => {
            if secrets.found_in(text) {
                withhold_secrets(&mut delta, secrets);
            }
            Ok(delta)
        }
        Err(e) => Err(e),
    }
}

/// Drops every new fact (content, category, `sourceError`) and section summary of `delta`
/// that contains a secret, reporting each in `skipped` with reason `secret`: whatever the
/// model echoes, the key never reaches storage or the next prompt. A removal paired with a
/// withheld fact is dropped too (it fails closed); later replacement indices follow their
/// facts.
pub fn withhold_secrets(delta: &mut Delta, secrets: &Secrets) {
    const WHY: &str = "quotes a secret of the llm configuration (the API key or a header value)";
    let mut index = Vec::with_capacity(delta.new_facts.len());
    let mut kept = Vec::with_capacity(delta.new_facts.len());
    for (i, f) in std::mem::take(&mut delta.new_facts).into_iter().enumerate() {
        let strings = [Some(f.content.as_str()), Some(f.category.as_str()), f.source_error.as_deref()];
        if strings.into_iter().flatten().any(|s| secrets.found_in(s)) {
            delta.skipped.push(Skipped::new(format!("newFacts[{i}]"), reasons::SECRET, WHY));
            index.push(None);
        } else {
            index.push(Some(kept.len()));
            kept.push(f);
        }
    }
    delta.new_facts = kept;
    let mut removals = Vec::with_capacity(delta.facts_to_remove.len());
    for (k, mut r) in std::mem::take(&mut delta.facts_to_remove).into_iter().enumerate() {
        match r.replacement.map(|j| index.get(j).copied()) {
            // A replacement index past the facts stays past them (apply refuses it).
            Some(Some(None)) => {
                let why = "its replacement quoted a secret and was withheld";
                delta.skipped.push(Skipped::new(format!("factsToRemove[{k}]"), reasons::REPLACEMENT_NOT_APPLIED, why).with_fact(&r.id));
                continue;
            }
            Some(Some(Some(j))) => r.replacement = Some(j),
            _ => {}
        }
        removals.push(r);
    }
    delta.facts_to_remove = removals;
    for id in SectionId::ALL {
        if delta.sections[id.index()].as_ref().is_some_and(|s| secrets.found_in(&s.summary)) {
            delta.sections[id.index()] = None;
            delta.skipped.push(Skipped::new(format!("{}.{}", id.group(), id.key()), reasons::SECRET, WHY));
        }
    }
}

/// Why an instance opened without `llm` does not extract (the error of [`NoLlm`], and of
/// `flush()` / `processDue()` on such an instance).
pub const NO_LLM: &str =
    "opened without `llm`: this instance reads and queues; extracting needs one opened with `llm` (the queue stays in storage for it)";

/// Why `autoProcess: true` is refused without `llm`.
pub const AUTO_NEEDS_LLM: &str = "`autoProcess: true` needs `llm` (an instance without one never extracts)";

/// The extraction model of an instance opened without `llm` (read-only use, e.g. a request
/// handler that only injects): every call fails with `INVALID_INPUT` ([`NO_LLM`]).
pub struct NoLlm;

impl Llm for NoLlm {
    fn complete<'a>(&'a self, _request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        Box::pin(async { Err(Error::invalid(NO_LLM)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_quoting_a_secret_is_masked_in_the_bad_output_error_even_where_the_excerpt_is_cut() {
        let key = "sk-proj-0123456789abcdefghijklmnop";
        let secrets = Secrets::new([key]);
        // Not a delta; the key starts at character 190, so an excerpt cut at 200 characters
        // from the unmasked reply would keep its first 10 characters.
        let reply = format!("{} {key} is not a valid key, so I cannot help.", "Sorry, ".repeat(27));
        let plain = parse_reply(&reply).unwrap_err();
        assert!(plain.message().contains("sk-proj-01"), "the unmasked excerpt cuts the key: {}", plain.message());
        let e = parse_delta(&reply, &secrets).unwrap_err();
        assert_eq!(e.code(), "LLM_BAD_OUTPUT");
        assert!(!e.message().contains("sk-proj-01") && e.message().contains("***"), "{}", e.message());
        // A broken delta quoting the key: the JSON error is quoted masked too.
        let broken = format!(r#"{{"newFacts": [{{"content": "uses {key}", "confidence": 0.9,]}}"#);
        let e = parse_delta(&broken, &secrets).unwrap_err();
        assert!(!e.message().contains("sk-proj"), "{}", e.message());
        // Without secrets it is parse_reply.
        assert_eq!(parse_delta(&reply, &Secrets::NONE).unwrap_err(), plain);
    }

    #[test]
    fn a_valid_delta_echoing_a_secret_loses_those_parts_and_reports_them() {
        let key = "sk-proj-0123456789abcdefghijklmnop";
        let secrets = Secrets::new([key]);
        let reply = format!(
            r#"{{"newFacts": [
                {{"content": "Lives in Lisbon", "confidence": 0.9}},
                {{"content": "Their OpenAI key is {key}", "confidence": 0.95}},
                {{"content": "Plays the cello", "confidence": 0.9}},
                {{"content": "Corrected: uses a new key", "category": "correction", "sourceError": "old key {key}", "confidence": 0.9}}],
              "factsToRemove": [{{"id": "fact_aaaaaaaa", "replacementFactIndex": 1}}, {{"id": "fact_bbbbbbbb", "replacementFactIndex": 2}}, "fact_cccccccc"],
              "user": {{"workContext": {{"summary": "Uses the key {key} at work", "shouldUpdate": true}},
                        "topOfMind": {{"summary": "Learning the cello", "shouldUpdate": true}}}}}}"#
        );
        let d = parse_delta(&reply, &secrets).unwrap();
        let contents: Vec<&str> = d.new_facts.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(contents, ["Lives in Lisbon", "Plays the cello"]);
        // The removal paired with the withheld fact is dropped; the other follows its fact.
        let removals: Vec<(&str, Option<usize>)> = d.facts_to_remove.iter().map(|r| (r.id.as_str(), r.replacement)).collect();
        assert_eq!(removals, [("fact_bbbbbbbb", Some(1)), ("fact_cccccccc", None)]);
        assert!(d.section(SectionId::WorkContext).is_none());
        assert_eq!(d.section(SectionId::TopOfMind).unwrap().summary, "Learning the cello");
        let skipped: Vec<(&str, &str)> = d.skipped.iter().map(|s| (s.path.as_str(), s.reason.as_str())).collect();
        assert_eq!(
            skipped,
            [
                ("newFacts[1]", "secret"),
                ("newFacts[3]", "secret"),
                ("factsToRemove[0]", "replacement-not-applied"),
                ("user.workContext", "secret")
            ]
        );
        assert!(!format!("{d:?}").contains("sk-proj"), "nothing of the key is left in the delta");
        // Without secrets in the reply nothing is touched.
        let clean = r#"{"newFacts": [{"content": "Lives in Lisbon"}]}"#;
        assert_eq!(parse_delta(clean, &secrets).unwrap(), parse_reply(clean).unwrap());
    }
}
