//! The work offered to each process: items of a fixed CPU time arriving open-loop, evenly
//! spaced or as a Poisson process (the parent module's **Work**).

use cotenant::Policy;

use super::run::{Event, Sim};

/// How arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    /// Evenly spaced, the first at 0.
    Uniform,
    /// A Poisson process.
    Poisson,
}

/// One process: a pool and the work offered to it.
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The pool's policy (the library's type; fixed, share or adaptive).
    pub policy: Policy,
    /// The pool's threads.
    pub threads: u32,
    /// Items offered per second.
    pub rate: f64,
    /// CPU time per item (ns).
    pub service: u64,
    /// How arrivals are spaced.
    pub arrivals: Arrivals,
    /// Its workers hold one of the host's CPU tokens while they run a task (`cotenant::tokens`:
    /// as many tokens as CPUs, shared by every process that uses them, handed on in FIFO
    /// order). A worker that finds none sleeps until one is handed to it.
    pub uses_tokens: bool,
    /// With a token, its workers also take the lease of one CPU and move there, as the
    /// library's do (`cotenant::tokens`, "CPU leases"): holders then do not share a CPU while
    /// another idles. Only the Linux scheduler model places threads on CPUs, so only it is
    /// changed by this.
    pub uses_leases: bool,
}

impl Sim {
    pub(super) fn arrival(&mut self, p: u32, duration: u64) {
        let p = p as usize;
        let now = self.now;
        let proc = &mut self.processes[p];
        match proc.submitter {
            Some(_) => proc.pending.push_back(proc.next_arrival),
            None => proc.queue.push_back(proc.next_arrival),
        }
        proc.offered += 1;
        self.outstanding += 1;
        let gap = 1e9 / proc.config.rate;
        let next = match proc.config.arrivals {
            Arrivals::Poisson => proc.next_arrival as f64 + proc.rng.exponential(gap),
            Arrivals::Uniform => proc.next_arrival as f64 + gap,
        };
        if next < duration as f64 {
            let at = (next as u64).max(now);
            proc.next_arrival = at;
            self.push(at, Event::Arrival(p as u32));
        }
        if let Some(submitter) = self.processes[p].submitter {
            // Its submitting thread queues the item (`Sim::submitted`); it wakes from its timer
            // unless it is already awake, and then takes this item along.
            if self.threads[submitter as usize].state == super::sched::ThreadState::Parked {
                self.threads[submitter as usize].remaining = self.submit_ns;
                self.wake(submitter, None);
            }
            return;
        }
        self.work_arrived(p);
        self.wake_one_allowed(p, None);
    }
}
