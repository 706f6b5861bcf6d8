// This file owns COTENANT_RECORD_SAMPLES: every sample and decision appended as a JSON line,
// in the format of crates/cotenant/src/pool/control.rs, so that recordings of Go processes
// become testdata/policy/ vectors like the Rust ones.

package cotenant

import (
	"encoding/json"
	"fmt"
	"os"
)

// RecordEnv names the environment variable that makes the controller append every sample
// and decision to a file, as JSON lines.
const RecordEnv = "COTENANT_RECORD_SAMPLES"

// recorder is the open recording file; nil records nothing.
type recorder struct{ f *os.File }

func openRecorder() *recorder {
	path := os.Getenv(RecordEnv)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil
	}
	return &recorder{f: f}
}

func (r *recorder) write(p Policy, before int, s *Sample, d Decision) {
	if r == nil {
		return
	}
	sample, err := json.Marshal(s)
	if err != nil {
		return
	}
	fmt.Fprintf(r.f, "{\"pid\": %d, \"pool\": 0, \"policy\": %q, \"before\": %d, \"sample\": %s, \"target\": %d, \"reason\": %q}\n",
		os.Getpid(), p.String(), before, sample, d.Target, d.Reason.String())
}

func (r *recorder) close() {
	if r != nil {
		r.f.Close()
	}
}
