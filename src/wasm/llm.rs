//! LLM transports: `fetch` to an OpenAI-compatible or Anthropic endpoint, and a plain JS
//! function `async ({ system, prompt, signal }) => string`.

use super::cancel::Cancel;
use super::convert::{prop, set, to_json};
use super::error::llm_function_error;
use super::http::{HttpClient, WholeBody};
use crate::error::{Error, Result};
use crate::http::Secrets;
use crate::llm::protocol::{build_http_request, downgrade, extract_reply, Shape};
use crate::llm::{Llm, LlmConfig, LlmReply, LlmRequest, Usage};
use crate::message::content_text;
use crate::sync::LocalFuture;
use js_sys::{Function, Object};
use std::cell::Cell;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// An HTTP endpoint (OpenAI-compatible or Anthropic) reached with `fetch`.
pub(crate) struct FetchLlm {
    cfg: LlmConfig,
    http: HttpClient,
    /// What the endpoint accepts, as learnt from its refusals (starts as the options ask).
    shape: Cell<Shape>,
}

impl FetchLlm {
    pub(crate) fn new(cfg: LlmConfig) -> FetchLlm {
        FetchLlm { http: HttpClient::new(cfg.conn.clone()), shape: Cell::new(Shape::of(&cfg)), cfg }
    }
}

impl Llm for FetchLlm {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        Box::pin(async move {
            loop {
                let shape = self.shape.get();
                let http = build_http_request(&self.cfg, request, shape);
                let mut body = WholeBody::default();
                match self.http.post(&http, false, &mut body).await {
                    Ok(()) => return extract_reply(self.cfg.provider, &body.text(), self.http.secrets()),
                    Err(f) => match f.error.status().and_then(|status| downgrade(shape, status, &f.body)) {
                        // Refused a part of the request: leave it out from now on.
                        Some(lower) => self.shape.set(lower),
                        None => return Err(f.error),
                    },
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
