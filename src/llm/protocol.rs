//! The pure parts of the HTTP protocols: URLs, headers, request bodies, what to leave out
//! when an endpoint refuses a parameter, reply extraction, and the verdict on a reply (use
//! it, retry a cut-off one with a larger budget, or fail). The platform layer only moves
//! bytes.

// Only the wasm layer (src/wasm/) calls this; natively the tests do.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use super::config::DEFAULT_MAX_TOKENS;
use super::schema::{DELTA_SCHEMA, DELTA_SCHEMA_NAME};
use super::{LlmConfig, LlmRequest, OutputMode, Provider, Usage};
use crate::base::error::{Error, Result};
use crate::base::http::{snippet, HttpRequest, Secrets};
use crate::extract::delta::cat;
use crate::json::{ArrayWriter, ObjectWriter, Value};
use crate::memory::message::content_text;

/// Anthropic API version header value.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The largest budget the retry of a cut-off reply asks for (a common output limit).
pub(crate) const MAX_RAISED_TOKENS: u64 = 8192;

/// The budget of the one retry of a reply cut off at `budget` tokens: four times as much,
/// at most [`MAX_RAISED_TOKENS`]; `None` when that is no more.
pub(crate) fn raised_budget(budget: u64) -> Option<u64> {
    let raised = budget.saturating_mul(4).min(MAX_RAISED_TOKENS);
    (raised > budget).then_some(raised)
}

/// What a request asks of the endpoint beyond the prompt. It starts from the options and
/// only ever loses parts, when the endpoint refuses one ([`downgrade`]); a transport keeps
/// it per instance, so a refusal costs one extra request once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// How the output is constrained.
    pub output: OutputMode,
    /// Stream the reply as server-sent events.
    pub stream: bool,
    /// Send `temperature`.
    pub temperature: bool,
    /// Send the budget as `max_completion_tokens` (OpenAI's reasoning models refuse
    /// `max_tokens`).
    pub max_completion_tokens: bool,
    /// The endpoint may be sent [`LOOP_PENALTY_FIELD`] when a reply is asked again after a
    /// repetition loop (false once it refused the field).
    pub penalty: bool,
}

/// The repetition penalty the retry of a looping reply sends (llama.cpp's server field,
/// which LM Studio, llamafile and node-llama-cpp servers read too), and its value: 1.1
/// over the last 64 tokens (llama.cpp's default window) made 9 of 10 looping requests of a
/// 0.5B model finish as valid JSON (docs/local-models.md).
pub(crate) const LOOP_PENALTY_FIELD: &str = "repeat_penalty";
pub(crate) const LOOP_PENALTY: f64 = 1.1;

impl Shape {
    /// The shape the options ask for.
    pub(crate) fn of(cfg: &LlmConfig) -> Shape {
        let output = match (cfg.provider, cfg.output) {
            // Anthropic has no JSON mode: text, or the schema through a tool.
            (Provider::Anthropic, OutputMode::Json) => OutputMode::Text,
            (_, mode) => mode,
        };
        // Only OpenAI-compatible servers have the field, and one the user set stays theirs.
        let penalty = cfg.provider == Provider::OpenAi && !cfg.sets(LOOP_PENALTY_FIELD);
        Shape { output, stream: cfg.stream, temperature: cfg.temperature.is_some(), max_completion_tokens: false, penalty }
    }
}

/// Whether `word` occurs in `text` on its own (not inside a longer identifier: `stream` is
/// not in `upstream` or `stream_options`).
fn has_word(text: &str, word: &str) -> bool {
    let ident = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    let bytes = text.as_bytes();
    text.match_indices(word).any(|(i, _)| !ident(i.checked_sub(1).and_then(|j| bytes.get(j))) && !ident(bytes.get(i + word.len())))
}

/// The shape to try instead after the endpoint answered a request of shape `shape` with
/// `status` and `body`: without the part the error names (the JSON schema, JSON mode,
/// streaming, `temperature`, or `max_tokens` in favour of `max_completion_tokens`). `None`
/// when the error names nothing that can be left out (it stands). Every step drops a part,
/// so the fallbacks end.
pub(crate) fn downgrade(provider: Provider, shape: Shape, status: u16, body: &str) -> Option<Shape> {
    if !matches!(status, 400 | 422) {
        return None;
    }
    let body = body.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| has_word(&body, w));
    let openai = provider == Provider::OpenAi;
    let mut lower = shape;
    if shape.output == OutputMode::Schema
        && (if openai {
            any(&["json_schema", "response_format", "schema", "strict"])
        } else {
            any(&["tools", "tool", "tool_choice", "input_schema"])
        })
    {
        lower.output = if openai { OutputMode::Json } else { OutputMode::Text };
    } else if shape.output == OutputMode::Json && openai && any(&["response_format", "json_object"]) {
        lower.output = OutputMode::Text;
    } else if shape.stream && any(&["stream", "stream_options"]) {
        lower.stream = false;
    } else if shape.temperature && any(&["temperature"]) {
        lower.temperature = false;
    } else if openai && !shape.max_completion_tokens && any(&["max_completion_tokens"]) {
        lower.max_completion_tokens = true;
    } else if shape.penalty && any(&[LOOP_PENALTY_FIELD]) {
        lower.penalty = false;
    } else {
        return None;
    }
    Some(lower)
}

/// Builds the HTTP request for `req` against the endpoint in `cfg`, shaped by `shape`, with
/// a reply budget of `budget` tokens (`None`: the endpoint's own); `penalize`: with the
/// repetition penalty of a retry after a loop (where `shape` allows it). The fields of
/// `llm.extraBody` come last (none of them is one of those written here).
pub(crate) fn build_http_request(cfg: &LlmConfig, req: &LlmRequest, shape: Shape, budget: Option<u64>, penalize: bool) -> HttpRequest {
    let conn = &cfg.conn;
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    let mut body = String::new();
    let mut o = ObjectWriter::new(&mut body);
    o.str("model", &cfg.model);
    let temperature = cfg.temperature.filter(|_| shape.temperature);
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
            o.bool("stream", shape.stream);
            if shape.stream {
                o.key("stream_options").push_str(r#"{"include_usage":true}"#);
            }
            if let Some(t) = temperature {
                o.fixed("temperature", t, 6);
            }
            if let Some(m) = budget {
                o.u64(if shape.max_completion_tokens { "max_completion_tokens" } else { "max_tokens" }, m);
            }
            match shape.output {
                OutputMode::Schema => {
                    let f = o.key("response_format");
                    f.push_str(r#"{"type":"json_schema","json_schema":{"name":""#);
                    f.push_str(DELTA_SCHEMA_NAME);
                    f.push_str(r#"","strict":true,"schema":"#);
                    f.push_str(DELTA_SCHEMA);
                    f.push_str("}}");
                }
                OutputMode::Json => o.key("response_format").push_str(r#"{"type":"json_object"}"#),
                OutputMode::Text => {}
            }
            if penalize && shape.penalty {
                o.fixed(LOOP_PENALTY_FIELD, LOOP_PENALTY, 2);
            }
            format!("{}/chat/completions", conn.base_url)
        }
        Provider::Anthropic => {
            if let Some(key) = &conn.api_key {
                headers.push(("x-api-key".into(), key.clone()));
            }
            headers.push(("anthropic-version".into(), ANTHROPIC_VERSION.into()));
            o.u64("max_tokens", budget.unwrap_or(DEFAULT_MAX_TOKENS)).str("system", &req.system);
            let mut messages = ArrayWriter::new(o.key("messages"));
            let mut m = ObjectWriter::new(messages.item());
            m.str("role", "user").str("content", &req.prompt);
            m.finish();
            messages.finish();
            if let Some(t) = temperature {
                o.fixed("temperature", t, 6);
            }
            if shape.stream {
                o.bool("stream", true);
            }
            if shape.output == OutputMode::Schema {
                // A forced call of the one tool whose input is the delta.
                let tools = o.key("tools");
                tools.push_str(r#"[{"name":""#);
                tools.push_str(DELTA_SCHEMA_NAME);
                tools.push_str(r#"","description":"Record what to change in the user's memory.","input_schema":"#);
                tools.push_str(DELTA_SCHEMA);
                tools.push_str("}]");
                let choice = o.key("tool_choice");
                choice.push_str(r#"{"type":"tool","name":""#);
                choice.push_str(DELTA_SCHEMA_NAME);
                choice.push_str(r#""}"#);
            }
            format!("{}/messages", conn.base_url)
        }
    };
    for (k, v) in &cfg.extra_body {
        v.write(o.key(k));
    }
    o.finish();
    HttpRequest { url, headers: conn.headers_over(headers), body }
}

/// A reply as the endpoint gave it, before the verdict.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Completion {
    /// The reply text (for a forced tool call: its input, as JSON text).
    pub text: String,
    /// The provider's token counts, when it sent them.
    pub usage: Option<Usage>,
    /// Why the model stopped (`finish_reason` / `stop_reason`), when the endpoint said.
    pub finish: Option<String>,
    /// A refusal the model gave instead of the reply (OpenAI's `message.refusal`).
    pub refusal: Option<String>,
}

impl Completion {
    /// Whether the model stopped at the token limit.
    pub(crate) fn cut_off(&self) -> bool {
        matches!(self.finish.as_deref(), Some("length" | "max_tokens"))
    }
}

/// Reads a successful (2xx), non-streamed response body.
///
/// OpenAI-compatible: `choices[0].message.content` as a string or a list of parts.
/// Anthropic: the input of a `tool_use` block (the forced delta tool), else the `text`
/// blocks of `content`. A body that is not JSON is `LLM_BAD_OUTPUT` (quoting it with
/// `secrets` masked).
pub(crate) fn extract_reply(provider: Provider, body: &str, secrets: &Secrets) -> Result<Completion> {
    let v = Value::parse(body)
        .map_err(|_| Error::LlmBadOutput(format!("the endpoint's response is not JSON: {}", snippet(&secrets.mask(body)))))?;
    let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let mut c = Completion { usage: usage(provider, v.get("usage")), ..Completion::default() };
    match provider {
        Provider::OpenAi => {
            let choice = v.get("choices").and_then(Value::as_array).and_then(|c| c.first());
            let message = choice.and_then(|c| c.get("message"));
            c.text = content_text(message.and_then(|m| m.get("content")));
            if c.text.trim().is_empty() {
                // Some servers return only `text` (legacy completions).
                c.text = content_text(choice.and_then(|c| c.get("text")));
            }
            c.finish = string(choice.and_then(|c| c.get("finish_reason")));
            c.refusal = string(message.and_then(|m| m.get("refusal")));
        }
        Provider::Anthropic => {
            let blocks = v.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            c.text = match blocks.iter().find(|b| b.get("type").and_then(Value::as_str) == Some("tool_use")) {
                Some(tool) => {
                    let mut json = String::new();
                    if let Some(input) = tool.get("input") {
                        input.write(&mut json);
                    }
                    json
                }
                None => content_text(v.get("content")),
            };
            c.finish = string(v.get("stop_reason"));
        }
    }
    Ok(c)
}

/// The token counts in a provider's `usage` object: OpenAI's `prompt_tokens` /
/// `completion_tokens`, Anthropic's `input_tokens` / `output_tokens`.
pub(crate) fn usage(provider: Provider, u: Option<&Value>) -> Option<Usage> {
    let u = u?;
    let (prompt, completion) = match provider {
        Provider::OpenAi => ("prompt_tokens", "completion_tokens"),
        Provider::Anthropic => ("input_tokens", "output_tokens"),
    };
    Some(Usage { prompt_tokens: u.get(prompt)?.as_u64()?, completion_tokens: u.get(completion)?.as_u64()? })
}

/// What to do with a completion.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Hand it to the engine.
    Accept,
    /// It was cut off at the token limit before the delta was complete: ask once more with
    /// this budget.
    Retry(u64),
    /// It was cut off in a repetition loop: ask once more with the same budget and a
    /// repetition penalty.
    RetryPenalized,
    /// Final: `LLM_BAD_OUTPUT` saying why.
    Fail(Error),
}

/// Which try of a request a completion answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Try {
    /// The first.
    First,
    /// The retry of a cut-off reply, with a raised budget (the first budget).
    Raised(u64),
    /// The retry of a looping reply, with a repetition penalty.
    Penalized,
}

/// Judges a completion of a request with budget `budget`, sent as try `tried`;
/// `can_penalize`: the endpoint may be asked again with a repetition penalty. A cut-off
/// reply that still holds a complete delta is used (a model that ran on after the object).
/// One that does not is asked once more: with a repetition penalty and the same budget when
/// it ends in a repetition loop (a larger budget only buys a longer loop; without a
/// penalty to send, it fails at once), else with [`raised_budget`]; then it is reported,
/// naming the cause.
pub(crate) fn judge(provider: Provider, c: &Completion, budget: Option<u64>, tried: Try, can_penalize: bool) -> Verdict {
    if c.cut_off() && crate::extract::parse::parse_reply(&c.text).is_err() {
        let field = if provider == Provider::OpenAi { "finish_reason" } else { "stop_reason" };
        let finish = c.finish.as_deref().unwrap_or_default();
        if super::repetition::is_repetition_loop(&c.text) {
            if tried == Try::First && can_penalize {
                return Verdict::RetryPenalized;
            }
            let how = match tried {
                Try::Penalized => "again with a repetition penalty",
                _ => "and the library has no repetition penalty to add (the endpoint refused it, or llm.extraBody sets one)",
            };
            return Verdict::Fail(Error::LlmBadOutput(cat(&[
                "the reply was cut off by the token limit (",
                field,
                ": \"",
                finish,
                "\") in a repetition loop, ",
                how,
                "; a larger model, or a penalty of your endpoint's own in llm.extraBody (e.g. repeat_penalty, frequency_penalty), may help",
            ])));
        }
        if tried == Try::First {
            if let Some(more) = budget.and_then(raised_budget) {
                return Verdict::Retry(more);
            }
        }
        let limits = match (tried, budget) {
            (Try::Raised(first), Some(b)) => format!("after {first} and again after {b} tokens"),
            (_, Some(b)) => format!("after {b} tokens"),
            (_, None) => "at the endpoint's own limit (llm.maxTokens: null)".to_string(),
        };
        return Verdict::Fail(Error::LlmBadOutput(format!(
            "the reply was cut off by the token limit ({field}: \"{finish}\") {limits}, before its memory JSON was complete; raise llm.maxTokens"
        )));
    }
    if c.text.trim().is_empty() {
        let why = match (&c.refusal, &c.finish) {
            (Some(r), _) => format!(": the model refused ({})", snippet(r)),
            (None, Some(f)) => format!(" (finish reason: {f})"),
            _ => String::new(),
        };
        return Verdict::Fail(Error::LlmBadOutput(format!("the model returned no text{why}")));
    }
    Verdict::Accept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(r: &HttpRequest) -> serde_json::Value {
        serde_json::from_str(&r.body).unwrap()
    }

    fn cfg_with(provider: &str, extra: serde_json::Value) -> LlmConfig {
        let mut v = serde_json::json!({
            "provider": provider, "baseUrl": "http://127.0.0.1:9/v1/", "apiKey": "sk-secret-123",
            "model": "m", "headers": {"X-Extra": "1", "Content-Type": "application/json; charset=utf-8"}
        });
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        LlmConfig::from_value(&Value::parse(&v.to_string()).unwrap()).unwrap()
    }

    fn cfg(provider: &str) -> LlmConfig {
        cfg_with(provider, serde_json::json!({}))
    }

    fn request(cfg: &LlmConfig, shape: Shape) -> serde_json::Value {
        body_of(&build_http_request(cfg, &LlmRequest { system: "S".into(), prompt: "P".into() }, shape, cfg.max_tokens, false))
    }

    #[test]
    fn openai_request_has_bearer_key_model_both_messages_stream_budget_and_the_schema() {
        let c = cfg("openai");
        let r = build_http_request(&c, &LlmRequest { system: "S".into(), prompt: "P".into() }, Shape::of(&c), c.max_tokens, false);
        assert_eq!(r.url, "http://127.0.0.1:9/v1/chat/completions");
        assert!(r.headers.contains(&("authorization".into(), "Bearer sk-secret-123".into())));
        assert!(r.headers.contains(&("X-Extra".into(), "1".into())));
        assert_eq!(r.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("content-type")).count(), 1);
        let body = body_of(&r);
        assert_eq!(body["model"], "m");
        assert_eq!(body["messages"][0]["content"], "S");
        assert_eq!(body["messages"][1]["content"], "P");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["temperature"], 0.0);
        let f = &body["response_format"];
        assert_eq!(
            (f["type"].as_str(), f["json_schema"]["name"].as_str(), f["json_schema"]["strict"].as_bool()),
            (Some("json_schema"), Some("memory_delta"), Some(true))
        );
        assert_eq!(f["json_schema"]["schema"], serde_json::from_str::<serde_json::Value>(DELTA_SCHEMA).unwrap());
    }

    #[test]
    fn openai_shapes_json_text_no_stream_no_temperature_and_max_completion_tokens() {
        let c = cfg_with("openai", serde_json::json!({"jsonMode": true, "stream": false, "maxTokens": null}));
        let body = request(&c, Shape::of(&c));
        assert_eq!((body["response_format"]["type"].as_str(), body["stream"].as_bool()), (Some("json_object"), Some(false)));
        assert!(body.get("stream_options").is_none() && body.get("max_tokens").is_none());
        let c = cfg_with("openai", serde_json::json!({"jsonMode": false}));
        let shape = Shape { temperature: false, max_completion_tokens: true, ..Shape::of(&c) };
        let body = request(&c, shape);
        assert!(body.get("response_format").is_none() && body.get("temperature").is_none() && body.get("max_tokens").is_none());
        assert_eq!(body["max_completion_tokens"], 1024);
    }

    #[test]
    fn anthropic_request_uses_x_api_key_version_budget_and_a_forced_tool() {
        let c = cfg("anthropic");
        let r = build_http_request(&c, &LlmRequest { system: "S".into(), prompt: "P".into() }, Shape::of(&c), c.max_tokens, false);
        assert_eq!(r.url, "http://127.0.0.1:9/v1/messages");
        assert!(r.headers.contains(&("x-api-key".into(), "sk-secret-123".into())));
        assert!(r.headers.iter().any(|(k, _)| k == "anthropic-version"));
        let body = body_of(&r);
        assert_eq!((body["system"].as_str(), body["max_tokens"].as_u64(), body["stream"].as_bool()), (Some("S"), Some(1024), Some(true)));
        assert_eq!(body["tools"][0]["name"], "memory_delta");
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(body["tool_choice"], serde_json::json!({"type": "tool", "name": "memory_delta"}));
        // jsonMode: true is plain text on Anthropic (it has no JSON mode).
        let c = cfg_with("anthropic", serde_json::json!({"jsonMode": true, "stream": false}));
        let body = request(&c, Shape::of(&c));
        assert!(body.get("tools").is_none() && body.get("stream").is_none());
    }

    #[test]
    fn replies_are_extracted_from_strings_part_lists_and_tool_calls() {
        let none = Secrets::default();
        let openai = r#"{"choices":[{"message":{"content":"hello"},"finish_reason":"stop"}]}"#;
        let c = extract_reply(Provider::OpenAi, openai, &none).unwrap();
        assert_eq!((c.text.as_str(), c.finish.as_deref(), c.cut_off()), ("hello", Some("stop"), false));
        let parts = r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#;
        assert_eq!(extract_reply(Provider::OpenAi, parts, &none).unwrap().text, "a b");
        let anthropic = r#"{"content":[{"type":"thinking","thinking":"…"},{"type":"text","text":"{}"}],"stop_reason":"max_tokens"}"#;
        let c = extract_reply(Provider::Anthropic, anthropic, &none).unwrap();
        assert_eq!((c.text.as_str(), c.cut_off()), ("{}", true));
        let tool = r#"{"content":[{"type":"tool_use","id":"t","name":"memory_delta","input":{"newFacts":[{"content":"x"}]}}],"stop_reason":"tool_use"}"#;
        assert_eq!(extract_reply(Provider::Anthropic, tool, &none).unwrap().text, r#"{"newFacts":[{"content":"x"}]}"#);
        let refusal = r#"{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}"#;
        assert_eq!(extract_reply(Provider::OpenAi, refusal, &none).unwrap().refusal.as_deref(), Some("I can't help with that."));
        assert_eq!(extract_reply(Provider::OpenAi, "<html>", &none).unwrap_err().code(), "LLM_BAD_OUTPUT");
        // A 2xx body that is not JSON is quoted with the secrets masked.
        let e = extract_reply(Provider::OpenAi, "debug: key=sk-secret-123", &Secrets::new(["sk-secret-123"])).unwrap_err();
        assert!(e.message().contains("key=***") && !e.message().contains("sk-secret"), "{}", e.message());
    }

    #[test]
    fn usage_is_read_from_either_provider() {
        let none = Secrets::default();
        let openai = r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":812,"completion_tokens":95,"total_tokens":907}}"#;
        assert_eq!(
            extract_reply(Provider::OpenAi, openai, &none).unwrap().usage,
            Some(Usage { prompt_tokens: 812, completion_tokens: 95 })
        );
        let anthropic = r#"{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":700,"output_tokens":80}}"#;
        assert_eq!(
            extract_reply(Provider::Anthropic, anthropic, &none).unwrap().usage,
            Some(Usage { prompt_tokens: 700, completion_tokens: 80 })
        );
        // OpenAI's field names under Anthropic (or a partial usage) are no usage.
        let partial = r#"{"content":[{"type":"text","text":"x"}],"usage":{"input_tokens":700}}"#;
        assert_eq!(extract_reply(Provider::Anthropic, partial, &none).unwrap().usage, None);
    }

    fn completion(text: &str, finish: &str) -> Completion {
        Completion { text: text.into(), finish: Some(finish.into()), ..Completion::default() }
    }

    #[test]
    fn a_cut_off_reply_is_retried_once_with_four_times_the_budget_then_reported() {
        let cut = completion(r#"{"newFacts": [{"content": "Lives in Lis"#, "length");
        assert_eq!(judge(Provider::OpenAi, &cut, Some(1024), Try::First, true), Verdict::Retry(4096));
        let Verdict::Fail(e) = judge(Provider::OpenAi, &cut, Some(4096), Try::Raised(1024), true) else { panic!() };
        assert_eq!(e.code(), "LLM_BAD_OUTPUT");
        assert_eq!(
            e.message(),
            "the reply was cut off by the token limit (finish_reason: \"length\") after 1024 and again after 4096 tokens, before its memory JSON was complete; raise llm.maxTokens"
        );
        let anthropic = completion("I will now list", "max_tokens");
        let Verdict::Fail(e) = judge(Provider::Anthropic, &anthropic, None, Try::First, false) else { panic!() };
        assert!(e.message().contains("stop_reason: \"max_tokens\"") && e.message().contains("endpoint's own limit"), "{}", e.message());
        // Nothing more to ask for: the cap of the raised budget.
        assert_eq!(raised_budget(MAX_RAISED_TOKENS), None);
        assert_eq!(raised_budget(3000), Some(MAX_RAISED_TOKENS));
        assert!(matches!(judge(Provider::OpenAi, &cut, Some(MAX_RAISED_TOKENS), Try::First, true), Verdict::Fail(_)));
    }

    #[test]
    fn a_reply_cut_off_in_a_loop_is_asked_again_with_a_penalty_never_a_bigger_budget() {
        let looping =
            completion(&format!(r#"{{"user": {{"topOfMind": "I am vegetarian. {}"#, "I am vegan. I am gluten-free. ".repeat(40)), "length");
        assert_eq!(judge(Provider::OpenAi, &looping, Some(1024), Try::First, true), Verdict::RetryPenalized);
        // Looping again with the penalty, or with no penalty to send: fail, naming the loop.
        for (tried, can, why) in
            [(Try::Penalized, true, "again with a repetition penalty"), (Try::First, false, "no repetition penalty to add")]
        {
            let Verdict::Fail(e) = judge(Provider::OpenAi, &looping, Some(1024), tried, can) else { panic!() };
            assert!(e.message().contains("in a repetition loop") && e.message().contains(why), "{}", e.message());
        }
        // A cut reply that does not loop still gets the bigger budget.
        let cut = completion(r#"{"newFacts": [{"content": "Lives in Lis"#, "length");
        assert_eq!(judge(Provider::OpenAi, &cut, Some(1024), Try::First, true), Verdict::Retry(4096));
    }

    #[test]
    fn the_penalty_and_the_extra_body_fields_are_written_and_a_refused_penalty_is_dropped() {
        let c = cfg_with("openai", serde_json::json!({"extraBody": {"top_k": 40, "options": {"num_ctx": 8192}}}));
        let shape = Shape::of(&c);
        assert!(shape.penalty);
        let req = LlmRequest { system: "S".into(), prompt: "P".into() };
        let body = body_of(&build_http_request(&c, &req, shape, Some(1024), true));
        assert_eq!((body["repeat_penalty"].as_f64(), body["top_k"].as_u64()), (Some(1.1), Some(40)));
        assert_eq!(body["options"]["num_ctx"], 8192);
        assert!(body_of(&build_http_request(&c, &req, shape, Some(1024), false)).get("repeat_penalty").is_none());
        let refused = r#"{"error":{"message":"Unrecognized request argument supplied: repeat_penalty"}}"#;
        let lower = downgrade(Provider::OpenAi, shape, 400, refused).unwrap();
        assert!(!lower.penalty);
        assert!(body_of(&build_http_request(&c, &req, lower, Some(1024), true)).get("repeat_penalty").is_none());
        // A penalty of the user's own, and Anthropic, get none of ours.
        assert!(!Shape::of(&cfg_with("openai", serde_json::json!({"extraBody": {"repeat_penalty": 1.2}}))).penalty);
        assert!(!Shape::of(&cfg("anthropic")).penalty);
    }

    #[test]
    fn a_cut_off_reply_with_a_complete_delta_is_used_and_an_empty_one_says_why() {
        // A model that ran on (whitespace, prose) after a complete delta.
        let ran_on = completion(&format!(r#"{{"newFacts": [{{"content": "Lives in Lisbon"}}]}}{}"#, " ".repeat(500)), "length");
        assert_eq!(judge(Provider::OpenAi, &ran_on, Some(1024), Try::First, true), Verdict::Accept);
        let Verdict::Fail(e) = judge(Provider::OpenAi, &completion("  ", "stop"), Some(1024), Try::First, true) else { panic!() };
        assert_eq!(e.message(), "the model returned no text (finish reason: stop)");
        let refused = Completion { refusal: Some("I can't help with that.".into()), ..Completion::default() };
        let Verdict::Fail(e) = judge(Provider::OpenAi, &refused, Some(1024), Try::First, true) else { panic!() };
        assert!(e.message().contains("refused (I can't help with that.)"), "{}", e.message());
        // An empty reply cut off by the limit (a reasoning model spent it thinking) is retried.
        assert_eq!(judge(Provider::OpenAi, &completion("", "length"), Some(1024), Try::First, true), Verdict::Retry(4096));
    }

    #[test]
    fn refused_parameters_are_dropped_one_at_a_time_and_the_fallbacks_end() {
        let c = cfg("openai");
        let start = Shape::of(&c);
        let openai = |shape, status, body| downgrade(Provider::OpenAi, shape, status, body);
        // A server without structured outputs names the parameter: schema → JSON mode.
        let no_schema =
            r#"{"error":{"message":"Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."}}"#;
        let json = openai(start, 400, no_schema).unwrap();
        assert_eq!(json.output, OutputMode::Json);
        // LM Studio refuses json_object: JSON mode → text.
        let lm_studio = r#"{"error":"'response_format.type' must be 'json_schema' or 'text'"}"#;
        assert_eq!(openai(json, 400, lm_studio).unwrap().output, OutputMode::Text);
        assert_eq!(openai(json, 422, "Unsupported: json_object").unwrap().output, OutputMode::Text);
        // Streaming, temperature and max_tokens refused by name (OpenAI's reasoning models).
        let text = Shape { output: OutputMode::Text, ..start };
        assert!(!openai(text, 400, r#"{"error":"Unknown parameter: 'stream_options'"}"#).unwrap().stream);
        let no_stream = Shape { stream: false, ..text };
        let t = r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported."}}"#;
        assert!(!openai(no_stream, 400, t).unwrap().temperature);
        let m = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."}}"#;
        let no_temp = Shape { temperature: false, ..no_stream };
        let last = openai(no_temp, 400, m).unwrap();
        assert!(last.max_completion_tokens);
        // Nothing left to drop, another status, or a body naming nothing we sent: the error stands.
        for body in [no_schema, lm_studio, t, m] {
            assert_eq!(openai(last, 400, body), None, "{body}");
        }
        assert_eq!(openai(start, 500, no_schema), None);
        assert_eq!(openai(start, 400, r#"{"error":{"message":"model not found"}}"#), None);
        assert_eq!(openai(Shape { output: OutputMode::Text, ..start }, 400, "upstream error"), None, "`upstream` is not `stream`");
        // Anthropic through a proxy without tools: the forced tool → text.
        let a = Shape::of(&cfg("anthropic"));
        let tools = r#"{"type":"error","error":{"type":"invalid_request_error","message":"tools: Extra inputs are not permitted"}}"#;
        assert_eq!(downgrade(Provider::Anthropic, a, 400, tools).unwrap().output, OutputMode::Text);
    }

    #[test]
    fn header_values_count_as_secrets() {
        // A key sent in a user header (Azure's `api-key`) is masked like the API key.
        let cfg = LlmConfig::from_value(&json!({"model": "m", "headers": {"api-key": "azure-secret-value"}})).unwrap();
        let e = crate::base::http::status_error(
            crate::base::http::EndpointName::LLM,
            401,
            r#"{"error":{"message":"bad key azure-secret-value"}}"#,
            &cfg.secrets(),
        );
        assert!(e.message().contains("bad key ***"), "{}", e.message());
    }
}
