// This file owns the parser of /proc/<pid>/task/<tid>/schedstat: a thread's time on a CPU and
// waiting on a run queue for one, in ns, and its timeslice count (the kernel's
// Documentation/scheduler/sched-stats.rst). Port of crates/cotenant/src/procfs/schedstat.rs.

package cotenant

const schedstatFormat = "/proc/<pid>/task/<tid>/schedstat"

// taskSchedstat is one thread's cumulative scheduler statistics.
type taskSchedstat struct {
	onCPUNS    uint64 // time running on a CPU
	runDelayNS uint64 // time runnable but waiting on a run queue
	timeslices uint64
}

// parseTaskSchedstat parses exactly three non-negative numbers separated by white space.
func parseTaskSchedstat(text string) (taskSchedstat, error) {
	fields := fieldsASCII(text)
	if len(fields) != 3 {
		return taskSchedstat{}, newParseError(schedstatFormat, `expected "<on-cpu ns> <run-delay ns> <timeslices>"`, text)
	}
	var v [3]uint64
	for i, what := range []string{"time on a CPU", "run-queue wait", "timeslice count"} {
		n, err := parseU64(schedstatFormat, what, fields[i])
		if err != nil {
			return taskSchedstat{}, newParseError(schedstatFormat, reasonOf(err), text)
		}
		v[i] = n
	}
	return taskSchedstat{onCPUNS: v[0], runDelayNS: v[1], timeslices: v[2]}, nil
}
