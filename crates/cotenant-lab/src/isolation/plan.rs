//! The plan of `lab isolation`, pure: the scenarios (where B runs, how it is scheduled, the
//! seed's figures), which of them run on this host, the pinned CPU split, the doctor's sample.

use std::time::Duration;

use serde::Serialize;

/// How long `doctor --pid <A>` samples during a run (at most half the run).
const DOCTOR_SAMPLE: Duration = Duration::from_secs(2);

/// One isolation option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// A alone.
    Baseline,
    /// A alone, its pool's workers pinned.
    BaselinePinned,
    /// A and B, each in its own cgroup, equal weights, no hints (two containers side by side,
    /// as in the noisy-neighbour course).
    Unisolated,
    /// B at a tenth of A's weight (`cpu.shares` 102 vs 1024; `cpu.weight` 10 vs 100).
    Weighted,
    /// Disjoint cpusets, half the CPUs each.
    Pinned,
    /// B's threads at nice 19.
    Nice,
    /// B's threads at `SCHED_IDLE`.
    Idle,
    /// B's threads at normal priority, B's cgroup marked idle (`cpu.idle` = 1, Linux 5.15+).
    CgroupIdle,
    /// B's threads at normal priority, B's cgroup made idle by `cotenant cgroup set --idle`
    /// (the remedy `cotenant doctor` prints), judged run by run.
    CgroupSetIdle,
    /// B's work on a cotenant adaptive pool.
    Cooperative,
    /// B's work on a cotenant background pool (`SCHED_IDLE` workers, fed from `SCHED_IDLE`).
    Background,
    /// The background pool in a cgroup marked idle: the deployment `docs/background.md`
    /// recommends when the batch job has a cgroup of its own.
    BackgroundCgroupIdle,
    /// A and B in one cgroup, no hints (two processes of one container or service).
    UnisolatedOneCgroup,
    /// A and B in one cgroup, B's threads at `SCHED_IDLE`.
    IdleOneCgroup,
    /// A and B in one cgroup, B on a cotenant background pool.
    BackgroundOneCgroup,
}

/// Every scenario, in table order.
pub const SCENARIOS: [Scenario; 15] = [
    Scenario::Baseline,
    Scenario::BaselinePinned,
    Scenario::Unisolated,
    Scenario::Weighted,
    Scenario::Pinned,
    Scenario::Nice,
    Scenario::Idle,
    Scenario::CgroupIdle,
    Scenario::CgroupSetIdle,
    Scenario::Cooperative,
    Scenario::Background,
    Scenario::BackgroundCgroupIdle,
    Scenario::UnisolatedOneCgroup,
    Scenario::IdleOneCgroup,
    Scenario::BackgroundOneCgroup,
];

/// Where B runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BCgroup {
    /// In its own cgroup, a sibling of A's.
    Own,
    /// In its own cgroup, marked idle (`cpu.idle` = 1).
    OwnIdle,
    /// In its own cgroup, made idle by `cotenant cgroup set --idle` (`cgroup_set::set`).
    OwnIdleByCgroupSet,
    /// In A's cgroup.
    SharedWithA,
}

impl Scenario {
    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Baseline => "baseline",
            Scenario::BaselinePinned => "baseline-pinned",
            Scenario::Unisolated => "unisolated",
            Scenario::Weighted => "weighted",
            Scenario::Pinned => "pinned",
            Scenario::Nice => "nice",
            Scenario::Idle => "idle",
            Scenario::CgroupIdle => "cgroup-idle",
            Scenario::CgroupSetIdle => "cgroup-set-idle",
            Scenario::Cooperative => "cooperative",
            Scenario::Background => "background",
            Scenario::BackgroundCgroupIdle => "background-cgroup-idle",
            Scenario::UnisolatedOneCgroup => "unisolated-one-cgroup",
            Scenario::IdleOneCgroup => "idle-one-cgroup",
            Scenario::BackgroundOneCgroup => "background-one-cgroup",
        }
    }

    /// B's command-line options, or `None` when A runs alone.
    pub fn batch_args(self) -> Option<&'static [&'static str]> {
        match self {
            Scenario::Baseline | Scenario::BaselinePinned => None,
            Scenario::Unisolated
            | Scenario::Weighted
            | Scenario::Pinned
            | Scenario::CgroupIdle
            | Scenario::CgroupSetIdle
            | Scenario::UnisolatedOneCgroup => Some(&["--mode", "plain"]),
            Scenario::Nice => Some(&["--mode", "plain", "--priority", "nice"]),
            Scenario::Idle | Scenario::IdleOneCgroup => Some(&["--mode", "plain", "--priority", "idle"]),
            Scenario::Cooperative => Some(&["--mode", "adaptive"]),
            Scenario::Background | Scenario::BackgroundCgroupIdle | Scenario::BackgroundOneCgroup => {
                Some(&["--mode", "background"])
            }
        }
    }

    /// Where B runs.
    pub fn b_cgroup(self) -> BCgroup {
        match self {
            Scenario::CgroupIdle | Scenario::BackgroundCgroupIdle => BCgroup::OwnIdle,
            Scenario::CgroupSetIdle => BCgroup::OwnIdleByCgroupSet,
            Scenario::UnisolatedOneCgroup | Scenario::IdleOneCgroup | Scenario::BackgroundOneCgroup => {
                BCgroup::SharedWithA
            }
            _ => BCgroup::Own,
        }
    }

    /// Whether B's cgroup is made idle, which needs `cpu.idle` (Linux 5.15+).
    pub fn needs_cpu_idle(self) -> bool {
        matches!(self.b_cgroup(), BCgroup::OwnIdle | BCgroup::OwnIdleByCgroupSet)
    }

    /// Whether the scenario is judged run by run ([`super::run_verdict`]): A's p99 within 1.2x
    /// the baseline's and B at 90 % of its unisolated throughput in at least 4 runs of 5.
    pub fn judged_per_run(self) -> bool {
        self == Scenario::CgroupSetIdle
    }

    /// Whether this is one of the background-pool scenarios the target applies to.
    pub fn is_background_pool(self) -> bool {
        matches!(self, Scenario::Background | Scenario::BackgroundCgroupIdle | Scenario::BackgroundOneCgroup)
    }

    /// The seed's 22-CPU figures (p50, p95, p99 ms) where it ran this scenario.
    pub fn seed_figures(self) -> Option<[f64; 3]> {
        match self {
            Scenario::Baseline => Some([0.40, 1.50, 2.30]),
            Scenario::Unisolated => Some([1.80, 10.30, 24.70]),
            Scenario::Weighted => Some([1.10, 3.90, 9.00]),
            Scenario::Pinned => Some([0.50, 1.40, 1.80]),
            _ => None,
        }
    }
}

/// The CPU lists of the pinned scenario: A the lower half, B the upper (at least one each).
pub fn split_cpus(cpus: u32) -> (String, String) {
    let cpus = cpus.max(2);
    let half = cpus / 2;
    let list = |lo: u32, hi: u32| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") };
    (list(0, half - 1), list(half, cpus - 1))
}

/// How long the doctor samples during a run of `window`: 2 s, or half a shorter window.
pub fn doctor_sample(window: Duration) -> Duration {
    DOCTOR_SAMPLE.min(window / 2)
}

/// The scenarios to run: the requested ones (all when none), always with baseline and
/// unisolated (the ratios' denominators), in table order; pinned only with a cpuset controller,
/// the idle-cgroup scenarios only where cgroups have `cpu.idle`.
pub fn chosen_scenarios(requested: &[Scenario], has_cpuset: bool, has_cpu_idle: bool) -> Vec<Scenario> {
    SCENARIOS
        .iter()
        .copied()
        .filter(|s| {
            requested.is_empty()
                || requested.contains(s)
                || matches!(s, Scenario::Baseline | Scenario::Unisolated)
        })
        .filter(|s| *s != Scenario::Pinned || has_cpuset)
        .filter(|s| !s.needs_cpu_idle() || has_cpu_idle)
        .collect()
}
