//! The pool's bounded task queue: one multi-producer multi-consumer FIFO shared by all workers.
//!
//! Outside loom it is crossbeam's lock-free `ArrayQueue` (a fixed ring allocated at build, so a
//! full queue is detected without allocating). Under loom it is a `Mutex<VecDeque>` with the
//! same contract: the models check the sleep/wake protocol around the queue, and treat the queue
//! itself as a linearizable black box.

#[cfg(not(loom))]
pub(crate) struct Queue<T> {
    ring: crossbeam_queue::ArrayQueue<T>,
}

#[cfg(not(loom))]
impl<T> Queue<T> {
    /// A queue that holds at most `capacity` items (`capacity >= 1`).
    pub(crate) fn new(capacity: usize) -> Self {
        Queue { ring: crossbeam_queue::ArrayQueue::new(capacity) }
    }

    /// Appends `item`, or gives it back when the queue is full.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        self.ring.push(item)
    }

    /// Takes the oldest item.
    pub(crate) fn pop(&self) -> Option<T> {
        self.ring.pop()
    }

    /// Items queued now (a snapshot: other threads may change it at once).
    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.ring.capacity()
    }
}

#[cfg(loom)]
pub(crate) struct Queue<T> {
    items: crate::sync::Mutex<std::collections::VecDeque<T>>,
    capacity: usize,
}

#[cfg(loom)]
impl<T> Queue<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Queue { items: crate::sync::Mutex::new(std::collections::VecDeque::new()), capacity }
    }

    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut items = crate::sync::lock(&self.items);
        if items.len() >= self.capacity {
            return Err(item);
        }
        items.push_back(item);
        Ok(())
    }

    pub(crate) fn pop(&self) -> Option<T> {
        crate::sync::lock(&self.items).pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        crate::sync::lock(&self.items).len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}
