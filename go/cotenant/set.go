// This file owns the one-shot API, in the idiom of go.uber.org/automaxprocs's maxprocs.Set:
// Set and its Options, and the rule it shares with Start that a GOMAXPROCS the user wrote in
// the environment is the user's decision, applied by the runtime before main, and not ours
// to change unless asked.

package cotenant

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// gomaxprocsEnv names the environment variable the Go runtime reads GOMAXPROCS from.
const gomaxprocsEnv = "GOMAXPROCS"

// lookupEnv reads the environment. A variable, so that tests can give Set and Start an
// environment of their own without changing the process's (which other tests read).
var lookupEnv = os.LookupEnv

// envGOMAXPROCS returns the GOMAXPROCS environment variable and whether the runtime obeys it:
// only a positive whole number that fits in 32 bits (what runtime.schedinit accepts). The
// runtime ignores any other value and picks its default, so this package ignores it too.
func envGOMAXPROCS() (value string, set bool) {
	v, ok := lookupEnv(gomaxprocsEnv)
	if !ok {
		return "", false
	}
	// Digits only, as the runtime's atoi32 reads it: strconv would also take a sign ("+4").
	if strings.Trim(v, "0123456789") != "" {
		return v, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	return v, err == nil && n > 0
}

// notLinuxError is errNotLinux's type: it matches errors.ErrUnsupported, so that a caller can
// tell "not on this operating system" from "broken" with errors.Is.
type notLinuxError struct{}

func (notLinuxError) Error() string { return "not supported on this operating system (Linux only)" }

func (notLinuxError) Is(target error) bool { return target == errors.ErrUnsupported }

// errNotLinux is what reading this system's CPU limits fails with where they are not Linux's
// (sys_other.go).
var errNotLinux error = notLinuxError{}

// Option configures [Set]. Options apply in order; a later one overrides an earlier one.
type Option func(*setConfig)

// setConfig is what the options of Set configure.
type setConfig struct {
	printf    func(format string, args ...any)
	rounding  Rounding
	min       int
	ignoreEnv bool
	probe     Probe
	err       error // the first invalid option, returned by Set
}

func (c *setConfig) log(format string, args ...any) {
	if c.printf != nil {
		c.printf(format, args...)
	}
}

// Logger makes Set report what it did, and its undo function what it undid, one line each,
// through printf: for example Logger(log.Printf). By default Set reports nothing.
func Logger(printf func(format string, args ...any)) Option {
	return func(c *setConfig) { c.printf = printf }
}

// Round sets how Set turns a fractional CPU limit into GOMAXPROCS: [Floor] (the default:
// never more running goroutines than the quota pays for in full, so the process is not
// throttled), [Ceil] (what the Go runtime's own default does) or [Nearest].
func Round(r Rounding) Option {
	return func(c *setConfig) {
		switch r {
		case Floor, Ceil, Nearest:
			c.rounding = r
		default:
			c.setErr(fmt.Errorf("cotenant: Round(%d): unknown rounding (expected Floor, Ceil or Nearest)", int(r)))
		}
	}
}

// Min sets the smallest GOMAXPROCS Set chooses, even when the CPU limit is lower; default 1.
// n below 1 makes Set return an error.
func Min(n int) Option {
	return func(c *setConfig) {
		if n < 1 {
			c.setErr(fmt.Errorf("cotenant: Min(%d): GOMAXPROCS must be at least 1", n))
			return
		}
		c.min = n
	}
}

// IgnoreGOMAXPROCSEnv makes Set apply the CPU count even when the GOMAXPROCS environment
// variable holds a value the runtime obeys. Without it, such a value is the user's choice
// and Set leaves GOMAXPROCS alone (see [Set]). Options.IgnoreGOMAXPROCSEnv is the same switch
// for [Start].
func IgnoreGOMAXPROCSEnv() Option {
	return func(c *setConfig) { c.ignoreEnv = true }
}

// FromProbe makes Set read the CPU limits through p rather than from the running system: for
// example a copy of a system's files ([ProbeAt]), for tests and examples.
func FromProbe(p Probe) Option {
	return func(c *setConfig) { c.probe = p }
}

func (c *setConfig) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}

// Set sets GOMAXPROCS once to the number of CPUs this process may really use, the way
// go.uber.org/automaxprocs's maxprocs.Set does: the smallest of the online CPUs, the cgroup
// cpuset, the affinity mask and every CPU quota (of the process's cgroup and its ancestors,
// cgroup v1 or v2), rounded down by default ([Round]), at least 1 ([Min]). Unlike the Go
// runtime's own default (Go 1.25 and later), which rounds a quota up and never goes below 2,
// a quota of 0.5 CPU gives 1, not 2 goroutines throttled every period.
//
// It does nothing, and returns a nil error, when the GOMAXPROCS environment variable holds a
// positive whole number (the user chose; [IgnoreGOMAXPROCSEnv] overrides), or on an operating
// system other than Linux, where there are no cgroup limits to read (GOMAXPROCS stays the
// runtime's choice). It returns an error, and leaves GOMAXPROCS alone, when an option is
// invalid or the CPU limits cannot be read.
//
// undo sets GOMAXPROCS back to the value it had before; it is never nil, so that
//
//	undo, err := cotenant.Set(cotenant.Logger(log.Printf))
//	defer undo()
//	if err != nil {
//		log.Print(err) // GOMAXPROCS stays the runtime's choice
//	}
//
// is always safe. Like any call to runtime.GOMAXPROCS, Set turns off the runtime's own
// periodic update of GOMAXPROCS (Go 1.25 and later), and so does undo: the value stays what
// it was at start even if the quota changes later. To follow a quota that changes, or the
// neighbours' load, use [Start] instead.
func Set(opts ...Option) (undo func(), err error) {
	cfg := setConfig{rounding: Floor, min: 1, probe: SystemProbe()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	noop := func() { cfg.log("cotenant: GOMAXPROCS was not changed, nothing to undo") }
	if cfg.err != nil {
		return noop, cfg.err
	}
	ignoring := ""
	if v, set := envGOMAXPROCS(); set {
		if !cfg.ignoreEnv {
			cfg.log("cotenant: leaving GOMAXPROCS=%d: honouring GOMAXPROCS=%s set in the environment", runtime.GOMAXPROCS(0), v)
			return noop, nil
		}
		ignoring = fmt.Sprintf(" (overriding GOMAXPROCS=%s set in the environment, as asked)", v)
	}
	if cfg.probe.isSystem() && !systemReadable {
		cfg.log("cotenant: leaving GOMAXPROCS=%d: CPU limits are read on Linux only, and this is %s",
			runtime.GOMAXPROCS(0), runtime.GOOS)
		return noop, nil
	}
	b, err := cfg.probe.Detect()
	if err != nil {
		return noop, fmt.Errorf("cotenant: Set left GOMAXPROCS at %d: cannot read the CPU limits: %w",
			runtime.GOMAXPROCS(0), err)
	}
	threads := b.Threads(cfg.rounding)
	why := fmt.Sprintf("%s rounding of a limit of %s, bound by %s", cfg.rounding, CPUsWord(b.Limit()), b.boundBy())
	b.Close()
	n := threads
	if n < cfg.min {
		n = cfg.min
		why += fmt.Sprintf(", raised to the minimum %d", cfg.min)
	}
	prev := runtime.GOMAXPROCS(n)
	cfg.log("cotenant: GOMAXPROCS=%d (was %d): %s%s", n, prev, why, ignoring)
	return func() {
		runtime.GOMAXPROCS(prev)
		cfg.log("cotenant: GOMAXPROCS reset to %d", prev)
	}, nil
}
