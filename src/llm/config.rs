//! LLM connection settings (`llm: { baseUrl, apiKey, model, … }`), validated.

use crate::base::error::{Error, Result};
use crate::base::http::{Connection, EndpointName, Secrets};
use crate::json::field::check_known_keys;
use crate::json::field::{opt_bool, opt_f64, opt_str, opt_uint};
use crate::json::Value;

/// Which HTTP protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI-compatible `POST {baseUrl}/chat/completions` (OpenAI, Ollama, vLLM, LM Studio,
    /// DeepSeek, OpenRouter …).
    OpenAi,
    /// Anthropic's `POST {baseUrl}/messages`.
    Anthropic,
}

/// Settings of an HTTP LLM endpoint.
///
/// `Debug` is implemented by hand so that the API key never reaches a log line.
#[derive(Clone, PartialEq)]
pub struct LlmConfig {
    /// The protocol.
    pub provider: Provider,
    /// Where and how to connect: base URL, key, headers, timeout, retries, body limit.
    pub conn: Connection,
    /// The model name.
    pub model: String,
    /// Sampling temperature: 0 unless given; `temperature: null` leaves it out of the
    /// request (`None`), for models that refuse the parameter.
    pub temperature: Option<f64>,
    /// The reply's token budget (`max_tokens`), default [`DEFAULT_MAX_TOKENS`]; `None`
    /// (`maxTokens: null`, OpenAI-compatible only) leaves it to the endpoint.
    pub max_tokens: Option<u64>,
    /// How the reply is constrained (`jsonMode`), default [`OutputMode::Schema`].
    pub output: OutputMode,
    /// Stream the reply (`stream`, default true).
    pub stream: bool,
    /// Further fields of the request body (`extraBody`), as given: sampling settings of local
    /// servers (`repeat_penalty`, `frequency_penalty`, `top_k`, Ollama's `options` …). Never
    /// one the library sets itself ([`RESERVED_BODY_KEYS`]).
    pub extra_body: Vec<(String, Value)>,
}

/// The request fields the library writes itself, which `extraBody` cannot set or override:
/// the model, the messages, the output constraint, the budget, streaming and temperature
/// (which has its own option).
pub const RESERVED_BODY_KEYS: [&str; 13] = [
    "model",
    "messages",
    "system",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "response_format",
    "temperature",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
];

/// What the request asks the model's output to be (`llm.jsonMode`). When the endpoint
/// refuses one, the transport goes down to the next (schema → JSON → text) and stays there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OutputMode {
    /// Free text (`jsonMode: false`).
    Text,
    /// Any JSON object (`jsonMode: true`: OpenAI's `response_format: { type: "json_object" }`;
    /// Anthropic has none, so it is text there).
    Json,
    /// The delta's JSON schema (`jsonMode: "schema"`): OpenAI's `response_format` with
    /// `json_schema` (strict), Anthropic's forced tool call.
    Schema,
}

/// `maxTokens` when none is given: the largest delta of the reply corpus
/// (`tests/fixtures/replies/`, a full six-section update in Chinese) is 381 tokens, the
/// median 95; a cut-off reply is retried once with 4× the budget.
pub const DEFAULT_MAX_TOKENS: u64 = 1024;

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("conn", &self.conn)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// `timeoutMs` when none is given.
pub use crate::base::http::DEFAULT_TIMEOUT_MS;

/// The keys of `llm` besides the [`Connection::KEYS`].
const OWN_KEYS: &[&str] = &["provider", "model", "temperature", "maxTokens", "jsonMode", "stream", "extraBody"];

/// Whether `key` is a field of the `llm` option object.
pub fn is_llm_key(key: &str) -> bool {
    OWN_KEYS.contains(&key) || Connection::KEYS.contains(&key)
}

impl LlmConfig {
    /// What must never appear in an error message, in storage or in the document: the API
    /// key and the values of the user's headers.
    pub fn secrets(&self) -> Secrets {
        self.conn.secrets()
    }

    /// Validates the `llm` option object.
    pub fn from_value(v: &Value) -> Result<LlmConfig> {
        let obj = v.as_object().ok_or_else(|| crate::json::field::wrong_type("llm", "an object { baseUrl, model, … } or a function", v))?;
        check_known_keys("llm", obj, &[OWN_KEYS, &Connection::KEYS])?;
        let provider = match opt_str(obj, "llm", "provider")? {
            None | Some("openai") => Provider::OpenAi,
            Some("anthropic") => Provider::Anthropic,
            Some(other) => return Err(Error::invalid(format!("`llm.provider` must be \"openai\" or \"anthropic\", found \"{other}\""))),
        };
        let default_base_url = match provider {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com/v1",
        };
        let conn = Connection::read(EndpointName::LLM, obj, default_base_url)?;
        let model = opt_str(obj, "llm", "model")?
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| Error::invalid("`llm.model` is required (e.g. \"gpt-4o-mini\" or \"llama3.1\")"))?
            .to_string();
        let temperature = match obj.get("temperature") {
            Some(Value::Null) => None,
            _ => Some(opt_f64(obj, "llm", "temperature")?.unwrap_or(0.0)),
        };
        let max_tokens = match obj.get("maxTokens") {
            Some(Value::Null) if provider == Provider::Anthropic => {
                return Err(Error::invalid("`llm.maxTokens` cannot be null with provider \"anthropic\" (its API requires max_tokens)"))
            }
            Some(Value::Null) => None,
            _ => match opt_uint(obj, "llm", "maxTokens")?.unwrap_or(DEFAULT_MAX_TOKENS) {
                0 => return Err(Error::invalid("`llm.maxTokens` must be at least 1 (or null to leave it out)")),
                n => Some(n),
            },
        };
        let output = match obj.get("jsonMode") {
            None | Some(Value::Null) => OutputMode::Schema,
            Some(Value::Bool(true)) => OutputMode::Json,
            Some(Value::Bool(false)) => OutputMode::Text,
            Some(Value::String(s)) if s == "schema" => OutputMode::Schema,
            Some(_) => return Err(Error::invalid("`llm.jsonMode` must be \"schema\" (the default), true (any JSON object) or false")),
        };
        let extra_body = read_extra_body(obj.get("extraBody"))?;
        Ok(LlmConfig {
            provider,
            conn,
            model,
            temperature,
            max_tokens,
            output,
            stream: opt_bool(obj, "llm", "stream")?.unwrap_or(true),
            extra_body,
        })
    }

    /// Whether `extraBody` sets `key`.
    pub fn sets(&self, key: &str) -> bool {
        self.extra_body.iter().any(|(k, _)| k == key)
    }
}

/// Reads `llm.extraBody`: an object whose fields go into every request body as given, none
/// of them one of [`RESERVED_BODY_KEYS`].
fn read_extra_body(v: Option<&Value>) -> Result<Vec<(String, Value)>> {
    let obj = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(o)) => o,
        Some(other) => return Err(crate::json::field::wrong_type("llm.extraBody", "an object of request fields", other).into()),
    };
    let mut out = Vec::with_capacity(obj.len());
    for (k, v) in obj {
        if RESERVED_BODY_KEYS.contains(&k.as_str()) {
            return Err(Error::invalid(crate::delta::cat(&[
                "`llm.extraBody.",
                k,
                "` is written by the library itself and cannot be overridden (model, messages, stream, maxTokens, jsonMode and temperature have options of their own)",
            ])));
        }
        out.push((k.clone(), v.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(v: crate::json::Value) -> Result<u64> {
        LlmConfig::from_value(&v).map(|c| c.conn.timeout_ms)
    }

    #[test]
    fn temperature_defaults_to_zero_and_null_leaves_it_out() {
        let t = |v| LlmConfig::from_value(&v).map(|c| c.temperature);
        assert_eq!(t(json!({"model": "m"})).unwrap(), Some(0.0));
        assert_eq!(t(json!({"model": "m", "temperature": 0.7})).unwrap(), Some(0.7));
        assert_eq!(t(json!({"model": "m", "temperature": null})).unwrap(), None);
        assert!(t(json!({"model": "m", "temperature": "hot"})).is_err());
    }

    #[test]
    fn timeout_defaults_to_a_minute_and_zero_means_none() {
        assert_eq!(timeout(json!({"model": "m"})).unwrap(), DEFAULT_TIMEOUT_MS);
        assert_eq!(timeout(json!({"model": "m", "timeoutMs": 180_000})).unwrap(), 180_000);
        assert_eq!(timeout(json!({"model": "m", "timeoutMs": 0})).unwrap(), 0);
        for bad in [serde_json::json!(-1), serde_json::json!(1.5), serde_json::json!("60000"), serde_json::json!(true)] {
            let e = timeout(json!({"model": "m", "timeoutMs": bad})).unwrap_err();
            assert_eq!(e.code(), "INVALID_INPUT");
            assert!(e.message().contains("llm.timeoutMs"), "{}", e.message());
        }
    }

    #[test]
    fn an_unknown_option_lists_the_known_ones() {
        let e = LlmConfig::from_value(&json!({"model": "m", "timeout": 5})).unwrap_err();
        assert_eq!(
            e.message(),
            "unknown option `llm.timeout`: did you mean `timeoutMs`? (known: provider, model, temperature, maxTokens, jsonMode, stream, extraBody, baseUrl, apiKey, headers, timeoutMs, deadlineMs, maxRetries, maxResponseBytes)"
        );
    }

    #[test]
    fn max_tokens_json_mode_and_stream_defaults_and_validation() {
        let c = |v| LlmConfig::from_value(&v);
        let d = c(json!({"model": "m"})).unwrap();
        assert_eq!((d.max_tokens, d.output, d.stream), (Some(DEFAULT_MAX_TOKENS), OutputMode::Schema, true));
        let e = c(json!({"model": "m", "maxTokens": null, "jsonMode": true, "stream": false})).unwrap();
        assert_eq!((e.max_tokens, e.output, e.stream), (None, OutputMode::Json, false));
        assert_eq!(c(json!({"model": "m", "jsonMode": false})).unwrap().output, OutputMode::Text);
        assert_eq!(c(json!({"model": "m", "jsonMode": "schema", "maxTokens": 300})).unwrap().max_tokens, Some(300));
        for (bad, named) in [
            (json!({"model": "m", "maxTokens": 0}), "llm.maxTokens"),
            (json!({"model": "m", "provider": "anthropic", "maxTokens": null}), "llm.maxTokens"),
            (json!({"model": "m", "jsonMode": "json_schema"}), "llm.jsonMode"),
            (json!({"model": "m", "stream": "yes"}), "llm.stream"),
        ] {
            let e = c(bad).unwrap_err();
            assert!(e.code() == "INVALID_INPUT" && e.message().contains(named), "{}", e.message());
        }
    }

    #[test]
    fn extra_body_fields_are_kept_and_the_librarys_own_are_refused() {
        let c = LlmConfig::from_value(&json!({"model": "m", "extraBody": {"repeat_penalty": 1.15, "options": {"num_ctx": 8192}}})).unwrap();
        assert_eq!(c.extra_body.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["repeat_penalty", "options"]);
        assert!(c.sets("repeat_penalty") && !c.sets("top_k"));
        assert!(LlmConfig::from_value(&json!({"model": "m"})).unwrap().extra_body.is_empty());
        for key in RESERVED_BODY_KEYS {
            let mut o = serde_json::Map::new();
            o.insert(key.to_string(), serde_json::json!(1));
            let v = serde_json::json!({"model": "m", "extraBody": o});
            let e = LlmConfig::from_value(&Value::parse(&v.to_string()).unwrap()).unwrap_err();
            assert!(e.code() == "INVALID_INPUT" && e.message().contains(&format!("`llm.extraBody.{key}`")), "{}", e.message());
        }
        let e = LlmConfig::from_value(&json!({"model": "m", "extraBody": ["repeat_penalty"]})).unwrap_err();
        assert!(e.message().contains("`llm.extraBody` must be an object"), "{}", e.message());
    }
}
