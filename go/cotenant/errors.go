// This file owns the package's error types: what a CPU-count detection returns when it
// cannot answer, each naming the file and the offending text (crates/cotenant/src/cpus/mod.rs,
// enum Error, and procfs/mod.rs, ParseError).

package cotenant

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"
)

// maxExcerptChars bounds how much offending input an error message repeats.
const maxExcerptChars = 80

// ParseError says that a text did not have the expected format. It names the format, says
// what was wrong and repeats (at most 80 characters of) the offending text. It does not know
// the file: a [FileError] wraps it with the path.
type ParseError struct {
	// Format is the format that was expected, e.g. "cpu.max".
	Format string
	// Reason says what was wrong.
	Reason string
	// Excerpt is the offending text, shortened with "…" beyond 80 characters.
	Excerpt string
}

// newParseError builds a ParseError whose excerpt is offending without trailing white space.
func newParseError(format, reason, offending string) *ParseError {
	offending = strings.TrimRightFunc(offending, isSpace)
	excerpt := offending
	if utf8.RuneCountInString(offending) > maxExcerptChars {
		runes := []rune(offending)
		excerpt = string(runes[:maxExcerptChars]) + "…"
	}
	return &ParseError{Format: format, Reason: reason, Excerpt: excerpt}
}

// Error implements error: `not a valid cpu.max: quota is not a non-negative integer in "banana 100000"`.
func (e *ParseError) Error() string {
	return fmt.Sprintf("not a valid %s: %s in %q", e.Format, e.Reason, e.Excerpt)
}

// FileError is a file that exists but could not be read (Op "read") or parsed (Op "parse").
// Path is the file as opened, so under the probe's root.
type FileError struct {
	// Op is "read" or "parse".
	Op string
	// Path is the file.
	Path string
	// Err is the *ParseError or the I/O error.
	Err error
}

// Error implements error: "<path>: <parse error>" or "cannot read <path>: <error>".
func (e *FileError) Error() string {
	if e.Op == opParse {
		return fmt.Sprintf("%s: %v", e.Path, e.Err)
	}
	err := e.Err
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		err = pathErr.Err // the path is already in the message
	}
	return fmt.Sprintf("cannot read %s: %v", e.Path, err)
}

// Unwrap returns the underlying error.
func (e *FileError) Unwrap() error { return e.Err }

const (
	opRead  = "read"
	opParse = "parse"
)

func parseFailed(path string, err error) error { return &FileError{Op: opParse, Path: path, Err: err} }
func readFailed(path string, err error) error  { return &FileError{Op: opRead, Path: path, Err: err} }

// NoSuchProcessError says that there is no process with this pid, or that its /proc entry is
// not visible.
type NoSuchProcessError struct {
	// PID is the pid asked for.
	PID int
	// Path is the directory that was looked for.
	Path string
}

// Error implements error.
func (e *NoSuchProcessError) Error() string {
	return fmt.Sprintf("no process with pid %d (%s does not exist)", e.PID, e.Path)
}

// SyscallError is a system call that failed unexpectedly, e.g. sched_getaffinity(2).
type SyscallError struct {
	// Name is the call, e.g. "sched_getaffinity(2)".
	Name string
	// Err is the error it returned.
	Err error
}

// Error implements error.
func (e *SyscallError) Error() string { return fmt.Sprintf("%s failed: %v", e.Name, e.Err) }

// Unwrap returns the underlying error.
func (e *SyscallError) Unwrap() error { return e.Err }

// UndeterminedError says that the sources that could be read do not determine a CPU count:
// none could be read, or the CPU sets have no CPU in common.
type UndeterminedError struct {
	// Reason says why, naming the sources.
	Reason string
}

// Error implements error.
func (e *UndeterminedError) Error() string { return e.Reason }
