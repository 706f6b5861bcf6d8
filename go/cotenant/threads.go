// This file owns the per-thread scheduler counters of the whole process, the Go stand-in for
// the Rust pool's per-worker schedstat (crates/cotenant/src/pool/control.rs, read_runq_wait).
//
// Go's workers are its Ms, and the runtime does not say which thread is which, so every
// thread of the process counts: each period the task directory is listed, each thread's
// /proc/self/task/<tid>/schedstat is read (opened once, re-read with pread), and the growth
// of its "time on a CPU" and "run-queue wait" since the previous reading is added to two
// running totals. Totals rather than sums of the current threads, because threads come and go
// (an exited thread takes its counters with it): the totals only grow, so two readings can be
// subtracted like any other cumulative counter.

package cotenant

import (
	"os"
	"strconv"
)

type threadFile struct {
	h            *handle
	onCPU, delay uint64 // at the last reading
	seen         uint64 // the reading that last saw the thread
}

// threadSampler accumulates the run time and run-queue wait of every thread.
type threadSampler struct {
	taskDir  string // <root>/proc/self/task
	files    map[int]*threadFile
	readings uint64
	cpuNS    uint64 // Σ growth of time on a CPU
	waitNS   uint64 // Σ growth of run-queue wait
	threads  int    // threads seen at the last reading
	buf      []byte
}

func newThreadSampler(taskDir string) *threadSampler {
	return &threadSampler{taskDir: taskDir, files: map[int]*threadFile{}}
}

// available reports whether the kernel keeps the counters: without CONFIG_SCHED_INFO the
// files are missing, and a kernel that keeps no statistics prints "0 0 0".
func (t *threadSampler) available() bool { return t.cpuNS > 0 }

// read updates the totals. A thread that exits between the listing and the read is skipped;
// a file that is not in the schedstat format is an error naming it.
func (t *threadSampler) read() error {
	dir, err := os.Open(t.taskDir)
	if err != nil {
		return readFailed(t.taskDir, err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return readFailed(t.taskDir, err)
	}
	t.readings++
	t.threads = 0
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		st, ok, err := t.readThread(tid, name)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		t.threads++
		f := t.files[tid]
		if f.seen+1 == t.readings && st.onCPUNS >= f.onCPU && st.runDelayNS >= f.delay {
			t.cpuNS = satAdd(t.cpuNS, st.onCPUNS-f.onCPU)
			t.waitNS = satAdd(t.waitNS, st.runDelayNS-f.delay)
		} else {
			// New since the last reading (or a reused tid): all its time is in this period.
			t.cpuNS = satAdd(t.cpuNS, st.onCPUNS)
			t.waitNS = satAdd(t.waitNS, st.runDelayNS)
		}
		f.onCPU, f.delay, f.seen = st.onCPUNS, st.runDelayNS, t.readings
	}
	for tid, f := range t.files {
		if f.seen != t.readings {
			f.h.close()
			delete(t.files, tid)
		}
	}
	return nil
}

// readThread reads one thread's counters, opening its file on first sight; ok is false when
// the thread is gone.
func (t *threadSampler) readThread(tid int, name string) (st taskSchedstat, ok bool, err error) {
	f := t.files[tid]
	if f == nil {
		h, err := openHandle(t.taskDir + "/" + name + "/schedstat")
		if err != nil || h.f == nil {
			return st, false, nil // exited since the listing, or no schedstat at all
		}
		f = &threadFile{h: h}
		t.files[tid] = f
	}
	text, missing, err := f.h.read(&t.buf)
	if err != nil || missing != "" {
		// ESRCH: the thread exited (a new one may reuse the tid; it is opened next time).
		f.h.close()
		delete(t.files, tid)
		return st, false, nil
	}
	st, err = parseTaskSchedstat(text)
	if err != nil {
		return st, false, parseFailed(f.h.path, err)
	}
	return st, true, nil
}

func (t *threadSampler) close() {
	for tid, f := range t.files {
		f.h.close()
		delete(t.files, tid)
	}
}
