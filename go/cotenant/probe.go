// This file owns all the I/O of CPU-count detection: Probe, a root standing in for "/" that
// tests replace with a fixture tree, and the plan of files a Budget re-reads. Port of
// crates/cotenant/src/cpus/probe.rs.
//
// Detection has two phases:
//  1. Resolve (once): parse /proc/<pid>/cgroup and /proc/self/mountinfo, decide which
//     hierarchy holds the cpu and cpuset controllers, walk the ancestors, and open the exact
//     files to read (a plan).
//  2. Read (at detection and on every Budget.Refresh): read only the numbers those files hold,
//     with pread at offset 0. A file missing at resolve stays absent until the next detection.
//
// For another process, membership comes from /proc/<pid>/cgroup but mounts from our own
// /proc/self/mountinfo: the kernel shows its cgroup paths relative to the reader's cgroup
// namespace, and the mount points must be ones the reader can open.

package cotenant

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Probe reads the sources of a [Budget] from the system, or from a copy of its files.
type Probe struct {
	root string
}

// SystemProbe reads the running system: /proc and /sys as they are.
func SystemProbe() Probe { return Probe{root: "/"} }

// ProbeAt reads a copy of a system's files under root: /proc from root/proc, /sys (and every
// cgroup mount point named in mountinfo) from under root. Affinity is then read from
// Cpus_allowed_list rather than the system call. testdata/cpus/<case>/ are such trees.
func ProbeAt(root string) Probe { return Probe{root: root} }

// CPUs detects the CPU budget of the calling process: online CPUs ∩ cpuset ∩ affinity, and
// the smallest quota of its cgroup and every ancestor. Same as SystemProbe().Detect().
func CPUs() (*Budget, error) { return SystemProbe().Detect() }

// CPUsAt detects the budget of the calling process from a copy of a system's files under
// root (see [ProbeAt]). Same as ProbeAt(root).Detect().
func CPUsAt(root string) (*Budget, error) { return ProbeAt(root).Detect() }

// CPUsOfPID detects the budget of process pid, through /proc/<pid>.
func CPUsOfPID(pid int) (*Budget, error) { return SystemProbe().DetectPID(pid) }

// Detect detects the budget of the calling process.
func (p Probe) Detect() (*Budget, error) { return p.detect(0, false) }

// DetectPID detects the budget of process pid.
func (p Probe) DetectPID(pid int) (*Budget, error) { return p.detect(pid, true) }

func (p Probe) isSystem() bool { return p.root == "/" }

// path maps a path as the host names it onto the probe's root.
func (p Probe) path(hostPath string) string {
	rest := strings.TrimLeft(hostPath, "/")
	if p.isSystem() {
		return "/" + rest
	}
	return strings.TrimRight(p.root, "/") + "/" + rest
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

func (p Probe) detect(pid int, hasPID bool) (b *Budget, err error) {
	procDir := p.path("/proc/self")
	if hasPID {
		procDir = p.path(fmt.Sprintf("/proc/%d", pid))
		if !isDir(procDir) {
			return nil, &NoSuchProcessError{PID: pid, Path: procDir}
		}
	}
	// Without these two files no cgroup can be found; the reason goes into the absent
	// sources. For another process a vanished cgroup file means the process exited.
	var unreadable []string
	memberships, missing, err := parseOptional(procDir+"/cgroup", parseProcCgroup)
	if err != nil {
		return nil, err
	}
	if missing != "" {
		if hasPID && !isDir(procDir) {
			return nil, &NoSuchProcessError{PID: pid, Path: procDir}
		}
		unreadable = append(unreadable, missing)
	}
	mounts, missing, err := parseOptional(p.path("/proc/self/mountinfo"), parseCgroupMounts)
	if err != nil {
		return nil, err
	}
	if missing != "" {
		unreadable = append(unreadable, missing)
	}
	explain := func(reason string) string {
		if len(unreadable) == 0 {
			return reason
		}
		return fmt.Sprintf("%s (%s)", reason, strings.Join(unreadable, "; "))
	}

	pl := &plan{}
	defer func() {
		if err != nil {
			pl.close()
		}
	}()
	if hasPID || !p.isSystem() {
		if pl.affinityStatus, err = openHandle(procDir + "/status"); err != nil {
			return nil, err
		}
	}
	cpu, cpuReason, err := p.locateCPU(memberships, mounts)
	if err != nil {
		return nil, err
	}
	if cpu == nil {
		cpuReason = explain(cpuReason)
	}
	if pl.cpuset, pl.cpusetAbsent, err = p.locateCpuset(memberships, mounts); err != nil {
		return nil, err
	}
	if pl.cpuset == nil {
		pl.cpusetAbsent = explain(pl.cpusetAbsent)
	}

	var levels []level
	var weight Source[uint64]
	if cpu != nil {
		pl.cpuVersion = cpu.version
		levels = cpu.levels()
		for i, l := range levels {
			files, err := p.levelFiles(cpu.version, l.dir, i+1 == len(levels))
			if err != nil {
				return nil, err
			}
			pl.quotaLevels = append(pl.quotaLevels, files)
		}
		name := "cpu.shares"
		if cpu.version == V2 {
			name = "cpu.weight"
		}
		if weight, err = p.readNumber(cpu.leafDir(), name); err != nil {
			return nil, err
		}
	} else {
		weight = absent[uint64](cpuReason)
	}
	if pl.online, err = openHandle(p.path("/sys/devices/system/cpu/online")); err != nil {
		return nil, err
	}
	lim, err := pl.readLimits()
	if err != nil {
		return nil, err
	}
	d, err := derive(lim.online, lim.cpuset, lim.affinity, lim.quotas)
	if err != nil {
		return nil, err
	}
	b = &Budget{plan: pl, online: lim.online, affinity: lim.affinity, cpuset: lim.cpuset, weight: weight, derived: d}
	if cpu == nil {
		b.quotaAbsent = cpuReason
	}
	for i, l := range levels {
		burstFile := "cpu.cfs_burst_us"
		if pl.quotaLevels[i].version == V2 {
			burstFile = "cpu.max.burst"
		}
		burst, err := p.readNumber(l.dir, burstFile)
		if err != nil {
			return nil, err
		}
		b.quotas = append(b.quotas, QuotaLevel{Cgroup: l.cgroup, Version: pl.quotaLevels[i].version,
			Quota: lim.quotas[i], Burst: burst})
	}
	return b, nil
}

// locateCPU finds the cpu controller: v1 wins when the process has a v1 cpu hierarchy
// (hybrid hosts); otherwise v2, if the cpu controller is enabled there. When there is none,
// the string says why.
func (p Probe) locateCPU(ms []membership, mounts []cgroupMount) (*controllerPlace, string, error) {
	place, v1 := locateV1("cpu", ms, mounts)
	if place != nil {
		return place, "", nil
	}
	place, v2 := locateV2(ms, mounts)
	if place != nil {
		lacks, err := p.v2Lacks(place, "cpu")
		if err != nil {
			return nil, "", err
		}
		if lacks == "" {
			return place, "", nil
		}
		v2 = lacks
	}
	return nil, fmt.Sprintf("no CPU quota: %s, and %s", v1, v2), nil
}

// locateCpuset opens the cpuset file: v1 cpuset.effective_cpus (or cpuset.cpus) of the
// process's cgroup, or v2 cpuset.cpus.effective of the nearest level that has one.
func (p Probe) locateCpuset(ms []membership, mounts []cgroupMount) (*cpusetFile, string, error) {
	place, v1 := locateV1("cpuset", ms, mounts)
	if place != nil {
		dir := place.leafDir()
		// cpuset.effective_cpus exists since Linux 4.x; older kernels only have cpuset.cpus.
		var reasons []string
		for _, name := range []string{"cpuset.effective_cpus", "cpuset.cpus"} {
			h, err := openHandle(p.path(dir + "/" + name))
			if err != nil {
				return nil, "", err
			}
			if h.f != nil {
				return &cpusetFile{h: h, version: V1}, "", nil
			}
			reasons = append(reasons, h.missing)
		}
		v1 = strings.Join(reasons, ", and ")
	}
	place, v2 := locateV2(ms, mounts)
	if place != nil {
		lacks, err := p.v2Lacks(place, "cpuset")
		if err != nil {
			return nil, "", err
		}
		if lacks != "" {
			v2 = lacks
		} else {
			for _, l := range place.levels() {
				h, err := openHandle(p.path(l.dir + "/cpuset.cpus.effective"))
				if err != nil {
					return nil, "", err
				}
				if h.f != nil {
					return &cpusetFile{h: h, version: V2}, "", nil
				}
			}
			v2 = fmt.Sprintf("no cpuset.cpus.effective from %s up to its mount root", place.leafDir())
		}
	}
	return nil, fmt.Sprintf("no cpuset: %s, and %s", v1, v2), nil
}

// v2Lacks says why the v2 hierarchy's cgroup.controllers (at the mount root) does not list
// controller; "" when it does, or when the file is missing (then each level's files are
// tried, and those missing are recorded as absent).
func (p Probe) v2Lacks(place *controllerPlace, controller string) (string, error) {
	file := p.path(place.mount.mountPoint + "/cgroup.controllers")
	text, missing, err := readWhole(file)
	if err != nil || missing != "" {
		return "", err
	}
	for _, c := range fieldsASCII(text) {
		if c == controller {
			return "", nil
		}
	}
	return fmt.Sprintf("the cgroup v2 hierarchy has no %s controller (%s lists %q)",
		controller, file, strings.TrimSpace(text)), nil
}

func (p Probe) levelFiles(version CgroupVersion, dir string, isMountRoot bool) (*levelFiles, error) {
	open := func(name string) (*handle, error) { return openHandle(p.path(dir + "/" + name)) }
	if version == V1 {
		q, err := open("cpu.cfs_quota_us")
		if err != nil {
			return nil, err
		}
		per, err := open("cpu.cfs_period_us")
		if err != nil {
			q.close()
			return nil, err
		}
		return &levelFiles{version: V1, quota: q, period: per}, nil
	}
	q, err := open("cpu.max")
	if err != nil {
		return nil, err
	}
	if isMountRoot && q.f == nil {
		// The common case, not a problem: say so rather than "does not exist".
		q.missing = "the root of a cgroup v2 tree has no cpu.max (no quota)"
	}
	return &levelFiles{version: V2, quota: q}, nil
}

// readNumber reads a single-number file once (weight, burst) and closes it.
func (p Probe) readNumber(dir, name string) (Source[uint64], error) {
	h, err := openHandle(p.path(dir + "/" + name))
	if err != nil {
		return Source[uint64]{}, err
	}
	defer h.close()
	var buf []byte
	return readSource(h, &buf, func(t string) (uint64, error) { return parseNumber(name, t) })
}

// plan is the files a budget re-reads on refresh, resolved and opened once.
type plan struct {
	online         *handle
	affinityStatus *handle // nil: the calling process's own, through sched_getaffinity(2)
	cpuset         *cpusetFile
	cpusetAbsent   string
	cpuVersion     CgroupVersion // 0 when no cpu controller was found
	quotaLevels    []*levelFiles
	buf            []byte
	closed         bool
}

type cpusetFile struct {
	h       *handle
	version CgroupVersion
}

type levelFiles struct {
	version CgroupVersion
	quota   *handle // v1 cpu.cfs_quota_us or v2 cpu.max
	period  *handle // v1 cpu.cfs_period_us; nil in v2, whose period is in cpu.max
}

// limits is the numbers a refresh reads.
type limits struct {
	online, affinity, cpuset Source[CPUSet]
	quotas                   []Source[*Quota]
}

func (pl *plan) readLimits() (limits, error) {
	var l limits
	var err error
	if pl.closed {
		return l, errors.New("the budget was closed")
	}
	if l.online, err = readSource(pl.online, &pl.buf, ParseCPUList); err != nil {
		return l, err
	}
	if pl.affinityStatus == nil {
		set, err := ownAffinity()
		if err != nil {
			return l, &SyscallError{Name: "sched_getaffinity(2)", Err: err}
		}
		l.affinity = present(Origin{Syscall: "sched_getaffinity(2)"}, set)
	} else {
		type allowed struct {
			set CPUSet
			ok  bool
		}
		s, err := readSource(pl.affinityStatus, &pl.buf, func(t string) (allowed, error) {
			set, ok, err := parseCpusAllowed(t)
			return allowed{set, ok}, err
		})
		switch {
		case err != nil:
			return l, err
		case !s.Present:
			l.affinity = absent[CPUSet](s.Reason)
		case !s.Value.ok:
			l.affinity = absent[CPUSet](pl.affinityStatus.path + " has no Cpus_allowed_list")
		default:
			l.affinity = present(s.Origin, s.Value.set)
		}
	}
	if pl.cpuset != nil {
		if l.cpuset, err = readSource(pl.cpuset.h, &pl.buf, ParseCPUList); err != nil {
			return l, err
		}
	} else {
		l.cpuset = absent[CPUSet](pl.cpusetAbsent)
	}
	for _, files := range pl.quotaLevels {
		q, err := pl.readQuota(files)
		if err != nil {
			return l, err
		}
		l.quotas = append(l.quotas, q)
	}
	return l, nil
}

func (pl *plan) readQuota(files *levelFiles) (Source[*Quota], error) {
	if files.period == nil {
		return readSource(files.quota, &pl.buf, parseCPUMax)
	}
	type cfsQuota struct {
		us      uint64
		limited bool
	}
	q, err := readSource(files.quota, &pl.buf, func(t string) (cfsQuota, error) {
		us, limited, err := parseCfsQuota(t)
		return cfsQuota{us, limited}, err
	})
	switch {
	case err != nil:
		return Source[*Quota]{}, err
	case !q.Present:
		return absent[*Quota](q.Reason), nil
	case !q.Value.limited:
		// Unlimited: the period does not matter, so it is not read (refresh is hot).
		return present[*Quota](q.Origin, nil), nil
	}
	per, err := readSource(files.period, &pl.buf, parseCfsPeriod)
	switch {
	case err != nil:
		return Source[*Quota]{}, err
	case !per.Present:
		return absent[*Quota](per.Reason), nil
	}
	return present(Origin{Path: files.quota.path}, &Quota{QuotaUS: q.Value.us, PeriodUS: per.Value}), nil
}

func (pl *plan) cgroupVersion() string {
	var cpuset CgroupVersion
	if pl.cpuset != nil {
		cpuset = pl.cpuset.version
	}
	switch {
	case pl.cpuVersion == 0 && cpuset == 0:
		return "none"
	case pl.cpuVersion != 0 && cpuset != 0 && pl.cpuVersion != cpuset:
		return "hybrid"
	case pl.cpuVersion != 0:
		return pl.cpuVersion.String()
	}
	return cpuset.String()
}

func (pl *plan) close() {
	if pl == nil {
		return
	}
	pl.closed = true
	pl.online.close()
	pl.affinityStatus.close()
	if pl.cpuset != nil {
		pl.cpuset.h.close()
	}
	for _, l := range pl.quotaLevels {
		l.quota.close()
		l.period.close()
	}
}

// readSource reads h and parses its text; a missing file is an absent source, a parse error
// names the file.
func readSource[T any](h *handle, buf *[]byte, parse func(string) (T, error)) (Source[T], error) {
	text, missing, err := h.read(buf)
	if err != nil {
		return Source[T]{}, err
	}
	if missing != "" {
		return absent[T](missing), nil
	}
	v, err := parse(text)
	if err != nil {
		return Source[T]{}, parseFailed(h.path, err)
	}
	return present(Origin{Path: h.path}, v), nil
}

// parseOptional parses a file read once at resolve; missing != "" when it does not exist.
func parseOptional[T any](path string, parse func(string) (T, error)) (v T, missing string, err error) {
	text, missing, err := readWhole(path)
	if err != nil || missing != "" {
		return v, missing, err
	}
	if v, err = parse(text); err != nil {
		return v, "", parseFailed(path, err)
	}
	return v, "", nil
}
