//! The platform layer: the `#[wasm_bindgen]` API and everything that touches JS
//! (fetch, timers, IndexedDB, localStorage, JS storage adapters, events).
//!
//! This is the only module that uses `wasm_bindgen`, `js_sys` or `web_sys`.

mod api;
mod cancel;
mod convert;
#[cfg(feature = "encryption")]
mod crypto;
mod embed;
mod error;
#[cfg(feature = "http")]
mod http;
mod idb;
mod js_store;
mod leader;
mod llm;
mod local;
mod maintenance;
mod marshal;
mod options;
mod persist;
mod platform;
mod stores;
mod tabs;
mod timer;
mod types;

pub use api::UserMemory;

// The browser storage backends, public for the browser tests (tests/wasm_browser.rs).
pub use idb::{AbortPoint, IdbStore};
pub use leader::{LeaderStore, Role};
pub use local::LocalStorageKv;

/// The allocator: Talc instead of the standard library's dlmalloc, about 5 KB smaller in the
/// wasm and faster (docs/size.md). Single-threaded wasm only, which this module is.
#[cfg(not(target_feature = "atomics"))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();
