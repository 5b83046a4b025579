//! The platform layer: the `#[wasm_bindgen]` API and everything that touches JS
//! (fetch, timers, IndexedDB, localStorage, JS storage adapters, events).
//!
//! This is the only module that uses `wasm_bindgen`, `js_sys` or `web_sys`.

mod api;
mod convert;
mod error;
mod idb;
mod js_store;
mod leader;
mod llm;
mod local;
mod options;
mod platform;
mod stores;
mod tabs;
mod types;

pub use api::UserMemory;

// The browser storage backends, public for the browser tests (tests/wasm_browser.rs).
pub use idb::{AbortPoint, IdbStore};
pub use leader::{LeaderStore, Role};
pub use local::LocalStorageKv;
