// Tests of the pure parsers (the Rust procfs unit tests, ported), and a fuzz target that
// checks none of them panics, standing in for the Rust proptests. `go test` runs the seed
// corpus; `go test -fuzz FuzzParsersNeverPanic` explores.

package cotenant

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func parseErr(t *testing.T, err error) *ParseError {
	t.Helper()
	pe, ok := err.(*ParseError)
	if !ok {
		t.Fatalf("want a *ParseError, got %T %v", err, err)
	}
	return pe
}

func TestCPUList(t *testing.T) {
	set, err := ParseCPUList("0-3,7,10-11\n")
	if err != nil || set.Count() != 7 || set.String() != "0-3,7,10-11" || !slices.Equal(slices.Collect(set.All()), []int{0, 1, 2, 3, 7, 10, 11}) {
		t.Fatalf("got %v (%d CPUs), %v", set, set.Count(), err)
	}
	if s, err := ParseCPUList("\n"); err != nil || !s.IsEmpty() || s.String() != "" {
		t.Fatalf("an empty list is the empty set: %v %v", s, err)
	}
	for _, bad := range []string{"0-", "a", "3-1", "1,,2", "0-99999999", "-1", "0-7:2"} {
		_, err := ParseCPUList(bad)
		if pe := parseErr(t, err); pe.Excerpt != bad {
			t.Errorf("%q: excerpt %q", bad, pe.Excerpt)
		}
	}
	a, _ := ParseCPUList("0-5")
	b := cpuSetFromMask([]uint64{0b1010_1000, 0})
	if got := a.Intersection(b).String(); got != "3,5" || !b.Intersection(a).Equal(a.Intersection(b)) {
		t.Fatalf("intersection %q", got)
	}
	if s, _ := ParseCPUList("64"); !s.Contains(64) || s.Contains(0) {
		t.Fatal("64")
	}
}

func TestProcCgroup(t *testing.T) {
	m, err := parseProcCgroup("9:name=systemd:/\n4:cpu,cpuacct:/docker/abc\n3:cpuset:/\n0::/init.scope\n")
	if err != nil || len(m) != 4 {
		t.Fatal(m, err)
	}
	if !m[1].hasController("cpu") || !m[1].hasController("cpuacct") || m[1].hasController("cpuset") || m[1].path != "/docker/abc" {
		t.Errorf("line 2: %+v", m[1])
	}
	if !m[3].isV2() || m[3].path != "/init.scope" {
		t.Errorf("line 4: %+v", m[3])
	}
	if m, _ := parseProcCgroup("0::/a:b\n"); m[0].path != "/a:b" {
		t.Errorf("colons in paths: %q", m[0].path)
	}
	for _, bad := range []string{"x::/\n", "0:/\n", "0::relative\n"} {
		if _, err := parseProcCgroup(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

const hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime shared:5 - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

func TestMountinfo(t *testing.T) {
	m, err := parseCgroupMounts(hybridMountinfo)
	if err != nil || len(m) != 4 {
		t.Fatal(m, err)
	}
	if !m[0].hasController("cpu") || m[0].hasController("cpuacct") || !m[2].hasController("cpuset") || !m[3].isV2 || m[3].hasController("cpu") {
		t.Errorf("%+v", m)
	}
	ns := cgroupMount{root: "/docker/abc", mountPoint: "/sys/fs/cgroup/cpu", superOptions: []string{"cpu"}}
	for path, want := range map[string]string{"/docker/abc": "/sys/fs/cgroup/cpu", "/docker/abc/x/": "/sys/fs/cgroup/cpu/x", "/docker/abc2": "", "/other": ""} {
		if got, _ := ns.dirOf(path); got != want {
			t.Errorf("dirOf(%q) = %q, want %q", path, got, want)
		}
	}
	ns.root = "/"
	if got, _ := ns.dirOf("/"); got != "/sys/fs/cgroup/cpu" {
		t.Errorf("root: %q", got)
	}
	if _, ok := ns.dirOf("/../x"); ok {
		t.Error("a cgroup outside the namespace is visible")
	}
	for in, want := range map[string]string{`/a\040b\\c`: `/a b\\c`, `/a\134b`: `/a\b`, `\777`: `\777`, `\04`: `\04`} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := parseCgroupMounts("1 2 3:4 / /x rw cgroup cgroup rw\n"); err == nil || !strings.Contains(err.Error(), "separator") {
		t.Error(err)
	}
	if _, err := parseCgroupMounts("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup\n"); err == nil || !strings.Contains(err.Error(), "too few fields") {
		t.Error(err)
	}
}

func TestCgroupFiles(t *testing.T) {
	if q, err := parseCPUMax("max 100000\n"); q != nil || err != nil {
		t.Fatal(q, err)
	}
	if q, err := parseCPUMax("150000 100000\n"); err != nil || *q != (Quota{150000, 100000}) || q.CPUs() != 1.5 {
		t.Fatal(q, err)
	}
	for _, bad := range []string{"banana 100000", "max", "50000 0", "50000 100000 7", "-5 100000", ""} {
		_, err := parseCPUMax(bad)
		if pe := parseErr(t, err); pe.Format != "cpu.max" || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, limited, err := parseCfsQuota("-1\n"); limited || err != nil {
		t.Error("-1 is unlimited")
	}
	if q, limited, err := parseCfsQuota("50000\n"); q != 50000 || !limited || err != nil {
		t.Error(q, err)
	}
	if _, _, err := parseCfsQuota("12abc"); err == nil || !strings.Contains(err.Error(), "12abc") {
		t.Error(err)
	}
	if _, err := parseCfsPeriod("0\n"); err == nil || !strings.Contains(err.Error(), "period is 0") {
		t.Error(err)
	}
	if u, err := parseUsagePercpu("335787734143 418572099613 \n"); err != nil || !slices.Equal(u, []uint64{335787734143, 418572099613}) {
		t.Error(u, err)
	}
	if _, err := parseUsagePercpu("1 2 x3 4\n"); err == nil || parseErr(t, err).Excerpt != "x3" || !strings.Contains(err.Error(), "CPU 2") {
		t.Error(err)
	}
	st, err := parseCPUStat("nr_periods 120\nnr_throttled 7\nthrottled_time 123456789\nwait_sum 5\n")
	if err != nil || st != (cpuStat{nrPeriods: 120, nrThrottled: 7, throttledNS: 123456789}) {
		t.Error(st, err)
	}
	st, err = parseCPUStat("usage_usec 1003429\nuser_usec 586133\nnr_periods 120\nnr_throttled 7\nthrottled_usec 35000\nnr_bursts 0\n")
	if err != nil || st != (cpuStat{nrPeriods: 120, nrThrottled: 7, throttledNS: 35_000_000, usageNS: 1_003_429_000, hasUsage: true}) {
		t.Error(st, err)
	}
	for _, bad := range []string{"nr_periods x", "nr_throttled", "throttled_usec 1 2", "usage_usec -1"} {
		_, err := parseCPUStat("user_usec 1\n" + bad + "\nnr_bursts 0\n")
		if pe := parseErr(t, err); pe.Format != "cpu.stat" || pe.Excerpt != bad {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestStatusLoadavgSchedstat(t *testing.T) {
	if s, ok, err := parseCpusAllowed("Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n"); !ok || err != nil || s.Count() != 2 {
		t.Error(s, ok, err)
	}
	if _, ok, err := parseCpusAllowed("Name:\tx\n"); ok || err != nil {
		t.Error("no field")
	}
	if _, _, err := parseCpusAllowed("Cpus_allowed_list:\tz\n"); err == nil {
		t.Error("z parsed")
	}
	if n, err := parseLoadavgRunning("0.00 0.01 0.05 3/123 4567\n"); n != 3 || err != nil {
		t.Error(n, err)
	}
	for bad, want := range map[string]string{"0.00 0.01\n": "fewer than 4 fields", "0 0 0 3-123 1": "running/total", "0 0 0 x/123 1": "running is not"} {
		if _, err := parseLoadavgRunning(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if s, err := parseTaskSchedstat("1520334412 48211075 2113\n"); err != nil || s != (taskSchedstat{1520334412, 48211075, 2113}) {
		t.Error(s, err)
	}
	for _, bad := range []string{"1 2", "1 2 3 4", "1 x 3"} {
		if _, err := parseTaskSchedstat(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestProcStat(t *testing.T) {
	st, err := parseProcStat("cpu  46129 0 27725 712857 1683 0 129 52 0 0\ncpu0 21656 0 11139 361125 301 0 21 23 0 0\n" +
		"cpu2 24472 0 16585 351732 1381 0 107 29 0 0\nintr 123 4 5\nprocs_running 1\nprocs_blocked 0\n")
	if err != nil || len(st.perCPU) != 2 || st.perCPU[1].id != 2 || *st.procsRunning != 1 || *st.procsBlocked != 0 {
		t.Fatal(st, err)
	}
	if c := st.perCPU[0].times; c.busy() != 21656+11139+21+23 || c.idle() != 361125+301 {
		t.Error(c)
	}
	if st, err := parseProcStat("cpu0 1 2 3 4\ncpu1 1 2 3 4 5 6 7\n"); err != nil || st.perCPU[0].times != (cpuTimes{1, 2, 3, 4}) || st.perCPU[1].times[6] != 7 {
		t.Error("old kernels print fewer fields", st, err)
	}
	for bad, what := range map[string]string{"cpu0 1 2 3": "at least 4", "cpu1 1 x 3 4": "nice", "cpu3 1 2 3 4 5 6 7 8 9 10 1.5": "extra field",
		"cpu99999999 1 2 3 4": "maximum", "procs_running many": "procs_running"} {
		_, err := parseProcStat("cpu0 1 2 3 4\n" + bad + "\nintr 1\n")
		if pe := parseErr(t, err); pe.Excerpt != bad || !strings.Contains(err.Error(), what) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := parseProcStat("cpu  1 2 3 4\nintr 1\n"); err == nil || !strings.Contains(err.Error(), "no per-CPU") {
		t.Error(err)
	}
}

func TestParseErrorShortensItsExcerpt(t *testing.T) {
	e := newParseError("x", "bad", strings.Repeat("é", 100)+"\n")
	if got := []rune(e.Excerpt); len(got) != 81 || got[80] != '…' {
		t.Fatalf("excerpt %q", e.Excerpt)
	}
}

func TestAuxv(t *testing.T) {
	word := int(unsafe.Sizeof(uintptr(0)))
	b := make([]byte, 6*word)
	put := func(i int, v uint64) {
		if word == 8 {
			binary.NativeEndian.PutUint64(b[i*word:], v)
		} else {
			binary.NativeEndian.PutUint32(b[i*word:], uint32(v))
		}
	}
	put(0, 6) // AT_PAGESZ
	put(1, 4096)
	put(2, atClkTck)
	put(3, 250)
	if got := parseAuxv(b, atClkTck); got != 250 {
		t.Fatalf("AT_CLKTCK = %d", got)
	}
	if got := parseAuxv(b[:2*word], atClkTck); got != 0 {
		t.Fatalf("absent: %d", got)
	}
}

func FuzzParsersNeverPanic(f *testing.F) {
	for _, seed := range []string{"", "0-3,7", "1:cpu:/a", hybridMountinfo, "max 100000", "-1", "nr_periods 1\nthrottled_usec 9",
		"cpu0 1 2 3 4\nprocs_running 2", "0 0 0 3/4 5", "1 2 3", "Cpus_allowed_list:\t0-1", `\0400`, "4294967296-1", "99999999999999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ParseCPUList(s)
		parseProcCgroup(s)
		if mounts, err := parseCgroupMounts(s); err == nil {
			for _, m := range mounts {
				m.dirOf(s)
			}
		}
		parseCPUMax(s)
		parseCfsQuota(s)
		parseCfsPeriod(s)
		parseNumber("cpu.weight", s)
		parseUsagePercpu(s)
		parseCPUStat(s)
		parseCpusAllowed(s)
		parseCpusAllowed(cpusAllowedField + s)
		parseProcStat(s)
		parseLoadavgRunning(s)
		parseTaskSchedstat(s)
		parseAuxv([]byte(s), atClkTck)
	})
}
