//! LLM transports: `fetch` to an OpenAI-compatible or Anthropic endpoint, and a plain JS
//! function `async ({ system, prompt, signal }) => string`.

use super::convert::{prop, set, to_json};
use super::error::{js_message, llm_function_error};
use crate::error::{Error, Result};
use crate::llm::protocol::{build_http_request, extract_reply, http_error, HttpRequest};
use crate::llm::retry::{delay_ms, is_retryable, parse_retry_after};
use crate::llm::{Llm, LlmConfig, LlmReply, LlmRequest, Usage};
use crate::message::content_text;
use crate::sync::LocalFuture;
use js_sys::{Function, Object, Promise};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Headers, Request, RequestInit, Response};

#[wasm_bindgen]
extern "C" {
    /// `globalThis`: a window, a worker, Node or workerd.
    type GlobalScope;
    /// `globalThis.fetch(request)`, called as a method so `this` is the global (workerd
    /// throws "Illegal invocation" otherwise).
    #[wasm_bindgen(method, catch, js_name = fetch)]
    fn fetch_with_request(this: &GlobalScope, input: &Request) -> std::result::Result<Promise, JsValue>;
}

/// What `close()` must be able to stop: the requests in flight (their `AbortController`s)
/// and the waits for them or between retries (their wakers).
#[derive(Default)]
struct Cancel {
    cancelled: Cell<bool>,
    controllers: RefCell<Vec<AbortController>>,
    /// One slot per live [`UntilClosed`] (freed when it drops, so a long-lived instance
    /// does not collect wakers).
    sleepers: RefCell<Vec<Option<Waker>>>,
}

impl Cancel {
    /// Aborts every request in flight and wakes every sleeper (once).
    fn cancel(&self) {
        if self.cancelled.replace(true) {
            return;
        }
        for c in self.controllers.take() {
            c.abort();
        }
        for w in self.sleepers.take().into_iter().flatten() {
            w.wake();
        }
    }
}

impl Cancel {
    /// A new `AbortController` for one call, aborted by [`Cancel::cancel`] until the
    /// returned guard drops; `CLOSED` if already cancelled.
    fn register(&self) -> Result<(AbortController, Unregister<'_>)> {
        if self.cancelled.get() {
            return Err(Error::Closed);
        }
        let controller = AbortController::new().map_err(|e| Error::LlmFailed(js_message(&e)))?;
        self.controllers.borrow_mut().push(controller.clone());
        Ok((controller.clone(), Unregister { cancel: self, controller }))
    }

    /// `future`, ended early with `CLOSED` when the instance is closed. Dropping it drops
    /// `future` (for a timer: clears its `setTimeout`, so a closed instance leaves no
    /// timer behind).
    fn until_closed<F: Future + Unpin>(&self, future: F) -> UntilClosed<'_, F> {
        UntilClosed { future, cancel: self, slot: None }
    }
}

/// See [`Cancel::until_closed`].
struct UntilClosed<'a, F> {
    future: F,
    cancel: &'a Cancel,
    slot: Option<usize>,
}

impl<F> Drop for UntilClosed<'_, F> {
    /// Frees the slot for the next wait.
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            if let Some(slot) = self.cancel.sleepers.borrow_mut().get_mut(i) {
                *slot = None;
            }
        }
    }
}

impl<F: Future + Unpin> Future for UntilClosed<'_, F> {
    type Output = Result<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.cancel.cancelled.get() {
            return Poll::Ready(Err(Error::Closed));
        }
        if let Poll::Ready(v) = Pin::new(&mut self.future).poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let mut sleepers = self.cancel.sleepers.borrow_mut();
        let waker = Some(cx.waker().clone());
        match self.slot {
            Some(i) if i < sleepers.len() => sleepers[i] = waker,
            _ => {
                let i = match sleepers.iter().position(Option::is_none) {
                    Some(i) => i,
                    None => {
                        sleepers.push(None);
                        sleepers.len() - 1
                    }
                };
                sleepers[i] = waker;
                drop(sleepers);
                self.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

/// An HTTP endpoint reached with `fetch`, with timeout and retries.
pub(crate) struct FetchLlm {
    cfg: LlmConfig,
    cancel: Cancel,
}

impl FetchLlm {
    pub(crate) fn new(cfg: LlmConfig) -> FetchLlm {
        FetchLlm { cfg, cancel: Cancel::default() }
    }

    /// One HTTP try: the reply body, or the error plus the server's `Retry-After` (ms).
    async fn try_once(&self, http: &HttpRequest) -> std::result::Result<String, (Error, Option<u64>)> {
        let no_wait = |e: Error| (e, None);
        let init = RequestInit::new();
        init.set_method("POST");
        let headers = Headers::new().map_err(|e| no_wait(Error::LlmFailed(js_message(&e))))?;
        for (k, v) in &http.headers {
            headers
                .set(k, v)
                // (Not the browser's message: it quotes the value, which may be a key.)
                .map_err(|_| {
                    no_wait(Error::invalid(format!(
                        "invalid llm header `{k}`: its name or value has characters HTTP does not allow (a line break?)"
                    )))
                })?;
        }
        init.set_headers(&headers);
        init.set_body(&JsValue::from_str(&http.body));
        // Forgotten by `close()` when this try ends, however it ends.
        let (controller, _registered) = self.cancel.register().map_err(no_wait)?;
        init.set_signal(Some(&controller.signal()));
        let request = Request::new_with_str_and_init(&http.url, &init)
            .map_err(|e| no_wait(Error::invalid(format!("invalid llm.baseUrl \"{}\": {}", self.cfg.base_url, js_message(&e)))))?;

        let timed_out = Rc::new(Cell::new(false));
        let flag = timed_out.clone();
        // setTimeout takes an i32 (a larger delay fires at once): about 24 days at most.
        let ms = self.cfg.timeout_ms.min(i32::MAX as u64) as u32;
        // Dropping the timer (end of this function) cancels it. `timeoutMs: 0`: no timer.
        let _timer = (ms > 0).then(|| {
            gloo_timers::callback::Timeout::new(ms, move || {
                flag.set(true);
                controller.abort();
            })
        });
        let fail = |e: JsValue| {
            if self.cancel.cancelled.get() {
                Error::Closed
            } else if timed_out.get() {
                Error::LlmTimeout(format!("no answer from {} within {} ms (llm.timeoutMs)", http.url, self.cfg.timeout_ms))
            } else {
                let cause = prop(&e, "cause");
                let detail = if cause.is_undefined() { js_message(&e) } else { format!("{} ({})", js_message(&e), js_message(&cause)) };
                Error::LlmNetwork(format!("could not reach {}: {detail}", http.url))
            }
        };
        let global: GlobalScope = js_sys::global().unchecked_into();
        let promise = global.fetch_with_request(&request).map_err(|e| no_wait(fail(e)))?;
        let response: Response = JsFuture::from(promise).await.map_err(|e| no_wait(fail(e)))?.unchecked_into();
        let status = response.status();
        let retry_after =
            response.headers().get("retry-after").ok().flatten().and_then(|v| parse_retry_after(&v, js_sys::Date::now() as u64));
        let text_promise = response.text().map_err(|e| no_wait(fail(e)))?;
        let body: String = JsFuture::from(text_promise).await.map_err(|e| no_wait(fail(e)))?.as_string().unwrap_or_default();
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err((http_error(status, &body, &self.cfg.secrets()), retry_after))
        }
    }
}

/// Removes a try's `AbortController` from [`Cancel`] when the try ends.
struct Unregister<'a> {
    cancel: &'a Cancel,
    controller: AbortController,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        let target: &JsValue = self.controller.as_ref();
        self.cancel.controllers.borrow_mut().retain(|c| !Object::is(c.as_ref(), target));
    }
}

impl Llm for FetchLlm {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LocalFuture<'a, Result<LlmReply>> {
        Box::pin(async move {
            let http = build_http_request(&self.cfg, request);
            let mut retry = 0;
            loop {
                match self.try_once(&http).await {
                    Ok(body) => return extract_reply(self.cfg.provider, &body, &self.cfg.secrets()),
                    Err((e, retry_after)) if retry < self.cfg.max_retries && is_retryable(&e) => {
                        // Waits without blocking the event loop; `CLOSED` if closed meanwhile.
                        let ms = delay_ms(retry, retry_after).min(i32::MAX as u64) as u32;
                        self.cancel.until_closed(gloo_timers::future::TimeoutFuture::new(ms)).await?;
                        retry += 1;
                    }
                    Err((e, _)) => return Err(e),
                }
            }
        })
    }

    fn cancel(&self) {
        self.cancel.cancel();
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
            let v = self.cancel.until_closed(JsFuture::from(Promise::resolve(&ret))).await?;
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
