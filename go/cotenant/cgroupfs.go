// This file owns the parsers of the cgroup CPU controller files, both versions: quota and
// period, burst and weight, cpuacct.usage_percpu and cpu.stat. Port of
// crates/cotenant/src/procfs/cgroupfs.rs.
//
//	version  quota and period                               burst             weight
//	v1       cpu.cfs_quota_us (-1 = none), cpu.cfs_period_us  cpu.cfs_burst_us  cpu.shares
//	v2       cpu.max = "max 100000" or "50000 100000"        cpu.max.burst     cpu.weight
//
// Those times are microseconds; the usage and throttling parsers return nanoseconds.

package cotenant

import (
	"fmt"
	"strings"
)

// Quota is a CPU bandwidth limit: QuotaUS of CPU time per PeriodUS of wall time, that is
// QuotaUS/PeriodUS CPUs.
type Quota struct {
	// QuotaUS is the CPU time allowed per period, in µs.
	QuotaUS uint64
	// PeriodUS is the period, in µs; never 0.
	PeriodUS uint64
}

// CPUs is the limit in CPUs, e.g. 1.5.
func (q Quota) CPUs() float64 { return float64(q.QuotaUS) / float64(q.PeriodUS) }

// parseCPUMax parses v2 cpu.max; nil when the quota is "max" (unlimited).
func parseCPUMax(text string) (*Quota, error) {
	const f = "cpu.max"
	fields := fieldsASCII(text)
	if len(fields) != 2 {
		return nil, newParseError(f, `expected "<quota|max> <period>"`, text)
	}
	period, err := parsePeriod(f, fields[1], text)
	if err != nil {
		return nil, err
	}
	if fields[0] == "max" {
		return nil, nil
	}
	quota, err := parseU64(f, "quota", fields[0])
	if err != nil {
		return nil, newParseError(f, reasonOf(err), text)
	}
	return &Quota{QuotaUS: quota, PeriodUS: period}, nil
}

// parseCfsQuota parses v1 cpu.cfs_quota_us; limited is false for -1 (unlimited).
func parseCfsQuota(text string) (quotaUS uint64, limited bool, err error) {
	if trimmed := strings.TrimSpace(text); trimmed == "-1" {
		return 0, false, nil
	}
	q, err := parseU64("cpu.cfs_quota_us", "quota (or -1)", text)
	return q, err == nil, err
}

// parseCfsPeriod parses v1 cpu.cfs_period_us.
func parseCfsPeriod(text string) (uint64, error) {
	return parsePeriod("cpu.cfs_period_us", text, text)
}

// parseNumber parses a single non-negative number (cpu.cfs_burst_us, cpu.max.burst,
// cpu.shares, cpu.weight); format names the file for the error.
func parseNumber(format, text string) (uint64, error) { return parseU64(format, "value", text) }

func parsePeriod(format, field, text string) (uint64, error) {
	p, err := parseU64(format, "period", field)
	switch {
	case err != nil:
		return 0, newParseError(format, reasonOf(err), text)
	case p == 0:
		return 0, newParseError(format, "period is 0", text)
	}
	return p, nil
}

// parseUsagePercpu parses v1 cpuacct.usage_percpu ("335787734143 418572099613 \n"): the ns
// the cgroup used on each CPU, indexed by CPU id. At least one number is required.
func parseUsagePercpu(text string) ([]uint64, error) {
	const f = "cpuacct.usage_percpu"
	var usage []uint64
	for cpu, field := range fieldsASCII(text) {
		u, err := parseU64(f, "usage", field)
		if err != nil {
			return nil, newParseError(f, fmt.Sprintf("CPU %d: %s", cpu, reasonOf(err)), field)
		}
		usage = append(usage, u)
	}
	if len(usage) == 0 {
		return nil, newParseError(f, "no CPU's usage", text)
	}
	return usage, nil
}

// The cpu.stat keys read. v1 prints the first three; v2 the first two (with the cpu
// controller enabled) and the last two.
const (
	keyNrPeriods     = "nr_periods"
	keyNrThrottled   = "nr_throttled"
	keyThrottledTime = "throttled_time"
	keyThrottledUsec = "throttled_usec"
	keyUsageUsec     = "usage_usec"
	nsPerUS          = 1000
)

// cpuStat is a cgroup's CPU usage and throttling, cumulative, from cpu.stat.
type cpuStat struct {
	nrPeriods, nrThrottled uint64
	throttledNS            uint64 // v1 throttled_time; v2 throttled_usec × 1000, saturating
	usageNS                uint64 // v2 usage_usec × 1000
	hasUsage               bool   // v1's cpu.stat has no usage
}

// parseCPUStat parses cpu.stat of either version. Other keys are ignored unread; a missing
// key counts as 0 (in v2 without the cpu controller only the usage keys are present).
func parseCPUStat(text string) (cpuStat, error) {
	const f = "cpu.stat"
	var st cpuStat
	for _, line := range lines(text) {
		key, value := splitOnceASCIISpace(strings.TrimSpace(line))
		number := func() (uint64, error) {
			v, err := parseU64(f, key, value)
			if err != nil {
				return 0, newParseError(f, reasonOf(err), line)
			}
			return v, nil
		}
		var err error
		switch key {
		case keyNrPeriods:
			st.nrPeriods, err = number()
		case keyNrThrottled:
			st.nrThrottled, err = number()
		case keyThrottledTime:
			st.throttledNS, err = number()
		case keyThrottledUsec:
			var v uint64
			v, err = number()
			st.throttledNS = satMul(v, nsPerUS)
		case keyUsageUsec:
			var v uint64
			v, err = number()
			st.usageNS, st.hasUsage = satMul(v, nsPerUS), true
		}
		if err != nil {
			return cpuStat{}, err
		}
	}
	return st, nil
}
