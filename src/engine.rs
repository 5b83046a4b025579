//! The engine. PLACEHOLDER: being written.

/// Arms the queue timer.
pub trait Scheduler {}
/// Receives events.
pub trait EventSink {}
