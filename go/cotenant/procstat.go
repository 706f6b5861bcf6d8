// This file owns the parser of /proc/stat: each CPU's cumulative time by state, in USER_HZ
// ticks, and the runnable and blocked thread counts. Port of crates/cotenant/src/procfs/stat.rs.
//
// A cpuN line is "cpuN user nice system idle iowait irq softirq steal guest guest_nice"; the
// "cpu" line (no N) sums them and is not read. Old kernels print at least the first four;
// guest and guest_nice are already inside user and nice.

package cotenant

import (
	"fmt"
	"strconv"
	"strings"
)

const procStatFormat = "/proc/stat"

// cpuFields are the fields of a cpuN line, in order; cpuTimes keeps the first eight.
var cpuFields = [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"}

// minCPUFields is how many fields every kernel prints: user nice system idle.
const minCPUFields = 4

// cpuTimes is one CPU's cumulative ticks per state: user, nice, system, idle, iowait, irq,
// softirq, steal.
type cpuTimes [8]uint64

// busy is user + nice + system + irq + softirq + steal (guest time is inside user and nice).
func (t cpuTimes) busy() uint64 {
	s := t[0]
	for _, i := range []int{1, 2, 5, 6, 7} {
		s = satAdd(s, t[i])
	}
	return s
}

// idle is idle + iowait.
func (t cpuTimes) idle() uint64 { return satAdd(t[3], t[4]) }

// procStat is what is read from /proc/stat.
type procStat struct {
	perCPU       []cpuLine // in file order; only online CPUs have a line
	procsRunning *uint64
	procsBlocked *uint64
}

type cpuLine struct {
	id    int
	times cpuTimes
}

// parseProcStat parses the cpuN lines, procs_running and procs_blocked; every other line is
// ignored unread. A text with no cpuN line is an error.
func parseProcStat(text string) (procStat, error) {
	var st procStat
	for _, line := range lines(text) {
		key, rest := splitOnceASCIISpace(strings.TrimSpace(line))
		switch key {
		case "procs_running", "procs_blocked":
			v, err := parseU64(procStatFormat, key, rest)
			if err != nil {
				return procStat{}, newParseError(procStatFormat, reasonOf(err), line)
			}
			if key == "procs_running" {
				st.procsRunning = &v
			} else {
				st.procsBlocked = &v
			}
			continue
		}
		digits, ok := strings.CutPrefix(key, "cpu")
		if !ok || digits == "" || !allDigits(digits) {
			continue
		}
		id, err := strconv.ParseUint(digits, 10, 32)
		if err != nil || id > MaxCPUID {
			return procStat{}, newParseError(procStatFormat,
				fmt.Sprintf("CPU id %s exceeds the supported maximum %d", digits, MaxCPUID), line)
		}
		times, err := parseCPUTimes(rest, line)
		if err != nil {
			return procStat{}, err
		}
		st.perCPU = append(st.perCPU, cpuLine{id: int(id), times: times})
	}
	if len(st.perCPU) == 0 {
		return procStat{}, newParseError(procStatFormat, "no per-CPU (cpuN) line", text)
	}
	return st, nil
}

// parseCPUTimes parses the numbers after cpuN; fields after guest_nice must be numbers but
// are otherwise ignored.
func parseCPUTimes(rest, line string) (cpuTimes, error) {
	var t cpuTimes
	fields := fieldsASCII(rest)
	for i, field := range fields {
		what := "extra field"
		if i < len(cpuFields) {
			what = cpuFields[i]
		}
		v, err := parseU64(procStatFormat, what, field)
		if err != nil {
			return cpuTimes{}, newParseError(procStatFormat, reasonOf(err), line)
		}
		if i < len(t) {
			t[i] = v
		}
	}
	if len(fields) < minCPUFields {
		return cpuTimes{}, newParseError(procStatFormat, fmt.Sprintf("expected at least %d times (%s), found %d",
			minCPUFields, strings.Join(cpuFields[:minCPUFields], " "), len(fields)), line)
	}
	return t, nil
}
