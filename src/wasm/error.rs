//! Errors across the boundary: Rust [`Error`] → a real JS `Error` with `name` and `code`,
//! and whatever JS throws → a Rust [`Error`].

use crate::base::error::Error;
use js_sys::Reflect;
use std::cell::RefCell;
use wasm_bindgen::JsValue;

/// How many recent JS failures are kept as causes.
const CAUSES_KEPT: usize = 16;

thread_local! {
    /// The JS values behind recent errors, by the message of the error they became. The
    /// [`Error`] enum is platform-free (it is compared, cloned and tested natively), so it
    /// cannot hold a `JsValue`; the message travels with it instead, also when a caller
    /// prefixes it with what it was doing, and [`to_js`] finds the cause again by it.
    static CAUSES: RefCell<Vec<(String, JsValue)>> = const { RefCell::new(Vec::new()) };
}

/// `e`, remembered as caused by the JS value `cause` (what a storage adapter, an LLM or
/// embed function, `fetch` or WebCrypto threw): the JS `Error` it becomes has it as `cause`.
pub(crate) fn caused_by(e: Error, cause: &JsValue) -> Error {
    CAUSES.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CAUSES_KEPT {
            c.remove(0);
        }
        c.push((e.message(), cause.clone()));
    });
    e
}

/// The cause remembered for an error whose message is (or contains) `message`; the latest
/// one when several match.
fn cause_of(message: &str) -> Option<JsValue> {
    CAUSES.with(|c| c.borrow().iter().rev().find(|(m, _)| message.contains(m.as_str())).map(|(_, v)| v.clone()))
}

/// The `name` of every error this library throws.
pub(crate) const ERROR_NAME: &str = "UserMemoryError";

/// Builds `new Error(message)` with `name = "UserMemoryError"`, `code`, `status` for HTTP
/// errors, and `cause`: the JS value thrown underneath, when there was one. Nothing ever
/// throws a string.
pub(crate) fn to_js(e: &Error) -> JsValue {
    let message = e.message();
    let err = js_sys::Error::new(&message);
    err.set_name(ERROR_NAME);
    let _ = Reflect::set(&err, &"code".into(), &e.code().into());
    if let Some(status) = e.status() {
        let _ = Reflect::set(&err, &"status".into(), &status.into());
    }
    if let Some(cause) = cause_of(&message) {
        let _ = Reflect::set(&err, &"cause".into(), &cause);
    }
    err.into()
}

/// `Result<T, Error>` → `Result<T, JsValue>` for exported functions.
pub(crate) trait IntoJsResult<T> {
    /// Converts the error side into a JS `Error`.
    fn js(self) -> Result<T, JsValue>;
}

impl<T> IntoJsResult<T> for Result<T, Error> {
    fn js(self) -> Result<T, JsValue> {
        self.map_err(|e| to_js(&e))
    }
}

/// The message of a thrown JS value (an `Error`'s `message`, else its string form). Read
/// with calls that catch: a thrown object may have a `message` getter that throws too.
pub(crate) fn js_message(v: &JsValue) -> String {
    if let Some(s) = v.as_string() {
        return s;
    }
    js_str_prop(v, "message")
        .unwrap_or_else(|| js_sys::JSON::stringify(v).ok().and_then(|s| s.as_string()).unwrap_or_else(|| "unknown error".into()))
}

fn js_str_prop(v: &JsValue, key: &str) -> Option<String> {
    if !v.is_object() && !v.is_function() {
        return None;
    }
    Reflect::get(v, &key.into()).ok().and_then(|x| x.as_string())
}

/// Maps a value thrown by storage (an adapter, localStorage, IndexedDB) to an [`Error`]:
/// quota errors become `STORAGE_QUOTA`, one of our own codes is kept, Node's `ENOENT`,
/// `EACCES`, `EROFS`, `ENOTDIR` become `STORAGE_UNAVAILABLE`, `ENOSPC`/`EDQUOT`
/// `STORAGE_QUOTA`; anything else is `STORAGE_FAILED`. `what` says which operation.
pub(crate) fn storage_error(v: &JsValue, what: &str) -> Error {
    caused_by(storage_error_of(v, what), v)
}

/// [`storage_error`] without remembering `v` as the cause: for a failure another tab
/// reported in a message (the message object is no cause worth showing).
pub(crate) fn storage_error_of(v: &JsValue, what: &str) -> Error {
    let message = format!("{what}: {}", js_message(v));
    let name = js_str_prop(v, "name").unwrap_or_default();
    let code = js_str_prop(v, "code").unwrap_or_default();
    if name == "QuotaExceededError" || name == "NS_ERROR_DOM_QUOTA_REACHED" || code == "ENOSPC" || code == "EDQUOT" {
        return Error::StorageQuota(format!("{message} (storage is full; the previous data is intact)"));
    }
    match code.as_str() {
        "STORAGE_QUOTA" => Error::StorageQuota(message),
        "STORAGE_UNAVAILABLE" | "ENOENT" | "EACCES" | "EPERM" | "EROFS" | "ENOTDIR" => Error::StorageUnavailable(message),
        "CORRUPT_MEMORY" => Error::CorruptMemory(message),
        "INVALID_INPUT" => Error::InvalidInput(message),
        _ if name == "SecurityError" || name == "InvalidStateError" => Error::StorageUnavailable(message),
        _ => Error::StorageFailed(message),
    }
}

/// Maps a value thrown by a user's LLM function to an [`Error`]: one of our LLM codes is
/// kept, anything else is `LLM_FAILED`.
pub(crate) fn llm_function_error(v: &JsValue) -> Error {
    caused_by(llm_function_error_of(v), v)
}

fn llm_function_error_of(v: &JsValue) -> Error {
    let message = format!("the llm function failed: {}", js_message(v));
    match js_str_prop(v, "code").as_deref() {
        Some("LLM_TIMEOUT") => Error::LlmTimeout(message),
        Some("LLM_NETWORK") => Error::LlmNetwork(message),
        Some("LLM_BAD_OUTPUT") => Error::LlmBadOutput(message),
        Some("LLM_HTTP") => {
            let status = Reflect::get(v, &"status".into()).ok().and_then(|s| s.as_f64()).unwrap_or(0.0) as u16;
            Error::LlmHttp { status, message }
        }
        _ => Error::LlmFailed(message),
    }
}

/// The error for an option that needs a Cargo feature this build was made without (a smaller
/// build, docs/size.md).
#[cfg(not(all(feature = "embed", feature = "encryption", feature = "http")))]
pub(crate) fn not_built(what: &str, feature: &str) -> Error {
    Error::invalid(format!(
        "{what} is not in this build of user-memory (built without the `{feature}` feature to be smaller): use the default build"
    ))
}
