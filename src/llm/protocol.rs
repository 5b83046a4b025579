//! The pure parts of the HTTP protocols: URLs, headers, request bodies, reply extraction
//! and error messages. The platform layer only moves bytes.

use super::{LlmConfig, LlmReply, LlmRequest, Provider, Usage};
use crate::error::{Error, Result};
use crate::http::{snippet, HttpRequest, Secrets};
use crate::json::{ArrayWriter, ObjectWriter, Value};
use crate::message::content_text;

/// Anthropic API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Default `max_tokens` of a reply (Anthropic requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// What a request asks of the endpoint beyond the prompt. It starts from the options and
/// only ever loses parts, when the endpoint refuses one ([`downgrade`]); a transport keeps
/// it per instance, so a refusal costs one extra request once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Ask for a JSON object (`response_format: { type: "json_object" }`).
    pub json: bool,
}

impl Shape {
    /// The shape the options ask for.
    pub fn of(cfg: &LlmConfig) -> Shape {
        Shape { json: cfg.json_mode && cfg.provider == Provider::OpenAi }
    }
}

/// The shape to try instead after the endpoint answered a request of shape `shape` with
/// `status` and `body`: without the part the error names (`response_format` …). `None` when
/// the error names nothing that can be left out (it stands). Every step drops a part, so
/// the fallbacks end.
pub fn downgrade(shape: Shape, status: u16, body: &str) -> Option<Shape> {
    if !matches!(status, 400 | 422) {
        return None;
    }
    let body = body.to_ascii_lowercase();
    let names = |words: &[&str]| words.iter().any(|w| body.contains(w));
    if shape.json && names(&["response_format", "json_object", "json mode"]) {
        return Some(Shape { json: false });
    }
    None
}

/// Builds the HTTP request for `req` against the endpoint in `cfg`, shaped by `shape`.
pub fn build_http_request(cfg: &LlmConfig, req: &LlmRequest, shape: Shape) -> HttpRequest {
    let conn = &cfg.conn;
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    let mut body = String::new();
    let mut o = ObjectWriter::new(&mut body);
    o.str("model", &cfg.model);
    let url = match cfg.provider {
        Provider::OpenAi => {
            if let Some(key) = &conn.api_key {
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
            if shape.json {
                o.key("response_format").push_str(r#"{"type":"json_object"}"#);
            }
            format!("{}/chat/completions", conn.base_url)
        }
        Provider::Anthropic => {
            if let Some(key) = &conn.api_key {
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
            format!("{}/messages", conn.base_url)
        }
    };
    o.finish();
    HttpRequest { url, headers: conn.headers_over(headers), body }
}

/// Extracts the reply text from a successful (2xx) response body.
///
/// OpenAI-compatible: `choices[0].message.content` as a string or a list of parts.
/// Anthropic: the `text` blocks of `content`. A body without text is `LLM_BAD_OUTPUT`
/// (quoting the body with `secrets` masked).
pub fn extract_reply(provider: Provider, body: &str, secrets: &Secrets) -> Result<LlmReply> {
    let v = Value::parse(body)
        .map_err(|_| Error::LlmBadOutput(format!("the endpoint's response is not JSON: {}", snippet(&secrets.mask(body)))))?;
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
        let r = build_http_request(&cfg("openai"), &LlmRequest { system: "S".into(), prompt: "P".into() }, Shape::of(&cfg("openai")));
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
        let r = build_http_request(&cfg("anthropic"), &LlmRequest { system: "S".into(), prompt: "P".into() }, Shape::of(&cfg("anthropic")));
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
        assert_eq!(extract_reply(Provider::OpenAi, openai, &Secrets::default()).unwrap(), LlmReply::text("hello"));
        let parts = r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#;
        assert_eq!(extract_reply(Provider::OpenAi, parts, &Secrets::default()).unwrap().text, "a b");
        let anthropic = r#"{"content":[{"type":"thinking","thinking":"…"},{"type":"text","text":"{}"}]}"#;
        assert_eq!(extract_reply(Provider::Anthropic, anthropic, &Secrets::default()).unwrap().text, "{}");
        let empty = r#"{"choices":[{"message":{"content":null},"finish_reason":"length"}]}"#;
        let e = extract_reply(Provider::OpenAi, empty, &Secrets::default()).unwrap_err();
        assert_eq!(e.code(), "LLM_BAD_OUTPUT");
        assert!(e.message().contains("length"));
        assert_eq!(extract_reply(Provider::OpenAi, "<html>", &Secrets::default()).unwrap_err().code(), "LLM_BAD_OUTPUT");
        // A 2xx body that is not JSON is quoted with the secrets masked.
        let e = extract_reply(Provider::OpenAi, "debug: key=sk-secret-123", &Secrets::new(["sk-secret-123"])).unwrap_err();
        assert!(e.message().contains("key=***") && !e.message().contains("sk-secret"), "{}", e.message());
    }

    #[test]
    fn usage_is_read_from_either_provider() {
        let openai = r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":812,"completion_tokens":95,"total_tokens":907}}"#;
        assert_eq!(
            extract_reply(Provider::OpenAi, openai, &Secrets::default()).unwrap().usage,
            Some(Usage { prompt_tokens: 812, completion_tokens: 95 })
        );
        let anthropic = r#"{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":700,"output_tokens":80}}"#;
        assert_eq!(
            extract_reply(Provider::Anthropic, anthropic, &Secrets::default()).unwrap().usage,
            Some(Usage { prompt_tokens: 700, completion_tokens: 80 })
        );
        // OpenAI's field names under Anthropic (or a partial usage) are no usage.
        let partial = r#"{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":700}}"#;
        assert_eq!(extract_reply(Provider::Anthropic, partial, &Secrets::default()).unwrap().usage, None);
    }

    #[test]
    fn json_mode_is_dropped_once_when_the_endpoint_refuses_response_format() {
        let json = Shape { json: true };
        // LM Studio refuses json_object; a server that does not know the parameter names it.
        let lm_studio = r#"{"error":"'response_format.type' must be 'json_schema' or 'text'"}"#;
        assert_eq!(downgrade(json, 400, lm_studio), Some(Shape { json: false }));
        assert_eq!(downgrade(json, 422, "Unsupported: json_object"), Some(Shape { json: false }));
        // Other errors stand: another status, a body that names nothing we sent, or nothing
        // left to drop.
        assert_eq!(downgrade(json, 500, lm_studio), None);
        assert_eq!(downgrade(json, 400, r#"{"error":{"message":"model not found"}}"#), None);
        assert_eq!(downgrade(Shape { json: false }, 400, lm_studio), None);
        // Anthropic has no JSON mode to send.
        let anthropic = LlmConfig::from_value(&json!({"provider": "anthropic", "model": "m", "jsonMode": true})).unwrap();
        assert_eq!(Shape::of(&anthropic), Shape { json: false });
    }

    #[test]
    fn header_values_count_as_secrets() {
        // A key sent in a user header (Azure's `api-key`) is masked like the API key.
        let cfg = LlmConfig::from_value(&json!({"model": "m", "headers": {"api-key": "azure-secret-value"}})).unwrap();
        let e = crate::http::status_error(
            crate::http::EndpointName::LLM,
            401,
            r#"{"error":{"message":"bad key azure-secret-value"}}"#,
            &cfg.secrets(),
        );
        assert!(e.message().contains("bad key ***"), "{}", e.message());
    }
}
