// This file owns the parser of /proc/<pid>/cgroup: which cgroup a process belongs to in each
// hierarchy. Port of crates/cotenant/src/procfs/cgroup.rs.
//
// Each line is hierarchy-id:controllers:path. A cgroup v1 hierarchy lists its controllers
// ("4:cpu,cpuacct:/docker/abc", or name=systemd); the v2 hierarchy is the line with id 0 and
// no controllers ("0::/user.slice"). Paths are relative to the reader's cgroup namespace.

package cotenant

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

const procCgroupFormat = "/proc/<pid>/cgroup"

// membership is one line of /proc/<pid>/cgroup.
type membership struct {
	hierarchyID uint32
	controllers []string // empty for v2
	path        string   // starts with "/"
}

func (m membership) isV2() bool { return m.hierarchyID == 0 && len(m.controllers) == 0 }

func (m membership) hasController(name string) bool { return slices.Contains(m.controllers, name) }

// parseProcCgroup parses the whole file; blank lines are skipped.
func parseProcCgroup(text string) ([]membership, error) {
	var out []membership
	for _, line := range lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseProcCgroupLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func parseProcCgroupLine(line string) (membership, error) {
	// The path may itself contain ':', so split off the first two fields only.
	fields := strings.SplitN(line, ":", 3)
	if len(fields) != 3 {
		return membership{}, newParseError(procCgroupFormat, "expected hierarchy-id:controllers:path", line)
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(fields[0], "+"), 10, 32) // Rust's u32 parse takes a '+'
	if err != nil {
		return membership{}, newParseError(procCgroupFormat,
			fmt.Sprintf("hierarchy id %q is not a number", fields[0]), line)
	}
	path := fields[2]
	if !strings.HasPrefix(path, "/") {
		return membership{}, newParseError(procCgroupFormat, "cgroup path does not start with '/'", line)
	}
	var controllers []string
	for c := range strings.SplitSeq(fields[1], ",") {
		if c != "" {
			controllers = append(controllers, c)
		}
	}
	return membership{hierarchyID: uint32(id), controllers: controllers, path: path}, nil
}
