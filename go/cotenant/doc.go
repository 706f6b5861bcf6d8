// Package cotenant computes the number of CPUs a Go process should really use, and sets
// runtime.GOMAXPROCS to it: once ([Set]), or continuously while the process runs ([Start]),
// so that programs sharing a Linux host do not hurt each other's tail latency.
//
//	import "github.com/cotenant/cotenant/go/cotenant"
//
// It is the Go port of the Rust crate cotenant (crates/cotenant in the same repository),
// pure Go, without cgo or dependencies, and checked against the same shared test vectors
// (testdata/cpus and testdata/policy). It builds on every operating system; the CPU limits it
// reads (cgroups, affinity masks) are Linux's, so elsewhere [Set] leaves GOMAXPROCS to the
// runtime and [Start] returns an error matching errors.ErrUnsupported.
//
// # Which to use
//
//   - [Set], once at the start of main, in the idiom of go.uber.org/automaxprocs: GOMAXPROCS
//     becomes the CPU count below, rounded down, and stays there. The smallest change, for
//     a service alone in its container or with a fixed quota.
//   - [Start], a controller that re-decides GOMAXPROCS every clock tick from what the
//     process and its neighbours use, never above what the quota pays for, following quota
//     changes at run time. For a service that shares its CPUs with other busy programs.
//   - The blank import of package github.com/cotenant/cotenant/go/cotenant/autostart, which
//     calls Start with the defaults from an init function and logs one line: the controller
//     without a line of code, as import _ "go.uber.org/automaxprocs" is for Set.
//
// All three respect a GOMAXPROCS the user set in the environment (a positive whole number,
// the values the runtime obeys): Set then changes nothing and Start returns a Controller
// that steers nothing ([Controller.Steering] is false), both logging why. The option
// [IgnoreGOMAXPROCSEnv] (for Set) and the field Options.IgnoreGOMAXPROCSEnv (for Start) make
// them override it.
//
// # The CPU count
//
// [CPUs] returns a [Budget]: the smallest of the online CPUs, the cgroup cpuset, the affinity
// mask, and the CPU quota (quota / period) of the process's cgroup and of every ancestor, on
// cgroup v1, v2 and hybrid hosts, with the file each value came from and which one binds.
// Go's own default GOMAXPROCS (1.25+) reads the quota too, but rounds it up and never goes
// below 2; a quota of 0.5 CPU gives 2 workers that are throttled every period. A Budget
// rounds down by default ([Floor]) and explains itself ([Budget.Explain]):
//
//	b, err := cotenant.CPUs()
//	if err != nil { ... }
//	defer b.Close()
//	fmt.Println(b.Threads(cotenant.Floor), b.Limit(), b.Binding())
//
// [CPUsAt] reads a copy of a host's /proc and /sys under a directory instead, which is how
// the tests run the shared vectors of testdata/cpus.
//
// # Steering GOMAXPROCS
//
// The paper on CPU overcommitment by OS threads proposes a friendly thread pool that resizes
// itself every clock tick to its process's share of the CPUs, and ends by saying that such a
// dynamic pool belongs inside the lightweight-thread runtimes themselves. Go's runtime can
// change its worker count at run time, so [Start] runs a controller that, every period (one
// clock tick, 10 ms, by default), samples the same signals as the Rust pool's controller
// (this process's CPU time, the busy and idle time of its CPUs, the host's runnable tasks,
// the quota and its throttling, and how long the process's threads waited on a run queue),
// asks the same adaptive policy ([Adaptive], a port of crates/cotenant/src/policy/adaptive.rs)
// and sets GOMAXPROCS to the answer, never above what the quota pays for, including after the
// quota changes at run time. [Controller.Stop] hands GOMAXPROCS back to the runtime.
//
// Setting GOMAXPROCS turns off the runtime's own once-a-second update; the controller takes
// that job over and re-reads the quota every period.
//
// # Differences from the Rust pool
//
// The Rust pool knows its workers; Go does not say which thread runs goroutines. The
// controller therefore counts every thread of the process: their run-queue wait is the
// contention signal, their time running or waiting (at most GOMAXPROCS threads' worth) is the
// busy signal, and the runtime's count of runnable goroutines stands for the pool's queue.
// The Rust pool also lends idle CPUs to single tasks between decisions (policy/borrow.rs);
// GOMAXPROCS has no per-task hook, so the Go controller does not. The runtime's own
// scheduling-latency histogram is reported in [Stats] but not decided on (schedmetrics.go
// says why).
//
// The parsers and the policy are pure functions; everything that reads a file is in
// probe.go, sampler.go and threads.go, and every system call is in sys_linux.go.
package cotenant
