// Tests of the pure parts of detection: the hierarchy walk (cpus/hierarchy.rs's tests) and
// derive and rounding (cpus/mod.rs's tests), ported.

package cotenant

import (
	"slices"
	"strings"
	"testing"
)

const hierarchyMounts = `32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
34 31 0:31 /kube /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`

func place(t *testing.T, cgroupText, mountinfo, v1 string) (*controllerPlace, string) {
	t.Helper()
	m, err := parseProcCgroup(cgroupText)
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := parseCgroupMounts(mountinfo)
	if err != nil {
		t.Fatal(err)
	}
	if v1 != "" {
		return locateV1(v1, m, mounts)
	}
	return locateV2(m, mounts)
}

func TestWalksEveryAncestorUpToTheMountRoot(t *testing.T) {
	p, _ := place(t, "1:cpu:/a/b\n", hierarchyMounts, "cpu")
	want := []level{{"/a/b", "/sys/fs/cgroup/cpu/a/b"}, {"/a", "/sys/fs/cgroup/cpu/a"}, {"/", "/sys/fs/cgroup/cpu"}}
	if got := p.levels(); !slices.Equal(got, want) {
		t.Fatalf("levels %v, want %v", got, want)
	}
}

func TestStopsAtANamespacedMountRoot(t *testing.T) {
	p, _ := place(t, "3:cpuset:/kube/pod/c\n", hierarchyMounts, "cpuset")
	var cgroups []string
	for _, l := range p.levels() {
		cgroups = append(cgroups, l.cgroup)
	}
	if !slices.Equal(cgroups, []string{"/kube/pod/c", "/kube/pod", "/kube"}) || p.leafDir() != "/sys/fs/cgroup/cpuset/pod/c" {
		t.Fatalf("levels %v, leaf %s", cgroups, p.leafDir())
	}
}

func TestTheBroadestOfTwoMountsWins(t *testing.T) {
	two := "32 31 0:29 /kube/pod /ctr/sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n" +
		"33 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
	if p, _ := place(t, "1:cpu:/kube/pod/c\n", two, "cpu"); len(p.levels()) != 4 {
		t.Fatalf("%v: /kube/pod/c, /kube/pod, /kube and / should be visible", p.levels())
	}
}

func TestExplainsWhatIsMissing(t *testing.T) {
	for _, c := range []struct{ cgroup, mounts, v1, want string }{
		{"1:cpu:/\n", hierarchyMounts, "cpuacct", "no cgroup v1 hierarchy"},
		{"3:cpuset:/other\n", hierarchyMounts, "cpuset", "outside"},
		{"1:cpu:/\n", "", "cpu", "mounted"},
	} {
		if p, why := place(t, c.cgroup, c.mounts, c.v1); p != nil || !strings.Contains(why, c.want) {
			t.Errorf("%q: %v %q, want %q", c.cgroup, p, why, c.want)
		}
	}
	if p, _ := place(t, "0::/x\n", hierarchyMounts, ""); p.leafDir() != "/sys/fs/cgroup/unified/x" {
		t.Errorf("v2 leaf %s", p.leafDir())
	}
}

func set(t *testing.T, list string) Source[CPUSet] {
	s, err := ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	return present(Origin{Syscall: "test"}, s)
}

func TestTheNarrowestCPUSetBindsAndTiesGoToTheBroaderSource(t *testing.T) {
	none := absent[CPUSet]("test")
	for _, c := range []struct {
		online, cpuset, affinity Source[CPUSet]
		allowed                  int
		binding                  Constraint
	}{
		{set(t, "0-3"), set(t, "0-3"), set(t, "0-3"), 4, ConstraintOnline},
		{set(t, "0-3"), set(t, "0"), set(t, "0"), 1, ConstraintCpuset},
		{set(t, "0-3"), set(t, "0-3"), set(t, "2"), 1, ConstraintAffinity},
		{none, none, set(t, "1,3"), 2, ConstraintAffinity},
	} {
		d, err := derive(c.online, c.cpuset, c.affinity, nil)
		if err != nil || d.allowed != c.allowed || d.binding != c.binding {
			t.Errorf("%v %v %v: got %+v %v", c.online.Value, c.cpuset.Value, c.affinity.Value, d, err)
		}
	}
}

func TestTheSmallestQuotaOfAnyLevelBindsNearestOnTies(t *testing.T) {
	q := func(quota, period uint64) Source[*Quota] {
		return present(Origin{Syscall: "test"}, &Quota{quota, period})
	}
	levels := []Source[*Quota]{present[*Quota](Origin{}, nil), q(100_000, 100_000), q(50_000, 50_000)}
	d, _ := derive(set(t, "0-3"), absent[CPUSet](""), absent[CPUSet](""), levels)
	if d.num != 100_000 || d.den != 100_000 || d.binding != ConstraintQuota || d.bindingLevel != 1 {
		t.Errorf("%+v", d)
	}
	d, _ = derive(set(t, "0-3"), absent[CPUSet](""), absent[CPUSet](""), []Source[*Quota]{q(800_000, 100_000)})
	if d.num != 4 || d.den != 1 || d.binding != ConstraintOnline {
		t.Errorf("a quota above the CPUs binds: %+v", d)
	}
}

func TestNoCPUsAtAllIsUndetermined(t *testing.T) {
	none := absent[CPUSet]("test")
	if _, err := derive(none, none, none, nil); err == nil {
		t.Error("no sources: no error")
	}
	if _, err := derive(set(t, "0-1"), set(t, "2-3"), none, nil); err == nil || !strings.Contains(err.Error(), "no CPU in common") {
		t.Error(err)
	}
}

func TestRoundingIsExactAndClamped(t *testing.T) {
	for _, c := range []struct {
		num, den             uint64
		allowed              int
		floor, ceil, nearest int
	}{
		{50_000, 100_000, 2, 1, 1, 1},
		{150_000, 100_000, 2, 1, 2, 2},
		{149_999, 100_000, 2, 1, 2, 1},
		{299_999, 100_000, 4, 2, 3, 3},
		{2, 1, 2, 2, 2, 2},
		{0, 100_000, 2, 1, 1, 1},
		{^uint64(0), 1, 8, 8, 8, 8},
		{^uint64(0), ^uint64(0) - 1, 8, 1, 2, 1},
	} {
		got := [3]int{threadsFor(c.num, c.den, c.allowed, Floor), threadsFor(c.num, c.den, c.allowed, Ceil), threadsFor(c.num, c.den, c.allowed, Nearest)}
		if got != [3]int{c.floor, c.ceil, c.nearest} {
			t.Errorf("%d/%d on %d: got %v", c.num, c.den, c.allowed, got)
		}
	}
	if r, err := ParseRounding("ceil"); r != Ceil || err != nil {
		t.Error(r, err)
	}
	if _, err := ParseRounding("up"); err == nil || !strings.Contains(err.Error(), "floor, ceil or nearest") {
		t.Error(err)
	}
}

func TestCPUsWord(t *testing.T) {
	for x, want := range map[float64]string{1: "1 CPU", 0.5: "0.5 CPU", 1.5: "1.5 CPUs", 2: "2 CPUs", 1.2345: "1.234 CPUs"} {
		if got := CPUsWord(x); got != want {
			t.Errorf("%v: %q, want %q", x, got, want)
		}
	}
}
