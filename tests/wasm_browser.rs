//! The browser storage backends in headless Chromium (wasm-bindgen-test-runner +
//! chromedriver): IndexedDB and localStorage round trips, commits interrupted at every step,
//! crash orphans, corrupt data, full storage, the localStorage leader tab, cross-instance
//! updates, and recovery with `inspect` + `reset` through the JS API.
// A test crate: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![cfg(target_arch = "wasm32")]

use js_sys::{Array, Function, Object, Promise, Reflect};
use std::cell::RefCell;
use std::rc::Rc;
use user_memory::storage::{Commit, KvCapabilities, KvStore, Slot, Store, VersionedKv};
use user_memory::wasm::{AbortPoint, IdbStore, LeaderStore, LocalStorageKv, Role, UserMemory};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

// ───────────────────────────── helpers ─────────────────────────────

async fn sleep(ms: i32) {
    let p = Promise::new(&mut |resolve, _| {
        let set_timeout: Function = Reflect::get(&js_sys::global(), &"setTimeout".into()).unwrap().unchecked_into();
        set_timeout.call2(&JsValue::NULL, &resolve, &JsValue::from(ms)).unwrap();
    });
    JsFuture::from(p).await.unwrap();
}

/// Runs a JS expression that may return a promise; resolves to its value.
async fn js(code: &str) -> JsValue {
    let v = js_sys::eval(code).unwrap_or_else(|e| panic!("eval failed: {e:?}\n{code}"));
    JsFuture::from(Promise::resolve(&v)).await.unwrap_or_else(|e| panic!("JS failed: {e:?}\n{code}"))
}

fn get(obj: &JsValue, key: &str) -> JsValue {
    Reflect::get(obj, &key.into()).unwrap()
}

fn set(obj: &JsValue, key: &str, value: impl Into<JsValue>) {
    Reflect::set(obj, &key.into(), &value.into()).unwrap();
}

/// The raw IndexedDB record under `key`, as JSON text (`"undefined"` when absent).
async fn idb_raw(key: &str) -> String {
    js(&format!(
        r#"new Promise((ok, fail) => {{
            const r = indexedDB.open("user-memory");
            r.onerror = () => fail(r.error);
            r.onsuccess = () => {{
                const db = r.result;
                const g = db.transaction("slots").objectStore("slots").get({key:?});
                g.onsuccess = () => {{ db.close(); ok(g.result === undefined ? "undefined" : JSON.stringify(g.result)); }};
                g.onerror = () => {{ db.close(); fail(g.error); }};
            }};
        }})"#
    ))
    .await
    .as_string()
    .unwrap()
}

/// Writes a raw IndexedDB record (any JS value given as an expression).
async fn idb_put_raw(key: &str, value_expr: &str) {
    js(&format!(
        r#"new Promise((ok, fail) => {{
            const r = indexedDB.open("user-memory");
            r.onerror = () => fail(r.error);
            r.onsuccess = () => {{
                const db = r.result;
                const tx = db.transaction("slots", "readwrite");
                tx.objectStore("slots").put({value_expr}, {key:?});
                tx.oncomplete = () => {{ db.close(); ok(); }};
                tx.onabort = () => {{ db.close(); fail(tx.error); }};
            }};
        }})"#
    ))
    .await;
}

fn local_kv() -> Rc<LocalStorageKv> {
    Rc::new(LocalStorageKv::new().expect("localStorage in a browser page"))
}

/// Removes every localStorage key of `agent`.
fn clear_local(agent: &str) {
    let storage: web_sys::Storage = get(&js_sys::global(), "localStorage").unchecked_into();
    let prefix = format!("user-memory/{agent}/");
    let keys: Vec<String> =
        (0..storage.length().unwrap()).filter_map(|i| storage.key(i).unwrap()).filter(|k| k.starts_with(&prefix)).collect();
    for k in keys {
        storage.remove_item(&k).unwrap();
    }
}

fn local_snapshot(agent: &str) -> Vec<(String, String)> {
    let storage: web_sys::Storage = get(&js_sys::global(), "localStorage").unchecked_into();
    let prefix = format!("user-memory/{agent}/");
    let mut out: Vec<(String, String)> = (0..storage.length().unwrap())
        .filter_map(|i| storage.key(i).unwrap())
        .filter(|k| k.starts_with(&prefix))
        .map(|k| {
            let v = storage.get_item(&k).unwrap().unwrap();
            (k, v)
        })
        .collect();
    out.sort();
    out
}

fn llm_fn() -> Function {
    Closure::<dyn Fn(JsValue) -> JsValue>::new(|_req: JsValue| JsValue::from_str(r#"{"newFacts":[]}"#)).into_js_value().unchecked_into()
}

fn options(agent: &str, storage: Option<&str>) -> JsValue {
    let o: JsValue = Object::new().into();
    set(&o, "agent", agent);
    if let Some(s) = storage {
        set(&o, "storage", s);
    }
    set(&o, "llm", llm_fn());
    o
}

async fn open(opts: JsValue) -> UserMemory {
    let v = JsFuture::from(UserMemory::open(opts)).await.unwrap_or_else(|e| panic!("open failed: {:?}", get(&e, "message")));
    <UserMemory as wasm_bindgen::convert::TryFromJsValue>::try_from_js_value(v).expect("a UserMemory")
}

fn code_of(err: &JsValue) -> String {
    assert!(err.is_instance_of::<js_sys::Error>(), "not an Error: {err:?}");
    get(err, "code").as_string().unwrap_or_default()
}

fn fact(content: &str) -> JsValue {
    let f: JsValue = Object::new().into();
    set(&f, "content", content);
    f
}

async fn fact_contents(m: &UserMemory) -> Vec<String> {
    let doc = JsFuture::from(m.get()).await.unwrap();
    Array::from(&get(&doc, "facts")).iter().map(|f| get(&f, "content").as_string().unwrap()).collect()
}

/// Waits for `cond`, polled every 10 ms, as long as a loaded machine needs: 60 s of wall time
/// (not a count of polls, which a busy machine's slow timers stretch or a fast one cuts
/// short), so it only turns a hang into a readable failure.
async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = js_sys::Date::now() + 60_000.0;
    while js_sys::Date::now() < deadline {
        if cond() {
            return;
        }
        sleep(10).await;
    }
    panic!("never happened within 60 s: {what}");
}

// ───────────────────────────── IndexedDB ─────────────────────────────

#[wasm_bindgen_test]
async fn indexeddb_round_trip_keeps_revisions_and_refuses_stale_bases() {
    let s = IdbStore::open("idb-round-trip").await.unwrap();
    s.discard(Slot::Document).await.unwrap();
    s.discard(Slot::Queue).await.unwrap();
    assert_eq!(s.load(Slot::Document).await.unwrap(), None);
    assert_eq!(s.commit(Slot::Document, 0, "one".into()).await.unwrap(), Commit::Committed(1));
    assert_eq!(s.commit(Slot::Document, 0, "stale".into()).await.unwrap(), Commit::Conflict);
    assert_eq!(s.commit(Slot::Document, 1, "two".into()).await.unwrap(), Commit::Committed(2));
    assert_eq!(s.commit(Slot::Queue, 0, "q".into()).await.unwrap(), Commit::Committed(1));

    // A second connection (another tab would have one) reads the committed values.
    let other = IdbStore::open("idb-round-trip").await.unwrap();
    let v = other.load(Slot::Document).await.unwrap().unwrap();
    assert_eq!((v.revision, v.value.as_str()), (2, "two"));
    assert_eq!(other.load(Slot::Queue).await.unwrap().unwrap().value, "q");
    assert_eq!(idb_raw("idb-round-trip/doc").await, r#"{"rev":2,"value":"two"}"#);
    // Another agent has its own records.
    assert_eq!(IdbStore::open("idb-round-trip-2").await.unwrap().load(Slot::Document).await.unwrap(), None);

    other.discard(Slot::Document).await.unwrap();
    assert_eq!(s.load(Slot::Document).await.unwrap(), None, "discard deletes the record");
    assert_eq!(s.commit(Slot::Document, 0, "fresh".into()).await.unwrap(), Commit::Committed(1));
}

#[wasm_bindgen_test]
async fn indexeddb_a_commit_aborted_at_any_step_leaves_the_old_document() {
    let s = IdbStore::open("idb-abort").await.unwrap();
    s.discard(Slot::Document).await.unwrap();
    assert_eq!(s.commit(Slot::Document, 0, "old".into()).await.unwrap(), Commit::Committed(1));
    for point in [AbortPoint::AfterGet, AbortPoint::AfterPutIssued, AbortPoint::AfterPutSucceeded] {
        s.abort_commits_at(point);
        let err = s.commit(Slot::Document, 1, "new".into()).await.unwrap_err();
        assert_eq!(err.code(), "STORAGE_FAILED", "{point:?}: {err}");
        // A fresh connection, as after a reload, sees the old document.
        let reopened = IdbStore::open("idb-abort").await.unwrap();
        let v = reopened.load(Slot::Document).await.unwrap().expect("never empty");
        assert_eq!((v.revision, v.value.as_str()), (1, "old"), "after an abort {point:?}");
    }
    s.abort_commits_at(AbortPoint::Never);
    assert_eq!(s.commit(Slot::Document, 1, "new".into()).await.unwrap(), Commit::Committed(2));
    assert_eq!(s.load(Slot::Document).await.unwrap().unwrap().value, "new");
}

#[wasm_bindgen_test]
async fn indexeddb_an_unreadable_record_is_corrupt_memory_and_is_never_overwritten() {
    let s = IdbStore::open("idb-corrupt").await.unwrap();
    for (i, bad) in
        [r#""just a string""#, r#"{rev: "7", value: "x"}"#, r#"{rev: 0, value: "x"}"#, r#"{rev: 3, value: 42}"#].iter().enumerate()
    {
        idb_put_raw("idb-corrupt/doc", bad).await;
        let before = idb_raw("idb-corrupt/doc").await;
        let err = s.load(Slot::Document).await.unwrap_err();
        assert_eq!(err.code(), "CORRUPT_MEMORY", "case {i}");
        for base in [0, 1, 3, 7] {
            let err = s.commit(Slot::Document, base, "replacement".into()).await.unwrap_err();
            assert_eq!(err.code(), "CORRUPT_MEMORY", "case {i}, base {base}");
        }
        assert_eq!(idb_raw("idb-corrupt/doc").await, before, "case {i}: the stored record is unchanged");
    }
    s.discard(Slot::Document).await.unwrap();
    assert_eq!(s.load(Slot::Document).await.unwrap(), None, "an explicit discard clears it");
}

#[wasm_bindgen_test]
async fn indexeddb_an_open_store_does_not_block_deleting_the_database_and_reopens_afterwards() {
    let s = IdbStore::open("idb-versionchange").await.unwrap();
    assert_eq!(s.load(Slot::Document).await.unwrap(), None);
    // Another tab deleting (or upgrading) the database: our connection closes on
    // `versionchange`, so the delete is not blocked.
    let outcome = js(r#"new Promise((ok, fail) => {
            let blocked = false;
            const r = indexedDB.deleteDatabase("user-memory");
            r.onblocked = () => { blocked = true; };
            r.onsuccess = () => ok(blocked ? "blocked" : "deleted");
            r.onerror = () => fail(r.error);
        })"#)
    .await;
    assert_eq!(outcome.as_string().as_deref(), Some("deleted"));
    // The next operation reopens (and recreates) the database.
    assert_eq!(s.commit(Slot::Document, 0, "after".into()).await.unwrap(), Commit::Committed(1));
    assert_eq!(s.load(Slot::Document).await.unwrap().unwrap().value, "after");
}

// ───────────────────────────── localStorage ─────────────────────────────

#[wasm_bindgen_test]
async fn localstorage_kv_round_trip_and_prefix_listing() {
    clear_local("kv");
    let kv = local_kv();
    assert_eq!(kv.get("user-memory/kv/a").await.unwrap(), None);
    kv.set("user-memory/kv/a", "1").await.unwrap();
    kv.set("user-memory/kv/b", "2").await.unwrap();
    kv.set("user-memory/kvx/c", "3").await.unwrap();
    assert_eq!(kv.get("user-memory/kv/a").await.unwrap().as_deref(), Some("1"));
    let mut keys = kv.keys("user-memory/kv/").await.unwrap();
    keys.sort();
    assert_eq!(keys, ["user-memory/kv/a", "user-memory/kv/b"]);
    assert!(kv.compare_and_set("user-memory/kv/a", Some("1"), "10").await.unwrap());
    assert!(!kv.compare_and_set("user-memory/kv/a", Some("1"), "11").await.unwrap());
    assert!(!kv.compare_and_set("user-memory/kv/a", None, "12").await.unwrap());
    assert!(kv.compare_and_set("user-memory/kv/new", None, "n").await.unwrap());
    assert_eq!(kv.get("user-memory/kv/a").await.unwrap().as_deref(), Some("10"));
    kv.delete("user-memory/kv/a").await.unwrap();
    assert_eq!(kv.get("user-memory/kv/a").await.unwrap(), None);
    clear_local("kv");
    clear_local("kvx");
}

#[path = "support/crashing_kv.rs"]
mod crashing_kv;

use crashing_kv::{assert_old_or_new, CrashingKv};

#[wasm_bindgen_test]
async fn localstorage_a_crash_at_every_step_of_the_swap_leaves_the_old_or_the_new_document() {
    let agent = "ls-crash";
    for caps in [KvCapabilities { keys: true, compare_and_set: true }, KvCapabilities { keys: true, compare_and_set: false }] {
        for after in [false, true] {
            let mut crash_at = 0;
            loop {
                clear_local(agent);
                let setup = VersionedKv::new(local_kv(), agent);
                assert_eq!(setup.commit(Slot::Document, 0, "old".into()).await.unwrap(), Commit::Committed(1));
                let crashing = Rc::new(CrashingKv::new(local_kv(), crash_at, after, caps));
                let result = VersionedKv::new(crashing.clone(), agent).commit(Slot::Document, 1, "new".into()).await;
                // "Reload": a fresh store over what the crash left in localStorage.
                let reopened = VersionedKv::new(local_kv(), agent);
                let seen = reopened.load(Slot::Document).await.unwrap().expect("never empty");
                assert_old_or_new(&seen, result.is_ok(), &format!("crash at op {crash_at} ({caps:?}, after={after})"));
                reopened.cleanup().await.unwrap();
                assert_eq!(reopened.load(Slot::Document).await.unwrap().unwrap(), seen, "cleanup never removes the live value");
                let versions = local_snapshot(agent).iter().filter(|(k, _)| k.contains("/doc/v")).count();
                assert!(versions <= 2, "at most the live version and one in-flight orphan remain ({versions})");
                if crashing.finished_before_crash() {
                    break; // the commit finished before reaching the crash point
                }
                crash_at += 1;
            }
            assert!(crash_at >= 2, "the protocol has several mutating steps");
        }
    }
    clear_local(agent);
}

#[wasm_bindgen_test]
async fn localstorage_cleanup_removes_crash_orphans_but_not_the_live_or_an_in_flight_version() {
    let agent = "ls-orphans";
    clear_local(agent);
    let kv = local_kv();
    let s = VersionedKv::new(kv.clone(), agent);
    s.commit(Slot::Document, 0, "one".into()).await.unwrap();
    s.commit(Slot::Document, 1, "two".into()).await.unwrap();
    s.commit(Slot::Queue, 0, "q1".into()).await.unwrap();
    s.commit(Slot::Queue, 1, "q2".into()).await.unwrap();
    // Left by crashed commits: versions older than the live one.
    kv.set(&format!("user-memory/{agent}/doc/v1-00000000"), "stale orphan").await.unwrap();
    kv.set(&format!("user-memory/{agent}/queue/v1-22222222"), "stale queue orphan").await.unwrap();
    // Newer than the pointer: may be a commit in flight in another tab.
    kv.set(&format!("user-memory/{agent}/doc/v3-11111111"), "a commit in flight").await.unwrap();
    s.cleanup().await.unwrap();
    let keys: Vec<String> = local_snapshot(agent).into_iter().map(|(k, _)| k).collect();
    assert!(!keys.iter().any(|k| k.ends_with("v1-00000000") || k.ends_with("v1-22222222")), "{keys:?}");
    assert!(keys.iter().any(|k| k.ends_with("v3-11111111")), "{keys:?}");
    assert_eq!(keys.len(), 5, "two pointers, two live versions, the one in flight: {keys:?}");
    assert_eq!(s.load(Slot::Document).await.unwrap().unwrap().value, "two");
    assert_eq!(s.load(Slot::Queue).await.unwrap().unwrap().value, "q2");
    clear_local(agent);
}

#[wasm_bindgen_test]
async fn localstorage_a_corrupt_pointer_or_missing_version_is_corrupt_memory_and_is_kept() {
    let agent = "ls-corrupt";
    let kv = local_kv();
    let pointer = format!("user-memory/{agent}/doc");
    let dangling = format!(r#"{{"rev":2,"key":"user-memory/{agent}/doc/v2-deadbeef"}}"#);
    // (pointer, whether the store itself refuses commits; a dangling pointer is refused by
    // the engine, which never commits without a successful load first)
    for (bad, refused) in
        [("{not json", true), (r#"{"rev":2,"key":"user-memory/elsewhere/doc/v2-00000000"}"#, true), (dangling.as_str(), false)]
    {
        clear_local(agent);
        kv.set(&pointer, bad).await.unwrap();
        let before = local_snapshot(agent);
        let s = VersionedKv::new(kv.clone(), agent);
        assert_eq!(s.load(Slot::Document).await.unwrap_err().code(), "CORRUPT_MEMORY", "{bad}");
        if refused {
            for base in [0, 2] {
                assert_eq!(s.commit(Slot::Document, base, "replacement".into()).await.unwrap_err().code(), "CORRUPT_MEMORY", "{bad}");
            }
        }
        s.cleanup().await.unwrap();
        assert_eq!(local_snapshot(agent), before, "nothing was changed next to {bad}");
    }
    clear_local(agent);
}

#[wasm_bindgen_test]
async fn localstorage_a_full_storage_gives_storage_quota_and_keeps_the_old_document() {
    let agent = "ls-quota";
    clear_local(agent);
    let s = VersionedKv::new(local_kv(), agent);
    s.commit(Slot::Document, 0, "small".into()).await.unwrap();
    // More than any browser's localStorage quota (Chromium: 10 MB per origin).
    let huge = "x".repeat(11 * 1024 * 1024);
    let err = s.commit(Slot::Document, 1, huge).await.unwrap_err();
    assert_eq!(err.code(), "STORAGE_QUOTA", "{err}");
    let v = s.load(Slot::Document).await.unwrap().unwrap();
    assert_eq!((v.revision, v.value.as_str()), (1, "small"));
    assert!(!local_snapshot(agent).iter().any(|(k, _)| k.contains("/doc/v2")), "no half-written version is left");
    clear_local(agent);
}

// ───────────────────────── localStorage: the leader tab ─────────────────────────

fn leader_store(agent: &str) -> Rc<LeaderStore> {
    LeaderStore::start(Rc::new(VersionedKv::new(local_kv(), agent))).unwrap()
}

#[wasm_bindgen_test]
async fn localstorage_followers_commit_through_the_leader_and_take_over_when_it_closes() {
    let agent = "ls-leader";
    clear_local(agent);
    let a = leader_store(agent);
    wait_until("the first instance leads", || a.role() == Role::Leader).await;
    let b = leader_store(agent);
    // fixed wait: an absence check (b must not take the lead meanwhile): a slow machine can only make it pass
    sleep(100).await;
    assert_eq!(b.role(), Role::Follower, "one leader at a time");

    // The follower's operations are performed by the leader.
    assert_eq!(b.load(Slot::Document).await.unwrap(), None);
    assert_eq!(b.commit(Slot::Document, 0, "from b".into()).await.unwrap(), Commit::Committed(1));
    assert_eq!(a.commit(Slot::Document, 0, "stale".into()).await.unwrap(), Commit::Conflict);
    assert_eq!(b.commit(Slot::Document, 0, "stale too".into()).await.unwrap(), Commit::Conflict);
    assert_eq!(a.load(Slot::Document).await.unwrap().unwrap().value, "from b");
    assert_eq!(b.load(Slot::Document).await.unwrap().unwrap().revision, 1);

    // A commit the leader already performed, sent again (its answer was lost), is
    // answered as committed rather than as a conflict.
    let reply = js(r#"new Promise((ok) => {
            const ch = new BroadcastChannel("user-memory/ls-leader/leader");
            ch.onmessage = (e) => { if (e.data.t === "res" && e.data.id === "resent-1") { ch.close(); ok(e.data); } };
            ch.postMessage({ t: "req", id: "resent-1", op: "commit", slot: "doc", base: 0, value: "from b", kd: 1, kq: 0, retry: true });
        })"#)
    .await;
    assert_eq!(get(&reply, "ok"), JsValue::TRUE);
    assert_eq!(get(&reply, "conflict"), JsValue::UNDEFINED, "not a conflict");
    assert_eq!(get(&reply, "rev").as_f64(), Some(1.0));

    // The leader closes: the follower takes over and keeps working.
    a.close();
    assert_eq!(a.role(), Role::Closed);
    assert_eq!(b.commit(Slot::Document, 1, "after the handoff".into()).await.unwrap(), Commit::Committed(2));
    assert_eq!(b.role(), Role::Leader);
    let c = leader_store(agent);
    let v = c.load(Slot::Document).await.unwrap().unwrap();
    assert_eq!((v.revision, v.value.as_str()), (2, "after the handoff"));
    assert_eq!(c.role(), Role::Follower);
    b.close();
    c.close();
    clear_local(agent);
}

// ───────────────────────── through the JS API, both backends ─────────────────────────

const BACKENDS: [&str; 2] = ["indexeddb", "localstorage"];

#[wasm_bindgen_test]
async fn default_storage_in_a_browser_is_indexeddb() {
    let m = open(options("default-storage", None)).await;
    JsFuture::from(m.add_fact(fact("Uses the default storage"))).await.unwrap();
    JsFuture::from(m.close()).await.unwrap();
    let stored = IdbStore::open("default-storage").await.unwrap().load(Slot::Document).await.unwrap().expect("stored in IndexedDB");
    assert!(stored.value.contains("Uses the default storage"));
    IdbStore::open("default-storage").await.unwrap().discard(Slot::Document).await.unwrap();
}

#[wasm_bindgen_test]
async fn memory_round_trips_through_both_backends_and_a_second_instance_reads_it() {
    for backend in BACKENDS {
        let agent = format!("api-round-trip-{backend}");
        JsFuture::from(UserMemory::reset(options(&agent, Some(backend)))).await.unwrap();
        let m = open(options(&agent, Some(backend))).await;
        JsFuture::from(m.add_fact(fact("Writes Go microservices"))).await.unwrap();
        JsFuture::from(m.close()).await.unwrap();
        let again = open(options(&agent, Some(backend))).await;
        assert_eq!(fact_contents(&again).await, ["Writes Go microservices"], "{backend}");
        JsFuture::from(again.close()).await.unwrap();
    }
}

#[wasm_bindgen_test]
async fn corrupt_memory_is_reported_by_open_and_recovered_with_inspect_then_reset() {
    for backend in BACKENDS {
        let agent = format!("api-corrupt-{backend}");
        // Plant a document that is not valid memory.
        let store: Rc<dyn Store> = if backend == "indexeddb" {
            Rc::new(IdbStore::open(&agent).await.unwrap())
        } else {
            Rc::new(VersionedKv::new(local_kv(), &agent))
        };
        store.discard(Slot::Document).await.unwrap();
        store.commit(Slot::Document, 0, r#"{"facts": "not a list"}"#.into()).await.unwrap();

        let err = JsFuture::from(UserMemory::open(options(&agent, Some(backend)))).await.unwrap_err();
        assert_eq!(code_of(&err), "CORRUPT_MEMORY", "{backend}");
        // The failed open changed nothing.
        let kept = store.load(Slot::Document).await.unwrap().unwrap();
        assert_eq!((kept.revision, kept.value.as_str()), (1, r#"{"facts": "not a list"}"#), "{backend}");

        let raw = JsFuture::from(UserMemory::inspect(options(&agent, Some(backend)))).await.unwrap();
        assert_eq!(get(&raw, "document").as_string().as_deref(), Some(r#"{"facts": "not a list"}"#), "{backend}");

        JsFuture::from(UserMemory::reset(options(&agent, Some(backend)))).await.unwrap();
        assert_eq!(store.load(Slot::Document).await.unwrap(), None, "{backend}");
        let m = open(options(&agent, Some(backend))).await;
        assert!(fact_contents(&m).await.is_empty());
        JsFuture::from(m.close()).await.unwrap();
    }
}

#[wasm_bindgen_test]
async fn a_commit_by_one_instance_reaches_another_as_a_remote_update() {
    for backend in BACKENDS {
        let agent = format!("api-remote-{backend}");
        JsFuture::from(UserMemory::reset(options(&agent, Some(backend)))).await.unwrap();
        let writer = open(options(&agent, Some(backend))).await;
        let reader = open(options(&agent, Some(backend))).await;
        let events: Rc<RefCell<Vec<JsValue>>> = Rc::default();
        let sink = events.clone();
        let listener: Function =
            Closure::<dyn Fn(JsValue)>::new(move |e: JsValue| sink.borrow_mut().push(e)).into_js_value().unchecked_into();
        reader.on("update".into(), listener.into()).unwrap();

        JsFuture::from(writer.add_fact(fact("Lives in Chengdu"))).await.unwrap();
        let remote = |events: &RefCell<Vec<JsValue>>| {
            events.borrow().iter().any(|e| {
                get(e, "reason").as_string().as_deref() == Some("remote")
                    && Array::from(&get(e, "added")).iter().any(|f| get(&f, "content").as_string().as_deref() == Some("Lives in Chengdu"))
            })
        };
        wait_until("the reader is told", || remote(&events)).await;
        // The reader's cached view (what inject uses) has the fact, without a get().
        let block = JsFuture::from(reader.inject(Array::new().into())).await.unwrap().as_string().unwrap();
        assert!(block.contains("Lives in Chengdu"), "{backend}: {block}");
        JsFuture::from(writer.close()).await.unwrap();
        JsFuture::from(reader.close()).await.unwrap();
    }
}

/// The fact vectors of `embed` are a slot of their own in both browser backends: written in
/// the background, read by a second instance (a reload) without embedding again, shown by
/// `inspect()`, deleted by `reset()`, and the document stays `memory.json`.
#[wasm_bindgen_test]
async fn fact_vectors_are_stored_beside_the_document_in_both_backends() {
    for backend in BACKENDS {
        let agent = format!("api-vectors-{backend}");
        JsFuture::from(UserMemory::reset(options(&agent, Some(backend)))).await.unwrap();
        // A toy model counting its calls: "dog" and "cello" dimensions plus a constant one.
        let calls = js("globalThis.__embedCalls = { facts: 0 }").await;
        let embed = js(r#"(texts, { purpose }) => {
                if (purpose === "facts") globalThis.__embedCalls.facts += texts.length;
                return texts.map((t) => [t.includes("dog") || t.includes("pet") ? 1 : 0, t.includes("cello") ? 1 : 0, 0.3]);
            }"#)
        .await;
        let opts = || {
            let o = options(&agent, Some(backend));
            set(&o, "embed", embed.clone());
            o
        };
        let m = open(opts()).await;
        JsFuture::from(m.add_fact(fact("Has a dog called Rex"))).await.unwrap();
        JsFuture::from(m.add_fact(fact("Plays the cello"))).await.unwrap();
        let count = |stored: &str| {
            let v = js_sys::JSON::parse(stored).unwrap_or(JsValue::NULL);
            if v.is_null() {
                0
            } else {
                Object::keys(get(&v, "vectors").unchecked_ref::<Object>()).length()
            }
        };
        let mut stored = String::new();
        // Open-ended (60 s, as wait_until): the background embedding takes what the machine gives it.
        let deadline = js_sys::Date::now() + 60_000.0;
        while js_sys::Date::now() < deadline {
            let raw = JsFuture::from(UserMemory::inspect(options(&agent, Some(backend)))).await.unwrap();
            stored = get(&raw, "vectors").as_string().unwrap_or_default();
            if !stored.is_empty() && count(&stored) == 2 {
                break;
            }
            sleep(10).await;
        }
        assert!(stored.contains(r#""model":"function""#) && count(&stored) == 2, "{backend}: {stored}");
        let doc = get(&JsFuture::from(UserMemory::inspect(options(&agent, Some(backend)))).await.unwrap(), "document").as_string().unwrap();
        assert!(!doc.contains("vectors"), "{backend}: the document is untouched");
        JsFuture::from(m.close()).await.unwrap();

        let again = open(opts()).await;
        let explanation =
            JsFuture::from(again.explain(Array::of1(&js(r#"({ role: "user", content: "my pet" })"#).await).into(), JsValue::UNDEFINED))
                .await
                .unwrap();
        let first = Array::from(&get(&explanation, "facts")).get(0);
        assert_eq!(get(&first, "content").as_string().as_deref(), Some("Has a dog called Rex"), "{backend}");
        assert_eq!(get(&first, "dense").as_f64(), Some(1.0), "{backend}: the stored vectors were used");
        assert_eq!(get(&calls, "facts").as_f64(), Some(2.0), "{backend}: nothing embedded twice");
        JsFuture::from(again.close()).await.unwrap();
        JsFuture::from(UserMemory::reset(options(&agent, Some(backend)))).await.unwrap();
        let raw = JsFuture::from(UserMemory::inspect(options(&agent, Some(backend)))).await.unwrap();
        assert!(get(&raw, "vectors").is_null(), "{backend}: reset deletes the vectors");
    }
}
