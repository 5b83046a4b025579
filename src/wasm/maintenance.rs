//! The static maintenance methods, which work on an agent's stored slots without opening its
//! memory: `UserMemory.inspect()`, `encrypt()` and `reset()` (docs/api.md). Each reads the
//! same storage options (`agent` or `userId`, `storage`) as `open()`.

use super::convert::{prop, set};
use super::error::to_js;
use super::stores::open_store;
use crate::base::error::{Error, Result};
use crate::storage::{Slot, Store};
use std::rc::Rc;
use wasm_bindgen::JsValue;

/// The store and agent the storage options name. `agent` or its alias `userId`; a value that
/// is not a string is refused, never read as "default" (which would inspect or reset another
/// memory).
async fn storage_for(options: &JsValue) -> Result<(Rc<dyn Store>, String)> {
    let text = |name: &str| -> Result<Option<String>> {
        let v = prop(options, name);
        if v.is_undefined() || v.is_null() {
            return Ok(None);
        }
        v.as_string().map(Some).ok_or_else(|| Error::invalid(format!("`{name}` must be a string")))
    };
    let (agent, user_id) = (text("agent")?, text("userId")?);
    let agent = crate::engine::config::agent_option(agent.as_deref(), user_id.as_deref())?.unwrap_or("default").to_string();
    let store = open_store(&prop(options, "storage"), &agent).await?;
    Ok((store, agent))
}

/// `inspect()`: every slot's raw stored text (`null` when empty) by slot name, and beside a
/// slot that cannot be read its error as `<slot>Error`, so what is readable can be exported.
pub(super) async fn inspect(options: &JsValue) -> Result<JsValue> {
    let (store, _) = storage_for(options).await?;
    let out = js_sys::Object::new();
    for slot in Slot::ALL {
        let key = match slot {
            Slot::Document => "document",
            other => other.name(),
        };
        let v = match store.load(slot).await {
            Ok(Some(v)) => JsValue::from_str(&v.value),
            Ok(None) => JsValue::NULL,
            Err(e) => {
                set(&out, &format!("{key}Error"), &to_js(&e));
                JsValue::NULL
            }
        };
        set(&out, key, &v);
    }
    Ok(JsValue::from(out))
}

/// `encrypt()`: encrypts plaintext memory with `encryption`, or, with `newEncryption` too,
/// rotates encrypted memory to the new key. The keys are read before the storage is opened.
#[cfg(feature = "encryption")]
pub(super) async fn encrypt(options: &JsValue) -> Result<JsValue> {
    use super::crypto::{read_encryption, WebCrypto};
    let key = read_encryption(&prop(options, "encryption"), "`encryption`")?
        .ok_or_else(|| Error::invalid("UserMemory.encrypt() needs `encryption`: { passphrase } or { key }"))?;
    let new_key = read_encryption(&prop(options, "newEncryption"), "`newEncryption`")?;
    let (store, agent) = storage_for(options).await?;
    crate::storage::crypto::encrypt(store, &agent, Rc::new(WebCrypto), &key, new_key.as_ref()).await?;
    Ok(JsValue::UNDEFINED)
}

/// `encrypt()` in a build without the `encryption` feature: `NOT_BUILT`.
#[cfg(not(feature = "encryption"))]
pub(super) async fn encrypt(_: &JsValue) -> Result<JsValue> {
    Err(super::error::not_built("UserMemory.encrypt()", "encryption"))
}

/// `reset()`: discards every slot of the agent (memory, queue, fact vectors, key record).
pub(super) async fn reset(options: &JsValue) -> Result<JsValue> {
    let (store, _) = storage_for(options).await?;
    for slot in Slot::ALL {
        store.discard(slot).await?;
    }
    Ok(JsValue::UNDEFINED)
}
