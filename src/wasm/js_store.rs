//! A user-supplied storage adapter `{ get, set, delete, keys?, compareAndSet? }` as a
//! [`KvStore`] (docs/design.md#storage). Methods may return values or promises.

use super::convert::{items, promise_of, prop};
use super::error::storage_error;
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::storage::{KvCapabilities, KvStore};
use js_sys::{Array, Function};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// The adapter object and its methods, looked up once.
pub(crate) struct JsKvStore {
    this: JsValue,
    get: Function,
    set: Function,
    delete: Function,
    keys: Option<Function>,
    cas: Option<Function>,
    name: String,
}

fn method(obj: &JsValue, name: &str) -> Option<Function> {
    prop(obj, name).dyn_into::<Function>().ok()
}

impl JsKvStore {
    /// Checks that `adapter` has `get`, `set` and `delete` functions.
    pub(crate) fn new(adapter: JsValue) -> Result<JsKvStore> {
        let need = |name: &str| {
            method(&adapter, name).ok_or_else(|| {
                Error::invalid(format!(
                    "`storage` must be \"indexeddb\", \"localstorage\", \"memory\" or an adapter with get/set/delete methods; `{name}` is missing"
                ))
            })
        };
        let name = prop(&adapter, "name").as_string().map_or_else(|| "storage adapter".to_string(), |n| format!("storage adapter {n}"));
        Ok(JsKvStore {
            get: need("get")?,
            set: need("set")?,
            delete: need("delete")?,
            keys: method(&adapter, "keys"),
            cas: method(&adapter, "compareAndSet"),
            this: adapter,
            name,
        })
    }

    async fn call(&self, f: &Function, what: &str, args: &[JsValue]) -> Result<JsValue> {
        let arr = Array::new();
        for a in args {
            arr.push(a);
        }
        let ret = f.apply(&self.this, &arr).map_err(|e| storage_error(&e, &format!("{} {what}", self.name)))?;
        JsFuture::from(promise_of(&ret)).await.map_err(|e| storage_error(&e, &format!("{} {what}", self.name)))
    }
}

impl KvStore for JsKvStore {
    fn get<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            let v = self.call(&self.get, "get", &[key.into()]).await?;
            if v.is_null() || v.is_undefined() {
                return Ok(None);
            }
            v.as_string()
                .map(Some)
                .ok_or_else(|| Error::StorageFailed(format!("{} get(\"{key}\") returned something other than a string or null", self.name)))
        })
    }

    fn set<'a>(&'a self, key: &'a str, value: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move { self.call(&self.set, "set", &[key.into(), value.into()]).await.map(|_| ()) })
    }

    fn delete<'a>(&'a self, key: &'a str) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move { self.call(&self.delete, "delete", &[key.into()]).await.map(|_| ()) })
    }

    fn capabilities(&self) -> KvCapabilities {
        KvCapabilities { keys: self.keys.is_some(), compare_and_set: self.cas.is_some() }
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> LocalFuture<'a, Result<Vec<String>>> {
        Box::pin(async move {
            let Some(f) = &self.keys else { return Ok(Vec::new()) };
            let v = self.call(f, "keys", &[prefix.into()]).await?;
            let not_keys = || Error::StorageFailed(format!("{} keys() must return an array of strings", self.name));
            let arr = items(&v, "keys()").map_err(|_| not_keys())?.ok_or_else(not_keys)?;
            // Adapters may ignore the prefix: filter here too.
            Ok(arr.iter().filter_map(|k| k.as_string()).filter(|k| k.starts_with(prefix)).collect())
        })
    }

    fn compare_and_set<'a>(&'a self, key: &'a str, expected: Option<&'a str>, value: &'a str) -> LocalFuture<'a, Result<bool>> {
        Box::pin(async move {
            let Some(f) = &self.cas else {
                return Err(Error::StorageFailed(format!("{} has no compareAndSet", self.name)));
            };
            let expected = expected.map_or(JsValue::NULL, JsValue::from_str);
            let v = self.call(f, "compareAndSet", &[key.into(), expected, value.into()]).await?;
            Ok(v.is_truthy())
        })
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}
