// This file owns the few system calls the package makes, on Linux: pread on a kept-open
// file, sched_getaffinity(2) and the process CPU clock. Pure Go through package syscall (no
// cgo), mirroring the libc calls of crates/cotenant/src/cpus/probe.rs and sampler.rs.

//go:build linux

package cotenant

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// systemReadable says whether this system's CPU limits can be read: on Linux, yes (the files
// may still be missing or unreadable, which detection reports).
const systemReadable = true

// pread is one pread(2) at off, retried on EINTR; (0, nil) is the end of the file. Through
// SyscallConn so that it is exactly one system call (os.File.ReadAt loops until its buffer
// is full, which costs a second call on every small kernel file).
func pread(f *os.File, b []byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var perr error
	if err := rc.Read(func(fd uintptr) bool {
		for {
			n, perr = syscall.Pread(int(fd), b, off)
			if perr != syscall.EINTR {
				return true
			}
		}
	}); err != nil {
		return 0, err
	}
	if perr != nil {
		return 0, &os.PathError{Op: "pread", Path: f.Name(), Err: perr}
	}
	return n, nil
}

// ownAffinity is the calling thread's affinity mask. The kernel fails with EINVAL when the
// buffer is smaller than its mask, so the buffer grows until it fits (hosts with more than
// 1024 CPUs).
func ownAffinity() (CPUSet, error) {
	words := 16 // 1024 CPUs, glibc's cpu_set_t
	for {
		mask := make([]uint64, words)
		_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(words*8),
			uintptr(unsafe.Pointer(&mask[0])))
		if errno == 0 {
			return cpuSetFromMask(mask), nil
		}
		if errno == syscall.EINVAL && words < 1024 {
			words *= 2
			continue
		}
		return CPUSet{}, errno
	}
}

// clockProcessCPUTimeID is CLOCK_PROCESS_CPUTIME_ID of <linux/time.h>.
const clockProcessCPUTimeID = 2

// processCPUNanos is this process's CPU time (every thread, exited ones included) in ns.
func processCPUNanos() (uint64, error) {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTimeID,
		uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, errors.New("clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed: " + errno.Error())
	}
	return satAdd(satMul(uint64(ts.Sec), 1e9), uint64(ts.Nsec)), nil
}

// clockTicksPerSecond is USER_HZ, the unit of /proc/stat, from the auxiliary vector (what
// glibc's sysconf(_SC_CLK_TCK) returns); 100, the value on every mainstream architecture,
// when it cannot be read.
func clockTicksPerSecond() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	if hz := parseAuxv(b, atClkTck); hz > 0 {
		return hz
	}
	return 100
}
