// This file owns the parser of /proc/loadavg, of which only the runnable-task count is read
// (the cheapest source of it: generating /proc/stat costs far more). Port of
// crates/cotenant/src/procfs/loadavg.rs.

package cotenant

import "strings"

const loadavgFormat = "/proc/loadavg"

// parseLoadavgRunning returns the runnable tasks (the reader included) from the fourth field,
// "running/total".
func parseLoadavgRunning(text string) (uint64, error) {
	fields := fieldsASCII(text)
	if len(fields) < 4 {
		return 0, newParseError(loadavgFormat, "fewer than 4 fields", text)
	}
	running, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, newParseError(loadavgFormat, "the tasks field is not running/total", text)
	}
	if _, err := parseU64(loadavgFormat, "total", total); err != nil {
		return 0, err
	}
	return parseU64(loadavgFormat, "running", running)
}
