//! `fetch` to an HTTP endpoint (the extraction LLM, an embeddings server) under the rules of
//! [`crate::base::http`]: a timeout per request (or per stretch without data, for streams), no
//! redirect to another origin, bodies read through a reader up to `maxResponseBytes`,
//! retries on 429 / 5xx / timeouts / network errors with backoff and `Retry-After`, secrets
//! masked in every message, and everything stopped by `close()`.
//!
//! A transport builds the [`HttpRequest`] and hands a [`BodySink`] for the answer to
//! [`HttpClient::post`]; the protocol (what the body means) stays with the transport.

use super::cancel::Cancel;
use super::convert::{prop, set};
use super::error::js_message;
use crate::base::error::{Error, Result};
use crate::base::http::{follow_redirect, is_redirect, status_error, too_large, Connection, HttpRequest, Secrets, MAX_ERROR_BODY_BYTES};
use crate::llm::retry::{delay_ms, is_retryable, parse_retry_after};
use js_sys::{Object, Promise, Uint8Array};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, ReadableStreamDefaultReader, Response, TextDecoder};

#[wasm_bindgen]
extern "C" {
    /// `globalThis`: a window, a worker, Node or workerd.
    type GlobalScope;
    /// `globalThis.fetch(url, init)`, called as a method so `this` is the global (workerd
    /// throws "Illegal invocation" otherwise).
    #[wasm_bindgen(method, catch, js_name = fetch)]
    fn fetch_with_init(this: &GlobalScope, url: &str, init: &Object) -> std::result::Result<Promise, JsValue>;
}

/// Where the bytes of a successful (2xx) answer go, chunk by chunk, as they arrive.
pub(crate) trait BodySink {
    /// A try's answer begins (with this content type): forget what an earlier try sent.
    fn start(&mut self, content_type: &str);

    /// Takes the next chunk; `true` once the sink has what it needs: reading stops there
    /// and the rest of the response is cancelled (the server stops generating).
    fn push(&mut self, chunk: &Uint8Array) -> bool;

    /// An error the server reported inside a 2xx body (a stream's error event): the try
    /// fails with `LLM_NETWORK` and is retried like a broken connection.
    fn reported_error(&self) -> Option<&str> {
        None
    }
}

/// The whole body, kept as JS chunks until it is complete and decoded (UTF-8, invalid
/// sequences replaced) once: a body refused at the cap never enters wasm memory, which
/// never shrinks, and an accepted one enters it once, at its size.
#[derive(Default)]
pub(crate) struct WholeBody {
    chunks: Vec<Uint8Array>,
    len: u32,
}

impl BodySink for WholeBody {
    fn start(&mut self, _content_type: &str) {
        self.chunks.clear();
        self.len = 0;
    }

    fn push(&mut self, chunk: &Uint8Array) -> bool {
        self.len = self.len.saturating_add(chunk.length());
        self.chunks.push(chunk.clone());
        false
    }
}

impl WholeBody {
    /// The body as text.
    pub(crate) fn text(&self) -> String {
        let all = Uint8Array::new_with_length(self.len);
        let mut at = 0;
        for c in &self.chunks {
            all.set(c, at);
            at += c.length();
        }
        TextDecoder::new().and_then(|d| d.decode_with_js_u8_array(&all)).unwrap_or_default()
    }
}

/// Why a call failed, after its retries.
pub(crate) struct Failure {
    /// The error to report (`LLM_HTTP`, `LLM_TIMEOUT`, `LLM_NETWORK`, `LLM_BAD_OUTPUT`,
    /// `CLOSED`, `INVALID_INPUT`), secrets masked.
    pub(crate) error: Error,
    /// The body of a non-2xx answer, masked and cut at [`MAX_ERROR_BODY_BYTES`] (empty for
    /// other failures): lets a transport recognise "this parameter is not supported".
    pub(crate) body: String,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure { error, body: String::new() }
    }
}

/// One failed try: the failure, the server's `Retry-After` (ms), and whether trying again
/// could help at all.
struct TryFailure {
    failure: Failure,
    retry_after: Option<u64>,
    final_: bool,
}

impl From<Error> for TryFailure {
    fn from(error: Error) -> TryFailure {
        TryFailure { failure: error.into(), retry_after: None, final_: false }
    }
}

impl TryFailure {
    /// A failure that another try would only repeat.
    fn final_(error: Error) -> TryFailure {
        TryFailure { failure: error.into(), retry_after: None, final_: true }
    }
}

/// Aborts a request after `timeoutMs` — counted from the start, or from the last data
/// received when re-armed for every chunk of a stream.
struct Watchdog {
    ms: u64,
    controller: AbortController,
    fired: Rc<Cell<bool>>,
    timer: RefCell<Option<super::timer::Timeout>>,
}

impl Watchdog {
    fn new(timeout_ms: u64, controller: AbortController) -> Watchdog {
        let w = Watchdog { ms: timeout_ms, controller, fired: Rc::default(), timer: RefCell::new(None) };
        w.arm();
        w
    }

    /// (Re)starts the countdown; `timeoutMs: 0` never fires. Dropping the watchdog (or
    /// re-arming it) clears the previous `setTimeout`.
    fn arm(&self) {
        if self.ms == 0 {
            return;
        }
        let (fired, controller) = (self.fired.clone(), self.controller.clone());
        *self.timer.borrow_mut() = Some(super::timer::after(self.ms, move || {
            fired.set(true);
            controller.abort();
        }));
    }
}

/// Lets a promise we do not wait for settle without an unhandled rejection (a cancelled
/// body's `cancel()` may reject).
fn forget(p: Promise) {
    wasm_bindgen_futures::spawn_local(async move {
        let _ = JsFuture::from(p).await;
    });
}

/// An HTTP endpoint reached with `fetch`.
pub(crate) struct HttpClient {
    conn: Connection,
    secrets: Secrets,
    cancel: Cancel,
}

impl HttpClient {
    /// A client for the endpoint `conn` describes.
    pub(crate) fn new(conn: Connection) -> HttpClient {
        HttpClient { secrets: conn.secrets(), conn, cancel: Cancel::default() }
    }

    /// The configuration's secrets (key, header values), for masking reply text.
    pub(crate) fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// Aborts the requests in flight and the waits between retries; later calls fail with
    /// `CLOSED`.
    pub(crate) fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Sends `request` (a POST), retrying within the call on 429, 5xx, timeouts and network
    /// errors up to `maxRetries` times, and feeds the 2xx body to `sink` (restarted for each
    /// try). `streamed`: the answer arrives over time, so `timeoutMs` counts from the last
    /// data received instead of from the start. A body longer than `maxResponseBytes` is
    /// `LLM_BAD_OUTPUT`.
    ///
    /// The whole call, its retries and their waits included, ends with `LLM_TIMEOUT` after
    /// `deadlineMs`: a server that drips a byte (or an SSE comment) just often enough to keep
    /// `timeoutMs` from firing cannot keep it pending.
    pub(crate) async fn post(&self, request: &HttpRequest, streamed: bool, sink: &mut dyn BodySink) -> Result<(), Failure> {
        let mut retry = 0;
        let deadline = self.conn.deadline_ms;
        let started = js_sys::Date::now();
        // What is left of the deadline (`None`: no deadline), at least 1 ms.
        let left = || (deadline > 0).then(|| (deadline as f64 - (js_sys::Date::now() - started)).max(1.0) as u64);
        loop {
            match self.try_once(request, streamed, sink, left()).await {
                Ok(()) => return Ok(()),
                Err(f)
                    if !f.final_
                        && retry < self.conn.max_retries
                        && is_retryable(&f.failure.error)
                        && left().map_or(true, |ms| ms > delay_ms(retry, f.retry_after)) =>
                {
                    // Waits without blocking the event loop; `CLOSED` if closed meanwhile.
                    self.cancel.until_closed(super::timer::sleep(delay_ms(retry, f.retry_after))).await?;
                    retry += 1;
                }
                Err(f) => return Err(f.failure),
            }
        }
    }

    /// The error for a rejected `fetch()` or body read of `url`.
    fn call_error(&self, e: &JsValue, url: &str, reading: bool, streamed: bool, timed_out: bool, past_deadline: bool) -> Error {
        let option = self.conn.name.option;
        if self.cancel.is_cancelled() {
            Error::Closed
        } else if past_deadline {
            let ms = self.conn.deadline_ms;
            Error::LlmTimeout(format!("no complete answer from {url} within {ms} ms ({option}.deadlineMs)"))
        } else if timed_out {
            let ms = self.conn.timeout_ms;
            Error::LlmTimeout(if streamed {
                format!("no answer or new data from {url} for {ms} ms ({option}.timeoutMs)")
            } else {
                format!("no answer from {url} within {ms} ms ({option}.timeoutMs)")
            })
        } else {
            let cause = prop(e, "cause");
            let detail = if cause.is_undefined() { js_message(e) } else { format!("{} ({})", js_message(e), js_message(&cause)) };
            let what = if reading { "lost the connection to" } else { "could not reach" };
            Error::LlmNetwork(self.secrets.mask(&format!("{what} {url}: {detail}")))
        }
    }

    /// The `fetch` options of a try: a plain object (the header names and values were
    /// checked when the options were read, see [`Connection::read`]).
    fn init(request: &HttpRequest, controller: &AbortController) -> Object {
        let init = Object::new();
        let headers = Object::new();
        for (k, v) in &request.headers {
            set(&headers, k, &JsValue::from_str(v));
        }
        set(&init, "method", &JsValue::from_str("POST"));
        set(&init, "headers", &headers);
        set(&init, "body", &JsValue::from_str(&request.body));
        set(&init, "signal", &controller.signal());
        // Redirects are ours to judge (crate::base::http::follow_redirect): `fetch` would send the
        // key, the headers and the body on to wherever the server points.
        set(&init, "redirect", &JsValue::from_str("manual"));
        init
    }

    /// One try: the request, the same-origin redirects it may follow, and the body.
    /// `left`: what is left of the call's deadline, in ms (`None`: no deadline).
    async fn try_once(&self, request: &HttpRequest, streamed: bool, sink: &mut dyn BodySink, left: Option<u64>) -> Result<(), TryFailure> {
        // Forgotten by `close()` when this try ends, however it ends.
        let (controller, _registered) = self.cancel.register()?;
        let watchdog = Watchdog::new(self.conn.timeout_ms, controller.clone());
        // Never re-armed: it counts from the call's start (a retry gets what is left).
        let deadline = Watchdog::new(left.unwrap_or(0), controller.clone());
        let fail = |e: JsValue, url: &str, reading: bool| {
            let error = self.call_error(&e, url, reading, streamed, watchdog.fired.get(), deadline.fired.get());
            TryFailure { final_: deadline.fired.get(), ..TryFailure::from(error) }
        };
        let global: GlobalScope = js_sys::global().unchecked_into();
        let init = Self::init(request, &controller);
        let mut url = request.url.clone();
        let mut hops = 0;
        let response = loop {
            let promise = global.fetch_with_init(&url, &init).map_err(|e| fail(e, &url, false))?;
            let response: Response = JsFuture::from(promise).await.map_err(|e| fail(e, &url, false))?.unchecked_into();
            if prop(&response, "type").as_string().as_deref() == Some("opaqueredirect") {
                // A browser: the target of the redirect is hidden from us, so it cannot be
                // judged; nothing was sent there.
                return Err(TryFailure::final_(Error::LlmNetwork(format!(
                    "{} answered with a redirect, which was not followed (a browser does not show where it leads, and the key and the conversation must not go to another origin) — set {}.baseUrl to the endpoint's final address",
                    self.conn.name.label, self.conn.name.option
                ))));
            }
            let status = response.status();
            if !is_redirect(status) {
                break response;
            }
            if let Some(body) = response.body() {
                forget(body.cancel());
            }
            let location = response.headers().get("location").ok().flatten();
            let from = if response.url().is_empty() { url.clone() } else { response.url() };
            url = follow_redirect(self.conn.name, &from, status, location.as_deref(), hops, &self.secrets).map_err(TryFailure::final_)?;
            hops += 1;
        };
        let status = response.status();
        let headers = response.headers();
        let ok = (200..300).contains(&status);
        let limit = if ok { self.conn.max_response_bytes } else { (MAX_ERROR_BODY_BYTES as u64).min(self.conn.max_response_bytes) };
        // (Of the encoded body: a compressed one decodes to more, which the reader counts.)
        let announced = headers.get("content-length").ok().flatten().and_then(|v| v.trim().parse::<u64>().ok());
        if ok && announced.is_some_and(|n| n > limit) {
            if let Some(body) = response.body() {
                forget(body.cancel());
            }
            return Err(TryFailure::final_(too_large(self.conn.name, limit)));
        }
        let mut error_body = WholeBody::default();
        let sink: &mut dyn BodySink = if ok { sink } else { &mut error_body };
        sink.start(&headers.get("content-type").ok().flatten().unwrap_or_default());
        if let Some(stream) = response.body() {
            let reader: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
            let mut total: u64 = 0;
            loop {
                let chunk = JsFuture::from(reader.read()).await.map_err(|e| fail(e, &url, true))?;
                if prop(&chunk, "done").as_bool() == Some(true) {
                    break;
                }
                let value: Uint8Array = prop(&chunk, "value").unchecked_into();
                let len = u64::from(value.length());
                let room = limit.saturating_sub(total);
                total = total.saturating_add(len);
                if streamed {
                    watchdog.arm();
                }
                // An error body is simply cut at its limit; a reply over it is refused.
                let over = len > room;
                let done = if over && ok { true } else { sink.push(&if over { value.subarray(0, room as u32) } else { value }) || over };
                if done {
                    forget(reader.cancel());
                    controller.abort();
                    if over && ok {
                        return Err(TryFailure::final_(too_large(self.conn.name, limit)));
                    }
                    break;
                }
            }
        }
        if ok {
            if let Some(e) = sink.reported_error() {
                let message = format!("the {}'s stream ended with an error: {e}", self.conn.name.label);
                return Err(Error::LlmNetwork(self.secrets.mask(&message)).into());
            }
            return Ok(());
        }
        let body = self.secrets.mask(&error_body.text());
        let retry_after = headers.get("retry-after").ok().flatten().and_then(|v| parse_retry_after(&v, js_sys::Date::now() as u64));
        let error = status_error(self.conn.name, status, &body, &self.secrets);
        Err(TryFailure { failure: Failure { error, body }, retry_after, final_: false })
    }
}
