// This file owns the controller: a goroutine that, every period, samples the host and the
// process (sampler.go, threads.go, schedmetrics.go), asks the policy (pure) for the next
// target and applies it with runtime.GOMAXPROCS, never above what the quota pays for. It is
// the Go counterpart of crates/cotenant/src/pool/control.rs, with GOMAXPROCS in the place of
// the pool's parked workers: the paper on CPU overcommitment by OS threads ends by saying
// that its friendly, every-tick-resized pool belongs inside the lightweight-thread runtimes,
// and GOMAXPROCS is the Go runtime's own worker count.
//
//  0. When the environment sets GOMAXPROCS (a value the runtime obeys) and the caller did not
//     ask to override it, Start steers nothing: it returns a Controller that only waits for
//     Stop, so that code written for a steering one (defer c.Stop(), c.Stats()) still works.
//  1. Start detects the budget, sets GOMAXPROCS to min(current, cap) at once (which also
//     turns off the runtime's own once-a-second update: the controller takes that job over)
//     and takes the first reading.
//  2. Each period: read, build the sample from the difference with the previous reading,
//     decide, and call runtime.GOMAXPROCS only when the target changes (it stops the world).
//  3. When sampling fails, GOMAXPROCS falls back to what the quota paid for at the last
//     sample (or Threads), the failure is counted and the first one logged; after
//     samplerRebuildAfter failures in a row the sampler is rebuilt.
//  4. After napAfterPeriods idle periods (the process used almost no CPU and had nothing
//     runnable) the controller wakes only every napPeriods periods until work returns, so
//     that an idle process does not pay a reading per clock tick. (The Rust controller naps
//     until a submit wakes it; GOMAXPROCS has no submit to hook, so this one keeps looking.)
//  5. Stop (or the context's end) stops the goroutine and hands GOMAXPROCS back to the
//     runtime with runtime.SetDefaultGOMAXPROCS, or, when the environment set GOMAXPROCS
//     and the caller overrode it, to the value it had at Start (the runtime's default would
//     ignore the environment).

package cotenant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPeriod is one clock tick (USER_HZ = 100): the rate at which the kernel's CPU
// accounting moves, and at which the friendly thread pool of the paper on CPU overcommitment
// by OS threads resized itself.
const DefaultPeriod = 10 * time.Millisecond

// MinPeriod is the shortest period accepted: below it the controller's own cost and the
// stop-the-world of every GOMAXPROCS change stop being small.
const MinPeriod = time.Millisecond

const (
	// samplerRetry is how long to wait before building the sampler again after it failed.
	samplerRetry = time.Second
	// samplerRebuildAfter is the failed readings in a row after which the sampler is rebuilt
	// (the process may have moved to another cgroup).
	samplerRebuildAfter = 100
	// napAfterPeriods idle periods in a row start a nap...
	napAfterPeriods = 10
	// ...during which the controller wakes every napPeriods periods.
	napPeriods = 10
	// napOwnCPUs: a period in which the process used less CPU than this (and had no runnable
	// goroutine) is idle. The controller itself uses far less.
	napOwnCPUs = 0.02
)

// ErrAlreadyRunning is returned by Start while another Controller runs: GOMAXPROCS is one
// per process, so there is one controller per process.
var ErrAlreadyRunning = errors.New("cotenant: a Controller is already running in this process")

// running guards the one controller of the process.
var running atomic.Bool

// Options configure a Controller. The zero value is the defaults.
type Options struct {
	// Period is how often the controller decides; default DefaultPeriod (10 ms), at least
	// MinPeriod.
	Period time.Duration
	// Threads is the most GOMAXPROCS the controller sets; default (0) the CPUs the process
	// may run on (online ∩ cpuset ∩ affinity) at Start.
	Threads int
	// Policy decides the target; the zero value is Adaptive().
	Policy Policy
	// Logger, if set, receives target changes (Debug) and the first sampling failure (Warn).
	Logger *slog.Logger
	// OnDecision, if set, is called from the controller's goroutine after every decision; it
	// must return quickly.
	OnDecision func(Event)
	// IgnoreGOMAXPROCSEnv makes the controller steer even when the GOMAXPROCS environment
	// variable holds a value the runtime obeys (a positive whole number). By default such a
	// value is the user's choice: Start logs (Info, through Logger) that it respects it and
	// returns a Controller that steers nothing ([Controller.Steering] is false).
	IgnoreGOMAXPROCSEnv bool
}

// Event describes one decision, for Options.OnDecision.
type Event struct {
	// At is when the period ended.
	At time.Time
	// Sample is the period as measured.
	Sample Sample
	// Before is GOMAXPROCS during the period.
	Before int
	// Decision is the policy's answer.
	Decision Decision
	// GOMAXPROCS is the value set for the next period: the decision, at most Sample.Cap().
	GOMAXPROCS int
	// SchedLatencyP99 is the p99 of the runtime's scheduling latency in this period (0 when
	// the runtime recorded none).
	SchedLatencyP99 time.Duration
}

// Stats is a snapshot of a Controller's state. For a Controller that does not steer
// ([Controller.Steering] is false) only GOMAXPROCS is set: its value at Start.
type Stats struct {
	// GOMAXPROCS is the value the controller set last.
	GOMAXPROCS int
	// Threads is the most it will set.
	Threads int
	// Decision is the last decision (zero before the first).
	Decision Decision
	// Cap is the most workers the quota and the allowed CPUs paid for at the last sample.
	Cap int
	// CPUs is the CPUs the process may run on, at the last reading.
	CPUs int
	// Limit is the CPU limit at the last reading: min(allowed CPUs, every quota).
	Limit float64
	// Decisions counts decisions; Changes counts those that changed GOMAXPROCS.
	Decisions, Changes uint64
	// SampleErrors counts failed readings; LastError is the last one ("" when none).
	SampleErrors uint64
	LastError    string
	// IdleAverage is the idle CPUs among those allowed, smoothed over about 8 periods.
	IdleAverage float64
	// Napping says whether the controller is sampling slowly because the process is idle.
	Napping bool
	// SchedLatencyP99 is the 99th percentile of the time goroutines spent runnable before
	// running (runtime/metrics /sched/latencies:seconds), over the last complete second.
	SchedLatencyP99 time.Duration
	// Last is the last sample.
	Last Sample
}

// Controller steers runtime.GOMAXPROCS. Create one with Start.
type Controller struct {
	period  time.Duration
	threads uint32
	policy  Policy
	logger  *slog.Logger
	onEvent func(Event)
	rec     *recorder

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
	// steering is false for the Controller that respects a GOMAXPROCS set in the environment.
	steering bool
	// envSet says the environment set GOMAXPROCS (overridden, since the controller steers):
	// Stop then restores before, the value at Start, rather than the runtime's default.
	envSet bool
	before int

	// Owned by the controller's goroutine.
	sampler      *hostSampler
	samplerErr   error     // why the sampler could not be built...
	samplerErrAt time.Time // ...and when
	failedReads  int
	last         *hostReading
	state        PolicyState
	lastCap      uint32
	applied      int
	idlePeriods  int
	sched        *schedMetrics
	warned       bool

	mu    sync.Mutex
	stats Stats
}

// Start starts the controller of this process: from now on, every period, GOMAXPROCS is what
// the policy decides, never more than the quota pays for. It returns an error when the
// options are invalid, when a controller is already running (ErrAlreadyRunning), on an
// operating system other than Linux (an error matching errors.ErrUnsupported), or when the
// CPU budget cannot be read (then GOMAXPROCS is left alone). The controller runs until Stop
// is called or ctx ends; either hands GOMAXPROCS back to the runtime.
//
// When the GOMAXPROCS environment variable holds a value the runtime obeys, that value is
// the user's choice: unless opts.IgnoreGOMAXPROCSEnv is set, Start leaves GOMAXPROCS alone,
// logs that through opts.Logger, and returns, with a nil error, a Controller that steers
// nothing ([Controller.Steering] is false) and does not count as running (ErrAlreadyRunning
// is about steering controllers). Its Stop, Done and Stats work as usual.
//
// Do not call runtime.GOMAXPROCS while a controller runs: its next change overrides yours.
func Start(ctx context.Context, opts Options) (*Controller, error) {
	if opts.Period == 0 {
		opts.Period = DefaultPeriod
	}
	if opts.Period < MinPeriod {
		return nil, fmt.Errorf("cotenant: Options.Period must be at least %v, got %v", MinPeriod, opts.Period)
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("cotenant: Options.Threads must be >= 0 (0: the allowed CPUs), got %d", opts.Threads)
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("cotenant: Options.Policy: %w", err)
	}
	env, envSet := envGOMAXPROCS()
	if envSet && !opts.IgnoreGOMAXPROCSEnv {
		if opts.Logger != nil {
			opts.Logger.Info("cotenant: respecting GOMAXPROCS set in the environment; not steering it",
				"GOMAXPROCS", env)
		}
		return startRespecting(ctx), nil
	}
	if !systemReadable {
		return nil, fmt.Errorf("cotenant: cannot start the controller on %s: %w", runtime.GOOS, errNotLinux)
	}
	if !running.CompareAndSwap(false, true) {
		return nil, ErrAlreadyRunning
	}
	sampler, err := newHostSampler(SystemProbe())
	if err != nil {
		running.Store(false)
		return nil, fmt.Errorf("cotenant: cannot start the controller: %w", err)
	}
	threads := opts.Threads
	if threads == 0 {
		threads = sampler.budget.AllowedCPUs()
	}
	c := &Controller{
		period:   opts.Period,
		threads:  uint32(min(threads, math.MaxUint32)),
		policy:   opts.Policy,
		logger:   opts.Logger,
		onEvent:  opts.OnDecision,
		rec:      openRecorder(),
		done:     make(chan struct{}),
		steering: true,
		envSet:   envSet,
		before:   runtime.GOMAXPROCS(0),
		sampler:  sampler,
		sched:    newSchedMetrics(time.Now()),
	}
	// Step 1: the cap at once, and the runtime's own updates off.
	b := sampler.budget
	first := Sample{Threads: c.threads, CPUs: uint32(b.AllowedCPUs())}
	if b.Binding() == ConstraintQuota {
		q := b.Limit()
		first.QuotaCPUs = &q
	}
	c.lastCap = first.Cap()
	initial := clamp32(uint32(max(runtime.GOMAXPROCS(0), 1)), 1, c.lastCap)
	c.state = NewPolicyState(initial)
	c.apply(int(initial))
	c.stats = Stats{GOMAXPROCS: int(initial), Threads: int(c.threads), Cap: int(c.lastCap),
		CPUs: b.AllowedCPUs(), Limit: b.Limit()}
	c.step() // the first reading: the baseline

	ctx, c.cancel = context.WithCancel(ctx)
	go c.run(ctx)
	return c, nil
}

// startRespecting returns the Controller that respects a GOMAXPROCS set in the environment:
// it steers nothing and only waits for Stop or ctx, so that Done means the same as for a
// steering one.
func startRespecting(ctx context.Context) *Controller {
	c := &Controller{done: make(chan struct{})}
	c.stats = Stats{GOMAXPROCS: runtime.GOMAXPROCS(0)}
	ctx, c.cancel = context.WithCancel(ctx)
	go func() {
		<-ctx.Done()
		close(c.done)
	}()
	return c
}

// Steering says whether the controller steers GOMAXPROCS: false when Start found GOMAXPROCS
// set in the environment and respected it (see [Start] and Options.IgnoreGOMAXPROCSEnv).
func (c *Controller) Steering() bool { return c.steering }

// Stop stops the controller, waits for its goroutine to end and hands GOMAXPROCS back: to the
// runtime's default (runtime.SetDefaultGOMAXPROCS: the runtime's own value, updated as the
// CPU limits change), or, when the controller overrode a GOMAXPROCS set in the environment
// (Options.IgnoreGOMAXPROCSEnv), to the value GOMAXPROCS had at Start, as the environment
// asked. A controller that does not steer leaves GOMAXPROCS alone. Stop is idempotent;
// after it, Start may be called again.
func (c *Controller) Stop() {
	c.stopOnce.Do(c.cancel)
	<-c.done
}

// Done is closed when the controller has stopped (by Stop or by its context) and GOMAXPROCS
// has been handed back.
func (c *Controller) Done() <-chan struct{} { return c.done }

// Stats returns a snapshot of the controller's state.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Controller) run(ctx context.Context) {
	defer func() {
		if c.envSet {
			runtime.GOMAXPROCS(c.before)
		} else {
			runtime.SetDefaultGOMAXPROCS()
		}
		c.sampler.close()
		c.rec.close()
		running.Store(false)
		close(c.done)
	}()
	ticker := time.NewTicker(c.period)
	defer ticker.Stop()
	napping := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			event, nap := c.step()
			if event != nil && c.onEvent != nil {
				c.onEvent(*event)
			}
			if nap != napping {
				napping = nap
				if napping {
					ticker.Reset(c.period * napPeriods)
				} else {
					ticker.Reset(c.period)
				}
			}
		}
	}
}

// step is tick, except that a bug in it (a panic) costs one period, counted and logged as a
// sampling failure, rather than the process (the Rust controller's catch_unwind).
func (c *Controller) step() (event *Event, napping bool) {
	defer func() {
		if r := recover(); r != nil {
			c.failed(fmt.Errorf("a controller period panicked: %v", r))
			event, napping = nil, false
		}
	}()
	return c.tick()
}

// tick is one period: read, decide, apply (steps 2 to 4). It returns the decision's event
// (nil when there was none) and whether the controller should nap.
func (c *Controller) tick() (event *Event, napping bool) {
	now := time.Now()
	reading, err := c.read(now)
	runnable, p99 := c.sched.read(now)
	if err != nil {
		c.failed(err)
		return nil, false
	}
	c.failedReads = 0
	last := c.last
	c.last = reading
	if last == nil {
		return nil, false
	}
	sample, ok := sampleBetween(last, reading, c.threads, uint32(max(c.applied, 1)), runnable)
	if !ok {
		return nil, false
	}
	c.lastCap = sample.Cap()
	before := c.applied
	d := c.policy.Decide(&sample, &c.state)
	target := int(min(d.Target, c.lastCap))
	c.apply(target)

	napping = c.nap(&sample)
	c.mu.Lock()
	c.stats.GOMAXPROCS, c.stats.Decision, c.stats.Cap = target, d, int(c.lastCap)
	c.stats.CPUs, c.stats.Limit = int(sample.CPUs), reading.limit
	c.stats.Decisions++
	if target != before {
		c.stats.Changes++
	}
	c.stats.IdleAverage, c.stats.Napping = c.state.IdleAverage, napping
	c.stats.SchedLatencyP99, c.stats.Last = c.sched.windowP99, sample
	c.mu.Unlock()

	if target != before && c.logger != nil {
		c.logger.Debug("cotenant: GOMAXPROCS changed", "gomaxprocs", target, "before", before,
			"reason", d.Reason.String(), "own_cpus", sample.OwnCPUs(), "neighbour_cpus", sample.NeighbourCPUs(),
			"idle_cpus", sample.IdleCPUs(), "waiting", sample.WaitingWorkers())
	}
	c.rec.write(c.policy, before, &sample, d)
	return &Event{At: now, Sample: sample, Before: before, Decision: d, GOMAXPROCS: target, SchedLatencyP99: p99}, napping
}

// read takes a reading, building the sampler again when it is missing.
func (c *Controller) read(now time.Time) (*hostReading, error) {
	if c.sampler == nil {
		if c.samplerErr != nil && now.Sub(c.samplerErrAt) < samplerRetry {
			return nil, c.samplerErr
		}
		s, err := newHostSampler(SystemProbe())
		if err != nil {
			c.samplerErr, c.samplerErrAt = err, now
			return nil, err
		}
		c.sampler, c.samplerErr = s, nil
	}
	return c.sampler.read()
}

// failed is step 3: fall back to what the quota paid for.
func (c *Controller) failed(err error) {
	target := FallbackTarget(c.threads, c.lastCap)
	c.state, c.last = NewPolicyState(target), nil
	c.apply(int(target))
	if c.failedReads++; c.failedReads >= samplerRebuildAfter && c.sampler != nil {
		c.sampler.close()
		c.sampler, c.failedReads, c.samplerErr = nil, 0, nil
	}
	if !c.warned && c.logger != nil {
		c.logger.Warn("cotenant: sampling failed; GOMAXPROCS falls back to what the quota pays for",
			"error", err, "gomaxprocs", target)
	}
	c.warned = true
	c.mu.Lock()
	c.stats.SampleErrors++
	c.stats.LastError = err.Error()
	c.stats.GOMAXPROCS = int(target)
	c.mu.Unlock()
}

// nap is step 4: counts idle periods; true once there were napAfterPeriods in a row.
func (c *Controller) nap(s *Sample) bool {
	if s.Queued > 0 || s.OwnCPUs() >= napOwnCPUs {
		c.idlePeriods = 0
		return false
	}
	c.idlePeriods = min(c.idlePeriods+1, napAfterPeriods)
	return c.idlePeriods >= napAfterPeriods
}

// apply sets GOMAXPROCS when it differs (a change stops the world).
func (c *Controller) apply(n int) {
	if n < 1 {
		n = 1
	}
	if runtime.GOMAXPROCS(0) != n || c.applied == 0 {
		runtime.GOMAXPROCS(n)
	}
	c.applied = n
}
