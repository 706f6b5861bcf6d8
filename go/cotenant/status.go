// This file owns the parser of /proc/<pid>/status, of which only Cpus_allowed_list is read:
// a process's affinity as another process sees it. Port of crates/cotenant/src/procfs/status.rs.

package cotenant

import "strings"

const cpusAllowedField = "Cpus_allowed_list:"

// parseCpusAllowed returns the Cpus_allowed_list of a status file; ok is false when the field
// is absent.
func parseCpusAllowed(text string) (set CPUSet, ok bool, err error) {
	for _, l := range lines(text) {
		list, found := strings.CutPrefix(l, cpusAllowedField)
		if !found {
			continue
		}
		set, err := ParseCPUList(list)
		if err != nil {
			return CPUSet{}, false, newParseError("Cpus_allowed_list", reasonOf(err), strings.TrimSpace(list))
		}
		return set, true, nil
	}
	return CPUSet{}, false, nil
}
