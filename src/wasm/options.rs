//! Reading the `open()` options object: JSON-like options go to [`Config`]; `llm`,
//! `storage` and `countTokens` may be functions or objects and are taken apart here.

use super::convert::{is_array, keys, prop, to_json};
use super::llm::{FetchLlm, JsFunctionLlm};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::json::{Map, Value};
use crate::llm::retry::{lease_ms, UNBOUNDED_LEASE_MS};
use crate::llm::{Llm, LlmConfig};
use js_sys::Function;
use std::rc::Rc;
use wasm_bindgen::{JsCast, JsValue};

/// The options, validated and split by kind.
pub(crate) struct Options {
    pub(crate) config: Config,
    pub(crate) llm: Rc<dyn Llm>,
    pub(crate) lease_ms: u64,
    pub(crate) storage: JsValue,
    pub(crate) count_tokens: Option<Function>,
    /// `persist: true`: ask the browser to keep its storage (`navigator.storage.persist()`).
    pub(crate) persist: bool,
}

/// Rejects numbers JSON cannot carry (`NaN`, `±Infinity`) anywhere in an options value,
/// because `JSON.stringify` would silently turn them into `null` (= "use the default").
/// Objects nested deeper than any option (a cycle, or an SDK client passed by mistake) are
/// `INVALID_INPUT` too, rather than a stack overflow.
pub(crate) fn check_finite(v: &JsValue, path: &str) -> Result<()> {
    check_finite_at(v, path, 0)
}

fn check_finite_at(v: &JsValue, path: &str, depth: usize) -> Result<()> {
    if let Some(x) = v.as_f64() {
        if !x.is_finite() {
            return Err(Error::invalid(format!("`{path}` must be a finite number")));
        }
    } else if v.is_object() && !v.is_function() && !is_array(v) {
        if depth >= 16 {
            return Err(Error::invalid(format!("`{path}` is nested too deeply (a cycle?); options are plain JSON-like values")));
        }
        for k in keys(v, &format!("`{path}`"))? {
            check_finite_at(&prop(v, &k), &format!("{path}.{k}"), depth + 1)?;
        }
    }
    Ok(())
}

/// Splits and validates the options object.
pub(crate) fn read(options: &JsValue) -> Result<Options> {
    if !options.is_object() {
        return Err(Error::invalid("UserMemory.open() needs an options object with at least `llm`"));
    }
    let mut json = Map::new();
    let mut llm = JsValue::UNDEFINED;
    let mut storage = JsValue::UNDEFINED;
    let mut count_tokens = None;
    let mut persist = false;
    for key in keys(options, "the options")? {
        let value = prop(options, &key);
        match key.as_str() {
            "llm" => llm = value,
            "storage" => storage = value,
            "persist" => {
                persist = match value.as_bool() {
                    Some(b) => b,
                    None if value.is_undefined() || value.is_null() => false,
                    None => return Err(Error::invalid("`persist` must be true or false")),
                }
            }
            "countTokens" => {
                if value.is_undefined() || value.is_null() {
                    continue;
                }
                count_tokens =
                    Some(value.dyn_into::<Function>().map_err(|_| Error::invalid("`countTokens` must be a function (text) => number"))?);
            }
            _ => {
                if value.is_function() {
                    return Err(Error::invalid(format!("`{key}` must not be a function")));
                }
                check_finite(&value, &key)?;
                json.insert(key.clone(), to_json(&value, &format!("`{key}`"))?);
            }
        }
    }
    let config = Config::from_value(&Value::Object(json))?;
    let (llm, lease_ms): (Rc<dyn Llm>, u64) = if let Some(f) = llm.dyn_ref::<Function>() {
        // A user function has no timeout of ours: give a claim ten minutes.
        (Rc::new(JsFunctionLlm::new(f.clone())), UNBOUNDED_LEASE_MS)
    } else if llm.is_object() {
        check_finite(&llm, "llm")?;
        let cfg = LlmConfig::from_value(&to_json(&llm, "`llm`")?)?;
        // A claim must outlast one attempt: every try timing out plus the waits between
        // (each up to a capped Retry-After), with a minute to spare.
        let lease = lease_ms(cfg.conn.timeout_ms, cfg.conn.max_retries);
        (Rc::new(FetchLlm::new(cfg)), lease)
    } else {
        return Err(Error::invalid(
            "`llm` is required: { baseUrl, apiKey, model } for an OpenAI-compatible endpoint, { provider: \"anthropic\", … }, or an async function ({ system, prompt, signal }) => string",
        ));
    };
    Ok(Options { config, llm, lease_ms, storage, count_tokens, persist })
}
