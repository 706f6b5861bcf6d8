// Tests of the one line start logs and of what it returns, in each of its three cases. The
// environment is the real one (t.Setenv): cotenant.Start reads it, and this package cannot
// reach the stand-in the cotenant package's own tests use.

package autostart

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cotenant/cotenant/go/cotenant"
)

// logLines collects what start logs.
type logLines []string

func (l *logLines) printf(format string, args ...any) { *l = append(*l, fmt.Sprintf(format, args...)) }

// stopInitController stops the controller init started, if any (Stop is idempotent), so that
// GOMAXPROCS holds still and the process's one controller slot is free.
func stopInitController() {
	if c := Controller(); c != nil {
		c.Stop()
	}
}

func TestInitLeftAControllerOrAReason(t *testing.T) {
	if (Controller() == nil) == (Err() == nil) {
		t.Errorf("Controller() nil: %v, Err() %v: exactly one must be set", Controller() == nil, Err())
	}
}

func TestGOMAXPROCSInTheEnvironmentIsRespectedInOneLine(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	stopInitController()
	before := runtime.GOMAXPROCS(0)
	var log logLines
	c, err := start(cotenant.Start, log.printf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Steering() {
		t.Error("the controller steers despite GOMAXPROCS=3 in the environment")
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d, want %d (left alone)", got, before)
	}
	if len(log) != 1 || !strings.Contains(log[0], "respecting GOMAXPROCS=3") {
		t.Errorf("log %q, want one line respecting GOMAXPROCS=3", log)
	}
}

func TestAFailedStartIsOneLineAndAnError(t *testing.T) {
	failing := func(context.Context, cotenant.Options) (*cotenant.Controller, error) {
		return nil, errors.New("cotenant: no CPU limits here")
	}
	var log logLines
	c, err := start(failing, log.printf)
	if c != nil || err == nil {
		t.Errorf("got %v, %v; want no controller and the error", c, err)
	}
	if len(log) != 1 || !strings.Contains(log[0], "no CPU limits here") || !strings.Contains(log[0], "leaving GOMAXPROCS=") {
		t.Errorf("log %q, want one line with the error", log)
	}
}

func TestSteeringIsOneLine(t *testing.T) {
	// An empty GOMAXPROCS is one the runtime ignores, and so does the controller.
	t.Setenv("GOMAXPROCS", "")
	stopInitController()
	var log logLines
	c, err := start(cotenant.Start, log.printf)
	if err != nil {
		if runtime.GOOS != "linux" && errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("no controller on %s: %v", runtime.GOOS, err)
		}
		t.Fatal(err)
	}
	defer c.Stop()
	if !c.Steering() {
		t.Error("the controller does not steer")
	}
	if len(log) != 1 || !strings.Contains(log[0], "steering GOMAXPROCS every 10ms") {
		t.Errorf("log %q, want one line saying it steers", log)
	}
}
