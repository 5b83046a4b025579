//! localStorage backend. PLACEHOLDER: being written.

use crate::error::{Error, Result};
use crate::storage::Store;
use std::rc::Rc;

/// Opens the localStorage store of `agent`.
pub(crate) async fn open(agent: &str) -> Result<Rc<dyn Store>> {
    let _ = agent;
    Err(Error::StorageUnavailable("the localStorage backend is not built yet".into()))
}
