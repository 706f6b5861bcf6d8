//! The pool's task queue: one multi-producer multi-consumer FIFO shared by all workers, bounded
//! for submitters, with an overflow list for the polls of woken futures.
//!
//! Outside loom the bounded part is crossbeam's lock-free `ArrayQueue` (a fixed ring allocated
//! at build, so a full queue is detected without allocating). Under loom it is a
//! `Mutex<VecDeque>` with the same contract: the models check the sleep/wake protocol around
//! the queue, and treat the queue itself as a linearizable black box.
//!
//! **Why an overflow list.** A woken future's poll must be queued wherever the wake-up comes
//! from (a tokio I/O thread, a timer, another pool's task) and must never wait for room nor be
//! refused: the future was accepted once, at its spawn, and a waker that blocks stalls the
//! thread that called it (every socket of a tokio I/O driver). So such a poll goes to the ring
//! if it has room and to the overflow list otherwise (`push_or_overflow`). The list needs no
//! bound of its own: a future has at most one poll queued at a time (`future_task/state.rs`),
//! so it never holds more polls than the pool has live futures. A pop takes the ring's oldest
//! item and moves the list's oldest into the place it freed, so the whole queue stays first in,
//! first out: a ring kept full by submitters cannot starve a woken future, and futures that
//! wake themselves over and over cannot starve the tasks in the ring (taking from the list
//! first did: each repoll found the ring full again and went back to the list, ahead of the
//! ring for good). The list is touched only when the ring was full; the common path pays one
//! load of a counter that stays in every core's cache (`overflowed`) per pop and per emptiness
//! check.

use std::collections::VecDeque;

use crate::sync::{lock, AtomicUsize, CachePadded, Mutex, Ordering};

pub(crate) struct Queue<T> {
    #[cfg(not(loom))]
    ring: crossbeam_queue::ArrayQueue<T>,
    #[cfg(loom)]
    ring: Mutex<VecDeque<T>>,
    #[cfg(loom)]
    capacity: usize,
    /// Items accepted past the ring's capacity (`push_or_overflow`), oldest first.
    overflow: Mutex<VecDeque<T>>,
    /// How many items `overflow` holds, read without its lock; changed only under it. SeqCst
    /// like the ring's own operations: an emptiness check after the protocol's fences must see
    /// an item pushed before the pusher's fence.
    overflowed: CachePadded<AtomicUsize>,
}

impl<T> Queue<T> {
    /// A queue whose ring holds at most `capacity` items (`capacity >= 1`).
    pub(crate) fn new(capacity: usize) -> Self {
        Queue {
            #[cfg(not(loom))]
            ring: crossbeam_queue::ArrayQueue::new(capacity),
            #[cfg(loom)]
            ring: Mutex::new(VecDeque::new()),
            #[cfg(loom)]
            capacity,
            overflow: Mutex::new(VecDeque::new()),
            overflowed: CachePadded(AtomicUsize::new(0)),
        }
    }

    /// Appends `item` to the ring, or gives it back when the ring is full.
    #[cfg(not(loom))]
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        self.ring.push(item)
    }

    #[cfg(loom)]
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut ring = lock(&self.ring);
        if ring.len() >= self.capacity {
            return Err(item);
        }
        ring.push_back(item);
        Ok(())
    }

    /// Appends `item` to the ring, or to the overflow list when the ring is full: never refused
    /// (see the module's comment for who may use it).
    pub(crate) fn push_or_overflow(&self, item: T) {
        if let Err(item) = self.push(item) {
            let mut overflow = lock(&self.overflow);
            overflow.push_back(item);
            self.overflowed.store(overflow.len(), ORDER);
        }
    }

    /// Takes the ring's oldest item and moves the oldest overflowed one into the place it
    /// freed; with the ring empty, takes the oldest overflowed item.
    pub(crate) fn pop(&self) -> Option<T> {
        let popped = self.pop_ring();
        if self.overflowed.load(ORDER) == 0 {
            return popped;
        }
        let mut overflow = lock(&self.overflow);
        let Some(item) = popped else {
            let item = overflow.pop_front();
            self.overflowed.store(overflow.len(), ORDER);
            return item;
        };
        if let Some(oldest) = overflow.pop_front() {
            // Into the ring before the count drops: `len` may count it twice for a moment,
            // never zero times. A push that took the freed place first sends it back.
            if let Err(oldest) = self.push(oldest) {
                overflow.push_front(oldest);
            }
            self.overflowed.store(overflow.len(), ORDER);
        }
        Some(item)
    }

    #[cfg(not(loom))]
    fn pop_ring(&self) -> Option<T> {
        self.ring.pop()
    }

    #[cfg(loom)]
    fn pop_ring(&self) -> Option<T> {
        lock(&self.ring).pop_front()
    }

    /// Items queued now, overflow included (a snapshot: other threads may change it at once).
    pub(crate) fn len(&self) -> usize {
        self.ring_len() + self.overflowed.load(ORDER)
    }

    #[cfg(not(loom))]
    fn ring_len(&self) -> usize {
        self.ring.len()
    }

    #[cfg(loom)]
    fn ring_len(&self) -> usize {
        lock(&self.ring).len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ring's capacity (the overflow list is not counted: it is for woken futures only).
    #[cfg(not(loom))]
    pub(crate) fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    #[cfg(loom)]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

/// See `Queue::overflowed`.
const ORDER: Ordering = Ordering::SeqCst;
