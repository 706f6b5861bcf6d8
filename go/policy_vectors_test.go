// Replays every testdata/policy/*.json vector (format in its README) and checks each
// decision, as crates/cotenant/tests/policy_vectors.rs does for the Rust crate. A new case is
// a new file, not a new test.

package cotenant

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var policyVectors = filepath.Join("..", "testdata", "policy")

type policyVector struct {
	Description string `json:"description"`
	Policy      struct {
		Kind       string   `json:"kind"`
		Overcommit *float64 `json:"overcommit"`
		N          *int     `json:"n"`
	} `json:"policy"`
	InitialTarget *uint32 `json:"initial_target"`
	Steps         []struct {
		Sample json.RawMessage `json:"sample"`
		Target uint32          `json:"target"`
		Reason string          `json:"reason"`
	} `json:"steps"`
}

// replayPolicyVector returns the number of steps replayed, or the first mismatch.
func replayPolicyVector(path string) (int, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cannot read: %w", err)
	}
	var v policyVector
	if err := json.Unmarshal(text, &v); err != nil {
		return 0, fmt.Errorf("not JSON: %w", err)
	}
	var p Policy
	switch v.Policy.Kind {
	case "adaptive":
		p = Adaptive()
	case "share":
		if v.Policy.Overcommit == nil {
			return 0, fmt.Errorf("share needs overcommit")
		}
		p = Share(*v.Policy.Overcommit)
	case "fixed":
		if v.Policy.N == nil {
			return 0, fmt.Errorf("fixed needs n")
		}
		p = Fixed(*v.Policy.N)
	default:
		return 0, fmt.Errorf("unknown policy kind %q", v.Policy.Kind)
	}
	if v.InitialTarget == nil {
		return 0, fmt.Errorf("no initial_target")
	}
	if len(v.Steps) == 0 {
		return 0, fmt.Errorf("no steps")
	}
	st := NewPolicyState(*v.InitialTarget)
	for i, step := range v.Steps {
		var s Sample
		if err := json.Unmarshal(step.Sample, &s); err != nil {
			return i, fmt.Errorf("step %d: sample: %w", i, err)
		}
		before := st.Target
		d := p.Decide(&s, &st)
		if d.Target != step.Target || d.Reason.String() != step.Reason {
			return i, fmt.Errorf("step %d: from %d, %v decided %d (%v), the vector says %d (%s)",
				i, before, p, d.Target, d.Reason, step.Target, step.Reason)
		}
	}
	return len(v.Steps), nil
}

func TestEveryPolicyVectorReplays(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(policyVectors, "*.json"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("expected the policy vectors in %s, found %v (%v)", policyVectors, paths, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			n, err := replayPolicyVector(path)
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(path), err)
			}
			t.Logf("%d steps", n)
		})
	}
}

func TestAWrongExpectationIsReportedWithTheStep(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(policyVectors, "recorded-2cpu-busy-neighbour.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The recording's only contention decision (2 -> 1): claim it stayed at 2.
	broken := strings.Replace(string(text), `"target": 1, "reason": "contention"`, `"target": 2, "reason": "contention"`, 1)
	if broken == string(text) {
		t.Fatal("the recording should contain a contention step")
	}
	path := filepath.Join(t.TempDir(), "broken.json")
	writeFile(t, path, broken)
	_, err = replayPolicyVector(path)
	if err == nil || !strings.Contains(err.Error(), "decided 1 (contention), the vector says 2") {
		t.Fatalf("got %v", err)
	}
}
