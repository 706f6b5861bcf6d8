// This file owns the formula of the paper on CPU overcommitment's friendly thread pool
// (friendlypool), faithfully: active = ceil(O · Δcpu_self / Δcpu_all · CPUs), Δcpu_all
// being the busy time of the CPUs we may use. Kept as
// the reference policy: it locks in (a process's share is capped by its own active count, so
// any split is a fixed point; docs/policy.md). Port of crates/cotenant/src/policy/share.rs.

package cotenant

import "math"

func decideShare(overcommit float64, s *Sample) Decision {
	cap := s.Cap()
	if s.BusyNS == 0 || s.CPUs == 0 {
		// Nothing ran at all: the whole allowance is free.
		return Decision{Target: cap, Reason: ReasonShare}
	}
	share := float64(min(s.SelfNS, s.BusyNS)) / float64(s.BusyNS)
	active := math.Ceil(overcommit * share * float64(s.CPUs))
	target := cap
	if !math.IsInf(active, 0) && !math.IsNaN(active) {
		target = f64ToU32(min(active, math.MaxUint32))
	}
	return Decision{Target: min(clamp32(target, 1, max(s.Threads, 1)), cap), Reason: ReasonShare}
}
