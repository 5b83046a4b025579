//! LLM transports: `fetch` to an OpenAI-compatible or Anthropic endpoint, and a plain JS
//! function `async ({ system, prompt, signal }) => string`.

use super::cancel::Cancel;
use super::convert::{prop, set, to_json};
use super::error::llm_function_error;
#[cfg(feature = "http")]
use super::http::{BodySink, HttpClient, WholeBody};
use crate::base::error::{Error, Result};
use crate::base::http::Secrets;
use crate::base::sync::LocalFuture;
use crate::llm::protocol::{build_http_request, downgrade, extract_reply, judge, Shape, Try, Verdict};
use crate::llm::stream::StreamDecoder;
use crate::llm::{Llm, LlmConfig, LlmReply, LlmRequest, Provider, Usage};
use crate::memory::message::content_text;
use js_sys::{Function, Object, Uint8Array};
use std::cell::Cell;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[cfg(feature = "http")]
/// An HTTP endpoint (OpenAI-compatible or Anthropic) reached with `fetch`.
pub(crate) struct FetchLlm {
    cfg: LlmConfig,
    http: HttpClient,
    /// What the endpoint accepts, as learnt from its refusals (starts as the options ask).
    shape: Cell<Shape>,
}

#[cfg(feature = "http")]
impl FetchLlm {
    pub(crate) fn new(cfg: LlmConfig) -> FetchLlm {
        FetchLlm { http: HttpClient::new(cfg.conn.clone()), shape: Cell::new(Shape::of(&cfg)), cfg }
    }
}

#[cfg(feature = "http")]
/// Where a reply's body goes: the event decoder when the endpoint streams, else the whole
/// body (an endpoint that answers a stream request with plain JSON).
struct ReplySink {
    provider: Provider,
    events: Option<StreamDecoder>,
    whole: WholeBody,
}

#[cfg(feature = "http")]
impl BodySink for ReplySink {
    fn start(&mut self, content_type: &str) {
        self.events = content_type.contains("text/event-stream").then(|| StreamDecoder::new(self.provider));
        self.whole.start(content_type);
    }

    fn push(&mut self, chunk: &Uint8Array) -> bool {
        match &mut self.events {
            Some(events) => events.feed(&chunk.to_vec()),
            None => self.whole.push(chunk),
        }
    }

    fn reported_error(&self) -> Option<&str> {
        self.events.as_ref().and_then(StreamDecoder::error)
    }
}

#[cfg(feature = "http")]
/// Adds up what the tries of one call used; `None` once one of them did not say.
fn add_usage(total: Option<Option<Usage>>, more: Option<Usage>) -> Option<Option<Usage>> {
    Some(match (total, more) {
        (None, u) => u,
        (Some(Some(a)), Some(b)) => {
            Some(Usage { prompt_tokens: a.prompt_tokens + b.prompt_tokens, completion_tokens: a.completion_tokens + b.completion_tokens })
        }
        _ => None,
    })
}

#[cfg(feature = "http")]
impl Llm for FetchLlm {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        Box::pin(async move {
            let provider = self.cfg.provider;
            let secrets = self.http.secrets();
            let mut budget = self.cfg.max_tokens;
            // Which try this is: the first, or the one retry of a cut-off reply.
            let mut tried = Try::First;
            let mut usage = None;
            loop {
                let shape = self.shape.get();
                let http = build_http_request(&self.cfg, request, shape, budget, tried == Try::Penalized);
                let mut sink = ReplySink { provider, events: None, whole: WholeBody::default() };
                if let Err(f) = self.http.post(&http, shape.stream, &mut sink).await {
                    match f.error.status().and_then(|status| downgrade(provider, shape, status, &f.body)) {
                        // Refused a part of the request: leave it out from now on.
                        Some(lower) => {
                            self.shape.set(lower);
                            continue;
                        }
                        None => return Err(f.error),
                    }
                }
                let completion = match sink.events {
                    Some(events) => events.finish(|text| secrets.mask(text))?,
                    None => {
                        if shape.stream {
                            // Asked to stream, answered whole: no need to ask again.
                            self.shape.set(Shape { stream: false, ..shape });
                        }
                        extract_reply(provider, &sink.whole.text(), secrets)?
                    }
                };
                usage = add_usage(usage, completion.usage);
                match judge(provider, &completion, budget, tried, self.shape.get().penalty) {
                    Verdict::Accept => return Ok(LlmReply { text: completion.text, usage: usage.flatten() }),
                    Verdict::Retry(more) => {
                        tried = Try::Raised(budget.unwrap_or(more));
                        budget = Some(more);
                    }
                    Verdict::RetryPenalized => tried = Try::Penalized,
                    Verdict::Fail(e) => return Err(e),
                }
            }
        })
    }

    fn cancel(&self) {
        self.http.cancel();
    }

    fn secrets(&self) -> &Secrets {
        self.http.secrets()
    }
}

/// A JS function `async ({ system, prompt, signal }) => string` as the LLM. `close()`
/// aborts `signal` and stops waiting for the function at once, whether or not it listens.
pub(crate) struct JsFunctionLlm {
    f: Function,
    cancel: Cancel,
}

impl JsFunctionLlm {
    pub(crate) fn new(f: Function) -> JsFunctionLlm {
        JsFunctionLlm { f, cancel: Cancel::default() }
    }
}

impl Llm for JsFunctionLlm {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        Box::pin(async move {
            let (controller, _registered) = self.cancel.register()?;
            let arg = Object::new();
            set(&arg, "system", &JsValue::from_str(&request.system));
            set(&arg, "prompt", &JsValue::from_str(&request.prompt));
            set(&arg, "signal", &controller.signal());
            let ret = self.f.call1(&JsValue::NULL, &arg).map_err(|e| llm_function_error(&e))?;
            let v = self.cancel.until_closed(JsFuture::from(super::convert::promise_of(&ret))).await?;
            let v = v.map_err(|e| llm_function_error(&e))?;
            Ok(LlmReply { text: reply_text(&v)?, usage: reply_usage(&v) })
        })
    }

    fn cancel(&self) {
        self.cancel.cancel();
    }
}

/// Token counts on a function's result object, when it carries them: the AI SDK's
/// `usage: { inputTokens, outputTokens }`, or `{ promptTokens, completionTokens }` /
/// OpenAI's `{ prompt_tokens, completion_tokens }`.
fn reply_usage(v: &JsValue) -> Option<Usage> {
    let u = prop(v, "usage");
    if !u.is_object() {
        return None;
    }
    let count = |names: [&str; 3]| names.iter().find_map(|n| prop(&u, n).as_f64()).filter(|x| x.is_finite() && *x >= 0.0);
    let prompt = count(["inputTokens", "promptTokens", "prompt_tokens"])?;
    let completion = count(["outputTokens", "completionTokens", "completion_tokens"])?;
    Some(Usage { prompt_tokens: prompt as u64, completion_tokens: completion as u64 })
}

/// Accepts a string, a list of content parts, `{ text }` (AI SDK results) or `{ content }`.
fn reply_text(v: &JsValue) -> Result<String> {
    if let Some(s) = v.as_string() {
        return Ok(s);
    }
    if let Some(s) = prop(v, "text").as_string() {
        return Ok(s);
    }
    let json = to_json(v, "the llm function's result").unwrap_or_default();
    let text = match &json {
        crate::json::Value::Array(_) => content_text(Some(&json)),
        crate::json::Value::Object(o) => content_text(o.get("content")),
        _ => String::new(),
    };
    if text.is_empty() {
        return Err(Error::LlmBadOutput("the llm function must resolve to a string (the model's reply)".into()));
    }
    Ok(text)
}
