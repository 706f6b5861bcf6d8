// Package check validates the deployment files under deploy/: the Kubernetes manifests
// (decoded strictly into the API's own types), the Grafana dashboard and the Dockerfile, for
// the fields that cooperation between containers and scraping by Prometheus depend on.
//
// Every finding is a [Problem] naming the file, the field and what is wrong; the tests in
// check_test.go run the checks on the files of this repository and on broken copies of them.
package check

import (
	"fmt"
	"sort"
)

// Problem is one finding: which file, which field in it, and what is wrong.
type Problem struct {
	// File is the file's name as given to the check (relative to the deploy/ folder's parts).
	File string
	// Field is the field's path in the document, e.g. "spec.template.spec.containers[api].env".
	Field string
	// Message says what is wrong and, where it is not obvious, why it matters.
	Message string
}

// Error formats the problem as "file: field: message".
func (p Problem) Error() string {
	if p.Field == "" {
		return fmt.Sprintf("%s: %s", p.File, p.Message)
	}
	return fmt.Sprintf("%s: %s: %s", p.File, p.Field, p.Message)
}

// problems collects the findings of one check.
type problems []Problem

func (ps *problems) add(file, field, format string, args ...any) {
	*ps = append(*ps, Problem{File: file, Field: field, Message: fmt.Sprintf(format, args...)})
}

// sortedKeys returns a map's keys in order, so that findings come in a stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
