// This file owns the host counters read once per period: this process's CPU time, the busy
// and idle time of the CPUs it may run on, runnable tasks, the quota, throttling, and every
// thread's run time and run-queue wait. Port of crates/cotenant/src/sampler.rs (HostSampler,
// HostCounters, HostDelta), plus the per-thread part of pool/control.rs.
//
// Sources, most precise first (the friendly thread pool of the paper on CPU overcommitment
// read /proc/stat in 10 ms ticks over all CPUs):
//   - this process: clock_gettime(CLOCK_PROCESS_CPUTIME_ID), ns;
//   - busy time of the allowed CPUs: cgroup v1 cpuacct.usage_percpu of the root cgroup (ns,
//     every task on the host), else /proc/stat's per-CPU lines (clock ticks);
//   - idle time: /proc/stat when it is the busy source, else the period minus busy time;
//   - runnable tasks: /proc/loadavg;
//   - quota: Budget.Refresh every period, and a full detection every resolveEvery, so that a
//     cgroup move or a controller enabled at run time is followed too (the Rust sampler only
//     refreshes);
//   - throttling: cpu.stat of every cgroup level that has a quota, the largest growth (the
//     Rust sampler reads the leaf's only, which misses an ancestor's throttling: a cgroup
//     without a quota of its own is never throttled itself, its parent is);
//   - threads: threads.go.
//
// Files are opened once and re-read with pread at offset 0.

package cotenant

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// resolveEvery is how often the sampler detects the budget again from scratch (seconds are
// what Go's own GOMAXPROCS update uses); between, it only refreshes the numbers.
const resolveEvery = time.Second

// hostReading is one reading of the host counters; times are cumulative nanoseconds.
type hostReading struct {
	at           time.Time
	selfNS       uint64
	busyNS       uint64
	idleNS       uint64
	hasIdle      bool // the busy source reports idle time too
	procsRunning uint32
	throttledNS  uint64
	allowed      CPUSet
	quotaCPUs    float64
	hasQuota     bool // a quota binds
	limit        float64
	onlineCPUs   int
	// Every thread's totals (threads.go); hasThreads is false without schedstat.
	threadsCPUNS, threadsWaitNS uint64
	hasThreads                  bool
}

// hostSampler reads hostReadings for the calling process (or a fixture tree).
type hostSampler struct {
	probe      Probe
	budget     *Budget
	resolvedAt time.Time
	busy       *handle
	busyIsAcct bool // busy is cpuacct.usage_percpu, else /proc/stat
	loadavg    *handle
	cpuStats   map[string]*cpuStatFile // by path, of the quota levels
	throttled  uint64                  // Σ per reading of the largest growth over the levels
	tickNS     uint64
	threads    *threadSampler
	cpuClock   func() (uint64, error)
	now        func() time.Time
	buf        []byte
}

type cpuStatFile struct {
	h    *handle
	last uint64 // throttled ns at the last reading
	seen bool
}

// newHostSampler detects the budget and opens the files of the system under p's root.
func newHostSampler(p Probe) (*hostSampler, error) {
	b, err := p.Detect()
	if err != nil {
		return nil, fmt.Errorf("cannot detect the CPU budget: %w", err)
	}
	s := &hostSampler{probe: p, budget: b, resolvedAt: time.Now(), cpuStats: map[string]*cpuStatFile{},
		tickNS: 1e9 / clockTicksPerSecond(), cpuClock: processCPUNanos, now: time.Now,
		threads: newThreadSampler(p.path("/proc/self/task"))}
	if s.loadavg, err = s.open("/proc/loadavg"); err != nil {
		s.close()
		return nil, err
	}
	if path := s.rootCpuacctUsage(); path != "" {
		if h, err := openHandle(path); err == nil && h.f != nil {
			s.busy, s.busyIsAcct = h, true
		}
	}
	if s.busy == nil {
		if s.busy, err = s.open("/proc/stat"); err != nil {
			s.close()
			return nil, err
		}
	}
	s.openCPUStats()
	return s, nil
}

// open opens a file that must exist.
func (s *hostSampler) open(hostPath string) (*handle, error) {
	path := s.probe.path(hostPath)
	h, err := openHandle(path)
	if err != nil {
		return nil, err
	}
	if h.f == nil {
		return nil, fmt.Errorf("cannot open %s: %s", path, h.missing)
	}
	return h, nil
}

// rootCpuacctUsage is the root cgroup's cpuacct.usage_percpu when a cgroup v1 cpuacct
// hierarchy is mounted at its root (a container that sees only its own subtree would report
// only itself); "" otherwise.
func (s *hostSampler) rootCpuacctUsage() string {
	text, missing, err := readWhole(s.probe.path("/proc/self/mountinfo"))
	if err != nil || missing != "" {
		return ""
	}
	mounts, err := parseCgroupMounts(text)
	if err != nil {
		return ""
	}
	for _, m := range mounts {
		if !m.isV2 && m.hasController("cpuacct") && m.root == "/" {
			path := s.probe.path(m.mountPoint + "/cpuacct.usage_percpu")
			if _, err := os.Stat(path); err == nil {
				return path
			}
		}
	}
	return ""
}

// openCPUStats opens cpu.stat next to every quota level's quota file, keeping the files
// (and their last values) of levels already open.
func (s *hostSampler) openCPUStats() {
	keep := map[string]bool{}
	for _, l := range s.budget.Quotas() {
		if !l.Quota.Present || l.Quota.Origin.Path == "" {
			continue
		}
		path := filepath.Dir(l.Quota.Origin.Path) + "/cpu.stat"
		keep[path] = true
		if s.cpuStats[path] == nil {
			if h, err := openHandle(path); err == nil && h.f != nil {
				s.cpuStats[path] = &cpuStatFile{h: h}
			}
		}
	}
	for path, f := range s.cpuStats {
		if !keep[path] {
			f.h.close()
			delete(s.cpuStats, path)
		}
	}
}

// read takes a reading. On error the reading is lost but the sampler stays usable.
func (s *hostSampler) read() (*hostReading, error) {
	r := &hostReading{at: s.now()}
	var err error
	if r.selfNS, err = s.cpuClock(); err != nil {
		return nil, err
	}
	if err := s.refreshBudget(r.at); err != nil {
		return nil, fmt.Errorf("cannot refresh the CPU budget: %w", err)
	}
	b := s.budget
	r.allowed = b.AllowedSet()
	r.limit = b.Limit()
	if b.Binding() == ConstraintQuota {
		r.quotaCPUs, r.hasQuota = b.Limit(), true
	}
	if b.Online().Present {
		r.onlineCPUs = b.Online().Value.Count()
	}

	text, err := s.readFile(s.loadavg)
	if err != nil {
		return nil, err
	}
	running, err := parseLoadavgRunning(text)
	if err != nil {
		return nil, parseFailed(s.loadavg.path, err)
	}
	r.procsRunning = uint32(min(running, 1<<32-1))

	if text, err = s.readFile(s.busy); err != nil {
		return nil, err
	}
	if s.busyIsAcct {
		perCPU, err := parseUsagePercpu(text)
		if err != nil {
			return nil, parseFailed(s.busy.path, err)
		}
		for cpu, ns := range perCPU {
			if r.allowed.Contains(cpu) {
				r.busyNS = satAdd(r.busyNS, ns)
			}
		}
	} else {
		st, err := parseProcStat(text)
		if err != nil {
			return nil, parseFailed(s.busy.path, err)
		}
		var busy, idle uint64
		for _, c := range st.perCPU {
			if r.allowed.Contains(c.id) {
				busy, idle = satAdd(busy, c.times.busy()), satAdd(idle, c.times.idle())
			}
		}
		r.busyNS, r.idleNS, r.hasIdle = satMul(busy, s.tickNS), satMul(idle, s.tickNS), true
	}

	if err := s.readThrottling(); err != nil {
		return nil, err
	}
	r.throttledNS = s.throttled

	if err := s.threads.read(); err != nil {
		return nil, err
	}
	r.threadsCPUNS, r.threadsWaitNS, r.hasThreads = s.threads.cpuNS, s.threads.waitNS, s.threads.available()
	return r, nil
}

// refreshBudget re-reads the budget's numbers, or detects it afresh every resolveEvery.
func (s *hostSampler) refreshBudget(now time.Time) error {
	if now.Sub(s.resolvedAt) >= resolveEvery {
		s.resolvedAt = now
		if b, err := s.probe.Detect(); err == nil {
			s.budget.Close()
			s.budget = b
			s.openCPUStats()
			return nil
		}
		// Fall through: Refresh says what is wrong, or the old paths still work.
	}
	return s.budget.Refresh()
}

// readThrottling adds the largest growth of throttled time among the levels that have a
// quota now (levels without one are never throttled themselves).
func (s *hostSampler) readThrottling() error {
	limited := map[string]bool{}
	for _, l := range s.budget.Quotas() {
		if l.Quota.Present && l.Quota.Value != nil {
			limited[filepath.Dir(l.Quota.Origin.Path)+"/cpu.stat"] = true
		}
	}
	var most uint64
	for path, f := range s.cpuStats {
		if !limited[path] {
			f.seen = false
			continue
		}
		text, missing, err := f.h.read(&s.buf)
		if err != nil {
			return err
		}
		if missing != "" {
			f.seen = false
			continue
		}
		st, err := parseCPUStat(text)
		if err != nil {
			return parseFailed(path, err)
		}
		if f.seen {
			most = max(most, satSub(st.throttledNS, f.last))
		}
		f.last, f.seen = st.throttledNS, true
	}
	s.throttled = satAdd(s.throttled, most)
	return nil
}

func (s *hostSampler) readFile(h *handle) (string, error) {
	text, missing, err := h.read(&s.buf)
	if err != nil {
		return "", err
	}
	if missing != "" {
		return "", errors.New(missing)
	}
	return text, nil
}

func (s *hostSampler) close() {
	if s == nil {
		return
	}
	if s.budget != nil {
		s.budget.Close()
	}
	s.loadavg.close()
	s.busy.close()
	for _, f := range s.cpuStats {
		f.h.close()
	}
	s.threads.close()
}

// sampleBetween is the policy sample of the period between two readings (HostDelta::between
// and the Rust controller's tick). threads is Options.Threads; gomaxprocs the value in force
// during the period; runnable the runnable goroutines at its end. False when the allowed CPUs
// changed in between (the sums are not comparable) or time did not advance.
//
// Workers are Go's threads: their CPU time and run-queue wait are the growth of the
// per-thread totals, and they were busy (runnable: running or waiting for a CPU) for the sum
// of both, at most gomaxprocs for the whole period, since only that many threads run Go code
// at once. Without schedstat, busy is the process's CPU time and nothing counts as waiting.
func sampleBetween(before, now *hostReading, threads, gomaxprocs, runnable uint32) (Sample, bool) {
	if !before.allowed.Equal(now.allowed) {
		return Sample{}, false
	}
	d := now.at.Sub(before.at)
	if d <= 0 {
		return Sample{}, false
	}
	elapsed := uint64(d)
	cpus := uint32(now.allowed.Count())
	busy := satSub(now.busyNS, before.busyNS)
	idle := satSub(satMul(elapsed, uint64(cpus)), busy)
	if before.hasIdle && now.hasIdle {
		idle = satSub(now.idleNS, before.idleNS)
	}
	self := satSub(now.selfNS, before.selfNS)
	running := now.procsRunning
	s := Sample{
		ElapsedNS:    elapsed,
		Threads:      threads,
		CPUs:         cpus,
		SelfNS:       self,
		BusyNS:       busy,
		IdleNS:       idle,
		ProcsRunning: &running,
		ThrottledNS:  satSub(now.throttledNS, before.throttledNS),
		Queued:       runnable,
	}
	if now.hasQuota {
		q := now.quotaCPUs
		s.QuotaCPUs = &q
	}
	most := satMul(elapsed, uint64(max(gomaxprocs, 1)))
	if before.hasThreads && now.hasThreads {
		cpu := satSub(now.threadsCPUNS, before.threadsCPUNS)
		wait := satSub(now.threadsWaitNS, before.threadsWaitNS)
		s.WorkersCPUNS, s.WorkersRunqWaitNS = &cpu, &wait
		s.WorkersBusyNS = min(satAdd(cpu, wait), most)
	} else {
		cpu := self
		s.WorkersCPUNS = &cpu
		s.WorkersBusyNS = min(self, most)
	}
	return s, true
}
