//! Single-threaded async helpers: a boxed local future type and a fair async lock.
//!
//! Everything in this crate runs on one thread (the JS event loop in wasm, a test executor
//! natively), so nothing here is `Send`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A boxed, non-`Send` future; what the platform traits return so they stay object-safe.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Which of two raced futures finished first.
#[derive(Debug, PartialEq, Eq)]
pub enum Either<A, B> {
    /// The first one, with its output.
    Left(A),
    /// The second one, with its output.
    Right(B),
}

/// Runs `a` and `b` together until one finishes; the other is dropped unfinished (`a` is
/// polled first, so it wins a tie).
pub async fn race<A: Future + Unpin, B: Future + Unpin>(a: A, b: B) -> Either<A::Output, B::Output> {
    Race { a, b }.await
}

struct Race<A, B> {
    a: A,
    b: B,
}

impl<A: Future + Unpin, B: Future + Unpin> Future for Race<A, B> {
    type Output = Either<A::Output, B::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = Pin::new(&mut self.a).poll(cx) {
            return Poll::Ready(Either::Left(v));
        }
        Pin::new(&mut self.b).poll(cx).map(Either::Right)
    }
}

/// A first-come-first-served async mutex without data, for serialising critical sections
/// that span `.await`s (a storage read-modify-write, one processing batch at a time).
#[derive(Clone, Default)]
pub struct AsyncLock {
    inner: Rc<LockInner>,
}

#[derive(Default)]
struct LockInner {
    locked: Cell<bool>,
    next_ticket: Cell<u64>,
    serving: Cell<u64>,
    waiters: RefCell<Vec<(u64, Waker)>>,
    abandoned: RefCell<Vec<u64>>,
}

/// Holding this keeps the [`AsyncLock`] locked; dropping it lets the next waiter in.
pub struct LockGuard {
    inner: Rc<LockInner>,
}

impl AsyncLock {
    /// A new, unlocked lock.
    pub fn new() -> AsyncLock {
        AsyncLock::default()
    }

    /// Waits until the lock is free, in arrival order, and takes it.
    pub fn lock(&self) -> impl Future<Output = LockGuard> + 'static {
        let ticket = self.inner.next_ticket.get();
        self.inner.next_ticket.set(ticket + 1);
        LockFuture { inner: self.inner.clone(), ticket, granted: false }
    }

    /// Whether someone holds the lock right now.
    pub fn is_locked(&self) -> bool {
        self.inner.locked.get()
    }
}

struct LockFuture {
    inner: Rc<LockInner>,
    ticket: u64,
    granted: bool,
}

impl Future for LockFuture {
    type Output = LockGuard;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<LockGuard> {
        if !self.inner.locked.get() && self.inner.serving.get() == self.ticket {
            self.inner.locked.set(true);
            self.granted = true;
            return Poll::Ready(LockGuard { inner: self.inner.clone() });
        }
        let inner = &self.inner;
        let mut waiters = inner.waiters.borrow_mut();
        match waiters.iter_mut().find(|(t, _)| *t == self.ticket) {
            Some((_, w)) => *w = cx.waker().clone(),
            None => waiters.push((self.ticket, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for LockFuture {
    fn drop(&mut self) {
        // A waiter that gives up must not block everyone behind it: its turn is skipped.
        if self.granted {
            return;
        }
        let inner = &self.inner;
        inner.waiters.borrow_mut().retain(|(t, _)| *t != self.ticket);
        if inner.serving.get() == self.ticket && !inner.locked.get() {
            advance(inner);
        } else {
            inner.abandoned.borrow_mut().push(self.ticket);
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        self.inner.locked.set(false);
        advance(&self.inner);
    }
}

fn advance(inner: &LockInner) {
    let mut next = inner.serving.get() + 1;
    {
        let mut abandoned = inner.abandoned.borrow_mut();
        while let Some(pos) = abandoned.iter().position(|t| *t == next) {
            abandoned.swap_remove(pos);
            next += 1;
        }
    }
    inner.serving.set(next);
    let waker = inner.waiters.borrow().iter().find(|(t, _)| *t == next).map(|(_, w)| w.clone());
    if let Some(w) = waker {
        w.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::LocalPool;
    use futures::task::{waker, ArcWake, LocalSpawnExt};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn critical_sections_do_not_interleave_and_run_in_arrival_order() {
        let lock = AsyncLock::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let gate = Rc::new(futures::lock::Mutex::new(()));
        let mut pool = LocalPool::new();
        let held = pool.run_until(gate.lock());
        for i in 0..3 {
            let (lock, log, gate) = (lock.clone(), log.clone(), gate.clone());
            pool.spawner()
                .spawn_local(async move {
                    let _g = lock.lock().await;
                    log.borrow_mut().push(format!("enter {i}"));
                    drop(gate.lock().await); // suspend while holding the lock
                    log.borrow_mut().push(format!("leave {i}"));
                })
                .unwrap();
        }
        pool.run_until_stalled();
        assert_eq!(*log.borrow(), vec!["enter 0"]);
        drop(held);
        pool.run();
        assert_eq!(*log.borrow(), vec!["enter 0", "leave 0", "enter 1", "leave 1", "enter 2", "leave 2"]);
        assert!(!lock.is_locked());
    }

    /// A waker that counts its wake-ups.
    struct Counter(AtomicUsize);

    impl ArcWake for Counter {
        fn wake_by_ref(me: &Arc<Self>) {
            me.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Waker, Arc<Counter>) {
        let c = Arc::new(Counter(AtomicUsize::new(0)));
        (waker(c.clone()), c)
    }

    fn woken(c: &Counter) -> usize {
        c.0.load(Ordering::SeqCst)
    }

    type Waiting = Pin<Box<dyn Future<Output = LockGuard>>>;

    /// A `lock()` polled once (so it queues) with `w`.
    fn queued(lock: &AsyncLock, w: &Waker) -> Waiting {
        let mut f: Waiting = Box::pin(lock.lock());
        assert!(poll(&mut f, w).is_pending(), "the lock is taken");
        f
    }

    /// The free lock, taken at once.
    fn take(lock: &AsyncLock, w: &Waker) -> LockGuard {
        let mut f: Waiting = Box::pin(lock.lock());
        match poll(&mut f, w) {
            Poll::Ready(g) => g,
            Poll::Pending => panic!("a free lock is taken at once"),
        }
    }

    fn poll(f: &mut Waiting, w: &Waker) -> Poll<LockGuard> {
        f.as_mut().poll(&mut Context::from_waker(w))
    }

    #[test]
    fn the_released_lock_goes_to_the_waiter_whose_turn_it_is_even_if_a_newcomer_polls_first() {
        let lock = AsyncLock::new();
        let (w, count) = counting();
        let held = take(&lock, &w);
        let mut second = queued(&lock, &w);
        drop(held);
        assert_eq!(woken(&count), 1, "the next waiter is woken");
        let mut newcomer: Waiting = Box::pin(lock.lock());
        assert!(poll(&mut newcomer, &w).is_pending(), "no barging past the woken waiter");
        let Poll::Ready(g2) = poll(&mut second, &w) else { panic!("the woken waiter gets the lock") };
        drop(g2);
        assert!(poll(&mut newcomer, &w).is_ready(), "then the newcomer");
    }

    #[test]
    fn a_waiter_dropped_after_its_turn_came_passes_the_lock_on() {
        let lock = AsyncLock::new();
        let (w, _) = counting();
        let held = take(&lock, &w);
        let (w2, _) = counting();
        let second = queued(&lock, &w2);
        let (w3, third_woken) = counting();
        let mut third = queued(&lock, &w3);
        drop(held); // the second one's turn: woken, but it goes away before it runs
        drop(second);
        assert_eq!(woken(&third_woken), 1, "the third one is woken in its place");
        assert!(poll(&mut third, &w3).is_ready());
    }

    #[test]
    fn consecutive_abandoned_waiters_are_all_skipped() {
        let lock = AsyncLock::new();
        let (w, _) = counting();
        let held = take(&lock, &w);
        let gone = [queued(&lock, &w), queued(&lock, &w), queued(&lock, &w)];
        let (w5, fifth_woken) = counting();
        let mut fifth = queued(&lock, &w5);
        drop(gone); // before their turn
        drop(held);
        assert_eq!(woken(&fifth_woken), 1);
        let Poll::Ready(_held) = poll(&mut fifth, &w5) else { panic!("the fifth one's turn") };
        assert!(lock.is_locked());
    }

    #[test]
    fn the_waker_of_the_latest_poll_is_the_one_woken() {
        let lock = AsyncLock::new();
        let (w, _) = counting();
        let held = take(&lock, &w);
        let (old, old_woken) = counting();
        let mut second = queued(&lock, &old);
        let (new, new_woken) = counting();
        assert!(poll(&mut second, &new).is_pending()); // moved to another task, say
        drop(held);
        assert_eq!((woken(&old_woken), woken(&new_woken)), (0, 1));
    }

    #[test]
    fn an_abandoned_waiter_does_not_block_the_queue() {
        let lock = AsyncLock::new();
        let mut pool = LocalPool::new();
        let g = pool.run_until(lock.lock());
        let abandoned = lock.lock();
        let third = lock.lock();
        drop(abandoned);
        drop(g);
        let _g3 = pool.run_until(third);
        assert!(lock.is_locked());
    }
}
