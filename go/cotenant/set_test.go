// Tests of Set and of the rule, shared with Start, that a GOMAXPROCS set in the environment
// is respected. The CPU limits come from copies of systems' files (testdata/cpus) and the
// environment from a stand-in for os.LookupEnv, so that the answers do not depend on the
// host or on how the tests were started.

package cotenant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// withEnv makes Set and Start see env as the environment until the test ends.
func withEnv(t *testing.T, env map[string]string) {
	t.Helper()
	saved := lookupEnv
	lookupEnv = func(key string) (string, bool) {
		v, ok := env[key]
		return v, ok
	}
	t.Cleanup(func() { lookupEnv = saved })
}

// keepGOMAXPROCS sets GOMAXPROCS to n for the test and puts back the value it had after it.
func keepGOMAXPROCS(t *testing.T, n int) {
	t.Helper()
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// logLines collects what a Logger option receives.
type logLines []string

func (l *logLines) printf(format string, args ...any) { *l = append(*l, fmt.Sprintf(format, args...)) }

func fixture(name string) Option { return FromProbe(ProbeAt(filepath.Join(cpusVectors, name))) }

func TestEnvGOMAXPROCSCountsOnlyWhatTheRuntimeObeys(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"GOMAXPROCS": "4"}, true},
		{map[string]string{"GOMAXPROCS": "1"}, true},
		{map[string]string{"GOMAXPROCS": ""}, false},
		{map[string]string{"GOMAXPROCS": "0"}, false},
		{map[string]string{"GOMAXPROCS": "-2"}, false},
		{map[string]string{"GOMAXPROCS": "two"}, false},
		{map[string]string{"GOMAXPROCS": " 4"}, false},
		{map[string]string{"GOMAXPROCS": "+4"}, false},         // the runtime reads digits only
		{map[string]string{"GOMAXPROCS": "4294967296"}, false}, // beyond 32 bits
	} {
		withEnv(t, c.env)
		if _, got := envGOMAXPROCS(); got != c.want {
			t.Errorf("environment %v: set %v, want %v", c.env, got, c.want)
		}
	}
}

func TestSetAppliesTheRoundedCountAndUndoRestoresIt(t *testing.T) {
	withEnv(t, nil)
	keepGOMAXPROCS(t, 5)
	for _, c := range []struct {
		fixture string
		opts    []Option
		want    int
		says    string
	}{
		// A quota of 2.5 CPUs on 8.
		{"v1-leaf-lower", nil, 2, "floor rounding of a limit of 2.5 CPUs"},
		{"v1-leaf-lower", []Option{Round(Ceil)}, 3, "ceil rounding"},
		{"v1-leaf-lower", []Option{Round(Nearest)}, 3, "nearest rounding"},
		// Half a CPU: at least 1, or the minimum asked for.
		{"v1-quota-0.5", nil, 1, "0.5 CPU, bound by the CPU quota"},
		{"v1-quota-0.5", []Option{Min(3)}, 3, "raised to the minimum 3"},
		// No quota: the allowed CPUs.
		{"v1-cpuset", nil, 3, "bound by the cgroup cpuset"},
	} {
		var log logLines
		opts := append([]Option{fixture(c.fixture), Logger(log.printf)}, c.opts...)
		undo, err := Set(opts...)
		if err != nil {
			t.Fatalf("%s: %v", c.fixture, err)
		}
		if got := runtime.GOMAXPROCS(0); got != c.want {
			t.Errorf("%s %d options: GOMAXPROCS %d, want %d", c.fixture, len(c.opts), got, c.want)
		}
		undo()
		if got := runtime.GOMAXPROCS(0); got != 5 {
			t.Errorf("%s: after undo GOMAXPROCS is %d, want 5", c.fixture, got)
		}
		if len(log) != 2 || !strings.Contains(log[0], fmt.Sprintf("GOMAXPROCS=%d (was 5)", c.want)) ||
			!strings.Contains(log[0], c.says) || !strings.Contains(log[1], "reset to 5") {
			t.Errorf("%s: log %q, want the change (saying %q) and the reset", c.fixture, log, c.says)
		}
	}
}

func TestSetLogsNothingWithoutALogger(t *testing.T) {
	withEnv(t, nil)
	keepGOMAXPROCS(t, 5)
	undo, err := Set(fixture("v1-quota-1.5"))
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d, want 1", got)
	}
	undo()
}

func TestSetRespectsGOMAXPROCSInTheEnvironmentUnlessToldNotTo(t *testing.T) {
	withEnv(t, map[string]string{"GOMAXPROCS": "7"})
	keepGOMAXPROCS(t, 5)
	var log logLines
	undo, err := Set(fixture("v1-leaf-lower"), Logger(log.printf))
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Errorf("GOMAXPROCS %d, want 5 (left alone)", got)
	}
	undo()
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Errorf("after undo GOMAXPROCS %d, want 5", got)
	}
	if len(log) != 2 || !strings.Contains(log[0], "GOMAXPROCS=7 set in the environment") ||
		!strings.Contains(log[1], "nothing to undo") {
		t.Errorf("log %q", log)
	}

	log = nil
	undo, err = Set(fixture("v1-leaf-lower"), Logger(log.printf), IgnoreGOMAXPROCSEnv())
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("with IgnoreGOMAXPROCSEnv GOMAXPROCS %d, want 2", got)
	}
	undo()
	if len(log) != 2 || !strings.Contains(log[0], "overriding GOMAXPROCS=7") {
		t.Errorf("log %q", log)
	}
}

func TestSetErrorsLeaveGOMAXPROCSAlone(t *testing.T) {
	withEnv(t, nil)
	keepGOMAXPROCS(t, 5)
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{fixture("malformed-cpu-max")}, "cpu.max"},
		{[]Option{fixture("v1-quota-1.5"), Min(0)}, "Min(0)"},
		{[]Option{fixture("v1-quota-1.5"), Round(Rounding(9))}, "Round(9)"},
		{[]Option{FromProbe(ProbeAt(filepath.Join(t.TempDir(), "missing")))}, "cannot read the CPU limits"},
	} {
		undo, err := Set(c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one naming %q", err, c.want)
		}
		if undo == nil {
			t.Fatal("undo is nil")
		}
		undo()
		if got := runtime.GOMAXPROCS(0); got != 5 {
			t.Errorf("%q: GOMAXPROCS %d, want 5 (left alone)", c.want, got)
		}
	}
}

func TestSetOnThisHost(t *testing.T) {
	withEnv(t, nil)
	keepGOMAXPROCS(t, 5)
	undo, err := Set()
	if !systemReadable {
		if err != nil || runtime.GOMAXPROCS(0) != 5 {
			t.Errorf("on %s: error %v, GOMAXPROCS %d (want nil and 5)", runtime.GOOS, err, runtime.GOMAXPROCS(0))
		}
		return
	}
	if err != nil {
		t.Fatalf("reading this Linux host: %v", err)
	}
	b, err := CPUs()
	if err != nil {
		t.Fatal(err)
	}
	want := b.Threads(Floor)
	b.Close()
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Errorf("GOMAXPROCS %d, want the budget's %d", got, want)
	}
	undo()
}

func TestStartRespectsGOMAXPROCSInTheEnvironment(t *testing.T) {
	withEnv(t, map[string]string{"GOMAXPROCS": "3"})
	keepGOMAXPROCS(t, 5)
	var buf bytes.Buffer
	c, err := Start(context.Background(), Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if c.Steering() {
		t.Error("the controller steers despite GOMAXPROCS in the environment")
	}
	if running.Load() {
		t.Error("a controller that does not steer holds the process's one controller slot")
	}
	if !strings.Contains(buf.String(), "GOMAXPROCS=3") || !strings.Contains(buf.String(), "respecting") {
		t.Errorf("log %q does not say it respects GOMAXPROCS=3", buf.String())
	}
	if s := c.Stats(); s.GOMAXPROCS != 5 {
		t.Errorf("stats %+v, want GOMAXPROCS 5", s)
	}
	select {
	case <-c.Done():
		t.Error("Done is closed before Stop")
	default:
	}
	c.Stop()
	c.Stop() // idempotent
	<-c.Done()
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Errorf("GOMAXPROCS %d, want 5 (left alone)", got)
	}
}

func TestARespectingControllerEndsWithItsContext(t *testing.T) {
	withEnv(t, map[string]string{"GOMAXPROCS": "3"})
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the controller outlived its context")
	}
}

func TestIgnoreGOMAXPROCSEnvSteersAndStopPutsTheValueBack(t *testing.T) {
	withEnv(t, map[string]string{"GOMAXPROCS": "3"})
	if !systemReadable {
		_, err := Start(context.Background(), Options{IgnoreGOMAXPROCSEnv: true})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("on %s: %v, want an error matching errors.ErrUnsupported", runtime.GOOS, err)
		}
		return
	}
	skipUnlessSampleable(t)
	keepGOMAXPROCS(t, 3) // as the runtime would have set it from the environment
	c, err := Start(context.Background(), Options{IgnoreGOMAXPROCSEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Steering() {
		t.Error("the controller does not steer despite IgnoreGOMAXPROCSEnv")
	}
	c.Stop()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("after Stop GOMAXPROCS %d, want 3, the environment's", got)
	}
}
