// This file owns the pure decision types: Sample (one period, as measured), PolicyState
// (what a policy remembers), Decision and Reason, and Policy, which dispatches to the fixed,
// share and adaptive rules. No clock, no I/O, no goroutine: the controller and the recorded
// vectors of testdata/policy/ call the same functions. Port of
// crates/cotenant/src/policy/mod.rs.
//
// Invariant: every decision is in [1, Sample.Threads], and a dynamic policy never exceeds
// [Sample.Cap] (what the quota pays for).

package cotenant

import (
	"fmt"
	"math"
	"strconv"
)

// Sample is one period as the controller measured it. Times are nanoseconds of that period;
// CPU amounts derived from them are in CPUs (1.0 = one CPU busy for the whole period). Field
// names in JSON are those of testdata/policy/ and of the Rust controller's recordings.
type Sample struct {
	// ElapsedNS is the wall-clock length of the period.
	ElapsedNS uint64 `json:"elapsed_ns"`
	// Threads is the most workers (for Go: the most GOMAXPROCS the controller will set).
	Threads uint32 `json:"threads"`
	// CPUs is the CPUs this process may run on (online ∩ affinity ∩ cpuset).
	CPUs uint32 `json:"cpus"`
	// QuotaCPUs is the CPU limit set by quotas; nil without a quota.
	QuotaCPUs *float64 `json:"quota_cpus"`
	// SelfNS is the CPU time of this whole process.
	SelfNS uint64 `json:"self_ns"`
	// BusyNS is the CPU time of every task on the CPUs we may use.
	BusyNS uint64 `json:"busy_ns"`
	// IdleNS is the idle time of the CPUs we may use.
	IdleNS uint64 `json:"idle_ns"`
	// ProcsRunning is the runnable tasks on the host at the end of the period, if known.
	ProcsRunning *uint32 `json:"procs_running"`
	// ThrottledNS is the time our cgroup was throttled by its quota (cpu.stat).
	ThrottledNS uint64 `json:"throttled_ns"`
	// WorkersBusyNS is the time our workers were busy, summed over workers.
	WorkersBusyNS uint64 `json:"workers_busy_ns"`
	// WorkersCPUNS is the CPU time our workers got; nil when unknown.
	WorkersCPUNS *uint64 `json:"workers_cpu_ns"`
	// WorkersRunqWaitNS is the time our workers waited on a run queue (schedstat); nil when
	// the kernel does not report it.
	WorkersRunqWaitNS *uint64 `json:"workers_runq_wait_ns"`
	// Queued is the work waiting at the end of the period (for Go: runnable goroutines).
	Queued uint32 `json:"queued"`
}

func (s *Sample) perPeriod(ns uint64) float64 {
	if s.ElapsedNS == 0 {
		return 0
	}
	return float64(ns) / float64(s.ElapsedNS)
}

// Cap is the most workers the quota and the allowed CPUs pay for: min(Threads, CPUs,
// floor(quota)), at least 1. Floor, because a worker the quota cannot pay for in full is
// throttled at the end of every period (as the papers on CPU overcommitment by OS threads
// and on CFS bandwidth control both measured).
func (s *Sample) Cap() uint32 {
	c := max(s.Threads, 1)
	if s.CPUs > 0 {
		c = min(c, s.CPUs)
	}
	if s.QuotaCPUs != nil {
		// A tiny epsilon so that 2.0 stored as 1.9999999 still pays for 2 workers.
		c = min(c, max(f64ToU32(math.Floor(*s.QuotaCPUs+1e-9)), 1))
	}
	return max(c, 1)
}

// OwnCPUs is the CPUs this process used.
func (s *Sample) OwnCPUs() float64 { return s.perPeriod(s.SelfNS) }

// NeighbourCPUs is the CPUs everyone else used on the CPUs we may use.
func (s *Sample) NeighbourCPUs() float64 { return s.perPeriod(satSub(s.BusyNS, s.SelfNS)) }

// IdleCPUs is the CPUs left idle among those we may use.
func (s *Sample) IdleCPUs() float64 { return s.perPeriod(s.IdleNS) }

// WaitingWorkers is our workers that were, on average, runnable but not running: run-queue
// wait from schedstat when known, otherwise busy time minus CPU time.
func (s *Sample) WaitingWorkers() float64 {
	switch {
	case s.WorkersRunqWaitNS != nil:
		return s.perPeriod(*s.WorkersRunqWaitNS)
	case s.WorkersCPUNS != nil:
		return s.perPeriod(satSub(s.WorkersBusyNS, *s.WorkersCPUNS))
	}
	return 0
}

// BusyWorkers is the workers busy, on average over the period.
func (s *Sample) BusyWorkers() float64 { return s.perPeriod(s.WorkersBusyNS) }

// ThrottledFraction is the share of the period our cgroup was throttled.
func (s *Sample) ThrottledFraction() float64 { return s.perPeriod(s.ThrottledNS) }

// NeighbourMemoryMax is the most periods of neighbour use a [PolicyState] remembers.
const NeighbourMemoryMax = 16

// IdleSmoothing is the weight of the newest period in PolicyState.IdleAverage (about 8
// periods); crates/cotenant/src/policy/borrow.rs.
const IdleSmoothing = 0.125

// PolicyState is what a policy remembers between periods.
type PolicyState struct {
	// Target is the target in force during the period being decided.
	Target uint32
	// Hold is the periods to keep the target unchanged (the period after a change mixes old
	// and new).
	Hold uint32
	// SinceChange is the periods since the target last changed.
	SinceChange uint32
	// ProbeWait is the periods to wait between fairness probes (doubles after a failed one).
	ProbeWait uint32
	// Probing says whether the last change was a probe not yet confirmed.
	Probing bool
	// RecentNeighbours is the neighbours' CPU use in the last periods, newest at
	// (Periods-1) % NeighbourMemoryMax.
	RecentNeighbours [NeighbourMemoryMax]float64
	// Periods is the periods decided so far (indexes RecentNeighbours).
	Periods uint64
	// IdleAverage is the idle CPUs among those we may use, smoothed over about 8 periods.
	// The Rust pool gates borrowing on it; the Go controller reports it in Stats.
	IdleAverage float64
}

// NewPolicyState is the state of a pool that starts with target workers allowed.
func NewPolicyState(target uint32) PolicyState { return PolicyState{Target: max(target, 1)} }

func (st *PolicyState) record(target uint32) {
	if target == st.Target {
		st.SinceChange = satAdd32(st.SinceChange, 1)
	} else {
		st.SinceChange = 0
	}
	st.Target = target
}

// Reason is why a decision was made.
type Reason int

const (
	// ReasonFixed is Fixed's constant.
	ReasonFixed Reason = iota
	// ReasonShare is Share's formula.
	ReasonShare
	// ReasonQuota is lowered to what the quota pays for.
	ReasonQuota
	// ReasonContention is our workers waited for a CPU (or the cgroup was throttled): shrink.
	ReasonContention
	// ReasonIdle is idle CPUs and queued work: grow.
	ReasonIdle
	// ReasonProbe is one more worker to test whether our fair share is larger.
	ReasonProbe
	// ReasonSteady is nothing calls for a change.
	ReasonSteady
	// ReasonHold is holding after a change (the period straddled it).
	ReasonHold
)

// String is the short lower-case name used by testdata/policy/: "fixed", "share", "quota",
// "contention", "idle", "probe", "steady" or "hold".
func (r Reason) String() string {
	names := [...]string{"fixed", "share", "quota", "contention", "idle", "probe", "steady", "hold"}
	if r < 0 || int(r) >= len(names) {
		return "Reason(" + strconv.Itoa(int(r)) + ")"
	}
	return names[r]
}

// Decision is a policy's answer for one period.
type Decision struct {
	// Target is the workers allowed to run in the next period.
	Target uint32
	// Reason says why.
	Reason Reason
}

type policyKind int

const (
	kindAdaptive policyKind = iota // the zero Policy is Adaptive()
	kindShare
	kindFixed
)

// Policy decides how many workers may run. The zero value is [Adaptive].
type Policy struct {
	kind       policyKind
	fixed      uint32
	overcommit float64
	config     *AdaptiveConfig // nil: DefaultAdaptiveConfig()
}

// Adaptive is cotenant's controller (the default): shrinks when neighbours make our workers
// wait for a CPU, grows into idle CPUs while work is queued, never plans more workers than
// the quota pays for, and probes for its fair share so that it cannot lock in
// (docs/policy.md).
func Adaptive() Policy { return Policy{} }

// AdaptiveWith is [Adaptive] with tuned constants (for experiments; the defaults are measured).
func AdaptiveWith(c AdaptiveConfig) Policy { return Policy{config: &c} }

// Share is the formula of the friendly thread pool of the paper on CPU overcommitment by OS
// threads, target = ceil(overcommit · Δcpu_self / Δcpu_busy · CPUs), capped by the quota. It locks in (docs/policy.md); kept as the reference.
func Share(overcommit float64) Policy { return Policy{kind: kindShare, overcommit: overcommit} }

// Fixed is a constant target of n workers.
func Fixed(n int) Policy {
	return Policy{kind: kindFixed, fixed: uint32(min(max(n, 0), math.MaxUint32))}
}

// String is "adaptive", "share(1.5)" or "fixed(2)".
func (p Policy) String() string {
	switch p.kind {
	case kindShare:
		return "share(" + strconv.FormatFloat(p.overcommit, 'g', -1, 64) + ")"
	case kindFixed:
		return fmt.Sprintf("fixed(%d)", p.fixed)
	}
	return "adaptive"
}

func (p Policy) adaptiveConfig() AdaptiveConfig {
	if p.config == nil {
		return DefaultAdaptiveConfig()
	}
	return *p.config
}

// Validate checks the parameters; the error says what is wrong.
func (p Policy) Validate() error {
	switch p.kind {
	case kindFixed:
		if p.fixed == 0 {
			return fmt.Errorf("Fixed(n) needs n >= 1, got 0")
		}
	case kindShare:
		if math.IsNaN(p.overcommit) || math.IsInf(p.overcommit, 0) || p.overcommit <= 0 {
			return fmt.Errorf("Share(overcommit) needs a finite overcommit > 0, got %v", p.overcommit)
		}
	default:
		return p.adaptiveConfig().Validate()
	}
	return nil
}

// Decide is the next target after a period described by s; it updates st.
func (p Policy) Decide(s *Sample, st *PolicyState) Decision {
	var d Decision
	switch p.kind {
	case kindFixed:
		d = Decision{Target: clamp32(p.fixed, 1, max(s.Threads, 1)), Reason: ReasonFixed}
	case kindShare:
		d = decideShare(p.overcommit, s)
	default:
		c := p.adaptiveConfig()
		d = decideAdaptive(&c, s, st)
	}
	st.IdleAverage += (s.IdleCPUs() - st.IdleAverage) * IdleSmoothing
	st.record(d.Target)
	return d
}

// FallbackTarget is the target when there is no sample (sampling failed): every worker the
// quota paid for at the last sample (lastCap; 0 when there was none), or every thread.
func FallbackTarget(threads, lastCap uint32) uint32 {
	t := threads
	if lastCap > 0 {
		t = lastCap
	}
	return clamp32(t, 1, max(threads, 1))
}
