//! IndexedDB backend. PLACEHOLDER: being written.

use crate::error::{Error, Result};
use crate::storage::Store;
use std::rc::Rc;

/// Opens the IndexedDB store of `agent`.
pub(crate) async fn open(agent: &str) -> Result<Rc<dyn Store>> {
    let _ = agent;
    Err(Error::StorageUnavailable("the IndexedDB backend is not built yet".into()))
}
