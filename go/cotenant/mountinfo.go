// This file owns the parser of /proc/<pid>/mountinfo: where each cgroup hierarchy is mounted
// and which of its cgroups is the mount's root. Port of crates/cotenant/src/procfs/mountinfo.rs.
//
// A line is "id parent major:minor root mount-point options [optional...] - fstype source
// super-options" (proc(5)). The root field matters: inside a container without a cgroup
// namespace the hierarchy is mounted from the container's own cgroup (/docker/abc), so a
// process's cgroup path is translated relative to it. Paths escape space, tab, newline and
// backslash as octal (\040).

package cotenant

import (
	"slices"
	"strings"
)

const mountinfoFormat = "/proc/<pid>/mountinfo"

// cgroupMount is one mount of a cgroup file system.
type cgroupMount struct {
	root         string   // the cgroup, relative to the hierarchy root, mounted at mountPoint
	mountPoint   string   // where it is mounted
	isV2         bool     // fstype cgroup2
	superOptions []string // v1: names the bound controllers ("rw,cpu,cpuacct")
}

func (m cgroupMount) hasController(name string) bool {
	return !m.isV2 && slices.Contains(m.superOptions, name)
}

// dirOf is the directory of cgroup path (as in /proc/<pid>/cgroup) below this mount, or false
// when the cgroup is not visible through it (not below the mount's root).
func (m cgroupMount) dirOf(path string) (string, bool) {
	rest := path
	if m.root != "/" {
		r, ok := strings.CutPrefix(path, m.root)
		if !ok || !(r == "" || strings.HasPrefix(r, "/")) {
			return "", false // "/docker/abc2" is not below "/docker/abc"
		}
		rest = r
	}
	if slices.Contains(strings.Split(rest, "/"), "..") {
		return "", false // a cgroup outside the reader's namespace
	}
	return strings.TrimRight(m.mountPoint, "/") + strings.TrimRight(rest, "/"), true
}

// parseCgroupMounts returns the cgroup mounts (v1 and v2) in file order. Lines of other file
// systems are checked for shape only.
func parseCgroupMounts(text string) ([]cgroupMount, error) {
	var mounts []cgroupMount
	for _, line := range lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Split(line, " ")
		sep := slices.Index(fields, "-")
		if sep < 0 {
			return nil, newParseError(mountinfoFormat, "no ' - ' separator", line)
		}
		// Six fields before the separator, then fstype, source and super options.
		if sep < 6 || len(fields) < sep+4 {
			return nil, newParseError(mountinfoFormat, "too few fields", line)
		}
		var isV2 bool
		switch fields[sep+1] {
		case "cgroup2":
			isV2 = true
		case "cgroup":
			isV2 = false
		default:
			continue
		}
		mounts = append(mounts, cgroupMount{
			root:         unescapeOctal(fields[3]),
			mountPoint:   unescapeOctal(fields[4]),
			isV2:         isV2,
			superOptions: strings.Split(fields[sep+3], ","),
		})
	}
	return mounts, nil
}

// unescapeOctal undoes the kernel's octal escaping (\040) of ' ', '\t', '\n' and '\\'.
func unescapeOctal(s string) string {
	b := []byte(s)
	out := make([]byte, 0, len(b))
	isOctal := func(c byte) bool { return c >= '0' && c <= '7' }
	for i := 0; i < len(b); {
		if b[i] == '\\' && i+3 < len(b) && isOctal(b[i+1]) && isOctal(b[i+2]) && isOctal(b[i+3]) {
			v := int(b[i+1]-'0')*64 + int(b[i+2]-'0')*8 + int(b[i+3]-'0')
			if v <= 255 {
				out = append(out, byte(v))
				i += 4
				continue
			}
		}
		out = append(out, b[i])
		i++
	}
	return string(out)
}
