// Tests of the controller on the real system: only facts that hold on any host (GOMAXPROCS
// stays in [1, NumCPU], Stop hands it back, one controller per process, errors are returned).
// The decisions themselves are covered by the policy tests and vectors.

package cotenant

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests that start a steering controller give it an environment without GOMAXPROCS
// (withEnv, set_test.go): with one, Start would rightly steer nothing.

// skipUnlessSampleable skips where the controller cannot read the host because it is not
// Linux; on Linux, /proc and the cgroup files are there to read, and failing to is a bug.
func skipUnlessSampleable(t *testing.T) {
	t.Helper()
	s, err := newHostSampler(SystemProbe())
	if err != nil {
		if runtime.GOOS != "linux" {
			t.Skipf("this host cannot be sampled (%s): %v", runtime.GOOS, err)
		}
		t.Fatalf("sampling this Linux host: %v", err)
	}
	s.close()
}

// decisionsWanted is how many decisions the range test waits for, and decisionsDeadline how
// long it waits: generous, since a loaded host can delay the controller's ticks well past
// their 10 ms period, and a controller that never decides still fails.
const (
	decisionsWanted   = 2
	decisionsDeadline = 30 * time.Second
)

func TestTheControllerKeepsGOMAXPROCSInRangeAndStopHandsItBack(t *testing.T) {
	skipUnlessSampleable(t)
	withEnv(t, nil)
	runtime.SetDefaultGOMAXPROCS()
	defaultProcs := runtime.GOMAXPROCS(0)

	var mu sync.Mutex
	var events []Event
	c, err := Start(context.Background(), Options{OnDecision: func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Some CPU work, so that the periods are not all idle.
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for !stop.Load() {
				x++
			}
			_ = x
		}()
	}
	// GOMAXPROCS stays in range until the controller has decided a few times (at least 100 ms,
	// as long as it takes on a loaded host).
	decided := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(events)
	}
	start := time.Now()
	for time.Since(start) < 100*time.Millisecond || (decided() < decisionsWanted && time.Since(start) < decisionsDeadline) {
		if n := runtime.GOMAXPROCS(0); n < 1 || n > runtime.NumCPU() {
			t.Errorf("GOMAXPROCS %d outside [1, %d]", n, runtime.NumCPU())
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	stats := c.Stats()
	c.Stop()
	c.Stop() // idempotent

	if stats.GOMAXPROCS < 1 || stats.GOMAXPROCS > runtime.NumCPU() || stats.Threads < 1 || stats.Cap < 1 || stats.Limit <= 0 {
		t.Errorf("stats %+v", stats)
	}
	mu.Lock()
	n := len(events)
	for _, e := range events {
		if e.GOMAXPROCS < 1 || uint32(e.GOMAXPROCS) > e.Sample.Cap() {
			t.Errorf("decision above the cap: %+v", e)
		}
	}
	mu.Unlock()
	if n < decisionsWanted {
		t.Errorf("%d decisions in %v, want %d (stats %+v)", n, time.Since(start).Round(time.Millisecond), decisionsWanted, stats)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is open after Stop")
	}
	if got := runtime.GOMAXPROCS(0); got != defaultProcs {
		t.Errorf("after Stop GOMAXPROCS is %d, the runtime's default %d", got, defaultProcs)
	}
}

func TestOnlyOneControllerRunsAtATime(t *testing.T) {
	skipUnlessSampleable(t)
	withEnv(t, nil)
	c, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), Options{}); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("a second Start: %v", err)
	}
	c.Stop()
	c2, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	c2.Stop()
}

func TestTheContextStopsTheController(t *testing.T) {
	skipUnlessSampleable(t)
	withEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Start(ctx, Options{Period: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the controller outlived its context")
	}
	c.Stop()
}

func TestInvalidOptionsAreErrors(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Period: time.Microsecond}, "Period"},
		{Options{Threads: -1}, "Threads"},
		{Options{Policy: Share(0)}, "overcommit"},
	} {
		ctl, err := Start(context.Background(), c.opts)
		if err == nil {
			ctl.Stop()
			t.Errorf("%+v started", c.opts)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v does not name %s", c.opts, err, c.want)
		}
	}
}
