// Runnable examples for the package documentation.

package cotenant_test

import (
	"context"
	"fmt"
	"log"
	"runtime"

	"github.com/cotenant/cotenant/go/cotenant"
)

// The CPU count of a process in a cgroup v1 with a quota of 1.5 CPUs on 2, read from a copy
// of its files (CPUs() reads the running system the same way).
func ExampleCPUsAt() {
	b, err := cotenant.CPUsAt("../../testdata/cpus/v1-quota-1.5")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	origin, _ := b.BindingOrigin()
	fmt.Println(b.Limit(), b.Threads(cotenant.Floor), b.Threads(cotenant.Ceil))
	fmt.Println(b.Binding(), b.BindingLevel().Cgroup, origin.Path[len("../../testdata/cpus/v1-quota-1.5"):])
	// Output:
	// 1.5 1 2
	// quota /app /sys/fs/cgroup/cpu/app/cpu.cfs_quota_us
}

// A parse error names the file and the offending text.
func ExampleCPUsAt_error() {
	_, err := cotenant.CPUsAt("../../testdata/cpus/malformed-cpu-max")
	fmt.Println(err)
	// Output:
	// ../../testdata/cpus/malformed-cpu-max/sys/fs/cgroup/app/cpu.max: not a valid cpu.max: quota is not a non-negative integer in "banana 100000"
}

// One period of the adaptive policy: a pool of 2 workers on 2 CPUs whose workers waited for
// a CPU for a whole period (a neighbour arrived) gives one worker back.
func ExamplePolicy_Decide() {
	wait := uint64(10_000_000)
	s := cotenant.Sample{ElapsedNS: 10_000_000, Threads: 2, CPUs: 2, SelfNS: 10_000_000, BusyNS: 20_000_000,
		WorkersBusyNS: 20_000_000, WorkersRunqWaitNS: &wait}
	st := cotenant.NewPolicyState(2)
	d := cotenant.Adaptive().Decide(&s, &st)
	fmt.Println(d.Target, d.Reason)
	// Output: 1 contention
}

// Set GOMAXPROCS once, at the start of main, as go.uber.org/automaxprocs does. Here the CPU
// limits are read from a copy of a system's files (a cgroup v1 quota of 1.5 CPUs on 2) and
// the environment's GOMAXPROCS, if the tests were started with one, is overridden, so that
// the answer is the same everywhere; in a program, Set(cotenant.Logger(log.Printf)) reads
// the running system and respects the environment.
func ExampleSet() {
	undo, err := cotenant.Set(
		cotenant.FromProbe(cotenant.ProbeAt("../../testdata/cpus/v1-quota-1.5")),
		cotenant.IgnoreGOMAXPROCSEnv(),
	)
	defer undo() // GOMAXPROCS back to what it was
	if err != nil {
		log.Print(err)
		return
	}
	fmt.Println(runtime.GOMAXPROCS(0)) // 1.5 CPUs, rounded down
	// Output: 1
}

// Steer GOMAXPROCS for the life of a program.
func ExampleStart() {
	c, err := cotenant.Start(context.Background(), cotenant.Options{})
	if err != nil {
		log.Fatal(err) // e.g. not Linux
	}
	defer c.Stop() // hands GOMAXPROCS back to the runtime

	n := runtime.GOMAXPROCS(0)
	// With GOMAXPROCS set in the environment the controller leaves it alone (Steering is
	// false); otherwise it keeps it within what the CPU limits pay for.
	fmt.Println(n >= 1 && (!c.Steering() || n <= c.Stats().Cap))
	// Output: true
}
