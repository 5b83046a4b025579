//! Storage seam. PLACEHOLDER: being written.

/// A store.
pub trait Store {}
/// A key-value store.
pub trait KvStore {}
