//! The embedding model (`embed` option): the trait a platform implements, the checks every
//! reply goes through, and the pure half of the OpenAI-compatible `POST {baseUrl}/embeddings`
//! protocol (request body, reply parsing).
//!
//! The engine embeds fact contents in the background after commits ([`EmbedPurpose::Facts`])
//! and the recent turns before `inject()` ([`EmbedPurpose::Query`], on the chat's critical
//! path: implementations give it a short timeout). Every failure is `EMBED_FAILED`; the
//! ranking then stays lexical.

use crate::base::base64::base64_decode;
use crate::base::error::{Error, Result};
use crate::base::http::{Connection, EndpointName, HttpRequest};
use crate::base::sync::LocalFuture;
use crate::json::field::check_known_keys;
use crate::json::field::{opt_str, opt_uint};
use crate::json::{ArrayWriter, ObjectWriter, Value};

/// What texts are embedded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedPurpose {
    /// The relevance query of `inject()`, `explain()` or `search()`: one text, answered within
    /// the short query timeout or not at all.
    Query,
    /// Fact contents, in batches, in the background.
    Facts,
}

impl EmbedPurpose {
    /// `"query"` or `"facts"` (what a JS embedder function is told).
    pub fn as_str(self) -> &'static str {
        match self {
            EmbedPurpose::Query => "query",
            EmbedPurpose::Facts => "facts",
        }
    }
}

/// An embedding model.
pub trait Embedder {
    /// The name of the vector space: vectors of one name are comparable, and stored vectors
    /// of another name are dropped and computed again. Includes whatever changes the vectors
    /// (the model, requested dimensions).
    fn model(&self) -> &str;

    /// How many texts one call may carry (≥ 1).
    fn batch_size(&self) -> usize;

    /// One vector per text, in order. Implementations apply their timeouts and retries; the
    /// engine checks the reply with [`check_reply`].
    fn embed<'a>(&'a self, texts: &'a [String], purpose: EmbedPurpose) -> LocalFuture<'a, Result<Vec<Vec<f32>>>>;

    /// Called once by `close()`: abort calls in flight; later calls fail with `CLOSED`.
    fn cancel(&self) {}
}

/// `batchSize` when none is given.
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// `queryTimeoutMs` when none is given: the query is embedded on the chat's critical path.
pub const DEFAULT_QUERY_TIMEOUT_MS: u64 = 2_000;

/// The settings of the `embed` option that do not depend on how the model is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedSettings {
    /// The model name (sent to an HTTP endpoint; names the vectors of a function embedder).
    pub model: String,
    /// Requested dimensions (`dimensions` of the OpenAI API), if any.
    pub dimensions: Option<u64>,
    /// Texts per call (1–2048).
    pub batch_size: usize,
    /// Timeout of the query embedding in ms (0 = none).
    pub query_timeout_ms: u64,
    /// Timeout of a batch of facts in ms (0 = none).
    pub timeout_ms: u64,
}

impl EmbedSettings {
    /// The option keys [`EmbedSettings::read`] takes.
    pub const KEYS: [&'static str; 4] = ["model", "dimensions", "batchSize", "queryTimeoutMs"];

    /// Reads `model`, `dimensions`, `batchSize`, `queryTimeoutMs` and `timeoutMs` of the
    /// `embed` object; `default_model` when there is no `model` (`None`: it is required).
    pub fn read(obj: &crate::json::Map, default_model: Option<&str>) -> Result<EmbedSettings> {
        let model = match opt_str(obj, "embed", "model")?.filter(|m| !m.trim().is_empty()) {
            Some(m) => m.to_string(),
            None => default_model
                .map(str::to_string)
                .ok_or_else(|| Error::invalid("`embed.model` is required (e.g. \"text-embedding-3-small\" or \"nomic-embed-text\")"))?,
        };
        let dimensions = opt_uint(obj, "embed", "dimensions")?;
        if dimensions == Some(0) {
            return Err(Error::invalid("`embed.dimensions` must be at least 1"));
        }
        let batch_size = opt_uint(obj, "embed", "batchSize")?.unwrap_or(DEFAULT_BATCH_SIZE as u64);
        if !(1..=2048).contains(&batch_size) {
            return Err(Error::invalid("`embed.batchSize` must be within 1 to 2048"));
        }
        let query_timeout_ms = opt_uint(obj, "embed", "queryTimeoutMs")?.unwrap_or(DEFAULT_QUERY_TIMEOUT_MS);
        let timeout_ms = opt_uint(obj, "embed", "timeoutMs")?.unwrap_or(crate::base::http::DEFAULT_TIMEOUT_MS);
        Ok(EmbedSettings { model, dimensions, batch_size: batch_size as usize, query_timeout_ms, timeout_ms })
    }

    /// What `options()` shows of the model (never a key or a header value): these settings
    /// and the endpoint's `baseUrl` (`null` for a function).
    pub fn resolved_json(&self, base_url: Option<&str>) -> String {
        let mut out = String::new();
        let mut o = ObjectWriter::new(&mut out);
        o.opt_str("baseUrl", base_url)
            .str("model", &self.model)
            .opt_u64("dimensions", self.dimensions)
            .u64("batchSize", self.batch_size as u64)
            .u64("timeoutMs", self.timeout_ms)
            .u64("queryTimeoutMs", self.query_timeout_ms);
        o.finish();
        out
    }

    /// The name of the vectors' space ([`Embedder::model`]): the model, and the requested
    /// dimensions when given (`"text-embedding-3-small@256"`).
    pub fn vector_space(&self) -> String {
        match self.dimensions {
            Some(d) => format!("{}@{d}", self.model),
            None => self.model.clone(),
        }
    }
}

/// Settings of an OpenAI-compatible embeddings endpoint (`embed: { baseUrl, model, … }`).
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedConfig {
    /// Where and how to connect: base URL, key, headers, timeout of a batch, retries, body limit.
    pub conn: Connection,
    /// Model, dimensions, batch size, query timeout.
    pub settings: EmbedSettings,
    /// Put before each query text (`queryPrefix`, e.g. `"query: "` for e5 models).
    pub query_prefix: String,
    /// Put before each fact text (`factPrefix`, e.g. `"passage: "` for e5 models).
    pub fact_prefix: String,
}

impl EmbedConfig {
    /// The keys of `embed: { function, … }` (a JS function embedder).
    pub const FUNCTION_KEYS: [&'static str; 2] = ["function", "timeoutMs"];

    /// The keys of the texts' prefixes (an HTTP endpoint only: a function is told the purpose).
    pub const PREFIX_KEYS: [&'static str; 2] = ["queryPrefix", "factPrefix"];

    /// Validates the `embed` option object of an HTTP endpoint.
    pub fn from_value(obj: &crate::json::Map) -> Result<EmbedConfig> {
        check_known_keys("embed", obj, &[&EmbedSettings::KEYS, &Connection::KEYS, &EmbedConfig::PREFIX_KEYS])?;
        let conn = Connection::read(EndpointName::EMBED, obj, "https://api.openai.com/v1")?;
        let prefix = |key| opt_str(obj, "embed", key).map(|p| p.unwrap_or_default().to_string());
        let (query_prefix, fact_prefix) = (prefix("queryPrefix")?, prefix("factPrefix")?);
        Ok(EmbedConfig { conn, settings: EmbedSettings::read(obj, None)?, query_prefix, fact_prefix })
    }

    /// The name of the vectors' space: [`EmbedSettings::vector_space`], and the fact prefix
    /// when there is one (vectors of facts embedded with another prefix are not comparable,
    /// so a changed `factPrefix` embeds the facts again).
    pub fn vector_space(&self) -> String {
        match self.fact_prefix.is_empty() {
            true => self.settings.vector_space(),
            false => format!("{}|{}", self.settings.vector_space(), self.fact_prefix),
        }
    }

    /// `POST {baseUrl}/embeddings` for `texts` embedded for `purpose`, each after its prefix.
    pub fn request_for(&self, texts: &[String], purpose: EmbedPurpose) -> HttpRequest {
        let prefix = if purpose == EmbedPurpose::Query { &self.query_prefix } else { &self.fact_prefix };
        if prefix.is_empty() {
            return self.request(texts);
        }
        let texts: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        self.request(&texts)
    }

    /// `POST {baseUrl}/embeddings` for `texts`.
    pub fn request(&self, texts: &[String]) -> HttpRequest {
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(key) = &self.conn.api_key {
            headers.push(("authorization".into(), format!("Bearer {key}")));
        }
        HttpRequest {
            url: format!("{}/embeddings", self.conn.base_url),
            headers: self.conn.headers_over(headers),
            body: request_body(&self.settings.model, self.settings.dimensions, texts),
        }
    }
}

/// Checks a reply to `texts` texts: one vector each, all of one non-zero number of
/// dimensions, every component finite. `EMBED_FAILED` naming the problem otherwise.
pub fn check_reply(texts: usize, vectors: &[Vec<f32>]) -> Result<()> {
    if vectors.len() != texts {
        return Err(Error::EmbedFailed(format!("the embedding model returned {} vectors for {texts} texts", vectors.len())));
    }
    let dims = vectors.first().map_or(0, Vec::len);
    if texts > 0 && dims == 0 {
        return Err(Error::EmbedFailed("the embedding model returned an empty vector".into()));
    }
    if let Some(v) = vectors.iter().find(|v| v.len() != dims) {
        return Err(Error::EmbedFailed(format!("the embedding model returned vectors of {dims} and of {} dimensions", v.len())));
    }
    if vectors.iter().any(|v| v.iter().any(|x| !x.is_finite())) {
        return Err(Error::EmbedFailed("the embedding model returned a vector with a NaN or infinite component".into()));
    }
    Ok(())
}

/// The JSON body of `POST {baseUrl}/embeddings`: `{"model", "input": [...], "dimensions"?}`.
pub fn request_body(model: &str, dimensions: Option<u64>, texts: &[String]) -> String {
    let mut out = String::new();
    let mut o = ObjectWriter::new(&mut out);
    o.str("model", model);
    let mut input = ArrayWriter::new(o.key("input"));
    for t in texts {
        input.str(t);
    }
    input.finish();
    if let Some(d) = dimensions {
        o.u64("dimensions", d);
    }
    o.finish();
    out
}

/// The vectors of an OpenAI-style reply `{"data": [{"index", "embedding"}, …]}`, in `index`
/// order (float arrays, or base64 of little-endian float32 as `encoding_format: "base64"`
/// gives). `EMBED_FAILED` for anything else; the count is checked by [`check_reply`].
pub fn parse_reply(body: &str) -> Result<Vec<Vec<f32>>> {
    let bad = |why: &str| Error::EmbedFailed(format!("the embeddings endpoint's reply is not usable: {why}"));
    let v = Value::parse(body).map_err(|_| bad("not JSON"))?;
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| bad("no `data` array"))?;
    let mut out: Vec<Option<Vec<f32>>> = vec![None; data.len()];
    for (i, item) in data.iter().enumerate() {
        let index = item.get("index").and_then(Value::as_u64).unwrap_or(i as u64);
        let mut vector = Vec::new();
        match item.get("embedding") {
            Some(Value::Array(xs)) => {
                for x in xs {
                    vector.push(x.as_f64().map_or(f32::NAN, |x| x as f32));
                }
            }
            Some(Value::String(b64)) => {
                let mut bytes = Vec::new();
                if !base64_decode(b64, &mut bytes) || bytes.len() % 4 != 0 {
                    return Err(bad("an embedding is not base64 of float32 values"));
                }
                for c in bytes.chunks_exact(4) {
                    vector.push(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                }
            }
            _ => return Err(bad("an item has no `embedding`")),
        }
        match out.get_mut(index as usize) {
            Some(slot @ None) => *slot = Some(vector),
            _ => return Err(bad("the `index` values are not 0, 1, 2 …")),
        }
    }
    Ok(out.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_in_index_order_as_floats_or_base64() {
        let body = r#"{"object":"list","data":[{"index":1,"embedding":[0.5,-1]},{"index":0,"embedding":"AACAPwAAAEA="}],"model":"m"}"#;
        assert_eq!(parse_reply(body).unwrap(), vec![vec![1.0, 2.0], vec![0.5, -1.0]]);
        for (bad, why) in [
            ("nope", "not JSON"),
            (r#"{"error":"x"}"#, "data"),
            (r#"{"data":[{"index":0}]}"#, "embedding"),
            (r#"{"data":[{"index":0,"embedding":"AAA*"}]}"#, "base64"),
            (r#"{"data":[{"index":3,"embedding":[1]}]}"#, "index"),
        ] {
            let e = parse_reply(bad).unwrap_err();
            assert_eq!(e.code(), "EMBED_FAILED");
            assert!(e.message().contains(why), "{why}: {}", e.message());
        }
        // A non-number component becomes NaN, which the reply check refuses.
        let v = parse_reply(r#"{"data":[{"embedding":[1,"x"]}]}"#).unwrap();
        assert!(check_reply(1, &v).is_err());
    }

    #[test]
    fn the_reply_check_names_count_dimension_and_nan_problems() {
        let ok = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        assert!(check_reply(2, &ok).is_ok());
        for (texts, v, why) in [
            (3, ok.clone(), "2 vectors for 3 texts"),
            (2, vec![vec![1.0, 0.0], vec![1.0]], "of 2 and of 1 dimensions"),
            (1, vec![vec![]], "empty"),
            (1, vec![vec![f32::NAN, 1.0]], "NaN"),
            (1, vec![vec![f32::INFINITY]], "NaN or infinite"),
        ] {
            let e = check_reply(texts, &v).unwrap_err();
            assert_eq!(e.code(), "EMBED_FAILED");
            assert!(e.message().contains(why), "{why}: {}", e.message());
        }
    }

    #[test]
    fn settings_are_validated_and_name_the_vector_space() {
        let s = EmbedSettings::read(json!({"model": "text-embedding-3-small", "dimensions": 256}).as_object().unwrap(), None).unwrap();
        assert_eq!(s.vector_space(), "text-embedding-3-small@256");
        assert_eq!((s.batch_size, s.query_timeout_ms), (DEFAULT_BATCH_SIZE, DEFAULT_QUERY_TIMEOUT_MS));
        let f = EmbedSettings::read(json!({}).as_object().unwrap(), Some("function")).unwrap();
        assert_eq!(f.vector_space(), "function");
        for (bad, name) in [
            (json!({}), "embed.model"),
            (json!({"model": "m", "dimensions": 0}), "embed.dimensions"),
            (json!({"model": "m", "batchSize": 0}), "embed.batchSize"),
            (json!({"model": "m", "batchSize": 5000}), "embed.batchSize"),
            (json!({"model": "m", "queryTimeoutMs": -1}), "embed.queryTimeoutMs"),
            (json!({"model": 7}), "embed.model"),
        ] {
            let e = EmbedSettings::read(bad.as_object().unwrap(), None).unwrap_err();
            assert_eq!(e.code(), "INVALID_INPUT");
            assert!(e.message().contains(name), "{name}: {}", e.message());
        }
        let e = EmbedConfig::from_value(json!({"model": "m", "baseURL": "x"}).as_object().unwrap()).unwrap_err();
        assert!(
            e.message().starts_with(
                "unknown option `embed.baseURL`: did you mean `baseUrl`? (known: model, dimensions, batchSize, queryTimeoutMs, baseUrl"
            ),
            "{}",
            e.message()
        );
    }

    #[test]
    fn the_http_request_goes_to_base_url_embeddings_with_the_key_and_headers() {
        let cfg = EmbedConfig::from_value(
            json!({"baseUrl": "http://127.0.0.1:8000/v1/", "model": "e5", "apiKey": "sk-1", "headers": {"x-app": "a"}, "dimensions": 64})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        let r = cfg.request(&["hi".to_string()]);
        assert_eq!(r.url, "http://127.0.0.1:8000/v1/embeddings");
        assert!(r.headers.contains(&("authorization".to_string(), "Bearer sk-1".to_string())));
        assert!(r.headers.contains(&("x-app".to_string(), "a".to_string())));
        assert_eq!(r.body, r#"{"model":"e5","input":["hi"],"dimensions":64}"#);
        assert_eq!(cfg.settings.vector_space(), "e5@64");
        assert!(!format!("{cfg:?}").contains("sk-1"), "Debug never shows the key");
    }

    #[test]
    fn prefixes_go_before_query_and_fact_texts_and_the_fact_prefix_names_the_space() {
        let obj = json!({"baseUrl": "http://127.0.0.1:8000/v1", "model": "e5", "queryPrefix": "query: ", "factPrefix": "passage: "});
        let cfg = EmbedConfig::from_value(obj.as_object().unwrap()).unwrap();
        let texts = ["my dog".to_string()];
        assert_eq!(cfg.request_for(&texts, EmbedPurpose::Query).body, r#"{"model":"e5","input":["query: my dog"]}"#);
        assert_eq!(cfg.request_for(&texts, EmbedPurpose::Facts).body, r#"{"model":"e5","input":["passage: my dog"]}"#);
        assert_eq!(cfg.vector_space(), "e5|passage: ", "another fact prefix, other vectors");
        let plain = EmbedConfig::from_value(json!({"baseUrl": "http://127.0.0.1:8000/v1", "model": "e5"}).as_object().unwrap()).unwrap();
        assert_eq!(plain.request_for(&texts, EmbedPurpose::Query).body, r#"{"model":"e5","input":["my dog"]}"#);
        assert_eq!(plain.vector_space(), "e5");
        let bad = json!({"baseUrl": "http://127.0.0.1:8000/v1", "model": "e5", "queryPrefix": 3});
        assert!(EmbedConfig::from_value(bad.as_object().unwrap()).is_err(), "a prefix is a string");
    }

    #[test]
    fn the_request_body_carries_model_input_and_dimensions() {
        let texts = vec!["a \"b\"".to_string(), "猫".to_string()];
        assert_eq!(request_body("m", None, &texts), r#"{"model":"m","input":["a \"b\"","猫"]}"#);
        assert_eq!(request_body("m", Some(256), &texts[..1]), r#"{"model":"m","input":["a \"b\""],"dimensions":256}"#);
    }
}
