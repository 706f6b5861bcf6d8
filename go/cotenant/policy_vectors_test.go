// Replays every testdata/policy/*.json vector (format in its README) and checks each
// decision, as crates/cotenant/tests/policy_vectors.rs does for the Rust crate. A new case is
// a new file, not a new test.

package cotenant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var policyVectors = filepath.Join("..", "..", "testdata", "policy")

type policyVector struct {
	Description string `json:"description"`
	Source      string `json:"source"`
	Policy      struct {
		Kind       string          `json:"kind"`
		Overcommit *float64        `json:"overcommit"`
		N          *int            `json:"n"`
		Config     json.RawMessage `json:"config"`
	} `json:"policy"`
	InitialTarget *uint32 `json:"initial_target"`
	Steps         []struct {
		Sample json.RawMessage `json:"sample"`
		Target *uint32         `json:"target"`
		Reason *string         `json:"reason"`
	} `json:"steps"`
}

// decodeStrict decodes JSON refusing unknown fields: a misspelt field would otherwise be read
// as its zero value and the vector would test less than it says (the Rust runner refuses them
// too).
func decodeStrict(data []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// adaptiveConfigFrom is DefaultAdaptiveConfig with the fields of raw (a partial config) set.
func adaptiveConfigFrom(raw json.RawMessage) (AdaptiveConfig, error) {
	c := DefaultAdaptiveConfig()
	if len(raw) == 0 {
		return c, nil
	}
	if err := decodeStrict(raw, &c); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, c.Validate()
}

// replayPolicyVector replays one vector's text and returns the reasons decided, or the first
// mismatch.
func replayPolicyVector(text []byte) ([]Reason, error) {
	var v policyVector
	if err := decodeStrict(text, &v); err != nil {
		return nil, fmt.Errorf("not a vector: %w", err)
	}
	var p Policy
	switch v.Policy.Kind {
	case "adaptive":
		c, err := adaptiveConfigFrom(v.Policy.Config)
		if err != nil {
			return nil, err
		}
		p = AdaptiveWith(c)
	case "adaptive(tokens)":
		c := DefaultAdaptiveConfig()
		c.NeighboursShareTokens = true
		p = AdaptiveWith(c)
	case "share":
		if v.Policy.Overcommit == nil {
			return nil, fmt.Errorf("share needs overcommit")
		}
		p = Share(*v.Policy.Overcommit)
	case "fixed":
		if v.Policy.N == nil {
			return nil, fmt.Errorf("fixed needs n")
		}
		p = Fixed(*v.Policy.N)
	default:
		return nil, fmt.Errorf("unknown policy kind %q", v.Policy.Kind)
	}
	if v.Policy.Kind != "adaptive" && len(v.Policy.Config) != 0 {
		return nil, fmt.Errorf("config is for adaptive policies, not %q", v.Policy.Kind)
	}
	if v.InitialTarget == nil {
		return nil, fmt.Errorf("no initial_target")
	}
	if len(v.Steps) == 0 {
		return nil, fmt.Errorf("no steps")
	}
	st := NewPolicyState(*v.InitialTarget)
	var reasons []Reason
	for i, step := range v.Steps {
		if step.Target == nil || step.Reason == nil {
			return reasons, fmt.Errorf("step %d: no target or reason", i)
		}
		var s Sample
		if err := decodeStrict(step.Sample, &s); err != nil {
			return reasons, fmt.Errorf("step %d: sample: %w", i, err)
		}
		before := st.Target
		d := p.Decide(&s, &st)
		if d.Target != *step.Target || d.Reason.String() != *step.Reason {
			return reasons, fmt.Errorf("step %d: from %d, %v decided %d (%v), the vector says %d (%s)",
				i, before, p, d.Target, d.Reason, *step.Target, *step.Reason)
		}
		reasons = append(reasons, d.Reason)
	}
	return reasons, nil
}

func TestEveryPolicyVectorReplaysAndTogetherTheyReachEveryReason(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(policyVectors, "*.json"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("expected the policy vectors in %s, found %v (%v)", policyVectors, paths, err)
	}
	reached := map[Reason]bool{}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			reasons, err := replayPolicyVector(text)
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(path), err)
			}
			for _, r := range reasons {
				reached[r] = true
			}
			t.Logf("%d steps", len(reasons))
		})
	}
	for r := ReasonFixed; r <= ReasonHold; r++ {
		if !reached[r] {
			t.Errorf("no vector reaches the reason %v", r)
		}
	}
}

func recordedVector(t *testing.T) string {
	text, err := os.ReadFile(filepath.Join(policyVectors, "recorded-2cpu-busy-neighbour.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func TestUnknownVectorFieldsAreRefused(t *testing.T) {
	text := recordedVector(t)
	for _, c := range []struct{ from, to, field string }{
		{`"steps":`, `"stpes": [], "steps":`, "stpes"},
		{`"kind": "adaptive"`, `"kind": "adaptive", "confg": {}`, "confg"},
		{`"queued":`, `"queue": 1, "queued":`, "queue"},
		{`"target":`, `"targt": 1, "target":`, "targt"},
		{`"kind": "adaptive"`, `"kind": "adaptive", "config": {"wait_thread": 1}`, "wait_thread"},
	} {
		broken := strings.Replace(text, c.from, c.to, 1)
		if broken == text {
			t.Fatalf("%s not found in the recording", c.from)
		}
		_, err := replayPolicyVector([]byte(broken))
		if err == nil || !strings.Contains(err.Error(), `unknown field "`+c.field+`"`) {
			t.Errorf("%s: got %v", c.field, err)
		}
	}
}

func TestAdaptiveDefaultsMatchTheSharedDefaultsFile(t *testing.T) {
	path := filepath.Join(policyVectors, "defaults", "adaptive.json")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Description string          `json:"description"`
		Config      json.RawMessage `json:"config"`
	}
	if err := decodeStrict(text, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	// Decode onto a config whose every field differs from the default, so that a field the
	// file does not list (or the decoder skips) shows.
	var listed map[string]any
	if err := json.Unmarshal(file.Config, &listed); err != nil {
		t.Fatal(err)
	}
	if n := reflect.TypeOf(AdaptiveConfig{}).NumField(); len(listed) != n {
		t.Fatalf("%s lists %d fields, AdaptiveConfig has %d", path, len(listed), n)
	}
	var fromFile AdaptiveConfig
	if err := decodeStrict(file.Config, &fromFile); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if got := DefaultAdaptiveConfig(); got != fromFile {
		t.Fatalf("DefaultAdaptiveConfig() = %+v, %s says %+v (change both, and the Rust AdaptiveConfig::default)",
			got, path, fromFile)
	}
}

func TestAWrongExpectationIsReportedWithTheStep(t *testing.T) {
	text := recordedVector(t)
	// The recording's only contention decision (2 -> 1): claim it stayed at 2.
	broken := strings.Replace(text, `"target": 1, "reason": "contention"`, `"target": 2, "reason": "contention"`, 1)
	if broken == text {
		t.Fatal("the recording should contain a contention step")
	}
	_, err := replayPolicyVector([]byte(broken))
	if err == nil || !strings.Contains(err.Error(), "decided 1 (contention), the vector says 2") {
		t.Fatalf("got %v", err)
	}
}
