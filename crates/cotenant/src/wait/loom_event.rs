//! loom models of the `Signal`/`Event` protocol (`signal.rs`): every interleaving, within the
//! preemption bound, of a notifier and waiters must wake every waiter whose condition became
//! true. A lost wake-up shows as a loom deadlock (under loom a timed wait never times out).
//! Run with `make loom`.

use super::{Backoff, Event, Signal};
use crate::sync::{thread, Arc, AtomicBool, Ordering};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// `set` racing with a `wait` that is checking, registering or parking.
#[test]
fn a_set_racing_a_wait_always_wakes_it() {
    model(|| {
        let event = Arc::new(Event::new());
        let waiter = {
            let event = event.clone();
            thread::spawn_named("waiter".into(), move || event.wait()).unwrap()
        };
        event.set();
        waiter.join().unwrap();
        assert!(event.is_set());
    });
}

/// Two waiters, one notification: both wake (`notify_all`), whichever parked first.
#[test]
fn one_set_wakes_every_waiter() {
    model(|| {
        let event = Arc::new(Event::new());
        let waiters: Vec<_> = (0..2)
            .map(|i| {
                let event = event.clone();
                thread::spawn_named(format!("waiter-{i}"), move || event.wait()).unwrap()
            })
            .collect();
        event.set();
        for waiter in waiters {
            waiter.join().unwrap();
        }
    });
}

/// A `Signal` with its condition outside (a Relaxed store made visible by the fences, as the
/// lab's sessions publish their slots), and a sleeping schedule whose sleeps are parks.
#[test]
fn a_signal_wakes_a_waiter_on_an_outside_condition() {
    model(|| {
        let (ready, signal) = (Arc::new(AtomicBool::new(false)), Arc::new(Signal::new()));
        let waiter = {
            let (ready, signal) = (ready.clone(), signal.clone());
            thread::spawn_named("waiter".into(), move || {
                signal.wait_until(|| ready.load(Ordering::Relaxed), &Backoff::wiredtiger());
            })
            .unwrap()
        };
        ready.store(true, Ordering::Relaxed);
        signal.notify_all();
        waiter.join().unwrap();
    });
}
