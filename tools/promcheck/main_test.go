package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// good is what cotenant's registry writes for two pools: one HELP and TYPE per family, the
// histograms cumulative, each _count equal to the pool's completed tasks.
const good = `# HELP cotenant_cpu_limit CPUs this process may use
# TYPE cotenant_cpu_limit gauge
cotenant_cpu_limit 1.5
# HELP cotenant_pool_completed_total tasks completed (including panicked)
# TYPE cotenant_pool_completed_total counter
cotenant_pool_completed_total{pool="a"} 3
cotenant_pool_completed_total{pool="b \"quoted\""} 1
# HELP cotenant_pool_queue_wait_seconds time from submitting a task to a worker taking it
# TYPE cotenant_pool_queue_wait_seconds histogram
cotenant_pool_queue_wait_seconds_bucket{pool="a",le="0.000001"} 1
cotenant_pool_queue_wait_seconds_bucket{pool="a",le="0.000002"} 2
cotenant_pool_queue_wait_seconds_bucket{pool="a",le="+Inf"} 3
cotenant_pool_queue_wait_seconds_sum{pool="a"} 0.5
cotenant_pool_queue_wait_seconds_count{pool="a"} 3
cotenant_pool_queue_wait_seconds_bucket{pool="b \"quoted\"",le="0.000001"} 0
cotenant_pool_queue_wait_seconds_bucket{pool="b \"quoted\"",le="0.000002"} 1
cotenant_pool_queue_wait_seconds_bucket{pool="b \"quoted\"",le="+Inf"} 1
cotenant_pool_queue_wait_seconds_sum{pool="b \"quoted\""} 0.000002
cotenant_pool_queue_wait_seconds_count{pool="b \"quoted\""} 1
# HELP cotenant_pool_run_time_seconds time a worker spent running a task
# TYPE cotenant_pool_run_time_seconds histogram
cotenant_pool_run_time_seconds_bucket{pool="a",le="0.000001"} 3
cotenant_pool_run_time_seconds_bucket{pool="a",le="+Inf"} 3
cotenant_pool_run_time_seconds_sum{pool="a"} 0.000003
cotenant_pool_run_time_seconds_count{pool="a"} 3
cotenant_pool_run_time_seconds_bucket{pool="b \"quoted\"",le="0.000001"} 1
cotenant_pool_run_time_seconds_bucket{pool="b \"quoted\"",le="+Inf"} 1
cotenant_pool_run_time_seconds_sum{pool="b \"quoted\""} 0.000001
cotenant_pool_run_time_seconds_count{pool="b \"quoted\""} 1
`

func TestAGoodExpositionPasses(t *testing.T) {
	s, err := check([]byte(good), 2)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if s.families != 4 || s.histograms != 2 {
		t.Errorf("summary %v: want 4 families, 2 histograms", s)
	}
	if strings.Join(s.pools, "|") != `a|b "quoted"` {
		t.Errorf("pools %q", s.pools)
	}
	if _, err := check([]byte(good), 3); err == nil || !strings.Contains(err.Error(), "expected 3") {
		t.Errorf("-pools 3 on two pools: %v", err)
	}
}

func TestADuplicateTypeLineFails(t *testing.T) {
	// Two one-pool texts put together: the family's HELP and TYPE come twice.
	one := "# HELP cotenant_pool_threads OS threads the pool started\n" +
		"# TYPE cotenant_pool_threads gauge\n" +
		"cotenant_pool_threads{pool=\"%s\"} 2\n"
	text := strings.ReplaceAll(one, "%s", "a") + strings.ReplaceAll(one, "%s", "b")
	_, err := check([]byte(text), -1)
	if err == nil {
		t.Fatal("a family typed twice passed")
	}
	// The parser alone refuses it too, whatever the block check says first.
	if _, perr := parse([]byte(text)); perr == nil {
		t.Errorf("the Prometheus parser accepted a second TYPE line (check said: %v)", err)
	}
}

func TestNonCumulativeBucketsFail(t *testing.T) {
	text := strings.Replace(good,
		`cotenant_pool_queue_wait_seconds_bucket{pool="a",le="0.000002"} 2`,
		`cotenant_pool_queue_wait_seconds_bucket{pool="a",le="0.000002"} 0`, 1)
	_, err := check([]byte(text), 2)
	if err == nil || !strings.Contains(err.Error(), "cumulative") {
		t.Fatalf("non-cumulative buckets: %v", err)
	}
}

func TestACountThatDisagreesWithCompletedFails(t *testing.T) {
	text := strings.Replace(good,
		`cotenant_pool_completed_total{pool="a"} 3`,
		`cotenant_pool_completed_total{pool="a"} 4`, 1)
	_, err := check([]byte(text), 2)
	if err == nil || !strings.Contains(err.Error(), `pool "a"`) {
		t.Fatalf("a count unequal to completed: %v", err)
	}
}

func TestAFamilySplitInTwoBlocksFails(t *testing.T) {
	text := "# TYPE x gauge\nx{pool=\"a\"} 1\n# TYPE y gauge\ny 1\nx{pool=\"b\"} 2\n"
	err := oneBlockPerFamily([]byte(text))
	if err == nil || !strings.Contains(err.Error(), "family x resumes") {
		t.Fatalf("a split family: %v", err)
	}
}

func TestRunPrintsOneLinePerFileAndFailsOnABadOne(t *testing.T) {
	dir := t.TempDir()
	goodFile, badFile := filepath.Join(dir, "good.txt"), filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(goodFile, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badFile, []byte("not a metric line {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"-pools", "2", goodFile}, &out, &errs); code != 0 {
		t.Fatalf("good file: exit %d\n%s%s", code, out.String(), errs.String())
	}
	out.Reset()
	if code := run([]string{goodFile, badFile}, &out, &errs); code != 1 {
		t.Fatalf("a bad file: exit %d, want 1\n%s", code, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ok ") || !strings.HasPrefix(lines[1], "FAIL ") {
		t.Errorf("output:\n%s", out.String())
	}
	if code := run(nil, &out, &errs); code != 2 {
		t.Errorf("no file: exit %d, want 2", code)
	}
}
