//! [`block_on`]: the smallest executor, running one future on the calling thread, for tests
//! and `main` (awaiting a [`Task`](crate::Task) of the pool, or a future spawned on it with
//! [`Pool::spawn_future`](crate::Pool::spawn_future)).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

/// The waker of [`block_on`]: unparks the thread that waits in it.
struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on the calling thread and returns its output.
///
/// The thread polls the future, and parks between polls until the future's waker is woken
/// (a wake-up that comes before the park is not lost: the park returns at once; a spurious
/// return from the park only polls once more). It costs no CPU while it waits.
///
/// For tests and `main`. Never call it inside a task or a future running on a pool's worker
/// when what it waits for needs that pool: it holds the worker for as long as it waits, and
/// the pool may have no other worker allowed to run. Inside async code, `.await` instead.
///
/// ```
/// let pool = cotenant::Pool::builder().policy(cotenant::Policy::fixed(2)).build().unwrap();
/// let sum = cotenant::block_on(async {
///     let a = pool.spawn(|| 40).await?;
///     let b = pool.spawn_future(async { 2 }).await?;
///     Ok::<i32, cotenant::JoinError>(a + b)
/// });
/// assert_eq!(sum.unwrap(), 42);
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unparker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::block_on;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};

    #[test]
    fn a_ready_future_gives_its_output() {
        assert_eq!(block_on(async { 6 * 7 }), 42);
        assert_eq!(block_on(std::future::ready("ready")), "ready");
    }

    /// Pending the first `pending` polls, waking itself each time; counts its polls.
    struct WakesItself {
        pending: usize,
        polls: usize,
    }

    impl Future for WakesItself {
        type Output = usize;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.polls > self.pending {
                return Poll::Ready(self.polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_each_time() {
        assert_eq!(block_on(WakesItself { pending: 5, polls: 0 }), 6);
    }

    /// Pending until `flag` is set; leaves its waker in `waker` for whoever sets it.
    struct Flagged {
        flag: Arc<AtomicBool>,
        waker: Arc<Mutex<Option<Waker>>>,
        polls: Arc<AtomicUsize>,
    }

    impl Future for Flagged {
        type Output = ();

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.flag.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            // The setter sets the flag only once it holds a waker, so the first poll never
            // sees it, and the waker it then wakes is one stored here.
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[test]
    fn a_wake_from_another_thread_unparks_the_waiting_thread() {
        let flag = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Mutex::new(None::<Waker>));
        let polls = Arc::new(AtomicUsize::new(0));
        let future = Flagged { flag: flag.clone(), waker: waker.clone(), polls: polls.clone() };
        let setter = std::thread::spawn(move || {
            // Set the flag only once the future has been polled and left its waker.
            let waker = loop {
                if let Some(waker) = waker.lock().unwrap().take() {
                    break waker;
                }
                std::thread::yield_now();
            };
            flag.store(true, Ordering::SeqCst);
            waker.wake();
        });
        block_on(future);
        setter.join().unwrap();
        // The first poll found no flag; the wake-up led to a poll that found it (a spurious
        // unpark may add polls, never lose one).
        assert!(polls.load(Ordering::SeqCst) >= 2);
    }
}
