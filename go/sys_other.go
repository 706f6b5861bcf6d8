// This file owns the stand-ins for sys_linux.go elsewhere: the package builds on every
// platform, but cgroups, affinity masks and /proc are Linux's, so detection answers from the
// files it can read and the controller refuses to start.

//go:build !linux

package cotenant

import (
	"errors"
	"io"
	"os"
)

func pread(f *os.File, b []byte, off int64) (int, error) {
	n, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

var errNotLinux = errors.New("not supported on this operating system (Linux only)")

func ownAffinity() (CPUSet, error) { return CPUSet{}, errNotLinux }

func processCPUNanos() (uint64, error) { return 0, errNotLinux }

func clockTicksPerSecond() uint64 { return 100 }
