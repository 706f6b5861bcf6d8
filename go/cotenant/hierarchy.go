// This file owns where a process's CPU controllers live: the v1-or-v2 choice per controller,
// the cgroup's directory below the right mount, and the walk over its ancestors up to the
// mount's root. Pure: parsed records in, host paths out; probe.go does the reading. Port of
// crates/cotenant/src/cpus/hierarchy.rs.

package cotenant

import (
	"fmt"
	"strings"
)

// CgroupVersion is a cgroup hierarchy's version.
type CgroupVersion int

const (
	// V1 is cgroup v1: one hierarchy per controller (or group of co-mounted controllers).
	V1 CgroupVersion = 1
	// V2 is cgroup v2: the single unified hierarchy.
	V2 CgroupVersion = 2
)

// String is "v1" or "v2".
func (v CgroupVersion) String() string {
	if v == V2 {
		return "v2"
	}
	return "v1"
}

// controllerPlace is a controller's place for one process: the hierarchy version, the
// process's cgroup in it, and the mount through which that cgroup is visible.
type controllerPlace struct {
	version CgroupVersion
	cgroup  string // as in /proc/<pid>/cgroup
	mount   cgroupMount
}

// level is one cgroup on the walk from the process's cgroup up to the mount root.
type level struct {
	cgroup string // as in /proc/<pid>/cgroup, e.g. /kubepods/pod1
	dir    string // as the host names it, e.g. /sys/fs/cgroup/cpu/kubepods/pod1
}

// locateV1 finds v1 controller name ("cpu", "cpuset"). The string is why there is none (the
// source is then absent, which is not an error).
func locateV1(name string, memberships []membership, mounts []cgroupMount) (*controllerPlace, string) {
	var member *membership
	for i := range memberships {
		if memberships[i].hasController(name) {
			member = &memberships[i]
			break
		}
	}
	if member == nil {
		return nil, fmt.Sprintf("the process is in no cgroup v1 hierarchy with the %s controller", name)
	}
	var candidates []cgroupMount
	for _, m := range mounts {
		if m.hasController(name) {
			candidates = append(candidates, m)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Sprintf("no cgroup v1 %s hierarchy is mounted", name)
	}
	return placeIn(V1, member.path, candidates)
}

// locateV2 finds the process's cgroup in the v2 hierarchy; whether a controller is enabled
// there is for the caller to check.
func locateV2(memberships []membership, mounts []cgroupMount) (*controllerPlace, string) {
	var member *membership
	for i := range memberships {
		if memberships[i].isV2() {
			member = &memberships[i]
			break
		}
	}
	if member == nil {
		return nil, "the process is in no cgroup v2 hierarchy"
	}
	var candidates []cgroupMount
	for _, m := range mounts {
		if m.isV2 {
			candidates = append(candidates, m)
		}
	}
	if len(candidates) == 0 {
		return nil, "no cgroup v2 hierarchy is mounted"
	}
	return placeIn(V2, member.path, candidates)
}

// placeIn picks, of the mounts through which cgroup is visible, the one with the shortest
// root (the first on ties): when a hierarchy is mounted more than once, the broadest view
// shows the most ancestors, and an ancestor's quota binds as surely as the process's own.
func placeIn(version CgroupVersion, cgroup string, candidates []cgroupMount) (*controllerPlace, string) {
	var best *cgroupMount
	for i := range candidates {
		if _, ok := candidates[i].dirOf(cgroup); !ok {
			continue
		}
		if best == nil || len(candidates[i].root) < len(best.root) {
			best = &candidates[i]
		}
	}
	if best == nil {
		roots := make([]string, len(candidates))
		for i, m := range candidates {
			roots[i] = m.root
		}
		return nil, fmt.Sprintf("cgroup %s is outside every mount of its hierarchy (mount roots: %s)",
			cgroup, strings.Join(roots, ", "))
	}
	return &controllerPlace{version: version, cgroup: cgroup, mount: *best}, ""
}

// levels is the process's cgroup and each ancestor up to and including the mount's root,
// leaf first. Ancestors above the mount root are invisible from here (inside a container they
// belong to the host) and are not listed.
func (p *controllerPlace) levels() []level {
	var out []level
	cgroup := strings.TrimRight(p.cgroup, "/")
	for {
		path := cgroup
		if path == "" {
			path = "/"
		}
		dir, ok := p.mount.dirOf(path)
		if !ok {
			break
		}
		out = append(out, level{cgroup: path, dir: dir})
		i := strings.LastIndexByte(cgroup, '/')
		if i < 0 || cgroup == "" {
			break
		}
		cgroup = cgroup[:i]
	}
	return out
}

// leafDir is the directory of the process's own cgroup (a place is only built when visible).
func (p *controllerPlace) leafDir() string {
	dir, _ := p.mount.dirOf(p.cgroup)
	return dir
}
