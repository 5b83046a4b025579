//! Reading the `open()` options object: JSON-like options go to [`Config`]; `llm`,
//! `storage`, `embed` and `countTokens` may be functions or objects and are taken apart here.

use super::convert::{check_finite, keys, prop, to_json};
use super::embed::{read_embed, EmbedOption};
#[cfg(feature = "http")]
use super::llm::FetchLlm;
use super::llm::JsFunctionLlm;
use crate::base::error::{Error, Result};
use crate::engine::config::Config;
use crate::json::{Map, Value};
use crate::llm::{Llm, LlmConfig};
use js_sys::Function;
use std::rc::Rc;
use wasm_bindgen::{JsCast, JsValue};

/// The options, validated and split by kind.
pub(crate) struct Options {
    pub(crate) config: Config,
    /// `None`: opened without `llm` (never extracts; `autoProcess` is off).
    pub(crate) llm: Option<Rc<dyn Llm>>,
    pub(crate) storage: JsValue,
    pub(crate) count_tokens: Option<Function>,
    /// `persist: true`: ask the browser to keep its storage (`navigator.storage.persist()`).
    pub(crate) persist: bool,
    /// The embedding model, if any.
    pub(crate) embed: EmbedOption,
    /// `encryption`: the user's key or passphrase, if any (never in `config`).
    pub(crate) encryption: Option<crate::storage::crypto::UserKey>,
}

/// Splits and validates the options object.
pub(crate) fn read(options: &JsValue) -> Result<Options> {
    if options.is_undefined() || options.is_null() {
        return read(&js_sys::Object::new().into());
    }
    if !options.is_object() {
        return Err(Error::invalid("UserMemory.open() takes an options object, e.g. { llm: { baseUrl, apiKey, model } }"));
    }
    let mut json = Map::new();
    let mut llm = JsValue::UNDEFINED;
    let mut storage = JsValue::UNDEFINED;
    let mut count_tokens = None;
    let mut persist = false;
    let mut embed = JsValue::UNDEFINED;
    let mut encryption = None;
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
            "embed" => embed = value,
            "encryption" => encryption = read_encryption(&value)?,
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
    let mut config = Config::from_value(&Value::Object(json))?;
    let embed = read_embed(&embed)?;
    let llm: Option<Rc<dyn Llm>> = if let Some(f) = llm.dyn_ref::<Function>() {
        Some(Rc::new(JsFunctionLlm::new(f.clone())))
    } else if llm.is_undefined() || llm.is_null() {
        // Read-only use (a request handler that only injects): no timers, and observe()
        // only queues, for an instance that has an llm to process.
        if prop(options, "autoProcess").as_bool() == Some(true) {
            return Err(Error::invalid(crate::llm::AUTO_NEEDS_LLM));
        }
        config.auto_process = false;
        None
    } else if llm.is_object() {
        check_finite(&llm, "llm")?;
        Some(fetch_llm(LlmConfig::from_value(&to_json(&llm, "`llm`")?)?)?)
    } else {
        return Err(Error::invalid(
            "`llm` must be { baseUrl, apiKey, model } for an OpenAI-compatible endpoint, { provider: \"anthropic\", … }, an async function ({ system, prompt, signal }) => string, or left out (read-only)",
        ));
    };
    Ok(Options { config, llm, storage, count_tokens, persist, embed, encryption })
}

/// The built-in transport of an `llm` endpoint (a build without `http` has none).
fn fetch_llm(cfg: LlmConfig) -> Result<Rc<dyn Llm>> {
    #[cfg(feature = "http")]
    return Ok(Rc::new(FetchLlm::new(cfg)));
    #[cfg(not(feature = "http"))]
    {
        let _ = cfg;
        Err(super::error::not_built("an `llm` endpoint ({ baseUrl, … }; a function works)", "http"))
    }
}

/// Reads `encryption` (the user's key or passphrase; none when undefined or null).
pub(crate) fn read_encryption(v: &JsValue) -> Result<Option<crate::storage::crypto::UserKey>> {
    #[cfg(feature = "encryption")]
    return super::crypto::read_encryption(v, "`encryption`");
    #[cfg(not(feature = "encryption"))]
    if v.is_undefined() || v.is_null() {
        Ok(None)
    } else {
        Err(super::error::not_built("`encryption`", "encryption"))
    }
}
