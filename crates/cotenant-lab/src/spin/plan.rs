//! The plan of `lab spin`, pure: the shape of the runs (R CPUs, S sessions, the boosted ones)
//! from the allowed CPUs and the command line, the three scenarios, and the spec of each run.

use std::time::Duration;

use serde::Serialize;

use super::model::{Boost, RunSpec, Strategy};

/// The client's round trip, part of every transaction's end-to-end latency as in the seed
/// (YCSB clients on another machine): the session sleeps it before each transaction (the timer
/// slack makes it about 50 µs longer). It sets how busy the sessions keep the CPU they are
/// restricted to, and that decides what the experiment can show (`--round-trip-us` sweeps it;
/// RESULTS.md "spin", "Where the seed's shape holds"): with 120 µs, 4 sessions want 1.25 CPUs,
/// so the one restricted CPU is saturated (0.98 used) and queueing alone raises every
/// non-spinning strategy's P99.9 by 40-90 %, which the seed's back-off run (+7 %) suggests its
/// restricted cores did not do; with 300 µs and more (0.7 CPU and less) a session is almost
/// never preempted inside its allocation window (most likely because the scheduler lets a
/// task that sleeps every 50 µs finish its slice; not measured), so spinning rarely stalls.
/// 200 µs keeps the restricted CPU about 85 % busy: contended, as the seed requires ("the
/// number of user connections must exceed the number of physical cores"), but not
/// overloaded. It was chosen after seeing quick runs' verdicts, which RESULTS.md says.
const ROUND_TRIP: Duration = Duration::from_micros(200);

/// The restricted CPU count and the sessions for `cpus` allowed CPUs: R = max(1, cpus / 4),
/// S = 4 R (the seed's 40 sessions on 10 of 112 cores); boosted = max(1, round(S / 10)).
pub fn shape(cpus: usize) -> (usize, usize, usize) {
    let restricted = (cpus / 4).max(1);
    let sessions = 4 * restricted;
    (restricted, sessions, boosted_for(sessions))
}

/// The boosted sessions among `sessions`: max(1, round(S / 10)).
pub(super) fn boosted_for(sessions: usize) -> usize {
    ((sessions as f64 / 10.0).round() as usize).max(1)
}

/// The three scenarios of the timeline table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// The sessions may use every allowed CPU.
    Unrestricted,
    /// The sessions are pinned to R CPUs.
    Restricted,
    /// Restricted, and some sessions at nice -20 in the middle third of the run.
    Inverted,
}

impl Scenario {
    pub(super) const ALL: [Scenario; 3] = [Scenario::Unrestricted, Scenario::Restricted, Scenario::Inverted];

    pub(super) fn name(self) -> &'static str {
        match self {
            Scenario::Unrestricted => "unrestricted",
            Scenario::Restricted => "restricted",
            Scenario::Inverted => "restricted + nice -20",
        }
    }
}

/// What `cotenant lab spin` runs: the shape, the times and the repeats, from the allowed CPUs
/// and the command line.
pub(super) struct Plan {
    /// The CPUs this process may run on: the unrestricted scenario's, and the uncontended run's.
    pub(super) allowed: Vec<usize>,
    /// R: the restricted CPU count.
    pub(super) restricted: usize,
    /// S: the sessions of the three scenarios.
    pub(super) sessions: usize,
    /// The sessions at nice -20 in the inverted scenario.
    pub(super) boosted: usize,
    /// The first R allowed CPUs.
    pub(super) restricted_cpus: Vec<usize>,
    pub(super) repeats: usize,
    /// How long each scenario run lasts.
    pub(super) scenario_time: Duration,
    /// How long each run of the sessions sweep and of the uncontended part lasts.
    pub(super) sweep_time: Duration,
    /// The inverted scenario's boost: the middle third of the run.
    pub(super) window: Boost,
    /// Sessions per restricted CPU in the sessions sweep.
    pub(super) per_cpu: &'static [usize],
    pub(super) round_trip: Duration,
}

impl Plan {
    /// The plan for `allowed` CPUs and the command line's `--quick`, `--repeats`, `--seconds`
    /// and `--round-trip-us`.
    pub(super) fn new(allowed: Vec<usize>, args: &crate::args::LabArgs) -> Plan {
        let (restricted, sessions, boosted) = shape(allowed.len());
        let restricted_cpus: Vec<usize> = allowed.iter().copied().take(restricted).collect();
        let repeats = args.repeats.unwrap_or(if args.quick { 1 } else { 3 }) as usize;
        let scenario_time =
            Duration::from_secs_f64(args.seconds.map_or(if args.quick { 1.5 } else { 9.0 }, |s| s as f64));
        let sweep_time = if args.quick { Duration::from_millis(500) } else { scenario_time / 3 };
        let window = Boost::Window { start: scenario_time / 3, end: scenario_time * 2 / 3 };
        let per_cpu: &'static [usize] = if args.quick { &[4] } else { &[2, 4, 8] };
        let round_trip = args.round_trip_us.map_or(ROUND_TRIP, Duration::from_micros);
        Plan {
            allowed,
            restricted,
            sessions,
            boosted,
            restricted_cpus,
            repeats,
            scenario_time,
            sweep_time,
            window,
            per_cpu,
            round_trip,
        }
    }

    /// Part 1: `scenario` with `strategy`.
    pub(super) fn scenario_spec(&self, scenario: Scenario, strategy: Strategy) -> RunSpec {
        RunSpec {
            strategy,
            sessions: self.sessions,
            cpus: if scenario == Scenario::Unrestricted {
                self.allowed.clone()
            } else {
                self.restricted_cpus.clone()
            },
            boosted: if scenario == Scenario::Inverted { self.boosted } else { 0 },
            boost: if scenario == Scenario::Inverted { self.window } else { Boost::Never },
            duration: self.scenario_time,
            round_trip: self.round_trip,
        }
    }

    /// Part 2: `per_cpu` sessions per restricted CPU, boosted throughout.
    pub(super) fn sweep_spec(&self, per_cpu: usize, strategy: Strategy) -> RunSpec {
        let s = per_cpu * self.restricted;
        RunSpec {
            strategy,
            sessions: s,
            cpus: self.restricted_cpus.clone(),
            boosted: boosted_for(s),
            boost: Boost::Always,
            duration: self.sweep_time,
            round_trip: self.round_trip,
        }
    }

    /// Part 3: uncontended, one session per allowed CPU, no round trip.
    pub(super) fn uncontended_spec(&self, strategy: Strategy) -> RunSpec {
        RunSpec {
            strategy,
            sessions: self.allowed.len(),
            cpus: self.allowed.clone(),
            boosted: 0,
            boost: Boost::Never,
            duration: self.sweep_time,
            round_trip: Duration::ZERO,
        }
    }
}
