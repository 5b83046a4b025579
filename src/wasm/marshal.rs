//! The exported methods' arguments and results: JS values read as the core's types
//! (`INVALID_INPUT` naming the argument, instead of wasm-bindgen's TypeError) and the core's
//! results written as JS values (through JSON text, one `JSON.parse` each).

use super::convert::{self, from_json, to_json};
use crate::base::error::{Error, Result};
use crate::engine::RunReport;
use crate::json::field::{opt_bool, opt_str, opt_uint};
use crate::json::{ArrayWriter, Map, ObjectWriter, ToJson, Value};
use crate::memory::forget::{Tombstone, Tombstones};
use crate::recall::inject::Explanation;
use crate::recall::search::{SearchHit, SearchOptions};
use crate::{Document, Fact};
use std::rc::Rc;
use wasm_bindgen::JsValue;

/// A revision number argument; `INVALID_INPUT` with `why` for anything else.
pub(super) fn revision_arg(v: &JsValue, why: &str) -> Result<u64> {
    Ok(v.as_f64().filter(|x| x.fract() == 0.0 && *x >= 0.0 && *x < 9.0e15).ok_or_else(|| Error::invalid(why))? as u64)
}

/// An optional options object of a method, as JSON: `{}` when absent; `INVALID_INPUT` for
/// anything else than an object of the `known` keys.
pub(super) fn options_arg(v: &JsValue, method: &str, known: &[&str]) -> Result<Map> {
    if v.is_undefined() || v.is_null() {
        return Ok(Map::new());
    }
    convert::check_finite(v, method)?;
    match to_json(v, &format!("the options of {method}()"))? {
        Value::Object(o) => {
            crate::json::field::check_known_keys(method, &o, &[known])?;
            Ok(o)
        }
        other => Err(Error::invalid(format!("the options of {method}() must be an object, found {}", other.type_name()))),
    }
}

/// A string argument, or `INVALID_INPUT` naming it (instead of wasm-bindgen's TypeError).
pub(super) fn string_arg(v: &JsValue, what: &str) -> Result<String> {
    v.as_string().ok_or_else(|| Error::invalid(format!("{what} must be a string")))
}

/// A JSON argument (a new fact, a patch): `INVALID_INPUT` at `path` for a number JSON cannot
/// hold, naming `what` for any other value JSON cannot hold.
#[inline(always)]
pub(super) fn json_arg(v: &JsValue, path: &str, what: &str) -> Result<Value> {
    convert::check_finite(v, path)?;
    to_json(v, what)
}

/// `importDoc()`'s argument: a memory document, or its JSON text.
pub(super) fn import_arg(doc: &JsValue) -> Result<Value> {
    match doc.as_string() {
        Some(s) => Ok(Value::String(s)),
        None => to_json(doc, "the imported memory"),
    }
}

/// The options of a method whose one option is the boolean `name` (`removeFact()`'s
/// `forget`, `clear()`'s `tombstones`): false when absent.
#[inline(always)]
pub(super) fn flag_option(v: &JsValue, method: &str, name: &str) -> Result<bool> {
    Ok(opt_bool(&options_arg(v, method, &[name])?, name, name)?.unwrap_or(false))
}

/// `history()`'s options: `limit` and `before`.
pub(super) fn history_options(v: &JsValue) -> Result<(Option<usize>, Option<u64>)> {
    let o = options_arg(v, "history", &["limit", "before"])?;
    Ok((opt_uint(&o, "limit", "limit")?.map(|n| n as usize), opt_uint(&o, "before", "before")?))
}

/// `undo()`'s options: the `revision` to undo.
pub(super) fn undo_options(v: &JsValue) -> Result<Option<u64>> {
    Ok(opt_uint(&options_arg(v, "undo", &["revision"])?, "undo", "revision")?)
}

/// `forgotten()`'s options: the `matching` text.
pub(super) fn forgotten_options(v: &JsValue) -> Result<Option<String>> {
    Ok(opt_str(&options_arg(v, "forgotten", &["matching"])?, "forgotten", "matching")?.map(str::to_string))
}

/// `search()`'s options.
pub(super) fn search_options(v: &JsValue) -> Result<SearchOptions> {
    SearchOptions::from_value(&json_arg(v, "search options", "the search options")?)
}

/// `forgotten()`'s result: the tombstones (with `matching`, the one it matches, if any).
pub(super) fn forgotten_js(list: Vec<Tombstone>) -> JsValue {
    from_json(&Tombstones { list }.to_json())
}

/// A fact, as the edit methods return it.
#[inline(always)]
pub(super) fn fact_js(fact: &Fact) -> JsValue {
    from_json(&fact.to_json())
}

pub(super) fn doc_js(doc: &Document) -> JsValue {
    from_json(&doc.to_json())
}

pub(super) fn report_js(r: &RunReport) -> JsValue {
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    for (key, threads) in [("processed", &r.processed), ("failed", &r.failed)] {
        let mut a = ArrayWriter::new(o.key(key));
        for t in threads {
            a.str(t);
        }
        a.finish();
    }
    o.finish();
    from_json(&out)
}

/// Scores and similarities cross with 6 decimals.
const SCORE_DECIMALS: u32 = 6;

/// A similarity that may be absent (`null`).
fn opt_fixed(o: &mut ObjectWriter, key: &str, x: Option<f64>) {
    match x {
        Some(x) => {
            o.fixed(key, x, SCORE_DECIMALS);
        }
        None => o.key(key).push_str("null"),
    }
}

pub(super) fn hits_js(hits: &[(SearchHit, crate::Fact)]) -> JsValue {
    let mut out = String::new();
    let mut a = ArrayWriter::new(&mut out);
    for (h, fact) in hits {
        let mut x = ObjectWriter::new(a.item());
        fact.write_json(x.key("fact"));
        x.fixed("lexical", h.lexical, SCORE_DECIMALS);
        opt_fixed(&mut x, "dense", h.dense);
        x.fixed("similarity", h.similarity, SCORE_DECIMALS).fixed("score", h.score, SCORE_DECIMALS);
        x.opt_str("date", crate::recall::inject::fact_date(fact));
        x.finish();
    }
    a.finish();
    from_json(&out)
}

pub(super) fn explanation_js((e, doc): &(Explanation, Rc<Document>)) -> JsValue {
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("block", &e.block).u64("tokens", e.tokens as u64);
    let mut facts = ArrayWriter::new(o.key("facts"));
    for f in &e.facts {
        // By position, not by id: a lookup by id per fact made explain() quadratic.
        let fact = doc.facts.get(f.position).filter(|x| x.id == f.id);
        let mut x = ObjectWriter::new(facts.item());
        x.str("id", &f.id)
            .opt_str("content", fact.map(|x| x.content.as_str()))
            .opt_str("category", fact.map(|x| x.category.as_str()))
            .fixed("lexical", f.lexical, SCORE_DECIMALS);
        opt_fixed(&mut x, "dense", f.dense);
        x.fixed("similarity", f.similarity, SCORE_DECIMALS)
            .fixed("confidence", f.confidence, SCORE_DECIMALS)
            .fixed("score", f.score, SCORE_DECIMALS)
            .opt_str("date", f.date.as_deref())
            .opt_str("createdAt", fact.map(|x| x.created_at.as_str()))
            .opt_str("happenedAt", fact.and_then(|x| x.happened_at()))
            .u64("tokens", f.tokens as u64)
            .bool("included", f.included)
            .str("reason", &f.reason);
        x.finish();
    }
    facts.finish();
    o.finish();
    from_json(&out)
}

/// `explain()`'s `options.limit`: absent (the default of [`Engine::explain_top`]), a whole
/// number ≥ 1, or `Infinity` for every fact.
pub(super) fn explain_limit(options: &JsValue) -> Result<Option<usize>> {
    if options.is_undefined() || options.is_null() {
        return Ok(None);
    }
    if !options.is_object() {
        return Err(Error::invalid("explain() options must be an object, e.g. { limit: 50 }"));
    }
    let limit = js_sys::Reflect::get(options, &"limit".into()).unwrap_or(JsValue::UNDEFINED);
    if limit.is_undefined() || limit.is_null() {
        return Ok(None);
    }
    match limit.as_f64() {
        Some(n) if n == f64::INFINITY => Ok(Some(usize::MAX)),
        Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= 1e15 => Ok(Some(n as usize)),
        _ => Err(Error::invalid("explain() `limit` must be a whole number ≥ 1, or Infinity for every fact")),
    }
}

/// `observe()`'s `options.at`: absent, or a time [`stamp`] reads.
pub(super) fn observe_at(options: &JsValue) -> Result<Option<crate::base::time::Stamp>> {
    if options.is_undefined() || options.is_null() {
        return Ok(None);
    }
    if !options.is_object() {
        return Err(Error::invalid("`observe()`'s options must be an object { at }"));
    }
    let at = convert::prop(options, "at");
    if at.is_undefined() || at.is_null() {
        return Ok(None);
    }
    convert::stamp(&at)
        .map(Some)
        .ok_or_else(|| Error::invalid("`at` must be a valid Date, an ISO-8601 date-time string or epoch milliseconds, from 1970 on"))
}
