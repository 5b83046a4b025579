//! The pure parts of talking to an HTTP endpoint (the LLM, an embeddings server): the
//! connection options every endpoint shares, the request, masking of secrets, the error for
//! a non-2xx answer, the redirect policy and the body limits. The platform layer
//! (`src/wasm/http.rs`) moves the bytes with `fetch` and applies these rules.

// Only the wasm layer calls the policy functions; natively they are reached by the tests.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use crate::base::error::{Error, Result};
use crate::json::field::{opt_str, opt_uint};
use crate::json::{Map, Value};

/// Which endpoint a message is about: how to call it, and the option that configures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointName {
    /// Used in messages: "LLM endpoint", "embeddings endpoint".
    pub label: &'static str,
    /// The option holding its settings: `llm`, `embed`.
    pub option: &'static str,
}

impl EndpointName {
    /// The extraction LLM (`llm: { … }`).
    pub const LLM: EndpointName = EndpointName { label: "LLM endpoint", option: "llm" };
    /// The embedding model (`embed: { … }`).
    pub const EMBED: EndpointName = EndpointName { label: "embeddings endpoint", option: "embed" };
}

/// `maxResponseBytes` when none is given: what a reply may hold, decoded (4 MiB; the parser
/// looks at the first 1 MiB of the reply text).
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: u64 = 4 << 20;

/// How much of an error (non-2xx) body is read: enough for any provider's error JSON.
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// Same-origin redirects followed per request before giving up.
pub(crate) const MAX_REDIRECTS: usize = 3;

/// `timeoutMs` when none is given.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// `deadlineMs` when none is given: this many times `timeoutMs` (a reply that streams for
/// longer than that is dripping, not answering).
pub(crate) const DEADLINE_TIMEOUTS: u64 = 5;

/// `maxRetries` when none is given.
pub(crate) const DEFAULT_MAX_RETRIES: u64 = 2;

/// An HTTP `POST`, ready for `fetch`.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    /// The full URL.
    pub url: String,
    /// Headers in order; user headers come last and replace defaults of the same name.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: String,
}

/// The settings every HTTP endpoint option has (`llm`, `embed`): where, with which key and
/// headers, and the limits of one request.
///
/// `Debug` is implemented by hand so that the key and header values never reach a log line.
#[derive(Clone, PartialEq)]
pub struct Connection {
    /// Which endpoint, for messages.
    pub name: EndpointName,
    /// The API root, without a trailing slash (e.g. `http://127.0.0.1:11434/v1`).
    pub base_url: String,
    /// The API key, when given (how it is sent depends on the protocol).
    pub api_key: Option<String>,
    /// Extra request headers; they override the protocol's defaults of the same name.
    pub headers: Vec<(String, String)>,
    /// Abort a request after this many milliseconds without an answer (for a streamed reply:
    /// without new data); `0` means no timeout.
    pub timeout_ms: u64,
    /// Abort the whole call (every try, the waits between them and a streamed reply however
    /// steadily it drips) after this many milliseconds; `0` means no deadline. Default:
    /// [`DEADLINE_TIMEOUTS`] × `timeout_ms`.
    pub deadline_ms: u64,
    /// Retries within one attempt on 429, 5xx, timeouts and network errors (at most 10).
    pub max_retries: u32,
    /// Reading a response stops after this many (decoded) bytes.
    pub max_response_bytes: u64,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name.option)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("headers", &self.headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>())
            .field("timeout_ms", &self.timeout_ms)
            .field("deadline_ms", &self.deadline_ms)
            .field("max_retries", &self.max_retries)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl Connection {
    /// The option keys [`Connection::read`] takes.
    pub const KEYS: [&'static str; 7] = ["baseUrl", "apiKey", "headers", "timeoutMs", "deadlineMs", "maxRetries", "maxResponseBytes"];

    /// Reads the connection keys of an endpoint option object; `default_base_url` when it
    /// has no `baseUrl`. Other keys are left to the caller.
    pub fn read(name: EndpointName, obj: &Map, default_base_url: &str) -> Result<Connection> {
        // The messages name the key; the option goes in front once, here.
        Connection::read_keys(name, obj, default_base_url).map_err(|e| match e {
            Error::InvalidInput(m) => Error::InvalidInput(m.replacen('`', &format!("`{}.", name.option), 1)),
            e => e,
        })
    }

    fn read_keys(name: EndpointName, obj: &Map, default_base_url: &str) -> Result<Connection> {
        let base_url = opt_str(obj, "", "baseUrl")?.unwrap_or(default_base_url).to_string();
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://") || base_url.starts_with('/')) {
            return Err(Error::invalid(format!("`baseUrl` must be an http(s) URL or an absolute path, found \"{base_url}\"")));
        }
        if (base_url.starts_with("http") && origin(&base_url).is_none()) || base_url.bytes().any(|b| b <= b' ') {
            return Err(Error::invalid(format!("`baseUrl` is not a URL: \"{base_url}\"")));
        }
        let mut headers = Vec::new();
        match obj.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                for (k, v) in h {
                    let Value::String(s) = v else {
                        return Err(crate::json::field::wrong_type(&crate::json::field::cat(&["headers.", k]), "a string", v).into());
                    };
                    // What `fetch` would refuse, refused here with a message that does not
                    // quote the value (it may be a key).
                    let what = if !is_header_name(k) { "name" } else { "value" };
                    if !is_header_name(k) || !is_header_value(s) {
                        return Err(Error::invalid(format!(
                            "`headers.{k}`: the header {what} has characters HTTP does not allow (a line break?)"
                        )));
                    }
                    headers.push((k.clone(), s.clone()));
                }
            }
            Some(other) => return Err(crate::json::field::wrong_type("headers", "an object of strings", other).into()),
        }
        let api_key = opt_str(obj, "", "apiKey")?.filter(|k| !k.is_empty()).map(str::to_string);
        if api_key.as_deref().is_some_and(|k| !is_header_value(k)) {
            return Err(Error::invalid("`apiKey` has characters HTTP does not allow in a header (a line break?)"));
        }
        let max_response_bytes = opt_uint(obj, "", "maxResponseBytes")?.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES);
        if max_response_bytes < 1024 {
            return Err(Error::invalid("`maxResponseBytes` must be at least 1024 (bytes)"));
        }
        let timeout_ms = opt_uint(obj, "", "timeoutMs")?.unwrap_or(DEFAULT_TIMEOUT_MS);
        Ok(Connection {
            name,
            base_url,
            api_key,
            headers,
            timeout_ms,
            deadline_ms: opt_uint(obj, "", "deadlineMs")?.unwrap_or(timeout_ms.saturating_mul(DEADLINE_TIMEOUTS)),
            max_retries: opt_uint(obj, "", "maxRetries")?.unwrap_or(DEFAULT_MAX_RETRIES).min(10) as u32,
            max_response_bytes,
        })
    }

    /// What must never appear in a message, in storage or in the document: the API key and
    /// the values of the user's headers (keys sent as `api-key`, a hand-set
    /// `Authorization`, …).
    pub fn secrets(&self) -> Secrets {
        Secrets::new(self.api_key.iter().map(String::as_str).chain(self.headers.iter().map(|(_, v)| v.as_str())))
    }

    /// `default_headers` (the protocol's: content type, how the key is sent …) followed by
    /// the user's headers, each replacing a default of the same name.
    pub fn headers_over(&self, mut default_headers: Vec<(String, String)>) -> Vec<(String, String)> {
        for (k, v) in &self.headers {
            default_headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            default_headers.push((k.clone(), v.clone()));
        }
        default_headers
    }
}

/// Whether `name` is an HTTP header name (a token: letters, digits and ``!#$%&'*+-.^_`|~``).
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `value` can be an HTTP header value: no line break or NUL, and nothing beyond
/// Latin-1 (which `fetch` refuses).
fn is_header_value(value: &str) -> bool {
    value.chars().all(|c| c as u32 <= 0xFF && !matches!(c, '\r' | '\n' | '\0'))
}

/// Secret strings of a configuration (keys, header values) that are masked wherever text
/// from a server is quoted. Strings shorter than 6 characters are not treated as secrets
/// (masking `"1"` or `"json"` everywhere would garble every message).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// No secrets.
    pub const NONE: Secrets = Secrets(Vec::new());

    /// The secrets among `values` (6 characters or more), without duplicates.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Secrets {
        let mut out: Vec<String> = Vec::new();
        for v in values {
            if v.len() >= 6 && !out.iter().any(|s| s == v) {
                // Longest first, so a secret containing another is masked whole.
                let at = out.iter().position(|s| s.len() < v.len()).unwrap_or(out.len());
                out.insert(at, v.to_string());
            }
        }
        Secrets(out)
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every secret replaced by `***`.
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.0 {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }

    /// Whether `text` contains a secret.
    pub fn found_in(&self, text: &str) -> bool {
        self.0.iter().any(|s| text.contains(s.as_str()))
    }
}

/// The error for a non-2xx answer: the status, the provider's own error message when the
/// body has one, else a short excerpt. Secrets echoed back are masked in the whole body
/// first, so no excerpt can cut one in half.
pub(crate) fn status_error(name: EndpointName, status: u16, body: &str, secrets: &Secrets) -> Error {
    let body = secrets.mask(body);
    let detail = Value::parse(&body)
        .ok()
        .and_then(|v| {
            v.get("error")
                .and_then(|e| e.get("message"))
                .or_else(|| v.get("error").filter(|e| e.as_str().is_some()))
                .or_else(|| v.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| snippet(&body));
    let option = name.option;
    let hint = match status {
        401 | 403 => format!(" — check the API key ({option}.apiKey, or the key your proxy adds)"),
        404 => format!(" — check {option}.baseUrl and {option}.model"),
        429 => " — rate limited".to_string(),
        _ => String::new(),
    };
    Error::LlmHttp { status, message: format!("{} answered HTTP {status}{hint}: {detail}", name.label) }
}

/// The error for a successful answer whose body is longer than `maxResponseBytes`.
pub(crate) fn too_large(name: EndpointName, limit: u64) -> Error {
    Error::LlmBadOutput(format!(
        "the {}'s response is larger than {}.maxResponseBytes ({limit} bytes); reading stopped there",
        name.label, name.option
    ))
}

/// The first 200 characters of a body, on one line.
pub(crate) fn snippet(body: &str) -> String {
    let one_line: String = body.chars().take(200).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if body.chars().count() > 200 {
        format!("{one_line}…")
    } else {
        one_line
    }
}

/// Whether a status is a redirect (`fetch` with `redirect: "manual"` hands those back).
pub(crate) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The redirect policy: a request is never sent on to another origin (the key, the headers
/// and the conversation would go there), so a `3xx` answer to `url` is followed only when it
/// is a 307 or 308 (which keep the method and body) to the same origin (scheme, host and
/// port). Returns the URL to send the same request to, or the `LLM_HTTP` error saying why
/// not. `hops` is how many redirects this request already followed.
pub(crate) fn follow_redirect(
    name: EndpointName,
    url: &str,
    status: u16,
    location: Option<&str>,
    hops: usize,
    secrets: &Secrets,
) -> Result<String> {
    let refuse = |why: String| {
        let message = format!(
            "{} answered HTTP {status}, {why}; it was not followed — set {}.baseUrl to the endpoint's final address",
            name.label, name.option
        );
        Err(Error::LlmHttp { status, message: secrets.mask(&message) })
    };
    let Some(location) = location.map(str::trim).filter(|l| !l.is_empty()) else {
        return refuse("a redirect without a Location".into());
    };
    let (Some(target), Some(from)) = (resolve(url, location), origin(url)) else {
        return refuse(format!("a redirect to \"{}\" that is not a URL", snippet(location)));
    };
    let to = origin(&target).unwrap_or_default();
    if to != from {
        return refuse(format!("a redirect to another origin ({to}), which must not receive the key, the headers or the conversation"));
    }
    if !matches!(status, 307 | 308) {
        return refuse("a redirect that would turn the POST into a GET (only 307 and 308 within one origin are followed)".into());
    }
    if hops >= MAX_REDIRECTS {
        return refuse(format!("the {}th redirect in a row", hops + 1));
    }
    Ok(target)
}

/// `scheme://host[:port]` of an absolute URL, lower case, without user info and without
/// the scheme's default port; `None` for anything else.
pub(crate) fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) {
        return None;
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.is_empty() {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let mut host_port = host_port.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" | "ws" => ":80",
        "https" | "wss" => ":443",
        _ => "",
    };
    if !default_port.is_empty() && host_port.ends_with(default_port) {
        host_port.truncate(host_port.len() - default_port.len());
    }
    Some(format!("{scheme}://{host_port}"))
}

/// `location` resolved against the absolute URL `base` (enough of RFC 3986 to tell the
/// target's origin and to send the request there; `fetch` normalises the path).
pub(crate) fn resolve(base: &str, location: &str) -> Option<String> {
    let has_scheme = location.find(':').is_some_and(|i| {
        i > 0
            && location.as_bytes()[0].is_ascii_alphabetic()
            && location[..i].bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    });
    if has_scheme {
        return Some(location.to_string());
    }
    let (scheme, rest) = base.split_once("://")?;
    if let Some(authority_and_path) = location.strip_prefix("//") {
        return Some(format!("{scheme}://{authority_and_path}"));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let root = &base[..scheme.len() + 3 + authority_end];
    if location.starts_with('/') {
        return Some(format!("{root}{location}"));
    }
    let path_and_more = &rest[authority_end..];
    let path = &path_and_more[..path_and_more.find(['?', '#']).unwrap_or(path_and_more.len())];
    if location.starts_with('?') || location.starts_with('#') {
        return Some(format!("{root}{path}{location}"));
    }
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    let dir = if dir.is_empty() { "/" } else { dir };
    Some(format!("{root}{dir}{location}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: EndpointName = EndpointName::LLM;

    fn read(v: Value) -> Result<Connection> {
        Connection::read(L, v.as_object().unwrap(), "https://api.example.test/v1")
    }

    #[test]
    fn connection_defaults_and_validation() {
        let c = read(json!({})).unwrap();
        assert_eq!(c.base_url, "https://api.example.test/v1");
        assert_eq!((c.timeout_ms, c.max_retries, c.max_response_bytes), (DEFAULT_TIMEOUT_MS, 2, DEFAULT_MAX_RESPONSE_BYTES));
        assert_eq!(c.deadline_ms, DEADLINE_TIMEOUTS * DEFAULT_TIMEOUT_MS);
        assert_eq!(read(json!({"timeoutMs": 1000})).unwrap().deadline_ms, DEADLINE_TIMEOUTS * 1000);
        assert_eq!(read(json!({"timeoutMs": 0})).unwrap().deadline_ms, 0, "no timeout, no deadline unless one is given");
        assert_eq!(read(json!({"timeoutMs": 0, "deadlineMs": 7})).unwrap().deadline_ms, 7);
        let c = read(json!({"baseUrl": " http://127.0.0.1:9/v1/ ", "maxRetries": 99, "maxResponseBytes": 2048, "apiKey": ""})).unwrap();
        assert_eq!((c.base_url.as_str(), c.max_retries, c.max_response_bytes, c.api_key), ("http://127.0.0.1:9/v1", 10, 2048, None));
        for (bad, named) in [
            (json!({"baseUrl": "ftp://x"}), "llm.baseUrl"),
            (json!({"headers": {"a": 1}}), "llm.headers.a"),
            (json!({"headers": "x"}), "llm.headers"),
            (json!({"maxResponseBytes": 10}), "llm.maxResponseBytes"),
            (json!({"maxResponseBytes": -1}), "llm.maxResponseBytes"),
            (json!({"timeoutMs": 1.5}), "llm.timeoutMs"),
            (json!({"baseUrl": "http://exa mple.test/v1"}), "llm.baseUrl"),
            (json!({"baseUrl": "https://"}), "llm.baseUrl"),
            (json!({"headers": {"X-Key": "sk-secret\r\nInjected: 1"}}), "llm.headers.X-Key"),
            (json!({"headers": {"Bad Name": "1"}}), "llm.headers.Bad Name"),
            (json!({"headers": {"X-Emoji": "🔑"}}), "llm.headers.X-Emoji"),
            (json!({"apiKey": "sk-secret\n"}), "llm.apiKey"),
        ] {
            let e = read(bad).unwrap_err();
            assert_eq!(e.code(), "INVALID_INPUT");
            assert!(e.message().contains(named), "{}", e.message());
            assert!(!e.message().contains("sk-secret"), "a header value is never quoted: {}", e.message());
        }
        // The embeddings endpoint's messages name its own option.
        let e = Connection::read(EndpointName::EMBED, json!({"baseUrl": "x"}).as_object().unwrap(), "").unwrap_err();
        assert!(e.message().contains("`embed.baseUrl`"), "{}", e.message());
    }

    #[test]
    fn debug_never_shows_the_key_or_header_values() {
        let c = read(json!({"apiKey": "sk-secret-123", "headers": {"api-key": "azure-secret"}})).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("sk-secret") && !shown.contains("azure-secret") && shown.contains("api-key"), "{shown}");
    }

    #[test]
    fn user_headers_replace_defaults_of_any_letter_case() {
        let c = read(json!({"headers": {"Content-Type": "application/json; charset=utf-8", "X-Extra": "1"}})).unwrap();
        let h = c.headers_over(vec![("content-type".into(), "application/json".into()), ("authorization".into(), "Bearer k".into())]);
        assert_eq!(
            h,
            vec![
                ("authorization".to_string(), "Bearer k".to_string()),
                ("Content-Type".to_string(), "application/json; charset=utf-8".to_string()),
                ("X-Extra".to_string(), "1".to_string())
            ]
        );
    }

    #[test]
    fn secrets_are_masked_whole_and_short_values_are_not_secrets() {
        let s = Secrets::new(["sk-abcdef", "sk-abcdef-longer", "json", "sk-abcdef"]);
        assert_eq!(s.mask("a sk-abcdef-longer b sk-abcdef c json"), "a *** b *** c json");
        assert!(s.found_in("x sk-abcdef y") && !s.found_in("sk-abc"));
        assert!(Secrets::new(["12345"]).is_empty());
    }

    #[test]
    fn http_errors_carry_status_and_provider_message_without_the_key() {
        let s = Secrets::new(["sk-secret-123"]);
        let e = status_error(L, 401, r#"{"error":{"message":"Incorrect API key provided: sk-secret-123"}}"#, &s);
        assert_eq!(e.status(), Some(401));
        assert_eq!(
            e.message(),
            "LLM endpoint answered HTTP 401 — check the API key (llm.apiKey, or the key your proxy adds): Incorrect API key provided: ***"
        );
        let e = status_error(EndpointName::EMBED, 404, "nope", &s);
        assert_eq!(e.message(), "embeddings endpoint answered HTTP 404 — check embed.baseUrl and embed.model: nope");
    }

    #[test]
    fn secrets_are_masked_before_the_excerpt_is_cut() {
        // The key starts at character 160 of a non-JSON body: cutting at 200 first would
        // have left most of it in the message.
        let key = "sk-proj-0123456789abcdefghijklmnopqrstuvwxyz";
        let body = format!("{}{key} trailing", "x".repeat(160));
        let e = status_error(L, 502, &body, &Secrets::new([key]));
        assert!(!e.message().contains("sk-proj-0123"), "{}", e.message());
    }

    #[test]
    fn origins_ignore_case_user_info_and_default_ports() {
        assert_eq!(origin("HTTP://User:pw@Example.test:80/v1?x").as_deref(), Some("http://example.test"));
        assert_eq!(origin("https://example.test:443").as_deref(), Some("https://example.test"));
        assert_eq!(origin("https://example.test:8443/").as_deref(), Some("https://example.test:8443"));
        assert_eq!(origin("http://[::1]:8080/v1").as_deref(), Some("http://[::1]:8080"));
        assert_ne!(origin("http://example.test"), origin("https://example.test"));
        assert_eq!(origin("/v1/chat"), None);
        assert_eq!(origin("http:///x"), None);
    }

    #[test]
    fn locations_resolve_like_a_browser() {
        let base = "http://127.0.0.1:9/v1/chat/completions?a=1";
        assert_eq!(resolve(base, "http://other:1/x").unwrap(), "http://other:1/x");
        assert_eq!(resolve(base, "//other:2/y").unwrap(), "http://other:2/y");
        assert_eq!(resolve(base, "/v2/chat").unwrap(), "http://127.0.0.1:9/v2/chat");
        assert_eq!(resolve(base, "completions/").unwrap(), "http://127.0.0.1:9/v1/chat/completions/");
        assert_eq!(resolve(base, "?b=2").unwrap(), "http://127.0.0.1:9/v1/chat/completions?b=2");
        assert_eq!(resolve("http://h", "x").unwrap(), "http://h/x");
    }

    #[test]
    fn only_same_origin_307_and_308_are_followed() {
        let s = Secrets::new(["sk-secret-123"]);
        let url = "http://127.0.0.1:9/v1/chat/completions";
        assert_eq!(follow_redirect(L, url, 307, Some("/v1/chat/completions/"), 0, &s).unwrap(), "http://127.0.0.1:9/v1/chat/completions/");
        assert_eq!(follow_redirect(L, url, 308, Some("http://127.0.0.1:9/v2"), 2, &s).unwrap(), "http://127.0.0.1:9/v2");
        let refused = |status, location: Option<&str>, hops| {
            let e = follow_redirect(L, url, status, location, hops, &s).unwrap_err();
            assert_eq!((e.code(), e.status()), ("LLM_HTTP", Some(status)));
            e.message()
        };
        let m = refused(307, Some("http://127.0.0.1:10/v1/chat/completions?key=sk-secret-123"), 0);
        assert!(m.contains("another origin (http://127.0.0.1:10)") && m.contains("llm.baseUrl") && !m.contains("sk-secret"), "{m}");
        assert!(refused(302, Some("https://127.0.0.1:9/v1"), 0).contains("another origin (https://127.0.0.1:9)"));
        assert!(refused(302, Some("/v1/other"), 0).contains("POST into a GET"));
        assert!(refused(301, Some("/v1/other"), 0).contains("POST into a GET"));
        assert!(refused(307, None, 0).contains("without a Location"));
        assert!(refused(307, Some("/again"), MAX_REDIRECTS).contains("4th redirect"));
        assert!([301, 302, 303, 307, 308].into_iter().all(is_redirect) && !is_redirect(304) && !is_redirect(300));
    }

    #[test]
    fn a_too_large_body_names_the_option() {
        let e = too_large(L, 4096);
        assert_eq!(e.code(), "LLM_BAD_OUTPUT");
        assert!(e.message().contains("llm.maxResponseBytes (4096 bytes)"), "{}", e.message());
    }
}
