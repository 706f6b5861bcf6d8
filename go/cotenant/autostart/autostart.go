// This file owns the start itself: init calls start, which is separate so that the tests can
// give it another Start and capture its one log line.

package autostart

import (
	"context"
	"log"
	"os"
	"runtime"

	"github.com/cotenant/cotenant/go/cotenant"
)

var (
	// controller is the controller init started; nil when it could not start.
	controller *cotenant.Controller
	// startErr is why it could not start.
	startErr error
)

func init() {
	controller, startErr = start(cotenant.Start, log.Printf)
}

// Controller returns the controller this package started when the program began, or nil
// when it could not start (see [Err]). It steers nothing when GOMAXPROCS was set in the
// environment (its Steering method says so).
func Controller() *cotenant.Controller { return controller }

// Err returns why the controller could not start (nil when it started): for example an error
// matching errors.ErrUnsupported on an operating system other than Linux.
func Err() error { return startErr }

// startFunc is the signature of cotenant.Start.
type startFunc func(context.Context, cotenant.Options) (*cotenant.Controller, error)

// start starts a controller with the default options through startFn and logs exactly one
// line through logf saying what happened. Options.Logger stays unset, so nothing is logged
// later (sampling failures are counted in the controller's Stats instead).
func start(startFn startFunc, logf func(format string, args ...any)) (*cotenant.Controller, error) {
	c, err := startFn(context.Background(), cotenant.Options{})
	switch {
	case err != nil:
		// Start's errors begin with "cotenant: " already.
		logf("%v; leaving GOMAXPROCS=%d", err, runtime.GOMAXPROCS(0))
		return nil, err
	case !c.Steering():
		logf("cotenant: respecting GOMAXPROCS=%s set in the environment; not steering it", os.Getenv("GOMAXPROCS"))
	default:
		s := c.Stats()
		logf("cotenant: steering GOMAXPROCS every %v (now %d, at most %d, the CPU limit being %s)",
			cotenant.DefaultPeriod, s.GOMAXPROCS, s.Cap, cotenant.CPUsWord(s.Limit))
	}
	return c, nil
}
