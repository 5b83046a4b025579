//! What `close()` stops: the requests in flight (their `AbortController`s) and the waits
//! for them or between retries. Shared by every transport that calls out (`fetch` to an
//! HTTP endpoint, a user's JS function).

use super::error::js_message;
use crate::base::error::{Error, Result};
use js_sys::Object;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use wasm_bindgen::JsValue;
use web_sys::AbortController;

/// What `close()` must be able to stop: the requests in flight (their `AbortController`s)
/// and the waits for them or between retries (their wakers).
#[derive(Default)]
pub(crate) struct Cancel {
    cancelled: Cell<bool>,
    controllers: RefCell<Vec<AbortController>>,
    /// One slot per live [`UntilClosed`] (freed when it drops, so a long-lived instance
    /// does not collect wakers).
    sleepers: RefCell<Vec<Option<Waker>>>,
}

impl Cancel {
    /// Whether [`Cancel::cancel`] was called.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.get()
    }

    /// Aborts every request in flight and wakes every sleeper (once).
    pub(crate) fn cancel(&self) {
        if self.cancelled.replace(true) {
            return;
        }
        for c in self.controllers.take() {
            c.abort();
        }
        for w in self.sleepers.take().into_iter().flatten() {
            w.wake();
        }
    }

    /// A new `AbortController` for one call, aborted by [`Cancel::cancel`] until the
    /// returned guard drops; `CLOSED` if already cancelled.
    pub(crate) fn register(&self) -> Result<(AbortController, Unregister<'_>)> {
        if self.cancelled.get() {
            return Err(Error::Closed);
        }
        let controller = AbortController::new().map_err(|e| Error::LlmFailed(js_message(&e)))?;
        self.controllers.borrow_mut().push(controller.clone());
        Ok((controller.clone(), Unregister { cancel: self, controller }))
    }

    /// `future`, ended early with `CLOSED` when the instance is closed. Dropping it drops
    /// `future` (for a timer: clears its `setTimeout`, so a closed instance leaves no
    /// timer behind).
    pub(crate) fn until_closed<F: Future + Unpin>(&self, future: F) -> UntilClosed<'_, F> {
        UntilClosed { future, cancel: self, slot: None }
    }
}

/// See [`Cancel::until_closed`].
pub(crate) struct UntilClosed<'a, F> {
    future: F,
    cancel: &'a Cancel,
    slot: Option<usize>,
}

impl<F> Drop for UntilClosed<'_, F> {
    /// Frees the slot for the next wait.
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            if let Some(slot) = self.cancel.sleepers.borrow_mut().get_mut(i) {
                *slot = None;
            }
        }
    }
}

impl<F: Future + Unpin> Future for UntilClosed<'_, F> {
    type Output = Result<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.cancel.cancelled.get() {
            return Poll::Ready(Err(Error::Closed));
        }
        if let Poll::Ready(v) = Pin::new(&mut self.future).poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let mut sleepers = self.cancel.sleepers.borrow_mut();
        let waker = Some(cx.waker().clone());
        match self.slot {
            Some(i) if i < sleepers.len() => sleepers[i] = waker,
            _ => {
                let i = match sleepers.iter().position(Option::is_none) {
                    Some(i) => i,
                    None => {
                        sleepers.push(None);
                        sleepers.len() - 1
                    }
                };
                sleepers[i] = waker;
                drop(sleepers);
                self.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

/// Removes a try's `AbortController` from [`Cancel`] when the try ends.
pub(crate) struct Unregister<'a> {
    cancel: &'a Cancel,
    controller: AbortController,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        let target: &JsValue = self.controller.as_ref();
        self.cancel.controllers.borrow_mut().retain(|c| !Object::is(c.as_ref(), target));
    }
}
