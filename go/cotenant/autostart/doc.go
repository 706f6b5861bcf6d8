// Package autostart starts the cotenant controller when it is imported, for its side effect
// only:
//
//	import _ "github.com/cotenant/cotenant/go/cotenant/autostart"
//
// Its init function calls cotenant.Start with the default options, and logs one line
// through the standard log package: that the controller steers GOMAXPROCS, that it respects
// a GOMAXPROCS set in the environment (a positive whole number, which the runtime obeys; the
// controller then steers nothing), or why it could not start (an operating system other than
// Linux, CPU limits that cannot be read). It never stops the program. The controller runs
// until the program ends; [Controller] gives it back, for example to read its Stats or to
// Stop it.
//
// # Which to use
//
//   - This package: the controller, with no line of code, in the way that
//     import _ "go.uber.org/automaxprocs" sets GOMAXPROCS. It re-decides GOMAXPROCS every
//     clock tick from what the process and its neighbours on the host use, never above what
//     the CPU quota pays for. For a service that shares its CPUs with other busy programs.
//   - cotenant.Set, called from main: GOMAXPROCS set once to the CPU count (the smallest of
//     the online CPUs, cpuset, affinity mask and CPU quotas, rounded down), like automaxprocs's
//     maxprocs.Set. For a program alone on its CPUs, or where GOMAXPROCS must not move.
//   - cotenant.Start, called from main: the same controller as this package, with options
//     (period, policy, logger, decision hook, overriding the environment's GOMAXPROCS) and
//     under the program's control (a context, Stop). For anything this package's defaults do
//     not fit.
//
// Do not combine them: a later cotenant.Set or runtime.GOMAXPROCS call is overridden at the
// controller's next change, and cotenant.Start returns cotenant.ErrAlreadyRunning while this
// package's controller steers.
package autostart
