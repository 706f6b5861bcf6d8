// Runs every shared CPU-count vector of testdata/cpus/*/ (format in its README) through
// ProbeAt, as crates/cotenant/tests/vectors.rs does for the Rust crate. A new case is a new
// directory, not a new test.

package cotenant

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var cpusVectors = filepath.Join("..", "..", "testdata", "cpus")

type cpusExpected struct {
	Description    string   `json:"description"`
	PID            *int     `json:"pid"`
	Limit          *float64 `json:"limit"`
	Threads        *int     `json:"threads"`
	ThreadsCeil    *int     `json:"threads_ceil"`
	ThreadsNearest *int     `json:"threads_nearest"`
	AllowedCPUs    *int     `json:"allowed_cpus"`
	Binding        *string  `json:"binding"`
	CgroupVersion  *string  `json:"cgroup_version"`
	BindingPath    *string  `json:"binding_path"`
	BindingCgroup  *string  `json:"binding_cgroup"`
	Error          *struct {
		File     string `json:"file"`
		Contains string `json:"contains"`
	} `json:"error"`
}

// hostPath is the origin as the host names it: the fixture root taken off.
func hostPath(o Origin, root string) string {
	if o.Path == "" {
		return o.Syscall
	}
	return "/" + strings.TrimLeft(strings.TrimPrefix(o.Path, root), "/")
}

func show[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// checkCPUsVector returns every difference between the case's expected.json and the budget.
func checkCPUsVector(root string) []string {
	text, err := os.ReadFile(filepath.Join(root, "expected.json"))
	if err != nil {
		return []string{err.Error()}
	}
	var want cpusExpected
	if err := json.Unmarshal(text, &want); err != nil {
		return []string{"expected.json: " + err.Error()}
	}
	probe := ProbeAt(root)
	var b *Budget
	if want.PID != nil {
		b, err = probe.DetectPID(*want.PID)
	} else {
		b, err = probe.Detect()
	}
	if want.Error != nil {
		if err == nil {
			b.Close()
			return []string{fmt.Sprintf("expected an error, got limit %v", b.Limit())}
		}
		var diffs []string
		if msg := err.Error(); !strings.Contains(msg, want.Error.Contains) {
			diffs = append(diffs, fmt.Sprintf("error %q does not contain %q", msg, want.Error.Contains))
		}
		if want.Error.File != "" {
			if full := root + want.Error.File; !strings.Contains(err.Error(), full) {
				diffs = append(diffs, fmt.Sprintf("error %q does not name %s", err.Error(), full))
			}
		}
		return diffs
	}
	if err != nil {
		return []string{"unexpected error: " + err.Error()}
	}
	defer b.Close()
	var diffs []string
	cmp := func(what string, want *string, got string, optional bool) {
		if want == nil && optional {
			return
		}
		if want == nil || *want != got {
			diffs = append(diffs, fmt.Sprintf("%s: want %s, got %s", what, show(want), got))
		}
	}
	num := func(what string, want *int, got int) {
		cmp(what, func() *string {
			if want == nil {
				return nil
			}
			s := fmt.Sprint(*want)
			return &s
		}(), fmt.Sprint(got), false)
	}
	if want.Limit == nil || *want.Limit != b.Limit() {
		diffs = append(diffs, fmt.Sprintf("limit: want %s, got %v", show(want.Limit), b.Limit()))
	}
	num("threads", want.Threads, b.Threads(Floor))
	num("threads_ceil", want.ThreadsCeil, b.Threads(Ceil))
	num("threads_nearest", want.ThreadsNearest, b.Threads(Nearest))
	num("allowed_cpus", want.AllowedCPUs, b.AllowedCPUs())
	cmp("binding", want.Binding, b.Binding().String(), false)
	cmp("cgroup_version", want.CgroupVersion, b.CgroupVersion(), false)
	gotPath := "null"
	if o, ok := b.BindingOrigin(); ok {
		gotPath = hostPath(o, root)
	}
	cmp("binding_path", want.BindingPath, gotPath, true)
	gotCgroup := "null"
	if l := b.BindingLevel(); l != nil {
		gotCgroup = l.Cgroup
	}
	cmp("binding_cgroup", want.BindingCgroup, gotCgroup, true)
	return diffs
}

func TestEveryCPUsVectorPasses(t *testing.T) {
	entries, err := os.ReadDir(cpusVectors)
	if err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	var cases []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(cpusVectors, e.Name(), "expected.json")); err == nil {
			cases = append(cases, e.Name())
		}
	}
	sort.Strings(cases)
	if len(cases) < 15 {
		t.Fatalf("only %d vectors in %s", len(cases), cpusVectors)
	}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			for _, d := range checkCPUsVector(filepath.Join(cpusVectors, name)) {
				t.Errorf("%s: %s", name, d)
			}
		})
	}
}

// Copy a vector, detect, change the quota on disk, refresh: the new quota is seen through the
// files opened at detection.
func TestRefreshRereadsTheNumbers(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join(cpusVectors, "v2-parent-lower"), root)
	b, err := CPUsAt(root)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Limit() != 1 {
		t.Fatalf("limit %v, want 1", b.Limit())
	}
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/kubepods.slice/cpu.max"), "max 100000\n")
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	if l := b.BindingLevel(); b.Limit() != 2 || l == nil || l.Cgroup != "/kubepods.slice/pod.slice" {
		t.Fatalf("after refresh: limit %v, binding level %+v; want 2 from /kubepods.slice/pod.slice", b.Limit(), l)
	}
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/kubepods.slice/pod.slice/cpu.max"), "oops\n")
	err = b.Refresh()
	if err == nil || !strings.Contains(err.Error(), "pod.slice/cpu.max") || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("refresh of a malformed cpu.max: %v", err)
	}
	if b.Limit() != 2 {
		t.Fatalf("a failed refresh changed the budget: limit %v", b.Limit())
	}
}

func TestExplainNamesTheBindingSource(t *testing.T) {
	b, err := CPUsAt(filepath.Join(cpusVectors, "v1-parent-lower"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	text := b.Explain(Floor)
	for _, want := range []string{"1 thread (floor rounding of a limit of 1 CPU; bound by the CPU quota of ancestor cgroup /parent",
		"*  quota", "unlimited", "cgroup version: v1"} {
		if !strings.Contains(text, want) {
			t.Errorf("Explain lacks %q:\n%s", want, text)
		}
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
