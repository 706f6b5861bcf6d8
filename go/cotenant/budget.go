// This file owns the answer: Budget (every source, the fractional limit, which constraint
// binds), derive (the pure function that intersects the CPU sets and picks the smallest
// quota, in exact rational arithmetic) and rounding to a thread count. Port of
// crates/cotenant/src/cpus/mod.rs (the CPU count that the paper on CPU overcommitment by OS
// threads asks every runtime for).

package cotenant

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Rounding is how a fractional CPU limit becomes a thread count. Whatever the rounding, the
// count is at least 1 and at most the number of allowed CPUs.
type Rounding int

const (
	// Floor rounds down (the default): never more runnable threads than the quota pays for,
	// so a CPU-bound pool is not throttled. 1.5 CPUs gives 1 thread.
	Floor Rounding = iota
	// Ceil rounds up: use the fraction too, accepting some throttling. 1.5 gives 2.
	Ceil
	// Nearest rounds to the nearest, halves up. 1.5 gives 2, 1.4 gives 1.
	Nearest
)

// String is "floor", "ceil" or "nearest".
func (r Rounding) String() string {
	switch r {
	case Ceil:
		return "ceil"
	case Nearest:
		return "nearest"
	}
	return "floor"
}

// ParseRounding parses "floor", "ceil" or "nearest".
func ParseRounding(s string) (Rounding, error) {
	switch s {
	case "floor":
		return Floor, nil
	case "ceil":
		return Ceil, nil
	case "nearest":
		return Nearest, nil
	}
	return Floor, fmt.Errorf("unknown rounding %q (expected floor, ceil or nearest)", s)
}

// Constraint is a kind of constraint that can bind a budget.
type Constraint int

const (
	// ConstraintOnline is the online CPUs: nothing else restricts the process.
	ConstraintOnline Constraint = iota
	// ConstraintAffinity is the process's affinity mask (e.g. taskset).
	ConstraintAffinity
	// ConstraintCpuset is the cgroup cpuset.
	ConstraintCpuset
	// ConstraintQuota is a CPU quota, of the process's cgroup or of an ancestor.
	ConstraintQuota
)

// String is "online", "affinity", "cpuset" or "quota".
func (c Constraint) String() string {
	return [...]string{"online", "affinity", "cpuset", "quota"}[c]
}

// Origin is where a value was read from: a file (as opened, so under the probe's root) or a
// system call.
type Origin struct {
	// Path is the file, or "" for a system call.
	Path string
	// Syscall names the call, e.g. "sched_getaffinity(2)", when Path is "".
	Syscall string
}

// String is the path or the system call's name.
func (o Origin) String() string {
	if o.Path != "" {
		return o.Path
	}
	return o.Syscall
}

// Source is a value with where it came from, or the reason it is absent (no controller, no
// file, no permission: an absent source is not an error).
type Source[T any] struct {
	// Present says whether the value was read.
	Present bool
	// Origin is where it was read from, when present.
	Origin Origin
	// Value is what was read, when present.
	Value T
	// Reason says, in words, why it is absent.
	Reason string
}

func present[T any](origin Origin, v T) Source[T] {
	return Source[T]{Present: true, Origin: origin, Value: v}
}
func absent[T any](reason string) Source[T] { return Source[T]{Reason: reason} }

// QuotaLevel is the quota of one cgroup on the walk from the process's cgroup to the mount
// root.
type QuotaLevel struct {
	// Cgroup is the cgroup path, as in /proc/<pid>/cgroup.
	Cgroup string
	// Version is the hierarchy it is in.
	Version CgroupVersion
	// Quota is present with a nil value when there is no limit (-1, max), absent when the
	// files are missing.
	Quota Source[*Quota]
	// Burst is cpu.cfs_burst_us or cpu.max.burst, in µs, read at detection (not on Refresh).
	Burst Source[uint64]
}

// derived is what follows from the sources.
type derived struct {
	allowed      int
	num, den     uint64 // the limit as the exact fraction num/den, so rounding is exact
	binding      Constraint
	bindingLevel int // index into quotas when a quota binds, else -1
}

// Budget is a process's CPU budget: every source, the fractional limit, and which constraint
// binds. It keeps the files it reads open, so that [Budget.Refresh] is cheap; [Budget.Close]
// releases them (the garbage collector does too).
type Budget struct {
	plan                     *plan
	online, affinity, cpuset Source[CPUSet]
	quotas                   []QuotaLevel
	quotaAbsent              string
	weight                   Source[uint64]
	derived                  derived
}

// AllowedCPUs is the number of CPUs the process may run on: online ∩ cpuset ∩ affinity.
func (b *Budget) AllowedCPUs() int { return b.derived.allowed }

// AllowedSet is the CPUs the process may run on, by id (of the sources that could be read).
func (b *Budget) AllowedSet() CPUSet {
	var acc *CPUSet
	for _, s := range []Source[CPUSet]{b.online, b.cpuset, b.affinity} {
		if !s.Present {
			continue
		}
		if acc == nil {
			v := s.Value
			acc = &v
		} else {
			v := acc.Intersection(s.Value)
			acc = &v
		}
	}
	if acc == nil {
		return CPUSet{}
	}
	return *acc
}

// Limit is the CPU limit as a fraction: min(allowed CPUs, every ancestor's quota / period).
func (b *Budget) Limit() float64 { return float64(b.derived.num) / float64(b.derived.den) }

// Threads is the thread count for rounding r: at least 1, at most [Budget.AllowedCPUs].
func (b *Budget) Threads(r Rounding) int {
	return threadsFor(b.derived.num, b.derived.den, b.derived.allowed, r)
}

// threadsFor rounds num/den exactly, in integers, and clamps to [1, allowed].
func threadsFor(num, den uint64, allowed int, r Rounding) int {
	q, rem := num/den, num%den
	switch r {
	case Ceil:
		if rem != 0 {
			q++
		}
	case Nearest:
		// floor((2n + d) / 2d) = q + (2·rem >= d), without overflow.
		if rem >= den-rem {
			q++
		}
	}
	return int(max(min(q, uint64(allowed)), 1))
}

// Binding is the constraint that binds.
func (b *Budget) Binding() Constraint { return b.derived.binding }

// BindingOrigin is where the binding value was read from; false when it is unknown.
func (b *Budget) BindingOrigin() (Origin, bool) {
	var s Source[CPUSet]
	switch b.derived.binding {
	case ConstraintOnline:
		s = b.online
	case ConstraintAffinity:
		s = b.affinity
	case ConstraintCpuset:
		s = b.cpuset
	default:
		if l := b.BindingLevel(); l != nil && l.Quota.Present {
			return l.Quota.Origin, true
		}
		return Origin{}, false
	}
	return s.Origin, s.Present
}

// BindingLevel is, when a quota binds, the cgroup level whose quota it is (the process's own
// cgroup or an ancestor); nil otherwise.
func (b *Budget) BindingLevel() *QuotaLevel {
	if b.derived.bindingLevel < 0 {
		return nil
	}
	return &b.quotas[b.derived.bindingLevel]
}

// Online is the online CPUs.
func (b *Budget) Online() Source[CPUSet] { return b.online }

// Affinity is the affinity mask.
func (b *Budget) Affinity() Source[CPUSet] { return b.affinity }

// Cpuset is the cgroup's effective cpuset.
func (b *Budget) Cpuset() Source[CPUSet] { return b.cpuset }

// Quotas is the quota of the process's cgroup and of each ancestor, leaf first. Empty when
// there is no CPU controller; [Budget.QuotaAbsentReason] then says why.
func (b *Budget) Quotas() []QuotaLevel { return b.quotas }

// QuotaAbsentReason says why no quota could be read at all ("" when quotas were read).
func (b *Budget) QuotaAbsentReason() string { return b.quotaAbsent }

// Weight is the cgroup's CPU weight, cpu.shares (v1) or cpu.weight (v2): a lower bound under
// contention, not a limit; for information.
func (b *Budget) Weight() Source[uint64] { return b.weight }

// CgroupVersion is which cgroup versions the budget was read from: "none", "v1", "v2", or
// "hybrid" when the cpu and cpuset controllers came from different versions.
func (b *Budget) CgroupVersion() string { return b.plan.cgroupVersion() }

// Refresh re-reads the numbers (online CPUs, affinity, cpuset, quotas) through the files
// opened at detection; cheap enough to call every clock tick. It does not notice the process
// moving to another cgroup, or a controller enabled since: detect again for that. A failed
// refresh leaves the budget as it was.
func (b *Budget) Refresh() error {
	l, err := b.plan.readLimits()
	if err != nil {
		return err
	}
	d, err := derive(l.online, l.cpuset, l.affinity, l.quotas)
	if err != nil {
		return err
	}
	b.derived = d
	for i := range b.quotas {
		b.quotas[i].Quota = l.quotas[i]
	}
	b.online, b.affinity, b.cpuset = l.online, l.affinity, l.cpuset
	return nil
}

// Close releases the files the budget keeps open; Refresh fails after it.
func (b *Budget) Close() error {
	b.plan.close()
	return nil
}

// derive intersects the CPU sets (online, then cpuset, then affinity), then takes the smallest
// quota. A constraint binds when it strictly lowers the value found so far, so ties go to the
// broader source and, among quotas, to the level nearest the process.
func derive(online, cpuset, affinity Source[CPUSet], quotas []Source[*Quota]) (derived, error) {
	var allowed *CPUSet
	binding := ConstraintOnline
	for _, c := range []struct {
		constraint Constraint
		source     Source[CPUSet]
	}{{ConstraintOnline, online}, {ConstraintCpuset, cpuset}, {ConstraintAffinity, affinity}} {
		if !c.source.Present {
			continue
		}
		next := c.source.Value
		if allowed != nil {
			next = allowed.Intersection(next)
		}
		if allowed == nil || next.Count() < allowed.Count() {
			binding = c.constraint
		}
		allowed = &next
	}
	if allowed == nil {
		return derived{}, &UndeterminedError{"neither the online CPUs, the cpuset nor the affinity mask could be read"}
	}
	if allowed.IsEmpty() {
		return derived{}, &UndeterminedError{fmt.Sprintf(
			"the online CPUs (%s), the cpuset (%s) and the affinity mask (%s) have no CPU in common",
			showSet(online), showSet(cpuset), showSet(affinity))}
	}
	count := allowed.Count()
	d := derived{allowed: count, num: uint64(count), den: 1, binding: binding, bindingLevel: -1}
	for i, q := range quotas {
		if !q.Present || q.Value == nil {
			continue
		}
		// quota/period < num/den, exactly: compare the 128-bit cross products.
		lh, ll := bits.Mul64(q.Value.QuotaUS, d.den)
		rh, rl := bits.Mul64(d.num, q.Value.PeriodUS)
		if lh < rh || (lh == rh && ll < rl) {
			d.num, d.den, d.bindingLevel, d.binding = q.Value.QuotaUS, q.Value.PeriodUS, i, ConstraintQuota
		}
	}
	return d, nil
}

func showSet(s Source[CPUSet]) string {
	if s.Present {
		return s.Value.String()
	}
	return "absent"
}

// SourceRow is one source of a budget, for display.
type SourceRow struct {
	// Kind is "online", "cpuset", "affinity", "quota", "burst" or "weight".
	Kind string
	// Origin is where it was read from (zero when absent).
	Origin Origin
	// Cgroup is the cgroup path, for cgroup sources.
	Cgroup string
	// Value is the value in words ("2 CPUs (0-1)", "1.5 CPUs (150000 µs per 100000 µs)").
	Value string
	// Binds says whether this source binds.
	Binds bool
}

// Sources lists every source as a row: kind, origin, value in words, and whether it binds.
func (b *Budget) Sources() []SourceRow {
	setRow := func(kind string, s Source[CPUSet], c Constraint) SourceRow {
		v := "absent: " + s.Reason
		if s.Present {
			v = fmt.Sprintf("%s (%s)", CPUsWord(float64(s.Value.Count())), s.Value)
		}
		return SourceRow{Kind: kind, Origin: s.Origin, Value: v, Binds: b.derived.binding == c}
	}
	rows := []SourceRow{
		setRow("online", b.online, ConstraintOnline),
		setRow("cpuset", b.cpuset, ConstraintCpuset),
		setRow("affinity", b.affinity, ConstraintAffinity),
	}
	if b.quotaAbsent != "" {
		rows = append(rows, SourceRow{Kind: "quota", Value: "absent: " + b.quotaAbsent})
	}
	for i, l := range b.quotas {
		var v string
		switch {
		case !l.Quota.Present:
			v = "absent: " + l.Quota.Reason
		case l.Quota.Value == nil:
			v = "unlimited"
		default:
			q := l.Quota.Value
			v = fmt.Sprintf("%s (%d µs per %d µs)", CPUsWord(q.CPUs()), q.QuotaUS, q.PeriodUS)
		}
		rows = append(rows, SourceRow{Kind: "quota", Origin: l.Quota.Origin, Cgroup: l.Cgroup, Value: v,
			Binds: b.derived.bindingLevel == i})
	}
	for _, l := range b.quotas {
		if l.Burst.Present {
			rows = append(rows, SourceRow{Kind: "burst", Origin: l.Burst.Origin, Cgroup: l.Cgroup,
				Value: fmt.Sprintf("%d µs", l.Burst.Value)})
		}
	}
	if b.weight.Present {
		row := SourceRow{Kind: "weight", Origin: b.weight.Origin, Value: strconv.FormatUint(b.weight.Value, 10)}
		if len(b.quotas) > 0 {
			row.Cgroup = b.quotas[0].Cgroup
		}
		rows = append(rows, row)
	} else {
		rows = append(rows, SourceRow{Kind: "weight", Value: "absent: " + b.weight.Reason})
	}
	return rows
}

// CPUsWord is a CPU amount in words: "1 CPU", "0.5 CPU", "1.5 CPUs", "2 CPUs" (at most three
// decimals, no trailing zeros).
func CPUsWord(x float64) string {
	n := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(x, 'f', 3, 64), "0"), ".")
	if x > 1 {
		return n + " CPUs"
	}
	return n + " CPU"
}

// boundBy names the binding constraint in words, e.g. "the CPU quota of its own cgroup /app".
func (b *Budget) boundBy() string {
	switch l := b.BindingLevel(); {
	case l != nil && b.derived.bindingLevel == 0:
		return "the CPU quota of its own cgroup " + l.Cgroup
	case l != nil:
		return "the CPU quota of ancestor cgroup " + l.Cgroup
	case b.derived.binding == ConstraintCpuset:
		return "the cgroup cpuset"
	case b.derived.binding == ConstraintAffinity:
		return "the affinity mask"
	}
	return "the online CPUs"
}

// Explain is a one-line answer followed by a table of every source, as `cotenant cpus
// --explain` prints it (crates/cotenant-cli/src/cmd/cpus.rs).
func (b *Budget) Explain(r Rounding) string {
	threads := b.Threads(r)
	what := b.boundBy()
	file := ""
	if o, ok := b.BindingOrigin(); ok {
		file = ", " + o.String()
	}
	plural := "s"
	if threads == 1 {
		plural = ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%d thread%s (%s rounding of a limit of %s; bound by %s%s)\n\n",
		threads, plural, r, CPUsWord(b.Limit()), what, file)
	cells := [][5]string{{"", "SOURCE", "CGROUP", "VALUE", "FILE"}}
	for _, row := range b.Sources() {
		c := [5]string{" ", row.Kind, "-", row.Value, "-"}
		if row.Binds {
			c[0] = "*"
		}
		if row.Cgroup != "" {
			c[2] = row.Cgroup
		}
		if o := row.Origin.String(); o != "" {
			c[4] = o
		}
		cells = append(cells, c)
	}
	var widths [5]int
	for _, c := range cells {
		for i, v := range c {
			widths[i] = max(widths[i], len([]rune(v)))
		}
	}
	for _, c := range cells {
		var l strings.Builder
		for i, v := range c {
			l.WriteString(v)
			if i+1 < len(c) {
				l.WriteString(strings.Repeat(" ", widths[i]-len([]rune(v))+2))
			}
		}
		s.WriteString(strings.TrimRight(l.String(), " "))
		s.WriteByte('\n')
	}
	fmt.Fprintf(&s, "\n* binds. cgroup version: %s. Threads by rounding: floor %d, ceil %d, nearest %d "+
		"(always at least 1 and at most the %d allowed CPUs).\n",
		b.CgroupVersion(), b.Threads(Floor), b.Threads(Ceil), b.Threads(Nearest), b.AllowedCPUs())
	return s.String()
}
