// Unit tests of the policy: the rules one at a time and the invariants, ported from
// crates/cotenant/tests/policy.rs where the recorded vectors do not already pin them.

package cotenant

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

const period = 10_000_000

// alone is a saturated pool of threads on cpus, alone on the host.
func alone(threads, cpus uint32) Sample {
	return Sample{ElapsedNS: period, Threads: threads, CPUs: cpus, SelfNS: uint64(cpus) * period,
		BusyNS: uint64(cpus) * period, WorkersBusyNS: uint64(cpus) * period, WorkersCPUNS: ptr(uint64(cpus) * period),
		WorkersRunqWaitNS: ptr(uint64(0)), Queued: 5}
}

func TestCap(t *testing.T) {
	for _, c := range []struct {
		threads, cpus uint32
		quota         *float64
		want          uint32
	}{
		{8, 4, nil, 4}, {2, 4, nil, 2}, {8, 4, ptr(1.5), 1}, {8, 4, ptr(0.5), 1}, {8, 4, ptr(1.9999999999), 2},
		{0, 0, nil, 1}, {8, 0, ptr(3.0), 3}, {8, 4, ptr(1e300), 4},
	} {
		s := Sample{Threads: c.threads, CPUs: c.cpus, QuotaCPUs: c.quota}
		if got := s.Cap(); got != c.want {
			t.Errorf("threads %d cpus %d quota %v: cap %d, want %d", c.threads, c.cpus, show(c.quota), got, c.want)
		}
	}
}

func TestAQuotaBelowTheTargetLowersItAtOnce(t *testing.T) {
	st := NewPolicyState(4)
	s := alone(4, 4)
	s.QuotaCPUs = ptr(1.5)
	if d := Adaptive().Decide(&s, &st); d != (Decision{1, ReasonQuota}) {
		t.Fatalf("got %+v", d)
	}
	if d := Adaptive().Decide(&s, &st); d.Reason != ReasonHold {
		t.Fatalf("the period after a change is held: %+v", d)
	}
}

func TestWaitingWorkersShrinkThePool(t *testing.T) {
	st := NewPolicyState(2)
	s := alone(2, 2)
	s.WorkersRunqWaitNS = ptr(uint64(period)) // one worker waited the whole period
	if d := Adaptive().Decide(&s, &st); d != (Decision{1, ReasonContention}) {
		t.Fatalf("got %+v", d)
	}
}

func TestThrottlingShrinksThePool(t *testing.T) {
	st := NewPolicyState(2)
	s := alone(2, 2)
	s.ThrottledNS = period / 10
	if d := Adaptive().Decide(&s, &st); d.Reason != ReasonContention || d.Target != 1 {
		t.Fatalf("got %+v", d)
	}
}

func TestIdleCPUsAndQueuedWorkGrowThePool(t *testing.T) {
	st := NewPolicyState(1)
	s := alone(4, 4)
	s.SelfNS, s.BusyNS, s.IdleNS, s.WorkersBusyNS = period, period, 3*period, period
	if d := Adaptive().Decide(&s, &st); d != (Decision{4, ReasonIdle}) {
		t.Fatalf("alone: grow into every idle CPU, got %+v", d)
	}
}

func TestWaitingWithoutSchedstatIsBusyMinusCPU(t *testing.T) {
	s := Sample{ElapsedNS: period, WorkersBusyNS: 2 * period, WorkersCPUNS: ptr(uint64(period))}
	if w := s.WaitingWorkers(); w != 1 {
		t.Fatalf("waiting %v", w)
	}
	s.WorkersRunqWaitNS = ptr(uint64(period / 2))
	if w := s.WaitingWorkers(); w != 0.5 {
		t.Fatalf("schedstat wins: %v", w)
	}
}

// Every decision is in [1, threads], and a dynamic one never exceeds the cap, whatever the
// samples (the Rust proptest, with a fixed seed so that the test is deterministic).
func TestDecisionsStayWithinTheirBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	u := func(n uint64) uint64 { return r.Uint64N(n) }
	for _, p := range []Policy{Adaptive(), Share(1), Share(0.3), Fixed(3)} {
		st := NewPolicyState(uint32(u(20)))
		for range 5000 {
			s := Sample{ElapsedNS: u(3 * period), Threads: uint32(u(17)), CPUs: uint32(u(17)), SelfNS: u(20 * period),
				BusyNS: u(20 * period), IdleNS: u(20 * period), ThrottledNS: u(period), WorkersBusyNS: u(20 * period),
				Queued: uint32(u(3))}
			if u(2) == 0 {
				s.QuotaCPUs = ptr(r.Float64() * 8)
			}
			if u(2) == 0 {
				s.WorkersRunqWaitNS = ptr(u(4 * period))
			}
			if u(2) == 0 {
				s.WorkersCPUNS = ptr(u(20 * period))
			}
			d := p.Decide(&s, &st)
			if d.Target < 1 || d.Target > max(s.Threads, 1) {
				t.Fatalf("%v: target %d outside [1, %d] for %+v", p, d.Target, s.Threads, s)
			}
			if p.kind != kindFixed && d.Target > s.Cap() {
				t.Fatalf("%v: target %d above the cap %d", p, d.Target, s.Cap())
			}
		}
	}
}

func TestPoliciesValidateAndPrint(t *testing.T) {
	if err := Share(-1).Validate(); err == nil || !strings.Contains(err.Error(), "finite overcommit > 0") {
		t.Error(err)
	}
	if err := Fixed(0).Validate(); err == nil {
		t.Error("Fixed(0) validated")
	}
	c := DefaultAdaptiveConfig()
	c.NeighbourMemory = 17
	if err := AdaptiveWith(c).Validate(); err == nil || !strings.Contains(err.Error(), "NeighbourMemory") {
		t.Error(err)
	}
	if err := (Policy{}).Validate(); err != nil {
		t.Error(err)
	}
	for p, want := range map[string]string{Share(1.5).String(): "share(1.5)", Fixed(2).String(): "fixed(2)", Policy{}.String(): "adaptive"} {
		if p != want {
			t.Errorf("%q, want %q", p, want)
		}
	}
	if FallbackTarget(4, 0) != 4 || FallbackTarget(4, 2) != 2 || FallbackTarget(0, 0) != 1 {
		t.Error("FallbackTarget")
	}
}
