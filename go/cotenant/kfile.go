// This file owns reading kernel-generated files (procfs, sysfs, cgroupfs) through a handle
// kept open: the kernel regenerates their text on every read from offset 0, so a re-read
// costs one pread rather than open + read + close. Port of crates/cotenant/src/kfile.rs and of
// probe.rs's Handle and missing_reason.

package cotenant

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// maxKernelFileBytes bounds a read: kernel files are far smaller; anything bigger is not one.
const maxKernelFileBytes = 16 << 20

// readChunk is how much one pread asks for; a short read is the end of the file, so a small
// file costs a single system call.
const readChunk = 4096

// handle is a file opened once and re-read from offset 0, or why it could not be opened.
type handle struct {
	path    string
	f       *os.File // nil when missing
	missing string   // why the file is missing, when f is nil
}

// openHandle opens path. A missing file (or directory, or permission) is recorded in the
// handle, since that makes a source absent rather than the detection fail; other errors are
// errors.
func openHandle(path string) (*handle, error) {
	f, err := os.Open(path)
	if err != nil {
		if reason, ok := missingReason(path, err); ok {
			return &handle{path: path, missing: reason}, nil
		}
		return nil, readFailed(path, err)
	}
	return &handle{path: path, f: f}, nil
}

// read returns the whole text, or missing != "" when the file is (or has become) missing.
func (h *handle) read(buf *[]byte) (text string, missing string, err error) {
	if h.f == nil {
		return "", h.missing, nil
	}
	if err := readAtZero(h.f, buf); err != nil {
		if reason, ok := missingReason(h.path, err); ok {
			return "", reason, nil
		}
		return "", "", readFailed(h.path, err)
	}
	return string(*buf), "", nil
}

func (h *handle) close() {
	if h != nil && h.f != nil {
		h.f.Close()
		h.f = nil
		h.missing = fmt.Sprintf("%s was closed", h.path)
	}
}

// readAtZero reads the whole file from offset 0 into *buf (reset first), readChunk bytes per
// pread, stopping at the first short read.
func readAtZero(f *os.File, buf *[]byte) error {
	b := (*buf)[:0]
	for {
		if cap(b)-len(b) < readChunk {
			b = append(b, make([]byte, readChunk)...)[:len(b)]
		}
		n, err := pread(f, b[len(b):len(b)+readChunk], int64(len(b)))
		if err != nil {
			*buf = b
			return err
		}
		b = b[:len(b)+n]
		if n < readChunk {
			*buf = b
			return nil
		}
		if len(b) > maxKernelFileBytes {
			*buf = b[:0]
			return errors.New("larger than 16 MiB, not a kernel file")
		}
	}
}

// readWhole reads a file that is read once, sequentially (mountinfo can be large, and reads
// past offset 0 make the kernel re-walk a seq_file). missing != "" when it does not exist.
func readWhole(path string) (text string, missing string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if reason, ok := missingReason(path, err); ok {
			return "", reason, nil
		}
		return "", "", readFailed(path, err)
	}
	return string(b), "", nil
}

// missingReason is the reason an I/O error makes a source absent, or false when it is a real
// error.
func missingReason(path string, err error) (string, bool) {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return path + " does not exist", true
	case errors.Is(err, fs.ErrPermission):
		return path + " is not readable (permission denied)", true
	case errors.Is(err, syscall.ENODEV):
		// The cgroup was removed after the file was opened.
		return path + " disappeared", true
	}
	return "", false
}
