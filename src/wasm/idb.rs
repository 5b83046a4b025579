//! The IndexedDB backend (docs/storage.md) on raw `web-sys`.
//!
//! Database `user-memory`, object store `slots`: the slots of every agent, under the key
//! `"{agent}/{slot}"` (`slot` is `doc`, `queue` or `vectors`, so the key splits unambiguously
//! at its last `/`), each a record `{rev, value}`.
//!
//! A commit is **one `readwrite` transaction**: it issues the `get` of the record, and the
//! `get`'s success callback (still inside the transaction, nothing foreign awaited) compares
//! the revision with the base and issues the `put`. Success is reported only after the
//! transaction's `complete` event, so an abort, a full disk or a killed tab at any point
//! leaves the previous record. Reads are `readonly` transactions and see only committed data,
//! in every tab at once (unlike localStorage).
//!
//! The connection closes itself when another tab upgrades or deletes the database
//! (`versionchange`), so it never blocks them; the next operation reopens it.

use super::convert::{prop, set};
use super::error::storage_error;
use crate::base::error::{Error, Result};
use crate::base::sync::LocalFuture;
use crate::storage::{Commit, Slot, Store, Versioned};
use js_sys::{Function, Object, Promise};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{IdbDatabase, IdbFactory, IdbObjectStore, IdbOpenDbRequest, IdbRequest, IdbTransaction, IdbTransactionMode};

/// The database name.
pub(crate) const DB_NAME: &str = "user-memory";
/// The schema version; [`upgrade`] brings any older database up to it.
const DB_VERSION: u32 = 1;
/// The one object store.
pub(crate) const OBJECT_STORE: &str = "slots";

/// Where a commit's transaction is aborted on purpose: lets tests show that a commit
/// interrupted at any point leaves the previous record (as a killed tab would).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortPoint {
    /// Never (normal operation).
    Never,
    /// When the `get` has returned, before the `put` is issued.
    AfterGet,
    /// Right after the `put` is issued.
    AfterPutIssued,
    /// When the `put` has succeeded inside the transaction, before it commits.
    AfterPutSucceeded,
}

/// The IndexedDB [`Store`] of one agent.
pub struct IdbStore {
    agent: String,
    db: RefCell<Option<IdbDatabase>>,
    abort_at: Cell<AbortPoint>,
}

/// A promise settled by the request's `success` (resolve) or `error` (reject) event.
fn wait(req: &IdbRequest) -> JsFuture {
    JsFuture::from(Promise::new(&mut |resolve, reject| {
        req.set_onsuccess(Some(&resolve));
        req.set_onerror(Some(&reject));
    }))
}

/// A promise settled by the transaction's `complete` (resolve) or `abort` (reject) event.
fn done(tx: &IdbTransaction) -> JsFuture {
    JsFuture::from(Promise::new(&mut |resolve, reject| {
        tx.set_oncomplete(Some(&resolve));
        tx.set_onabort(Some(&reject));
    }))
}

/// `obj.method` bound to `obj` (e.g. `db.close`), usable as an event handler with no Rust
/// closure behind it.
fn bound(obj: &JsValue, method: &str) -> Function {
    prop(obj, method).unchecked_into::<Function>().bind0(obj)
}

fn request_error(req: &IdbRequest, what: &str) -> Error {
    match req.error() {
        Ok(Some(e)) => storage_error(&e, what),
        _ => Error::StorageFailed(format!("{what} failed")),
    }
}

fn unavailable(why: &str) -> Error {
    Error::StorageUnavailable(format!(
        "IndexedDB cannot be used here ({why}): use storage: \"localstorage\", \"memory\" or a storage adapter"
    ))
}

/// Brings the database from `old` to [`DB_VERSION`], one version step after the other.
fn upgrade(req: &IdbOpenDbRequest, old: f64) {
    let Ok(db) = req.result() else { return };
    let db: IdbDatabase = db.unchecked_into();
    if old < 1.0 {
        let _ = db.create_object_store(OBJECT_STORE);
    }
    // A future version 2 adds `if old < 2.0 { … }` here: every step runs in order.
}

/// Opens (creating or upgrading) the database.
async fn open_db() -> Result<IdbDatabase> {
    let factory = prop(&js_sys::global(), "indexedDB");
    if factory.is_undefined() || factory.is_null() {
        return Err(unavailable("there is no indexedDB"));
    }
    let factory: IdbFactory = factory.unchecked_into();
    // Throws SecurityError in opaque origins and where storage is blocked.
    let req = factory.open_with_u32(DB_NAME, DB_VERSION).map_err(|e| storage_error(&e, "cannot open IndexedDB"))?;
    let on_upgrade = {
        let req = req.clone();
        // (JsValue rather than IdbVersionChangeEvent: one closure type for the whole crate)
        Closure::<dyn FnMut(JsValue)>::new(move |ev: JsValue| upgrade(&req, prop(&ev, "oldVersion").as_f64().unwrap_or(0.0)))
    };
    req.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    // If another tab holds an older version open, `blocked` fires and the open waits until
    // that tab closes its connection (ours do on `versionchange`).
    let opened = wait(&req).await;
    req.set_onupgradeneeded(None);
    drop(on_upgrade);
    if opened.is_err() {
        // InvalidStateError / SecurityError (private modes, blocked storage) → unavailable.
        return Err(request_error(&req, "cannot open IndexedDB"));
    }
    let db: IdbDatabase = req.result().map_err(|e| storage_error(&e, "cannot open IndexedDB"))?.unchecked_into();
    db.set_onversionchange(Some(&bound(&db, "close")));
    Ok(db)
}

/// Reads a stored record (`undefined` when absent). Anything but `{rev ≥ 1, value: string}`
/// is `CORRUPT_MEMORY`: never taken for "empty", never overwritten.
fn parse_record(key: &str, v: &JsValue) -> Result<Option<Versioned>> {
    if v.is_undefined() {
        return Ok(None);
    }
    match (prop(v, "rev").as_f64(), prop(v, "value").as_string()) {
        (Some(rev), Some(value)) if rev >= 1.0 && rev.fract() == 0.0 && rev < 9.0e15 => Ok(Some(Versioned { revision: rev as u64, value })),
        _ => Err(Error::corrupt(format!(
            "IndexedDB \"{DB_NAME}\": the record \"{key}\" is not a {{rev, value}} record; it was left as it is \
             and nothing is written over it: UserMemory.inspect() shows the stored text"
        ))),
    }
}

fn record(rev: u64, value: &str) -> JsValue {
    let o: JsValue = Object::new().into();
    set(&o, "rev", &JsValue::from_f64(rev as f64));
    set(&o, "value", &JsValue::from_str(value));
    o
}

impl IdbStore {
    /// Opens the database and the store of `agent`.
    pub async fn open(agent: &str) -> Result<IdbStore> {
        let db = open_db().await?;
        Ok(IdbStore { agent: agent.to_string(), db: RefCell::new(Some(db)), abort_at: Cell::new(AbortPoint::Never) })
    }

    /// Makes every following commit abort at `point` (for crash tests).
    pub fn abort_commits_at(&self, point: AbortPoint) {
        self.abort_at.set(point);
    }

    /// The record key of `slot`: `"{agent}/{slot}"`.
    pub fn key(&self, slot: Slot) -> String {
        format!("{}/{}", self.agent, slot.name())
    }

    /// A transaction on the object store; reopens the connection once if it was closed
    /// (by another tab's upgrade, or by the browser).
    async fn transaction(&self, mode: IdbTransactionMode) -> Result<(IdbTransaction, IdbObjectStore)> {
        let mut reopened = false;
        loop {
            let cached = self.db.borrow().clone();
            let db = match cached {
                Some(db) => db,
                None => {
                    let db = open_db().await?;
                    *self.db.borrow_mut() = Some(db.clone());
                    db
                }
            };
            match db.transaction_with_str_and_mode(OBJECT_STORE, mode) {
                Ok(tx) => {
                    let store = tx.object_store(OBJECT_STORE).map_err(|e| storage_error(&e, "IndexedDB"))?;
                    return Ok((tx, store));
                }
                Err(_) if !reopened => {
                    reopened = true;
                    *self.db.borrow_mut() = None;
                }
                Err(e) => return Err(storage_error(&e, "cannot start an IndexedDB transaction")),
            }
        }
    }

    /// Runs `op` on `slot` in one transaction and reports only after the transaction's
    /// `complete` event. A commit's `put` is issued in the success callback of its `get`,
    /// inside the transaction, with nothing foreign awaited in between.
    async fn transact(&self, slot: Slot, op: Op) -> Result<Done> {
        let mode = if let Op::Load = op { IdbTransactionMode::Readonly } else { IdbTransactionMode::Readwrite };
        let (tx, store) = self.transaction(mode).await?;
        let key_text = self.key(slot);
        let key = JsValue::from_str(&key_text);
        let req = match op {
            Op::Discard => store.delete(&key),
            _ => store.get(&key),
        }
        .map_err(|e| storage_error(&e, "IndexedDB"))?;
        let outcome: Rc<RefCell<Option<Result<Done>>>> = Rc::default();
        let on_success = {
            let (tx, req, decided, abort_at) = (tx.clone(), req.clone(), outcome.clone(), self.abort_at.get());
            Closure::once(move |_event: JsValue| {
                let current = req.result().unwrap_or(JsValue::UNDEFINED);
                let r = match op {
                    Op::Load => parse_record(&key_text, &current).map(Done::Loaded),
                    Op::Commit(base, value) => decide(&tx, &store, &key, &key_text, &current, base, &value, abort_at).map(Done::Committed),
                    Op::Discard => Ok(Done::Discarded),
                };
                *decided.borrow_mut() = Some(r);
            })
        };
        req.set_onsuccess(Some(on_success.as_ref().unchecked_ref()));
        let finished = done(&tx).await;
        drop(on_success);
        let decided = outcome.borrow_mut().take();
        match (finished, decided) {
            (Ok(_), Some(r)) | (Err(_), Some(r @ Err(_))) => r,
            _ => Err(match tx.error() {
                Some(e) => storage_error(&e, "IndexedDB"),
                None => Error::StorageFailed("the IndexedDB transaction was aborted; the previous data is intact".into()),
            }),
        }
    }
}

/// What one transaction does.
enum Op {
    Load,
    Commit(u64, String),
    Discard,
}

/// What it did.
enum Done {
    Loaded(Option<Versioned>),
    Committed(Commit),
    Discarded,
}

/// Inside the `get`'s success callback: compare the revision, then `put` (or abort).
#[allow(clippy::too_many_arguments)]
fn decide(
    tx: &IdbTransaction,
    store: &IdbObjectStore,
    key: &JsValue,
    key_text: &str,
    current: &JsValue,
    base: u64,
    value: &str,
    abort_at: AbortPoint,
) -> Result<Commit> {
    let current_rev = match parse_record(key_text, current) {
        Ok(v) => v.map_or(0, |v| v.revision),
        Err(e) => {
            let _ = tx.abort();
            return Err(e);
        }
    };
    if current_rev != base {
        return Ok(Commit::Conflict); // nothing written; the transaction completes empty
    }
    if abort_at == AbortPoint::AfterGet {
        let _ = tx.abort();
        return Ok(Commit::Committed(base + 1));
    }
    match store.put_with_key(&record(base + 1, value), key) {
        Ok(put) => {
            match abort_at {
                AbortPoint::AfterPutIssued => {
                    let _ = tx.abort();
                }
                AbortPoint::AfterPutSucceeded => put.set_onsuccess(Some(&bound(tx, "abort"))),
                _ => {}
            }
            Ok(Commit::Committed(base + 1))
        }
        Err(e) => {
            let _ = tx.abort();
            Err(storage_error(&e, "IndexedDB write"))
        }
    }
}

impl Drop for IdbStore {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            db.close();
        }
    }
}

impl Store for IdbStore {
    fn load(&self, slot: Slot) -> LocalFuture<'_, Result<Option<Versioned>>> {
        Box::pin(async move {
            match self.transact(slot, Op::Load).await? {
                Done::Loaded(v) => Ok(v),
                _ => Ok(None),
            }
        })
    }

    fn commit(&self, slot: Slot, base: u64, value: String) -> LocalFuture<'_, Result<Commit>> {
        Box::pin(async move {
            match self.transact(slot, Op::Commit(base, value)).await? {
                Done::Committed(c) => Ok(c),
                _ => Ok(Commit::Conflict),
            }
        })
    }

    fn discard(&self, slot: Slot) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move { self.transact(slot, Op::Discard).await.map(|_| ()) })
    }

    fn describe(&self) -> String {
        format!("IndexedDB \"{DB_NAME}\"")
    }
}

/// Opens the IndexedDB store of `agent`.
pub(crate) async fn open(agent: &str) -> Result<Rc<dyn Store>> {
    Ok(Rc::new(IdbStore::open(agent).await?))
}
