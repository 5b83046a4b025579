//! WebCrypto (`globalThis.crypto.subtle`: browsers, workers, Node ≥ 18, workerd, Bun,
//! Deno) behind the core's [`CryptoProvider`], and the `encryption` option.
//!
//! The calls go through `Reflect` on the global `crypto` object rather than typed web-sys
//! bindings: the same few calls, no extra binding glue.

use super::convert::{items, keys, prop, set};
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::storage::crypto::{Aead, CryptoProvider, Mark, UserKey};
use crate::storage::KvStore;
use js_sys::{Array, Function, Object, Uint8Array};
use std::rc::Rc;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

fn failed(what: &str) -> Error {
    Error::StorageFailed(format!("WebCrypto failed to {what}"))
}

fn subtle() -> Result<JsValue> {
    let s = prop(&prop(&js_sys::global(), "crypto"), "subtle");
    if s.is_object() {
        Ok(s)
    } else {
        Err(Error::StorageUnavailable("encryption needs WebCrypto (globalThis.crypto.subtle), which this runtime lacks".into()))
    }
}

/// `crypto.subtle[method](...args)`, awaited.
async fn call(method: &str, args: &[JsValue]) -> std::result::Result<JsValue, JsValue> {
    let subtle = subtle().map_err(|e| JsValue::from_str(&e.message()))?;
    let f: Function = prop(&subtle, method).dyn_into()?;
    let p = f.apply(&subtle, &args.iter().collect::<Array>())?;
    JsFuture::from(js_sys::Promise::resolve(&p)).await
}

fn bytes(b: &[u8]) -> JsValue {
    Uint8Array::from(b).into()
}

fn obj(pairs: &[(&str, JsValue)]) -> JsValue {
    let o = Object::new();
    for (k, v) in pairs {
        set(&o, k, v);
    }
    o.into()
}

fn gcm(iv: &[u8], aad: &[u8]) -> JsValue {
    obj(&[("name", "AES-GCM".into()), ("iv", bytes(iv)), ("additionalData", bytes(aad))])
}

fn usages() -> JsValue {
    Array::of2(&"encrypt".into(), &"decrypt".into()).into()
}

/// An AES-GCM `CryptoKey`.
struct WebKey(JsValue);

impl Aead for WebKey {
    fn seal<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], plain: &'a [u8]) -> LocalFuture<'a, Result<Vec<u8>>> {
        Box::pin(async move {
            let out = call("encrypt", &[gcm(iv, aad), self.0.clone(), bytes(plain)]).await.map_err(|_| failed("encrypt"))?;
            Ok(Uint8Array::new(&out).to_vec())
        })
    }
    fn open<'a>(&'a self, iv: &'a [u8; 12], aad: &'a [u8], sealed: &'a [u8]) -> LocalFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            // An OperationError is a failed authentication; anything else a broken runtime.
            match call("decrypt", &[gcm(iv, aad), self.0.clone(), bytes(sealed)]).await {
                Ok(out) => Ok(Some(Uint8Array::new(&out).to_vec())),
                Err(e) if prop(&e, "name").as_string().as_deref() == Some("OperationError") => Ok(None),
                Err(_) => Err(failed("decrypt")),
            }
        })
    }
}

/// The platform's crypto.
pub(crate) struct WebCrypto;

impl CryptoProvider for WebCrypto {
    fn random(&self, buf: &mut [u8]) -> Result<()> {
        getrandom::fill(buf).map_err(|_| Error::StorageUnavailable("no secure random numbers in this runtime".into()))
    }
    fn import<'a>(&'a self, raw: &'a [u8]) -> LocalFuture<'a, Result<Rc<dyn Aead>>> {
        Box::pin(async move {
            let alg = obj(&[("name", "AES-GCM".into())]);
            let key =
                call("importKey", &["raw".into(), bytes(raw), alg, false.into(), usages()]).await.map_err(|_| failed("import a key"))?;
            Ok(Rc::new(WebKey(key)) as Rc<dyn Aead>)
        })
    }
    fn derive<'a>(&'a self, passphrase: &'a str, salt: &'a [u8], iterations: u32) -> LocalFuture<'a, Result<Rc<dyn Aead>>> {
        Box::pin(async move {
            let base = call(
                "importKey",
                &["raw".into(), bytes(passphrase.as_bytes()), "PBKDF2".into(), false.into(), Array::of1(&"deriveKey".into()).into()],
            )
            .await
            .map_err(|_| failed("import the passphrase"))?;
            let params =
                obj(&[("name", "PBKDF2".into()), ("hash", "SHA-256".into()), ("salt", bytes(salt)), ("iterations", iterations.into())]);
            let alg = obj(&[("name", "AES-GCM".into()), ("length", 256.into())]);
            let key = call("deriveKey", &[params, base, alg, false.into(), usages()]).await.map_err(|_| failed("derive a key"))?;
            Ok(Rc::new(WebKey(key)) as Rc<dyn Aead>)
        })
    }
    fn sha256<'a>(&'a self, data: &'a [u8]) -> LocalFuture<'a, Result<Vec<u8>>> {
        Box::pin(async move {
            let out = call("digest", &["SHA-256".into(), bytes(data)]).await.map_err(|_| failed("hash"))?;
            Ok(Uint8Array::new(&out).to_vec())
        })
    }
}

const SHAPE: &str =
    "`encryption` must be { key: CryptoKey } (AES-GCM, usages encrypt and decrypt) or { passphrase: string, salt?: Uint8Array }";

/// Reads the `encryption` option (`what` names it in errors); `None` when absent. Nothing
/// of the key or passphrase is ever put in an error message.
pub(crate) fn read_encryption(v: &JsValue, what: &str) -> Result<Option<UserKey>> {
    if v.is_undefined() || v.is_null() || v.as_bool() == Some(false) {
        return Ok(None);
    }
    let bad = |why: &str| Error::invalid(format!("{what}: {why}; {SHAPE}"));
    if !v.is_object() {
        return Err(bad("not an object"));
    }
    let known = ["key", "passphrase", "salt", "mark"];
    for k in keys(v, what)? {
        if !known.contains(&k.as_str()) {
            return Err(bad(&format!("unknown field `{k}`")));
        }
    }
    let mark = prop(v, "mark");
    if !(mark.is_undefined() || mark.is_null() || mark.as_bool() == Some(false) || mark_methods(&mark).is_some()) {
        return Err(Error::invalid(format!(
            "{what}: `mark` must be an object with get(name) and set(name, value) methods (where the rollback mark is kept), or false"
        )));
    }
    let (key, passphrase) = (prop(v, "key"), prop(v, "passphrase"));
    // Not `as_string()`: it replaces a lone surrogate with U+FFFD, so that different
    // passphrases would open the same memory. NFC first, so that "é" typed composed or
    // decomposed is the same passphrase.
    let passphrase = match passphrase.dyn_ref::<js_sys::JsString>() {
        Some(p) => {
            let nfc = p.normalize("NFC");
            let text = nfc.as_string().unwrap_or_default();
            // A lone surrogate does not survive the round trip through UTF-8 (`===` in JS).
            if JsValue::from_str(&text) != JsValue::from(nfc) {
                return Err(crate::storage::crypto::not_well_formed(what));
            }
            Some(text)
        }
        None => None,
    };
    let passphrase_given = !prop(v, "passphrase").is_undefined();
    match (key.is_undefined(), passphrase) {
        (false, None) if !passphrase_given => {
            let alg = prop(&prop(&key, "algorithm"), "name").as_string();
            let usages: Vec<String> =
                items(&prop(&key, "usages"), "`encryption.key.usages`")?.unwrap_or_default().iter().filter_map(|u| u.as_string()).collect();
            if alg.as_deref() != Some("AES-GCM") || !["encrypt", "decrypt"].iter().all(|u| usages.iter().any(|x| x == u)) {
                return Err(bad("`key` is not an AES-GCM CryptoKey with the usages encrypt and decrypt"));
            }
            Ok(Some(UserKey::Key(Rc::new(WebKey(key)))))
        }
        (true, Some(p)) if !p.is_empty() => {
            let salt = prop(v, "salt");
            let salt = match salt.dyn_ref::<Uint8Array>() {
                Some(s) if s.length() >= 16 => Some(s.to_vec()),
                None if salt.is_undefined() => None,
                _ => return Err(bad("`salt` must be a Uint8Array of at least 16 bytes")),
            };
            Ok(Some(UserKey::Passphrase { passphrase: p, salt }))
        }
        (true, Some(_)) => Err(bad("the passphrase is empty")),
        _ => Err(bad("give either `key` or `passphrase`")),
    }
}

/// A rollback mark kept by JS: the `encryption.mark` object, a storage adapter's
/// `rollbackMark` (`fileStore`'s files outside its folder), or localStorage for the browser's
/// own storage (IndexedDB or localStorage memory).
enum JsMark {
    Object { this: JsValue, get: Function, set: Function, name: String },
    Local(super::local::LocalStorageKv),
}

fn mark_methods(v: &JsValue) -> Option<(Function, Function)> {
    Some((prop(v, "get").dyn_into().ok()?, prop(v, "set").dyn_into().ok()?))
}

impl JsMark {
    async fn call(&self, f: &Function, args: &[JsValue]) -> Result<JsValue> {
        let Self::Object { this, .. } = self else { return Ok(JsValue::UNDEFINED) };
        let failed = |_| Error::StorageFailed("the rollback mark failed".into());
        let p = f.apply(this, &args.iter().collect::<Array>()).map_err(failed)?;
        JsFuture::from(super::convert::promise_of(&p)).await.map_err(failed)
    }
}

impl Mark for JsMark {
    fn get<'a>(&'a self, name: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            match self {
                Self::Object { get, .. } => Ok(self.call(get, &[name.into()]).await?.as_string()),
                Self::Local(kv) => kv.get(name).await,
            }
        })
    }
    fn set<'a>(&'a self, name: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            match self {
                Self::Object { set, .. } => self.call(set, &[name.into(), value.into()]).await.map(drop),
                Self::Local(kv) => kv.set(name, value).await,
            }
        })
    }
    fn describe(&self) -> String {
        match self {
            Self::Object { name, .. } => name.clone(),
            Self::Local(_) => "localStorage".into(),
        }
    }
}

/// The rollback mark for the `open()` options: `encryption.mark` (`false`: none), else the
/// storage adapter's `rollbackMark`, else localStorage for IndexedDB and localStorage memory;
/// `None` elsewhere.
pub(crate) fn rollback_mark(options: &JsValue) -> Option<Rc<dyn Mark>> {
    let object = |v: &JsValue, default: &str| {
        let (get, set) = mark_methods(v)?;
        let name = prop(v, "name").as_string().unwrap_or_else(|| default.into());
        Some(Rc::new(JsMark::Object { this: v.clone(), get, set, name }) as Rc<dyn Mark>)
    };
    let given = prop(&prop(options, "encryption"), "mark");
    if !given.is_undefined() {
        return object(&given, "the `encryption.mark` object");
    }
    let storage = prop(options, "storage");
    if storage.is_object() {
        return object(&prop(&storage, "rollbackMark"), "the storage adapter's rollbackMark");
    }
    // localStorage memory too: its mark key (`user-memory-mark/…`) is outside the store's
    // keys (`user-memory/{agent}/…`), so putting those back does not put the mark back.
    let browser = match storage.as_string() {
        Some(kind) => kind == "indexeddb" || kind == "localstorage",
        None => super::convert::has_global("indexedDB"),
    };
    let kv = super::local::LocalStorageKv::new().ok().filter(|_| browser)?;
    Some(Rc::new(JsMark::Local(kv)))
}
