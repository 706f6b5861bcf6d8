// This file owns the stand-ins for sys_linux.go elsewhere: the package builds on every
// platform, but cgroups, affinity masks and /proc are Linux's, so detection of this system
// fails with errNotLinux (a copy of a Linux system's files, ProbeAt, is still read), Set
// leaves GOMAXPROCS to the runtime and the controller refuses to start.

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

// systemReadable says whether this system's CPU limits can be read: not here.
const systemReadable = false

func ownAffinity() (CPUSet, error) { return CPUSet{}, errNotLinux }

func processCPUNanos() (uint64, error) { return 0, errNotLinux }

func clockTicksPerSecond() uint64 { return 100 }
