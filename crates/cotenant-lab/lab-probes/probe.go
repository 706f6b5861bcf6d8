// What Go's scheduler will use: GOMAXPROCS (Go 1.25+ derives it from the cgroup quota too).
package main

import (
	"fmt"
	"runtime"
)

func main() { fmt.Println(runtime.GOMAXPROCS(0)) }
