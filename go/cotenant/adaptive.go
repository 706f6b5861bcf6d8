// This file owns cotenant's controller, Adaptive: its constants and its decision rule. Port
// of crates/cotenant/src/policy/adaptive.rs; the mechanism, the alternatives tried and their
// numbers are in docs/policy.md. Each period, in order:
//
//  1. Quota: never more than Sample.Cap workers (what the quota and CPUs pay for).
//  2. Hold: the period after a change straddles it; decide nothing from it.
//  3. Contention: our workers waited for a CPU (at least WaitThreads of them on average and
//     WaitFraction of the target), or the cgroup was throttled: shrink by the workers that
//     waited, so a bigger pool gives back more (Chiu and Jain's AIMD argument).
//  4. Idle: CPUs idle and work queued (or every allowed worker busy): grow into them, all of
//     them when nobody else runs, half when neighbours run, never past the CPUs the
//     neighbours leave us. "Neighbours" is their largest use over the last NeighbourMemory
//     periods, so a bursty neighbour's gaps are not mistaken for room.
//  5. Probe: no idle CPU, our workers busy, and the neighbours use at least a CPU more than
//     we do: every ProbeWait periods try one more worker; undo it (and wait twice as long) if
//     our workers still wait three periods later. This breaks the share formula's lock-in.

package cotenant

import (
	"fmt"
	"math"
)

// AdaptiveConfig is the adaptive controller's constants (defaults chosen with the simulator
// and measured on a real host; docs/policy.md has the numbers).
type AdaptiveConfig struct {
	// WaitThreads: shrink when at least this many of our workers waited, on average, for a CPU...
	WaitThreads float64 `json:"wait_threads"`
	// WaitFraction: ...and that is at least this fraction of the target.
	WaitFraction float64 `json:"wait_fraction"`
	// ThrottledFraction: shrink when the cgroup was throttled this fraction of the period.
	ThrottledFraction float64 `json:"throttled_fraction"`
	// MaxDecrease is the largest share of the target given back in one period.
	MaxDecrease float64 `json:"max_decrease"`
	// IdleCPUs: grow only when at least this many CPUs were idle.
	IdleCPUs float64 `json:"idle_cpus"`
	// NeighbourCPUs: neighbours using less than this many CPUs count as absent.
	NeighbourCPUs float64 `json:"neighbour_cpus"`
	// NeighbourMemory is over how many periods the neighbours' use is remembered (1 to
	// NeighbourMemoryMax): their largest use in that window counts.
	NeighbourMemory uint32 `json:"neighbour_memory"`
	// SaturatedFraction: a busy-worker average at or above this fraction of the target
	// counts as saturated.
	SaturatedFraction float64 `json:"saturated_fraction"`
	// ProbeWaitMin is the first wait between probes, in periods; it doubles after each
	// failed probe...
	ProbeWaitMin uint32 `json:"probe_wait_min"`
	// ProbeWaitMax ...up to this many periods.
	ProbeWaitMax uint32 `json:"probe_wait_max"`
	// Borrow is the Rust pool's per-task borrowing of idle CPUs (policy/borrow.rs), off by
	// default there. GOMAXPROCS has no per-task hook, so the Go controller does not borrow;
	// kept for a faithful config.
	Borrow bool `json:"borrow"`
	// NeighboursShareTokens: the neighbours that matter share this pool's host CPU tokens (the
	// Rust pool's Builder::host_tokens), so their CPU use neither limits growth into idle CPUs
	// nor starts fairness probes; only contention shrinks the pool. The Go controller has no
	// tokens; kept so that the shared vectors replay the same decisions on both ports.
	NeighboursShareTokens bool `json:"neighbours_share_tokens"`
}

// DefaultAdaptiveConfig is the measured defaults of Adaptive.
func DefaultAdaptiveConfig() AdaptiveConfig {
	return AdaptiveConfig{
		WaitThreads:           0.5,
		WaitFraction:          0,
		ThrottledFraction:     0.05,
		MaxDecrease:           0.5,
		IdleCPUs:              0.5,
		NeighbourCPUs:         0.5,
		NeighbourMemory:       6,
		SaturatedFraction:     0.9,
		ProbeWaitMin:          4,
		ProbeWaitMax:          300,
		Borrow:                false,
		NeighboursShareTokens: false,
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate checks the constants; the error names the field and the value.
func (c AdaptiveConfig) Validate() error {
	for _, f := range []struct {
		name  string
		value float64
	}{{"WaitThreads", c.WaitThreads}, {"IdleCPUs", c.IdleCPUs}, {"SaturatedFraction", c.SaturatedFraction}} {
		if !finite(f.value) || f.value <= 0 {
			return fmt.Errorf("AdaptiveConfig.%s must be finite and > 0, got %v", f.name, f.value)
		}
	}
	for _, f := range []struct {
		name  string
		value float64
	}{{"WaitFraction", c.WaitFraction}, {"ThrottledFraction", c.ThrottledFraction}, {"NeighbourCPUs", c.NeighbourCPUs}} {
		if !finite(f.value) || f.value < 0 {
			return fmt.Errorf("AdaptiveConfig.%s must be finite and >= 0, got %v", f.name, f.value)
		}
	}
	if c.NeighbourMemory == 0 || c.NeighbourMemory > NeighbourMemoryMax {
		return fmt.Errorf("AdaptiveConfig.NeighbourMemory must be in 1..=%d, got %d", NeighbourMemoryMax, c.NeighbourMemory)
	}
	if !(c.MaxDecrease > 0 && c.MaxDecrease < 1) {
		return fmt.Errorf("AdaptiveConfig.MaxDecrease must be in (0, 1), got %v", c.MaxDecrease)
	}
	if c.ProbeWaitMin == 0 || c.ProbeWaitMax < c.ProbeWaitMin {
		return fmt.Errorf("AdaptiveConfig probe waits need 1 <= ProbeWaitMin <= ProbeWaitMax, got %d and %d",
			c.ProbeWaitMin, c.ProbeWaitMax)
	}
	return nil
}

// probeGapDivisor: a probe adds max(1, gap/8) workers, the gap being how many more CPUs the
// neighbours use than we do.
const probeGapDivisor = 8.0

func decideAdaptive(c *AdaptiveConfig, s *Sample, st *PolicyState) Decision {
	if st.ProbeWait == 0 {
		st.ProbeWait = c.ProbeWaitMin
	}
	neighbours, neighboursLeast := rememberNeighbours(c, s, st)
	if c.NeighboursShareTokens {
		// Neighbours that share our tokens cannot overcommit the host with us: count them
		// absent (the memory is still kept, as in the Rust policy).
		neighbours, neighboursLeast = 0, 0
	}
	cap := s.Cap()
	current := clamp32(st.Target, 1, cap)
	// 1. Quota (and a thread count or CPU set that shrank under us).
	if current < st.Target {
		st.Hold = 1
		st.Probing = false
		return Decision{Target: current, Reason: ReasonQuota}
	}
	// 2. Hold.
	if st.Hold > 0 {
		st.Hold--
		return Decision{Target: current, Reason: ReasonHold}
	}
	waiting := s.WaitingWorkers()
	contended := (waiting >= c.WaitThreads && waiting >= c.WaitFraction*float64(current)) ||
		s.ThrottledFraction() >= c.ThrottledFraction
	saturated := s.Queued > 0 || s.BusyWorkers() >= c.SaturatedFraction*float64(current)
	idle := s.IdleCPUs()

	// 3. Contention.
	if contended {
		if st.Probing {
			// The probe cost us more than it gained: back off.
			st.ProbeWait = min(satMul32(st.ProbeWait, 2), c.ProbeWaitMax)
			st.Probing = false
		}
		if current == 1 {
			return Decision{Target: 1, Reason: ReasonContention}
		}
		// Give back the workers that waited: exactly the excess when everyone does it, and
		// proportional to our size, so that repeated, this equalises the pools.
		most := max(f64ToU32(math.Ceil(float64(current)*c.MaxDecrease)), 1)
		giveBack := clamp32(f64ToU32(math.Round(waiting)), 1, most)
		st.Hold = 1
		return Decision{Target: max(satSub32(current, giveBack), 1), Reason: ReasonContention}
	}
	if st.Probing && st.SinceChange >= 2 {
		// The third period after the probe (the first was held): the neighbours have had two
		// periods to react. If our workers still wait, the probe only overcommitted the host:
		// undo it and wait twice as long before the next one. If not, probe again soon.
		st.Probing = false
		if waiting >= c.WaitThreads/2 {
			st.ProbeWait = min(satMul32(st.ProbeWait, 2), c.ProbeWaitMax)
			st.Hold = 1
			return Decision{Target: max(satSub32(current, 1), 1), Reason: ReasonContention}
		}
		st.ProbeWait = c.ProbeWaitMin
	}
	if !saturated || current >= cap {
		return Decision{Target: current, Reason: ReasonSteady}
	}
	// 4. Idle CPUs.
	if idle >= c.IdleCPUs {
		alone := neighbours < c.NeighbourCPUs
		// The CPUs the neighbours leave us, halves rounded down: a neighbour at 0.5 CPU of
		// 2 leaves us 1.
		room := cap
		if !alone && s.CPUs != 0 {
			room = min(f64ToU32(math.Max(math.Ceil(float64(s.CPUs)-neighbours-0.5), 1)), cap)
		}
		if current < room {
			share := idle
			if !alone {
				share = idle / 2
			}
			grow := max(f64ToU32(math.Ceil(share)), 1)
			st.Hold = 1
			return Decision{Target: min(satAdd32(current, grow), room), Reason: ReasonIdle}
		}
	}
	// 5. Fairness probe, only against a lasting gap (the neighbours' least use over the
	// memory) and when our workers were busy all period.
	gap := neighboursLeast - s.OwnCPUs()
	busyAllPeriod := s.BusyWorkers() >= c.SaturatedFraction*float64(current)
	if gap >= 1 && busyAllPeriod && satAdd32(st.SinceChange, 1) >= st.ProbeWait {
		// One worker, or an eighth of the gap on big hosts.
		step := max(f64ToU32(math.Floor(gap/probeGapDivisor)), 1)
		st.Probing = true
		st.Hold = 1
		return Decision{Target: min(satAdd32(current, step), cap), Reason: ReasonProbe}
	}
	return Decision{Target: current, Reason: ReasonSteady}
}

// rememberNeighbours records this period's neighbour use and returns the largest and the
// least of the last NeighbourMemory periods (a non-finite figure counts as 0).
func rememberNeighbours(c *AdaptiveConfig, s *Sample, st *PolicyState) (most, least float64) {
	now := s.NeighbourCPUs()
	if !finite(now) {
		now = 0
	}
	const n = NeighbourMemoryMax
	st.RecentNeighbours[st.Periods%n] = math.Max(now, 0)
	st.Periods++
	memory := min(uint64(clamp32(c.NeighbourMemory, 1, n)), st.Periods)
	most, least = 0, math.Inf(1)
	for back := uint64(1); back <= memory; back++ {
		v := st.RecentNeighbours[(st.Periods-back)%n]
		most, least = math.Max(most, v), math.Min(least, v)
	}
	return most, least
}
