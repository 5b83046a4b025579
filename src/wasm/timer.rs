//! Every wait of the wasm layer, on the global `setTimeout` through gloo-timers: sleeps
//! (backoff, the commit check of localStorage without a leader, the clock's `sleep`) and
//! callbacks (the queue timer, a request's watchdog). Dropping either clears its timeout,
//! so a closed instance leaves nothing behind.

use gloo_timers::future::TimeoutFuture;

/// A pending callback of [`after`]; dropping it cancels the call.
pub(crate) use gloo_timers::callback::Timeout;

/// `ms` as `setTimeout` takes it: an i32 (a larger delay would fire at once), so about 24
/// days at most.
fn clamp(ms: u64) -> u32 {
    ms.min(i32::MAX as u64) as u32
}

/// Resolves after `ms` milliseconds.
pub(crate) fn sleep(ms: u64) -> TimeoutFuture {
    TimeoutFuture::new(clamp(ms))
}

/// Calls `f` once after `ms` milliseconds, unless the returned handle is dropped first.
pub(crate) fn after(ms: u64, f: impl FnOnce() + 'static) -> Timeout {
    Timeout::new(clamp(ms), f)
}
