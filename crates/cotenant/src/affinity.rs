//! A thread's CPU affinity mask, sized from the kernel: the one place the library reads or sets
//! one (the CPU count's affinity source in `cpus/probe.rs`, pinned workers in
//! `pool/placement.rs`, and the moves to a leased CPU in `pool/host_tokens.rs`).
//!
//! glibc's `cpu_set_t` holds 1024 CPUs, but the kernel's mask has as many bits as the host can
//! have CPUs (`nr_cpu_ids`), and `sched_getaffinity(2)` fails with `EINVAL` when the buffer is
//! smaller than that: a fixed `cpu_set_t` turns pinning and CPU leases off on a larger host.
//! So a read starts with 1024 bits and doubles the buffer on `EINVAL` up to [`MAX_MASK_BITS`]
//! (what glibc's `CPU_ALLOC` users such as `nproc` do), and a mask to set is as long as its
//! highest CPU needs (the kernel zero-fills a shorter mask and ignores bits past its CPUs).
//! The raw system calls are used (`crate::sys`), because glibc's wrappers are typed for
//! `cpu_set_t`.
//!
//! The layout is the kernel's: CPU `i` is bit `i % WORD_BITS` of word `i / WORD_BITS`, in
//! words of an `unsigned long`. Packing CPU ids into words and back is pure ([`pack`],
//! [`unpack`]) and tested beyond 1024 CPUs.
//!
//! On systems other than Linux (`crate::sys`'s fallback) a thread has no mask cotenant can read
//! or set: every read and every pin fails with an `Unsupported` error that says so. The CPU
//! count then comes from `std::thread::available_parallelism`, and a pool that asked for pinned
//! workers runs them unpinned and reports it (`Metrics::degradations`).

// Under loom only the CPU count reads a mask: the pool's placement and host tokens are not built.
#![cfg_attr(loom, allow(dead_code))]

use std::io;

use crate::sys;

/// One word of a mask, as the kernel lays it out (`unsigned long`).
type Word = sys::MaskWord;
const WORD_BITS: usize = Word::BITS as usize;
const WORD_BYTES: usize = std::mem::size_of::<Word>();

/// The buffer a read tries first: glibc's `cpu_set_t`, enough for all but the largest hosts.
const FIRST_MASK_BITS: usize = 1024;

/// The largest buffer a read grows to, and one past the highest CPU id a mask to set may hold:
/// far beyond Linux's largest `NR_CPUS` (8192), yet small (128 KiB) so that a kernel that
/// keeps answering `EINVAL` cannot make a read allocate without bound.
pub(crate) const MAX_MASK_BITS: usize = 1 << 20;

/// A CPU affinity mask in the kernel's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mask {
    words: Vec<Word>,
}

impl Mask {
    /// The calling thread's mask, read into a buffer grown until the kernel's mask fits.
    pub(crate) fn of_current_thread() -> io::Result<Mask> {
        let mut bits = FIRST_MASK_BITS;
        loop {
            let mut words: Vec<Word> = vec![0; bits / WORD_BITS];
            let error = match sys::get_thread_affinity(&mut words) {
                Ok(written) => {
                    // The kernel returns the size of its mask in bytes; the words after it are
                    // still zero.
                    words.truncate(written.div_ceil(WORD_BYTES));
                    return Ok(Mask { words });
                }
                Err(error) => error,
            };
            let too_small = sys::mask_too_small(&error);
            let Some(more) = grown(bits, too_small) else {
                return Err(if too_small {
                    // Even the largest buffer is smaller than the kernel's mask.
                    io::Error::new(
                        error.kind(),
                        format!("{error} (with a buffer of {bits} CPUs, the most cotenant reads)"),
                    )
                } else {
                    error
                });
            };
            bits = more;
        }
    }

    /// A mask of exactly `cpus` (any order, repeats allowed), as long as the highest needs.
    /// Refused (`InvalidInput`, saying why): an empty list, or a CPU id of
    /// [`MAX_MASK_BITS`] or more.
    pub(crate) fn of_cpus(cpus: &[u32]) -> io::Result<Mask> {
        pack(cpus).map(|words| Mask { words }).map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))
    }

    /// The CPU ids in the mask, ascending.
    pub(crate) fn cpus(&self) -> Vec<u32> {
        unpack(&self.words)
    }

    /// Makes this the calling thread's mask (`sched_setaffinity(2)`). Allocates nothing, so a
    /// mask built before a `fork` may be applied in the child before it calls `exec`.
    pub(crate) fn apply_to_current_thread(&self) -> io::Result<()> {
        sys::set_thread_affinity(&self.words)
    }
}

/// The CPUs the calling thread may run on (its affinity mask, which the kernel keeps within
/// its cgroup's cpuset), ascending.
pub(crate) fn current_thread_cpus() -> io::Result<Vec<u32>> {
    Mask::of_current_thread().map(|mask| mask.cpus())
}

/// Lets the calling thread run on `cpu` only.
pub(crate) fn pin_current_thread(cpu: u32) -> io::Result<()> {
    Mask::of_cpus(&[cpu])?.apply_to_current_thread()
}

/// The kernel's words for the CPU ids `cpus` (any order, repeats allowed): as many words as the
/// highest id needs. `Err` says why not: no CPU at all, or an id of [`MAX_MASK_BITS`] or more.
pub(crate) fn pack(cpus: &[u32]) -> Result<Vec<Word>, String> {
    let Some(&highest) = cpus.iter().max() else {
        return Err("an empty CPU list: a thread must be allowed at least one CPU".into());
    };
    if highest as usize >= MAX_MASK_BITS {
        return Err(format!(
            "CPU {highest} is beyond the largest CPU mask cotenant builds ({MAX_MASK_BITS} CPUs)"
        ));
    }
    let mut words: Vec<Word> = vec![0; highest as usize / WORD_BITS + 1];
    let one: Word = 1;
    for &cpu in cpus {
        let cpu = cpu as usize;
        words[cpu / WORD_BITS] |= one << (cpu % WORD_BITS);
    }
    Ok(words)
}

/// The CPU ids whose bits are set in `words` (the kernel's layout), ascending.
pub(crate) fn unpack(words: &[Word]) -> Vec<u32> {
    let mut cpus = Vec::new();
    for (index, &word) in words.iter().enumerate().filter(|&(_, &word)| word != 0) {
        for bit in 0..WORD_BITS {
            if (word >> bit) & 1 == 1 {
                cpus.push((index * WORD_BITS + bit) as u32);
            }
        }
    }
    cpus
}

/// The buffer (in CPUs) to try after `sched_getaffinity(2)` failed on one of `bits`: twice as
/// large when the failure says the kernel's mask is larger (`too_small`: `EINVAL`), up to
/// [`MAX_MASK_BITS`]; `None`: give up with the error.
fn grown(bits: usize, too_small: bool) -> Option<usize> {
    (too_small && bits < MAX_MASK_BITS).then(|| (bits * 2).min(MAX_MASK_BITS))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cpus_pack_into_the_kernels_words_and_back_beyond_1024() {
        let cpus = [0, 1, 63, 64, 1023, 1024, 1500, 4095];
        let words = pack(&cpus).unwrap();
        assert_eq!(words.len(), 4096 / WORD_BITS, "as many words as CPU 4095 needs");
        let one: Word = 1;
        assert_ne!(words[1500 / WORD_BITS] & (one << (1500 % WORD_BITS)), 0, "CPU 1500's bit");
        assert_ne!(words[4095 / WORD_BITS] & (one << (4095 % WORD_BITS)), 0, "CPU 4095's bit");
        assert_eq!(words.iter().map(|w| w.count_ones()).sum::<u32>(), cpus.len() as u32);
        assert_eq!(unpack(&words), cpus);
        // Any order, repeats allowed; the list comes back ascending and once each.
        assert_eq!(unpack(&pack(&[4095, 1500, 1500, 3]).unwrap()), [3, 1500, 4095]);
        assert_eq!(pack(&[1500]).unwrap().len(), 1500 / WORD_BITS + 1);
        assert_eq!(unpack(&pack(&[1500]).unwrap()), [1500]);
        assert_eq!(unpack(&[0, 0, 0]), Vec::<u32>::new());
        // The largest id a mask holds, and one too many.
        let last = (MAX_MASK_BITS - 1) as u32;
        assert_eq!(unpack(&pack(&[last]).unwrap()), [last]);
        let e = pack(&[MAX_MASK_BITS as u32]).unwrap_err();
        assert!(e.contains("beyond the largest CPU mask"), "{e}");
        let e = pack(&[]).unwrap_err();
        assert!(e.contains("empty CPU list"), "{e}");
        let e = Mask::of_cpus(&[u32::MAX]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn a_read_grows_its_buffer_only_while_the_kernel_says_it_is_too_small() {
        assert_eq!(grown(1024, true), Some(2048));
        assert_eq!(grown(MAX_MASK_BITS / 2 + 64, true), Some(MAX_MASK_BITS));
        assert_eq!(grown(MAX_MASK_BITS, true), None, "capped");
        assert_eq!(grown(1024, false), None, "another error is the answer");
    }

    #[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
    #[test]
    fn einval_and_only_einval_says_the_buffer_is_too_small() {
        assert!(sys::mask_too_small(&io::Error::from_raw_os_error(libc::EINVAL)));
        assert!(!sys::mask_too_small(&io::Error::from_raw_os_error(libc::EPERM)));
        assert!(!sys::mask_too_small(&io::Error::other("no errno")));
    }

    #[cfg(all(target_os = "linux", not(cotenant_force_fallback)))]
    #[test]
    fn the_calling_thread_is_pinned_and_given_its_mask_back() {
        // Runs on a thread of its own: the test harness's threads keep their masks.
        std::thread::spawn(|| {
            let mask = Mask::of_current_thread().unwrap();
            let cpus = mask.cpus();
            assert!(!cpus.is_empty(), "a running thread is allowed some CPU");
            assert!(cpus.windows(2).all(|pair| pair[0] < pair[1]), "ascending: {cpus:?}");
            let last = *cpus.last().unwrap();
            pin_current_thread(last).unwrap();
            assert_eq!(current_thread_cpus().unwrap(), [last]);
            mask.apply_to_current_thread().unwrap();
            assert_eq!(current_thread_cpus().unwrap(), cpus, "the mask given back");
        })
        .join()
        .unwrap();
    }

    /// The fallback for systems other than Linux: no mask is read or set, and the error says
    /// why rather than passing for an empty mask.
    #[cfg(any(not(target_os = "linux"), cotenant_force_fallback))]
    #[test]
    fn without_linux_no_mask_is_read_or_set_and_the_error_says_why() {
        let e = Mask::of_current_thread().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains("needs Linux"), "{e}");
        let e = current_thread_cpus().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        let e = pin_current_thread(0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains("sched_setaffinity"), "{e}");
    }
}
