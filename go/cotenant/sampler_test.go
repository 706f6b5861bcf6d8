// Tests of the host sampler against a fixture tree built in a temporary directory: two
// readings with the counters moved in between, and the sample of the period between them.

package cotenant

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// samplerTree is a cgroup v2 host with 2 CPUs: the process in /team/app, a quota of 1 CPU on
// /team and none on /team/app, two threads.
func samplerTree(t *testing.T) string {
	root := t.TempDir()
	for path, text := range map[string]string{
		"proc/self/cgroup":                     "0::/team/app\n",
		"proc/self/mountinfo":                  "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"proc/self/status":                     "Name:\tx\nCpus_allowed_list:\t0-1\n",
		"proc/loadavg":                         "0.00 0.00 0.00 3/100 123\n",
		"proc/stat":                            "cpu  300 0 0 2000 0 0 0 0 0 0\ncpu0 100 0 0 1000 0 0 0 0 0 0\ncpu1 200 0 0 1000 0 0 0 0 0 0\nprocs_running 3\n",
		"proc/self/task/100/schedstat":         "1000 200 3\n",
		"proc/self/task/101/schedstat":         "500 500 1\n",
		"sys/devices/system/cpu/online":        "0-1\n",
		"sys/fs/cgroup/cgroup.controllers":     "cpuset cpu\n",
		"sys/fs/cgroup/team/cpu.max":           "100000 100000\n",
		"sys/fs/cgroup/team/cpu.stat":          "usage_usec 9\nnr_periods 5\nnr_throttled 1\nthrottled_usec 1000\n",
		"sys/fs/cgroup/team/app/cpu.max":       "max 100000\n",
		"sys/fs/cgroup/team/app/cpu.stat":      "usage_usec 9\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
		"sys/fs/cgroup/team/app/cpu.weight":    "100\n",
		"sys/fs/cgroup/team/app/cpu.max.burst": "0\n",
	} {
		writeFile(t, filepath.Join(root, path), text)
	}
	return root
}

func TestTheSampleOfAPeriodComesFromTwoReadings(t *testing.T) {
	root := samplerTree(t)
	s, err := newHostSampler(ProbeAt(root))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	t0 := time.Unix(1000, 0)
	clock, at := uint64(5_000_000), t0
	s.cpuClock = func() (uint64, error) { return clock, nil }
	s.now = func() time.Time { return at }
	s.tickNS = 10_000_000
	if s.busyIsAcct {
		t.Fatal("a v2 host has no cpuacct: /proc/stat is the busy source")
	}
	r1, err := s.read()
	if err != nil {
		t.Fatal(err)
	}

	clock, at = 20_000_000, t0.Add(10*time.Millisecond)
	writeFile(t, filepath.Join(root, "proc/stat"), "cpu0 101 0 0 1000 0 0 0 0 0 0\ncpu1 200 0 0 1001 0 0 0 0 0 0\n")
	writeFile(t, filepath.Join(root, "proc/loadavg"), "0.00 0.00 0.00 4/100 123\n")
	// The parent is throttled 3 ms; the leaf, without a quota, never is.
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/team/cpu.stat"), "nr_periods 6\nnr_throttled 2\nthrottled_usec 4000\n")
	writeFile(t, filepath.Join(root, "proc/self/task/100/schedstat"), "6000 1200 9\n")
	if err := os.RemoveAll(filepath.Join(root, "proc/self/task/101")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "proc/self/task/102/schedstat"), "300 50 1\n")
	r2, err := s.read()
	if err != nil {
		t.Fatal(err)
	}

	got, ok := sampleBetween(r1, r2, 2, 2, 1)
	if !ok {
		t.Fatal("the readings are comparable")
	}
	want := Sample{ElapsedNS: 10_000_000, Threads: 2, CPUs: 2, QuotaCPUs: ptr(1.0), SelfNS: 15_000_000,
		BusyNS: 10_000_000, IdleNS: 10_000_000, ProcsRunning: ptr(uint32(4)), ThrottledNS: 3_000_000,
		WorkersBusyNS: 6350, WorkersCPUNS: ptr(uint64(5300)), WorkersRunqWaitNS: ptr(uint64(1050)), Queued: 1}
	if !sameSample(got, want) {
		t.Fatalf("sample\n got %s\nwant %s", sampleString(got), sampleString(want))
	}

	// The quota is refreshed every reading: lifting it is seen at once.
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/team/cpu.max"), "max 100000\n")
	at = at.Add(10 * time.Millisecond)
	r3, err := s.read()
	if err != nil || r3.hasQuota {
		t.Fatalf("after lifting the quota: quota %v, %v", r3.hasQuota, err)
	}
}

func TestAMalformedFileNamesItself(t *testing.T) {
	root := samplerTree(t)
	s, err := newHostSampler(ProbeAt(root))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	writeFile(t, filepath.Join(root, "proc/self/task/100/schedstat"), "banana\n")
	_, err = s.read()
	if err == nil || !containsAll(err.Error(), "task/100/schedstat", "banana") {
		t.Fatalf("got %v", err)
	}
	writeFile(t, filepath.Join(root, "proc/self/task/100/schedstat"), "1 2 3\n")
	writeFile(t, filepath.Join(root, "proc/loadavg"), "0.00\n")
	if _, err = s.read(); err == nil || !containsAll(err.Error(), "proc/loadavg", "fewer than 4 fields") {
		t.Fatalf("got %v", err)
	}
}

func TestReadingsAreIncomparableAcrossACPUSetChange(t *testing.T) {
	a, b := &hostReading{at: time.Unix(0, 0)}, &hostReading{at: time.Unix(0, 10)}
	a.allowed.Add(0)
	b.allowed.Add(1)
	if _, ok := sampleBetween(a, b, 1, 1, 0); ok {
		t.Error("different CPU sets are comparable")
	}
	b.allowed = a.allowed
	if _, ok := sampleBetween(b, a, 1, 1, 0); ok {
		t.Error("time went backwards and the readings are comparable")
	}
}

func TestWithoutSchedstatNothingCountsAsWaiting(t *testing.T) {
	a := &hostReading{at: time.Unix(0, 0), selfNS: 0}
	b := &hostReading{at: time.Unix(0, 10_000_000), selfNS: 30_000_000}
	a.allowed.Add(0)
	b.allowed.Add(0)
	s, ok := sampleBetween(a, b, 4, 2, 0)
	if !ok || s.WorkersRunqWaitNS != nil || s.WaitingWorkers() != 0 || s.WorkersBusyNS != 20_000_000 || s.IdleNS != 10_000_000 {
		t.Fatalf("%s", sampleString(s))
	}
}

func TestAReusedThreadIDCountsAsANewThread(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "42", "schedstat")
	writeFile(t, path, "1000 100 1\n")
	ts := newThreadSampler(root)
	defer ts.close()
	if err := ts.read(); err != nil || ts.cpuNS != 1000 || ts.threads != 1 {
		t.Fatal(ts.cpuNS, err)
	}
	writeFile(t, path, "300 30 1\n") // a new thread with the same tid
	if err := ts.read(); err != nil || ts.cpuNS != 1300 || ts.waitNS != 130 {
		t.Fatal(ts.cpuNS, ts.waitNS, err)
	}
}

func sameSample(a, b Sample) bool { return sampleString(a) == sampleString(b) }

func sampleString(s Sample) string {
	return "elapsed " + show(&s.ElapsedNS) + " threads " + show(&s.Threads) + " cpus " + show(&s.CPUs) +
		" quota " + show(s.QuotaCPUs) + " self " + show(&s.SelfNS) + " busy " + show(&s.BusyNS) + " idle " + show(&s.IdleNS) +
		" running " + show(s.ProcsRunning) + " throttled " + show(&s.ThrottledNS) + " workers busy " + show(&s.WorkersBusyNS) +
		" cpu " + show(s.WorkersCPUNS) + " wait " + show(s.WorkersRunqWaitNS) + " queued " + show(&s.Queued)
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
