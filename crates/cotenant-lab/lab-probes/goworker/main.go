// The Go worker of `cotenant lab quota` (Figure 5 of the paper on CPU overcommitment by OS
// threads) and `cotenant lab go-neighbours` (its Figure 7 with Go services): the same open-loop workload as the Rust lab worker
// (crates/cotenant-lab/src/workload.rs), served by one goroutine per item, the way a Go
// service serves requests. GOMAXPROCS is Go's default unless told otherwise:
//
//   - --gomaxprocs N sets it once, at start (a static split, the "optimal" of Figure 7);
//   - --cotenant starts the cotenant controller (the package go/cotenant of this repository),
//     which re-decides it every clock tick, even when GOMAXPROCS is set in the environment.
//
// Items run as soon as they arrive (one goroutine each, Go's time-slicing among them), or with
// --limit at most GOMAXPROCS at a time, in arrival order: the worker pool sized by GOMAXPROCS
// that CPU-bound Go services are advised to use, and the Go analogue of cotenant's pool, which
// never runs more tasks than it has running workers. Service time is measured from the moment
// an item may run (its goroutine starts; with --limit, it gets its slot) to its end.
//
// It prints one JSON line in the Rust WorkerReport format.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/cotenant/cotenant/go/cotenant"
)

const chunkFib = 20

func fib(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return fib(n-1) + fib(n-2)
}

var sink uint64

// splitMix64 is the Rust worker's generator, so both schedules have the same kind of arrivals.
type splitMix64 struct{ state uint64 }

func (s *splitMix64) next() uint64 {
	s.state += 0x9E3779B97F4A7C15
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (s *splitMix64) float() float64 { return float64(s.next()>>11) / float64(uint64(1)<<53) }

// schedule returns intended arrival offsets (Poisson or uniform), as the Rust `schedule`.
func schedule(arrivals string, rate float64, duration time.Duration, seed uint64) []time.Duration {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil
	}
	end := duration.Seconds()
	rng := splitMix64{seed}
	var out []time.Duration
	t := 0.0
	for {
		gap := 1.0 / rate
		if arrivals != "uniform" {
			gap = -math.Log(1.0-rng.float()) / rate
		}
		if !(len(out) == 0 && arrivals == "uniform") {
			t += gap
		}
		if t >= end {
			return out
		}
		out = append(out, time.Duration(t*1e9))
	}
}

func sleepUntil(deadline time.Time) {
	const spin = 200 * time.Microsecond
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		if left > spin {
			time.Sleep(left - spin)
		} else {
			runtime.Gosched()
		}
	}
}

// percentile is nearest-rank on a sorted slice, in microseconds.
func percentile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	if rank < 0 {
		rank = 0
	}
	return float64(sorted[rank]) / 1000.0
}

// item runs one work item of `chunks` chunks.
func item(chunks int) uint64 {
	var acc uint64
	for c := 0; c < chunks; c++ {
		acc += fib(chunkFib)
	}
	return acc
}

// calibrate returns the time of one chunk and the chunks of a serviceMs item. First the
// median of 31 chunks after 20 warm-ups, as the Rust worker does; then, because a chunk timed
// alone is a noisy guide to Go's cost per chunk inside an item (it came out 10 to 35 % low on
// the lab's VM), the median of `rounds` whole items in a goroutine, and the count corrected
// by it.
//
// Go's cost per chunk varies by ±20 % from one process to the next on the lab's VM, so a lab
// that compares runs calibrates once (--calibrate) and gives every run the same --chunks: the
// same work per item, whatever each process would have measured.
func calibrate(serviceMs float64, rounds int) (chunkNs float64, chunks int) {
	for i := 0; i < 20; i++ {
		sink += fib(chunkFib)
	}
	times := make([]float64, 31)
	for i := range times {
		start := time.Now()
		sink += fib(chunkFib)
		times[i] = float64(time.Since(start).Nanoseconds())
	}
	sort.Float64s(times)
	chunkNs = math.Max(times[len(times)/2], 1)
	target := serviceMs * 1e6
	chunks = int(math.Max(1, math.Round(target/chunkNs)))
	items := make([]float64, rounds)
	done := make(chan struct{})
	go func() {
		for i := range items {
			start := time.Now()
			sink += item(chunks)
			items[i] = float64(time.Since(start).Nanoseconds())
		}
		close(done)
	}()
	<-done
	sort.Float64s(items)
	chunkNs = math.Max(items[len(items)/2]/float64(chunks), 1)
	return chunkNs, int(math.Max(1, math.Round(target/chunkNs)))
}

// limiter lets at most GOMAXPROCS items run at once, first come first served (sync.Cond
// wakes its waiters in the order they waited).
type limiter struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running int
}

func newLimiter() *limiter {
	l := &limiter{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *limiter) acquire() {
	l.mu.Lock()
	for l.running >= runtime.GOMAXPROCS(0) {
		l.cond.Wait()
	}
	l.running++
	l.mu.Unlock()
}

func (l *limiter) release() {
	l.mu.Lock()
	l.running--
	l.mu.Unlock()
	l.cond.Signal()
}

// changed wakes every waiter after GOMAXPROCS grew.
func (l *limiter) changed() { l.cond.Broadcast() }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "goworker: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	processes := flag.Int("processes", 1, "processes in the experiment")
	load := flag.Float64("load", 0.7, "offered load, a fraction of --fair-cpus")
	serviceMs := flag.Float64("service-ms", 5, "service time of an item (ms)")
	durationMs := flag.Int64("duration-ms", 1000, "run length (ms)")
	arrivals := flag.String("arrivals", "poisson", "poisson or uniform")
	seed := flag.Uint64("seed", 0, "schedule seed")
	startAtNs := flag.Int64("start-at-ns", 0, "CLOCK_REALTIME start instant (ns since the epoch)")
	parent := flag.Int("parent", 0, "the lab's pid")
	fairCpus := flag.Float64("fair-cpus", 0, "the CPUs the load is a fraction of")
	gomaxprocs := flag.Int("gomaxprocs", 0, "set GOMAXPROCS to this at start (0: Go's default)")
	withCotenant := flag.Bool("cotenant", false, "steer GOMAXPROCS with the cotenant controller")
	limit := flag.Bool("limit", false, "run at most GOMAXPROCS items at once, in arrival order")
	fixedChunks := flag.Int("chunks", 0, "chunks per item, calibrated once by the lab (0: calibrate here)")
	calibrateOnly := flag.Bool("calibrate", false, "print this host's chunks per --service-ms item and exit")
	flag.Parse()
	if flag.NArg() > 0 {
		fail("unexpected argument %q", flag.Arg(0))
	}
	if !(*serviceMs > 0) {
		fail("--service-ms must be more than 0, got %v", *serviceMs)
	}
	if *calibrateOnly {
		chunkNs, chunks := calibrate(*serviceMs, 21)
		fmt.Printf("{\"chunks\":%d,\"chunk_ns\":%g}\n", chunks, chunkNs)
		return
	}
	if *fixedChunks < 0 {
		fail("--chunks must be at least 0, got %d", *fixedChunks)
	}
	if *gomaxprocs < 0 {
		fail("--gomaxprocs must be at least 0, got %d", *gomaxprocs)
	}
	if *gomaxprocs > 0 && *withCotenant {
		fail("--gomaxprocs and --cotenant exclude each other")
	}
	if *processes < 1 {
		fail("--processes must be at least 1, got %d", *processes)
	}
	if !(*load > 0 && *load <= 10) {
		fail("--load must be more than 0 and at most 10, got %v", *load)
	}
	if *durationMs < 1 {
		fail("--duration-ms must be at least 1, got %d", *durationMs)
	}
	if *arrivals != "poisson" && *arrivals != "uniform" {
		fail("--arrivals must be poisson or uniform, got %q", *arrivals)
	}
	if !(*fairCpus > 0) {
		fail("--fair-cpus must be more than 0, got %v", *fairCpus)
	}
	// Die with the lab (PR_SET_PDEATHSIG = 1), and refuse to start if it is already gone.
	syscall.RawSyscall(syscall.SYS_PRCTL, 1, uintptr(syscall.SIGKILL), 0)
	if os.Getppid() != *parent {
		fail("the lab (pid %d) is gone; not starting", *parent)
	}

	if *gomaxprocs > 0 {
		runtime.GOMAXPROCS(*gomaxprocs)
	}
	slots := newLimiter()
	var controller *cotenant.Controller
	if *withCotenant {
		// The lab asked for steering: a GOMAXPROCS inherited from the shell that started the
		// lab must not quietly make this kind steer nothing.
		opts := cotenant.Options{IgnoreGOMAXPROCSEnv: true}
		if *limit {
			opts.OnDecision = func(e cotenant.Event) {
				if e.GOMAXPROCS > e.Before {
					slots.changed()
				}
			}
		}
		c, err := cotenant.Start(context.Background(), opts)
		if err != nil {
			fail("%v", err)
		}
		controller = c
	}

	var chunkNs float64
	var chunks int
	if *fixedChunks > 0 {
		chunks, chunkNs = *fixedChunks, *serviceMs*1e6/float64(*fixedChunks)
	} else {
		chunkNs, chunks = calibrate(*serviceMs, 5)
	}

	rate := *load * *fairCpus / (*serviceMs / 1000.0)
	duration := time.Duration(*durationMs) * time.Millisecond
	plan := schedule(*arrivals, rate, duration, *seed^uint64(os.Getpid()))
	startAt := time.Unix(0, *startAtNs)
	sleepUntil(startAt)
	start := time.Now()
	started := make([]int64, len(plan))
	ended := make([]int64, len(plan))
	var wg sync.WaitGroup
	for i, at := range plan {
		sleepUntil(start.Add(at))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if *limit {
				slots.acquire()
				defer slots.release()
			}
			began := time.Since(start).Nanoseconds()
			acc := item(chunks)
			started[i] = began
			ended[i] = time.Since(start).Nanoseconds()
			if acc == 42 {
				fmt.Fprint(os.Stderr, "")
			}
		}(i)
	}
	wg.Wait()
	// What the run used: the most GOMAXPROCS could be, where it ended, and how many decisions
	// the controller took (0 without one).
	procs := runtime.GOMAXPROCS(0)
	threads, finalTarget, decisions := procs, procs, uint64(0)
	if controller != nil {
		st := controller.Stats()
		threads, finalTarget, decisions = st.Threads, st.GOMAXPROCS, st.Decisions
		controller.Stop()
	}

	service := make([]int64, 0, len(plan))
	e2e := make([]int64, 0, len(plan))
	lastEnd := int64(0)
	for i, at := range plan {
		service = append(service, ended[i]-started[i])
		e2e = append(e2e, ended[i]-at.Nanoseconds())
		if ended[i] > lastEnd {
			lastEnd = ended[i]
		}
	}
	sort.Slice(service, func(a, b int) bool { return service[a] < service[b] })
	sort.Slice(e2e, func(a, b int) bool { return e2e[a] < e2e[b] })
	span := math.Max(float64(duration.Nanoseconds()), float64(lastEnd)) / 1e9
	report := map[string]any{
		"pid":          os.Getpid(),
		"rate_per_s":   rate,
		"threads":      threads,
		"final_target": finalTarget,
		"decisions":    decisions,
		"chunks":       chunks,
		"chunk_ns":     chunkNs,
		"summary": map[string]any{
			"offered":          len(plan),
			"completed":        len(plan),
			"throughput_per_s": float64(len(plan)) / span,
			"service_p50_us":   percentile(service, 0.50),
			"service_p99_us":   percentile(service, 0.99),
			"service_max_us":   percentile(service, 1.0),
			"e2e_p50_us":       percentile(e2e, 0.50),
			"e2e_p99_us":       percentile(e2e, 0.99),
			"e2e_max_us":       percentile(e2e, 1.0),
		},
	}
	line, err := json.Marshal(report)
	if err != nil {
		fail("encoding the report: %v", err)
	}
	fmt.Println(string(line))
}
