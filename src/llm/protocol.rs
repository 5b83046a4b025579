//! The pure parts of the HTTP protocols: URLs, headers, request bodies, reply extraction
//! and error messages. The platform layer only moves bytes.

use super::{LlmConfig, LlmReply, LlmRequest, Provider, Usage};
use crate::error::{Error, Result};
use crate::json::{ArrayWriter, ObjectWriter, Value};
use crate::message::content_text;

/// Anthropic API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Default `max_tokens` of a reply (Anthropic requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// An HTTP request, ready for `fetch`.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    /// The full URL.
    pub url: String,
    /// Headers in order; user headers come last and replace defaults of the same name.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: String,
}

/// Builds the HTTP request for `req` against the endpoint in `cfg`.
pub fn build_http_request(cfg: &LlmConfig, req: &LlmRequest) -> HttpRequest {
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    let mut body = String::new();
    let mut o = ObjectWriter::new(&mut body);
    o.str("model", &cfg.model);
    let url = match cfg.provider {
        Provider::OpenAi => {
            if let Some(key) = &cfg.api_key {
                headers.push(("authorization".into(), format!("Bearer {key}")));
            }
            let mut messages = ArrayWriter::new(o.key("messages"));
            for (role, content) in [("system", &req.system), ("user", &req.prompt)] {
                let mut m = ObjectWriter::new(messages.item());
                m.str("role", role).str("content", content);
                m.finish();
            }
            messages.finish();
            o.bool("stream", false);
            if let Some(t) = cfg.temperature {
                o.fixed("temperature", t, 6);
            }
            if let Some(m) = cfg.max_tokens {
                o.u64("max_tokens", m);
            }
            if cfg.json_mode {
                o.key("response_format").push_str(r#"{"type":"json_object"}"#);
            }
            format!("{}/chat/completions", cfg.base_url)
        }
        Provider::Anthropic => {
            if let Some(key) = &cfg.api_key {
                headers.push(("x-api-key".into(), key.clone()));
            }
            headers.push(("anthropic-version".into(), ANTHROPIC_VERSION.into()));
            o.u64("max_tokens", cfg.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)).str("system", &req.system);
            let mut messages = ArrayWriter::new(o.key("messages"));
            let mut m = ObjectWriter::new(messages.item());
            m.str("role", "user").str("content", &req.prompt);
            m.finish();
            messages.finish();
            if let Some(t) = cfg.temperature {
                o.fixed("temperature", t, 6);
            }
            format!("{}/messages", cfg.base_url)
        }
    };
    o.finish();
    for (k, v) in &cfg.headers {
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    HttpRequest { url, headers, body }
}

/// Extracts the reply text from a successful (2xx) response body.
///
/// OpenAI-compatible: `choices[0].message.content` as a string or a list of parts.
/// Anthropic: the `text` blocks of `content`. A body without text is `LLM_BAD_OUTPUT`
/// (quoting the body with `secrets` masked).
pub fn extract_reply(provider: Provider, body: &str, secrets: &[&str]) -> Result<LlmReply> {
    let v = Value::parse(body)
        .map_err(|_| Error::LlmBadOutput(format!("the endpoint's response is not JSON: {}", snippet(&mask(body, secrets)))))?;
    let text = match provider {
        Provider::OpenAi => {
            let choice = first_choice(&v);
            let text = content_text(choice.and_then(|c| c.get("message")).and_then(|m| m.get("content")));
            if text.trim().is_empty() {
                // Some servers return only `text` (legacy completions) or put the answer in a
                // reasoning field when the budget ran out; accept the former.
                content_text(choice.and_then(|c| c.get("text")))
            } else {
                text
            }
        }
        Provider::Anthropic => content_text(v.get("content")),
    };
    if text.trim().is_empty() {
        let why = match first_choice(&v).and_then(|c| c.get("finish_reason")).or_else(|| v.get("stop_reason")) {
            Some(Value::String(r)) => format!(" (finish reason: {r})"),
            _ => String::new(),
        };
        return Err(Error::LlmBadOutput(format!("the model returned no text{why}")));
    }
    Ok(LlmReply { text, usage: usage(provider, &v) })
}

/// The token counts the provider reported: OpenAI's `usage.prompt_tokens` /
/// `completion_tokens`, Anthropic's `usage.input_tokens` / `output_tokens`.
fn usage(provider: Provider, v: &Value) -> Option<Usage> {
    let u = v.get("usage")?;
    let (prompt, completion) = match provider {
        Provider::OpenAi => ("prompt_tokens", "completion_tokens"),
        Provider::Anthropic => ("input_tokens", "output_tokens"),
    };
    Some(Usage { prompt_tokens: u.get(prompt)?.as_u64()?, completion_tokens: u.get(completion)?.as_u64()? })
}

/// `choices[0]` of an OpenAI-compatible response.
fn first_choice(v: &Value) -> Option<&Value> {
    v.get("choices")?.as_array()?.first()
}

/// Replaces every secret of 6 or more characters in `text` with `***`.
pub fn mask(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 6) {
        if out.contains(*s) {
            out = out.replace(*s, "***");
        }
    }
    out
}

/// The error for a non-2xx response: the status, the provider's own error message when the
/// body has one, else a short excerpt. `secrets` (the API key, header values) echoed back
/// are masked in the whole body first, so no excerpt can cut one in half.
pub fn http_error(status: u16, body: &str, secrets: &[&str]) -> Error {
    let body = mask(body, secrets);
    let detail = Value::parse(&body)
        .ok()
        .and_then(|v| {
            v.get("error")
                .and_then(|e| e.get("message"))
                .or_else(|| v.get("error").filter(|e| e.as_str().is_some()))
                .or_else(|| v.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| snippet(&body));
    let hint = match status {
        401 | 403 => " — check the API key (llm.apiKey, or the key your proxy adds)",
        404 => " — check llm.baseUrl and llm.model",
        429 => " — rate limited",
        _ => "",
    };
    Error::LlmHttp { status, message: format!("LLM endpoint answered HTTP {status}{hint}: {detail}") }
}

/// The first 200 characters of a body, on one line.
fn snippet(body: &str) -> String {
    let one_line: String = body.chars().take(200).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if body.chars().count() > 200 {
        format!("{one_line}…")
    } else {
        one_line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(r: &HttpRequest) -> serde_json::Value {
        serde_json::from_str(&r.body).unwrap()
    }

    fn cfg(provider: &str) -> LlmConfig {
        LlmConfig::from_value(&json!({
            "provider": provider, "baseUrl": "http://127.0.0.1:9/v1/", "apiKey": "sk-secret-123",
            "model": "m", "headers": {"X-Extra": "1", "Content-Type": "application/json; charset=utf-8"}
        }))
        .unwrap()
    }

    #[test]
    fn openai_request_has_bearer_key_model_and_both_messages() {
        let r = build_http_request(&cfg("openai"), &LlmRequest { system: "S".into(), prompt: "P".into() });
        assert_eq!(r.url, "http://127.0.0.1:9/v1/chat/completions");
        assert!(r.headers.contains(&("authorization".into(), "Bearer sk-secret-123".into())));
        assert!(r.headers.contains(&("X-Extra".into(), "1".into())));
        assert_eq!(r.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("content-type")).count(), 1);
        let body = body_of(&r);
        assert_eq!(body["model"], "m");
        assert_eq!(body["messages"][0]["content"], "S");
        assert_eq!(body["messages"][1]["content"], "P");
    }

    #[test]
    fn anthropic_request_uses_x_api_key_version_and_max_tokens() {
        let r = build_http_request(&cfg("anthropic"), &LlmRequest { system: "S".into(), prompt: "P".into() });
        assert_eq!(r.url, "http://127.0.0.1:9/v1/messages");
        assert!(r.headers.contains(&("x-api-key".into(), "sk-secret-123".into())));
        assert!(r.headers.iter().any(|(k, _)| k == "anthropic-version"));
        let body = body_of(&r);
        assert_eq!(body["system"], "S");
        assert_eq!(body["max_tokens"], 4096);
    }

    #[test]
    fn replies_are_extracted_from_strings_and_part_lists() {
        let openai = r#"{"choices":[{"message":{"content":"hello"}}]}"#;
        assert_eq!(extract_reply(Provider::OpenAi, openai, &[]).unwrap(), LlmReply::text("hello"));
        let parts = r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#;
        assert_eq!(extract_reply(Provider::OpenAi, parts, &[]).unwrap().text, "a b");
        let anthropic = r#"{"content":[{"type":"thinking","thinking":"…"},{"type":"text","text":"{}"}]}"#;
        assert_eq!(extract_reply(Provider::Anthropic, anthropic, &[]).unwrap().text, "{}");
        let empty = r#"{"choices":[{"message":{"content":null},"finish_reason":"length"}]}"#;
        let e = extract_reply(Provider::OpenAi, empty, &[]).unwrap_err();
        assert_eq!(e.code(), "LLM_BAD_OUTPUT");
        assert!(e.message().contains("length"));
        assert_eq!(extract_reply(Provider::OpenAi, "<html>", &[]).unwrap_err().code(), "LLM_BAD_OUTPUT");
        // A 2xx body that is not JSON is quoted with the secrets masked.
        let e = extract_reply(Provider::OpenAi, "debug: key=sk-secret-123", &["sk-secret-123"]).unwrap_err();
        assert!(e.message().contains("key=***") && !e.message().contains("sk-secret"), "{}", e.message());
    }

    #[test]
    fn usage_is_read_from_either_provider() {
        let openai = r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":812,"completion_tokens":95,"total_tokens":907}}"#;
        assert_eq!(extract_reply(Provider::OpenAi, openai, &[]).unwrap().usage, Some(Usage { prompt_tokens: 812, completion_tokens: 95 }));
        let anthropic = r#"{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":700,"output_tokens":80}}"#;
        assert_eq!(
            extract_reply(Provider::Anthropic, anthropic, &[]).unwrap().usage,
            Some(Usage { prompt_tokens: 700, completion_tokens: 80 })
        );
        // OpenAI's field names under Anthropic (or a partial usage) are no usage.
        let partial = r#"{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":700}}"#;
        assert_eq!(extract_reply(Provider::Anthropic, partial, &[]).unwrap().usage, None);
    }

    #[test]
    fn http_errors_carry_status_and_provider_message_without_the_key() {
        let e = http_error(401, r#"{"error":{"message":"Incorrect API key provided: sk-secret-123"}}"#, &["sk-secret-123"]);
        assert_eq!(e.status(), Some(401));
        assert!(e.message().contains("Incorrect API key provided: ***"));
        assert!(!e.message().contains("sk-secret-123"));
        assert!(e.message().contains("check the API key"));
    }

    #[test]
    fn secrets_are_masked_before_the_excerpt_is_cut_and_header_values_count_as_secrets() {
        // The key starts at character 160 of a non-JSON body: cutting at 200 first would
        // have left most of it in the message.
        let key = "sk-proj-0123456789abcdefghijklmnopqrstuvwxyz";
        let body = format!("{}{key} trailing", "x".repeat(160));
        let e = http_error(502, &body, &[key]);
        assert!(!e.message().contains("sk-proj-0123"), "{}", e.message());
        // A key sent in a user header (Azure's `api-key`) is masked like the API key.
        let cfg = LlmConfig::from_value(&json!({"model": "m", "headers": {"api-key": "azure-secret-value"}})).unwrap();
        let e = http_error(401, r#"{"error":{"message":"bad key azure-secret-value"}}"#, &cfg.secrets());
        assert!(e.message().contains("bad key ***"), "{}", e.message());
    }
}
