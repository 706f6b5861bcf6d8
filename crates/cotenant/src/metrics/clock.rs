//! The task histograms' clock (`histogram.rs`): nanoseconds for durations only, read at least
//! once per task, so its cost is the histograms' cost.
//!
//! On x86-64 Linux whose kernel keeps time with the CPU's time-stamp counter (the `tsc` clock
//! source: the kernel has checked that it is invariant and synchronised across CPUs), a
//! reading is one `rdtsc` scaled to nanoseconds, 11.5 ns against `clock_gettime`'s 30 ns on
//! the VM of RESULTS.md ("Operators"). Elsewhere, or when the counter's rate looks wrong, it
//! is `Instant`. The counter's rate is measured once per process (the median of three
//! measurements over 300 µs sleeps, about 1 ms) at the first pool built with histograms on
//! ([`calibrate`]); its error (a few parts in 10⁴) is far below the factor-of-two buckets the
//! readings go into. Should the kernel later give up the counter as its clock (it can, at run
//! time), the process keeps it: durations stay right wherever the counter is invariant, which
//! the kernel checked when it chose it.
//!
//! Readings are only subtracted from one another; they are not comparable with the pool's
//! other clocks (the busy stretches' `Instant` since the pool's epoch), whose rate may differ
//! slightly.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where readings come from, chosen once per process.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The time-stamp counter, scaled: `ns = ticks × mul / 2³²`.
    #[cfg_attr(
        any(not(all(target_arch = "x86_64", target_os = "linux")), cotenant_force_fallback),
        allow(dead_code)
    )]
    Tsc { mul: u64 },
    /// `Instant`, from a process-wide origin.
    Std { origin: Instant },
}

static SOURCE: OnceLock<Source> = OnceLock::new();

/// Chooses the source (and measures the counter's rate) now rather than at the first reading;
/// called where a pool with histograms on is built, so that no task pays for it.
#[cfg_attr(loom, allow(dead_code))] // histograms are off under loom
pub(crate) fn calibrate() {
    source();
}

/// Nanoseconds since an arbitrary origin (the same for the whole process).
#[inline]
pub(crate) fn now_ns() -> u64 {
    match *source() {
        Source::Tsc { mul } => ticks_to_ns(read_tsc(), mul),
        Source::Std { origin } => u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX),
    }
}

#[inline]
fn source() -> &'static Source {
    SOURCE.get_or_init(choose)
}

/// `ticks × mul / 2³²`, saturating.
fn ticks_to_ns(ticks: u64, mul: u64) -> u64 {
    u64::try_from((u128::from(ticks) * u128::from(mul)) >> 32).unwrap_or(u64::MAX)
}

/// The scale `mul` for a counter that advanced `ticks` in `elapsed`, if its rate is plausible
/// (between 100 MHz and 20 GHz); pure.
#[cfg_attr(
    any(not(all(target_arch = "x86_64", target_os = "linux")), cotenant_force_fallback),
    allow(dead_code)
)]
fn scale(ticks: u64, elapsed: Duration) -> Option<u64> {
    let ns = elapsed.as_nanos();
    if ticks == 0 || ns == 0 {
        return None;
    }
    let hz = u128::from(ticks) * 1_000_000_000 / ns;
    if !(100_000_000..=20_000_000_000).contains(&hz) {
        return None;
    }
    u64::try_from((ns << 32) / u128::from(ticks)).ok()
}

fn choose() -> Source {
    let fallback = Source::Std { origin: Instant::now() };
    #[cfg(all(target_arch = "x86_64", target_os = "linux", not(cotenant_force_fallback)))]
    {
        // The kernel's own choice says the counter can be trusted across CPUs and over time.
        let source =
            std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
        if source.map(|s| s.trim() == "tsc").unwrap_or(false) && tsc_allowed() {
            // Three measurements over a sleep each, the median: one preempted between its
            // readings cannot skew the rate.
            let mut muls: Vec<u64> =
                (0..3).filter_map(|_| measure_rate(Duration::from_micros(300))).collect();
            muls.sort_unstable();
            if muls.len() == 3 {
                return Source::Tsc { mul: muls[1] };
            }
        }
    }
    fallback
}

/// Whether this thread may read the counter: a process can make `rdtsc` fault
/// (`prctl(PR_SET_TSC, PR_TSC_SIGSEGV)`, as some sandboxes do).
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(cotenant_force_fallback)))]
fn tsc_allowed() -> bool {
    const PR_GET_TSC: libc::c_int = 25; // linux/prctl.h
    const PR_TSC_ENABLE: libc::c_int = 1;
    let mut state: libc::c_int = 0;
    // SAFETY: PR_GET_TSC writes one int through the pointer, which points at `state`.
    let got = unsafe { libc::prctl(PR_GET_TSC, &mut state as *mut libc::c_int) };
    got == 0 && state == PR_TSC_ENABLE
}

/// The counter's scale measured over a sleep of `over`: each end an `Instant` bracketed by two
/// counter readings (a bracket wider than 10 µs, a preemption, fails the measurement).
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(cotenant_force_fallback)))]
fn measure_rate(over: Duration) -> Option<u64> {
    let pair = || {
        let before = read_tsc();
        let at = Instant::now();
        let after = read_tsc();
        let bracket = after.wrapping_sub(before);
        // 10 µs at 20 GHz, the fastest counter `scale` accepts.
        (bracket < 200_000).then_some((at, before + bracket / 2))
    };
    let (t0, c0) = pair()?;
    std::thread::sleep(over);
    let (t1, c1) = pair()?;
    scale(c1.wrapping_sub(c0), t1 - t0)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline]
fn read_tsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 CPU and only reads the counter; it is read only
    // after `tsc_allowed` (a process may have made it fault).
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[inline]
fn read_tsc() -> u64 {
    0 // never read: `Source::Tsc` is only chosen on x86-64 Linux
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_scale_turns_ticks_into_nanoseconds() {
        // A 3 GHz counter: 3,000 ticks in 1 µs.
        let mul = scale(3_000_000, Duration::from_millis(1)).unwrap();
        assert_eq!(ticks_to_ns(3_000, mul), 999, "truncated, within a ns");
        assert_eq!(ticks_to_ns(3_000_000_000, mul), 999_999_999);
        // A 1 GHz counter is one tick per ns.
        let mul = scale(1_000_000, Duration::from_millis(1)).unwrap();
        assert_eq!(ticks_to_ns(12_345, mul), 12_345);
        assert_eq!(ticks_to_ns(u64::MAX, u64::MAX), u64::MAX, "saturates");
    }

    #[test]
    fn an_implausible_rate_is_refused() {
        assert_eq!(scale(0, Duration::from_millis(1)), None);
        assert_eq!(scale(1_000, Duration::ZERO), None);
        assert_eq!(scale(10, Duration::from_millis(1)), None, "10 kHz");
        assert_eq!(scale(30_000_000_000, Duration::from_millis(1)), None, "30 THz");
    }

    #[test]
    fn readings_never_go_back_on_one_thread() {
        calibrate();
        let mut last = now_ns();
        for _ in 0..10_000 {
            let now = now_ns();
            assert!(now >= last, "{now} after {last}");
            last = now;
        }
    }
}
