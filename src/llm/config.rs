//! LLM connection settings (`llm: { baseUrl, apiKey, model, … }`), validated.

use crate::config::{opt_bool, opt_f64, opt_str, opt_uint};
use crate::error::{Error, Result};
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
    /// The API root, without a trailing slash (e.g. `http://127.0.0.1:11434/v1`).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` (OpenAI) or `x-api-key` (Anthropic) when present.
    pub api_key: Option<String>,
    /// The model name.
    pub model: String,
    /// Extra request headers; they override the defaults of the same name.
    pub headers: Vec<(String, String)>,
    /// Abort a request after this many milliseconds (default 60 000); `0` means no timeout
    /// (the request runs until the server answers or the instance is closed).
    pub timeout_ms: u64,
    /// Retries within one attempt on 429, 5xx, timeouts and network errors (default 2).
    pub max_retries: u32,
    /// Sampling temperature: 0 unless given; `temperature: null` leaves it out of the
    /// request (`None`), for models that refuse the parameter.
    pub temperature: Option<f64>,
    /// `max_tokens` of the reply (Anthropic requires one; default 4096).
    pub max_tokens: Option<u64>,
    /// Ask OpenAI-compatible servers for a JSON object (`response_format`), default false.
    pub json_mode: bool,
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

/// `timeoutMs` when none is given.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

const KNOWN: &[&str] =
    &["provider", "baseUrl", "apiKey", "model", "headers", "timeoutMs", "maxRetries", "temperature", "maxTokens", "jsonMode"];

impl LlmConfig {
    /// What must never appear in an error message: the API key and the values of the
    /// user's headers (keys sent as `api-key`, a hand-set `Authorization`, …).
    pub fn secrets(&self) -> Vec<&str> {
        self.api_key.iter().map(String::as_str).chain(self.headers.iter().map(|(_, v)| v.as_str())).collect()
    }

    /// Validates the `llm` option object.
    pub fn from_value(v: &Value) -> Result<LlmConfig> {
        let obj = v.as_object().ok_or_else(|| {
            Error::invalid(format!("`llm` must be an object {{ baseUrl, model, … }} or a function, found {}", v.type_name()))
        })?;
        if let Some(k) = obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            let mut msg = format!("unknown option `llm.{k}` (known: {}", KNOWN[0]);
            for name in &KNOWN[1..] {
                msg.push_str(", ");
                msg.push_str(name);
            }
            msg.push(')');
            return Err(Error::invalid(msg));
        }
        let provider = match opt_str(obj, "llm.provider", "provider")?.as_deref() {
            None | Some("openai") => Provider::OpenAi,
            Some("anthropic") => Provider::Anthropic,
            Some(other) => return Err(Error::invalid(format!("`llm.provider` must be \"openai\" or \"anthropic\", found \"{other}\""))),
        };
        let base_url = match opt_str(obj, "llm.baseUrl", "baseUrl")? {
            Some(u) => u,
            None => match provider {
                Provider::OpenAi => "https://api.openai.com/v1".to_string(),
                Provider::Anthropic => "https://api.anthropic.com/v1".to_string(),
            },
        };
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://") || base_url.starts_with('/')) {
            return Err(Error::invalid(format!("`llm.baseUrl` must be an http(s) URL or an absolute path, found \"{base_url}\"")));
        }
        let model = opt_str(obj, "llm.model", "model")?
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| Error::invalid("`llm.model` is required (e.g. \"gpt-4o-mini\" or \"llama3.1\")"))?;
        let mut headers = Vec::new();
        match obj.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                for (k, v) in h {
                    match v {
                        Value::String(s) => headers.push((k.clone(), s.clone())),
                        other => return Err(Error::invalid(format!("`llm.headers.{k}` must be a string, found {}", other.type_name()))),
                    }
                }
            }
            Some(other) => return Err(Error::invalid(format!("`llm.headers` must be an object of strings, found {}", other.type_name()))),
        }
        let temperature = match obj.get("temperature") {
            Some(Value::Null) => None,
            _ => Some(opt_f64(obj, "llm.temperature", "temperature")?.unwrap_or(0.0)),
        };
        Ok(LlmConfig {
            provider,
            base_url,
            api_key: opt_str(obj, "llm.apiKey", "apiKey")?.filter(|k| !k.is_empty()),
            model,
            headers,
            timeout_ms: opt_uint(obj, "llm.timeoutMs", "timeoutMs")?.unwrap_or(DEFAULT_TIMEOUT_MS),
            max_retries: opt_uint(obj, "llm.maxRetries", "maxRetries")?.unwrap_or(2).min(10) as u32,
            temperature,
            max_tokens: opt_uint(obj, "llm.maxTokens", "maxTokens")?,
            json_mode: opt_bool(obj, "llm.jsonMode", "jsonMode")?.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(v: crate::json::Value) -> Result<u64> {
        LlmConfig::from_value(&v).map(|c| c.timeout_ms)
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
        assert_eq!(crate::llm::retry::lease_ms(0, 2), crate::llm::retry::UNBOUNDED_LEASE_MS);
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
            "unknown option `llm.timeout` (known: provider, baseUrl, apiKey, model, headers, timeoutMs, maxRetries, temperature, maxTokens, jsonMode)"
        );
    }
}
