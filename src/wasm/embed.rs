//! Embedding models (`embed` option): `fetch` to an OpenAI-compatible `POST
//! {baseUrl}/embeddings` through the shared [`HttpClient`] (its redirect, body-cap, retry,
//! masking and `close()` rules), or a JS function `async (texts, { signal, purpose }) =>
//! number[][] | Float32Array[]`. Both give the query its own short timeout.

use super::cancel::Cancel;
use super::convert::check_finite;
use super::convert::{items, promise_of, prop, set, to_json};
use super::error::{caused_by, js_message};
#[cfg(feature = "http")]
use super::http::{HttpClient, WholeBody};
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::engine::Spawner;
use crate::json::{Map, Value};
use crate::recall::embed::{parse_reply, EmbedConfig, EmbedPurpose, EmbedSettings, Embedder};
use js_sys::{Array, Float32Array, Function, Object};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// Background tasks on the JS event loop.
pub(crate) struct LocalSpawner;

impl Spawner for LocalSpawner {
    fn spawn(&self, task: LocalFuture<'static, ()>) {
        wasm_bindgen_futures::spawn_local(task);
    }
}

/// The `embed` option, read: the embedder (or none) and what `options()` shows of it
/// (never the key or header values).
pub(crate) struct EmbedOption {
    pub(crate) embedder: Option<Rc<dyn Embedder>>,
    pub(crate) resolved: String,
}

/// Reads `embed`: `undefined`, `null` or `false` (none), a function, `{ function, model?,
/// batchSize?, timeoutMs?, queryTimeoutMs? }`, or an endpoint `{ baseUrl, model, … }`.
pub(crate) fn read_embed(v: &JsValue) -> Result<EmbedOption> {
    if v.is_undefined() || v.is_null() || v.as_bool() == Some(false) {
        return Ok(EmbedOption { embedder: None, resolved: "null".into() });
    }
    #[cfg(feature = "embed")]
    return read_embedder(v);
    #[cfg(not(feature = "embed"))]
    Err(super::error::not_built("`embed`", "embed"))
}

/// Reads an `embed` that is not none.
#[cfg(feature = "embed")]
fn read_embedder(v: &JsValue) -> Result<EmbedOption> {
    let (f, obj) = match v.dyn_ref::<Function>() {
        Some(f) => (Some(f.clone()), Map::new()),
        None if v.is_object() => {
            let f = prop(v, "function");
            let f = if f.is_undefined() {
                None
            } else {
                Some(f.dyn_into::<Function>().map_err(|_| Error::invalid("`embed.function` must be a function (texts, { signal }) => vectors"))?)
            };
            check_finite(v, "embed")?;
            match to_json(v, "`embed`")? {
                Value::Object(o) => (f, o),
                _ => return Err(Error::invalid("`embed` must be an object")),
            }
        }
        None => {
            return Err(Error::invalid(
                "`embed` must be { baseUrl, model, … } for an OpenAI-compatible /embeddings endpoint, an async function (texts, { signal }) => vectors, or false",
            ))
        }
    };
    let (embedder, resolved): (Rc<dyn Embedder>, String) = match f {
        Some(f) => {
            crate::json::field::check_known_keys("embed", &obj, &[&EmbedConfig::FUNCTION_KEYS, &EmbedSettings::KEYS])?;
            let settings = EmbedSettings::read(&obj, Some("function"))?;
            let resolved = settings.resolved_json(None);
            (Rc::new(FunctionEmbedder { f, space: settings.vector_space(), settings, cancel: Cancel::default() }), resolved)
        }
        #[cfg(feature = "http")]
        None => {
            let cfg = EmbedConfig::from_value(&obj)?;
            let resolved = cfg.settings.resolved_json(Some(&cfg.conn.base_url));
            (Rc::new(FetchEmbedder::new(cfg)), resolved)
        }
        #[cfg(not(feature = "http"))]
        None => return Err(super::error::not_built("an `embed` endpoint ({ baseUrl, … }; a function works)", "http")),
    };
    Ok(EmbedOption { embedder: Some(embedder), resolved })
}

#[cfg(all(feature = "embed", feature = "http"))]
/// An OpenAI-compatible embeddings endpoint. Fact batches use `timeoutMs` and `maxRetries`;
/// the query one try within `queryTimeoutMs` (a retry would outlast the chat's patience).
struct FetchEmbedder {
    cfg: EmbedConfig,
    space: String,
    facts: HttpClient,
    query: HttpClient,
}

#[cfg(all(feature = "embed", feature = "http"))]
impl FetchEmbedder {
    fn new(cfg: EmbedConfig) -> FetchEmbedder {
        let mut quick = cfg.conn.clone();
        (quick.timeout_ms, quick.max_retries) = (cfg.settings.query_timeout_ms, 0);
        FetchEmbedder { space: cfg.vector_space(), facts: HttpClient::new(cfg.conn.clone()), query: HttpClient::new(quick), cfg }
    }
}

#[cfg(all(feature = "embed", feature = "http"))]
impl Embedder for FetchEmbedder {
    fn model(&self) -> &str {
        &self.space
    }

    fn batch_size(&self) -> usize {
        self.cfg.settings.batch_size
    }

    fn embed<'a>(&'a self, texts: &'a [String], purpose: EmbedPurpose) -> LocalFuture<'a, Result<Vec<Vec<f32>>>> {
        Box::pin(async move {
            let client = if purpose == EmbedPurpose::Query { &self.query } else { &self.facts };
            let mut body = WholeBody::default();
            match client.post(&self.cfg.request_for(texts, purpose), false, &mut body).await {
                Ok(()) => parse_reply(&client.secrets().mask(&body.text())),
                Err(f) => Err(match f.error {
                    Error::LlmTimeout(_) if purpose == EmbedPurpose::Query => Error::EmbedFailed(format!(
                        "no answer from the embeddings endpoint within {} ms (embed.queryTimeoutMs)",
                        self.cfg.settings.query_timeout_ms
                    )),
                    e => e,
                }),
            }
        })
    }

    fn cancel(&self) {
        self.facts.cancel();
        self.query.cancel();
    }
}

#[cfg(feature = "embed")]
/// A JS function `(texts, { signal, purpose }) => vectors`. `signal` aborts on the timeout
/// and on `close()`; the wait ends then whether or not the function listens.
struct FunctionEmbedder {
    f: Function,
    space: String,
    settings: EmbedSettings,
    cancel: Cancel,
}

#[cfg(feature = "embed")]
impl Embedder for FunctionEmbedder {
    fn model(&self) -> &str {
        &self.space
    }

    fn batch_size(&self) -> usize {
        self.settings.batch_size
    }

    fn embed<'a>(&'a self, texts: &'a [String], purpose: EmbedPurpose) -> LocalFuture<'a, Result<Vec<Vec<f32>>>> {
        Box::pin(async move {
            let (controller, _registered) = self.cancel.register()?;
            let ms = if purpose == EmbedPurpose::Query { self.settings.query_timeout_ms } else { self.settings.timeout_ms };
            let input = Array::new();
            for t in texts {
                input.push(&JsValue::from_str(t));
            }
            let arg = Object::new();
            set(&arg, "signal", &controller.signal());
            set(&arg, "purpose", &JsValue::from_str(purpose.as_str()));
            let fail = |e: &JsValue| caused_by(Error::EmbedFailed(format!("the embed function failed: {}", js_message(e))), e);
            let ret = self.f.call2(&JsValue::NULL, &input, &arg).map_err(|e| fail(&e))?;
            // The answer, or `None` when the timer fires first (the signal is aborted then).
            let timer = (ms > 0).then(|| super::timer::sleep(ms));
            let answer = FirstOf { answer: JsFuture::from(promise_of(&ret)), timer };
            let Some(v) = self.cancel.until_closed(answer).await? else {
                controller.abort();
                let option = if purpose == EmbedPurpose::Query { "queryTimeoutMs" } else { "timeoutMs" };
                return Err(Error::EmbedFailed(format!("the embed function gave no answer within {ms} ms (embed.{option})")));
            };
            let v = v.map_err(|e| fail(&e))?;
            vectors_of(&v)
        })
    }

    fn cancel(&self) {
        self.cancel.cancel();
    }
}

#[cfg(feature = "embed")]
/// The output of `answer`, or `None` if `timer` (when there is one) is done first.
struct FirstOf<A, B> {
    answer: A,
    timer: Option<B>,
}

#[cfg(feature = "embed")]
impl<A: Future + Unpin, B: Future + Unpin> Future for FirstOf<A, B> {
    type Output = Option<A::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = Pin::new(&mut self.answer).poll(cx) {
            return Poll::Ready(Some(v));
        }
        match self.timer.as_mut().map(|t| Pin::new(t).poll(cx)) {
            Some(Poll::Ready(_)) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

#[wasm_bindgen]
extern "C" {
    /// `Float32Array.from(v)`: any array-like of numbers in one call (a component that is not
    /// a number becomes NaN), catching what a hostile value throws.
    #[wasm_bindgen(catch, js_namespace = Float32Array, js_name = from)]
    fn float32_from(v: &JsValue) -> std::result::Result<Float32Array, JsValue>;
}

#[cfg(feature = "embed")]
/// `number[][]`, `Float32Array[]` (or other array-likes) as vectors; a NaN component (also
/// one that was not a number) is refused by the engine's reply check.
fn vectors_of(v: &JsValue) -> Result<Vec<Vec<f32>>> {
    let what = "the embed function's result";
    let unusable = || Error::EmbedFailed(format!("{what} must be an array of vectors (number[][] or Float32Array[])"));
    let list = items(v, what).map_err(|e| Error::EmbedFailed(e.message()))?.ok_or_else(unusable)?;
    let mut out = Vec::with_capacity(list.len());
    for item in &list {
        out.push(float32_from(item).map_err(|_| unusable())?.to_vec());
    }
    Ok(out)
}
