package check

// The Kubernetes manifests: every document decoded strictly into the API's own types (a
// misspelt or misplaced field fails), then the fields that cooperation between containers and
// scraping depend on. docs/kubernetes.md says why each one matters.

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Names the manifests, the image and the library agree on.
const (
	// shmPath is where the hand-over pipe of the host CPU tokens lives
	// (/dev/shm/cotenant-tokens-<uid>-<key>, crates/cotenant/src/tokens/wakeup.rs).
	shmPath = "/dev/shm"
	// tokensSetEnv names the token set every default pool of a process shares.
	tokensSetEnv = "COTENANT_TOKENS_SET"
	// tokensEnv turns the default pools' host tokens off.
	tokensEnv = "COTENANT_TOKENS"
	// hostIPCReasonAnnotation, on a pod template, says why it sets hostIPC: true.
	hostIPCReasonAnnotation = "cotenant/host-ipc-reason"
	scrapeAnnotation        = "prometheus.io/scrape"
	portAnnotation          = "prometheus.io/port"
	pathAnnotation          = "prometheus.io/path"
	// metricsPath is where the services serve their Prometheus text.
	metricsPath = "/metrics"
)

// ManifestReport is what [CheckManifests] found, and how much it looked at (so that a test can
// tell a clean result from one that checked nothing).
type ManifestReport struct {
	// Problems lists the findings, in file order.
	Problems []Problem
	// Workloads counts the pod specs checked: Pods, and Deployments' pod templates.
	Workloads int
	// CooperatingPods counts the pod specs with two or more containers that run cotenant.
	CooperatingPods int
	// PodMonitors counts the PodMonitor objects checked.
	PodMonitors int
}

// workload is one pod spec: a Pod's, or a Deployment's template.
type workload struct {
	file string
	// prefix is the field path of the pod's metadata and spec: "spec.template" in a
	// Deployment, "" in a Pod.
	prefix string
	meta   metav1.ObjectMeta
	spec   corev1.PodSpec
}

// field is the path of rest ("spec.containers", ...) in the workload's document.
func (w workload) field(rest string) string {
	if w.prefix == "" {
		return rest
	}
	return w.prefix + "." + rest
}

// podMonitor is a Prometheus Operator PodMonitor, kept as a map: its type is not part of the
// Kubernetes API modules, and the check reads only a few of its fields.
type podMonitor struct {
	file string
	obj  map[string]any
}

// CheckManifestDir reads every .yaml and .yml file of dir and checks them ([CheckManifests]).
// The error is for a folder that cannot be read or holds no manifest.
func CheckManifestDir(dir string) (ManifestReport, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ManifestReport{}, fmt.Errorf("reading the manifests folder %s: %w", dir, err)
	}
	files := map[string][]byte{}
	for _, entry := range entries {
		name := entry.Name()
		if entry.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return ManifestReport{}, fmt.Errorf("reading %s: %w", filepath.Join(dir, name), err)
		}
		files[name] = data
	}
	if len(files) == 0 {
		return ManifestReport{}, fmt.Errorf("%s holds no .yaml or .yml file", dir)
	}
	return CheckManifests(files), nil
}

// CheckManifests checks the manifests given as file name → contents: each document (files
// may hold several, separated by "---" lines) is decoded strictly by its kind, and every pod
// spec and PodMonitor is checked; PodMonitors against the pods of all the files.
func CheckManifests(files map[string][]byte) ManifestReport {
	var ps problems
	var workloads []workload
	var monitors []podMonitor
	for _, name := range sortedKeys(files) {
		docs := splitDocuments(files[name])
		if len(docs) == 0 {
			ps.add(name, "", "holds no document")
			continue
		}
		for i, doc := range docs {
			where := name
			if len(docs) > 1 {
				where = fmt.Sprintf("%s (document %d)", name, i+1)
			}
			w, m := decode(where, doc, &ps)
			if w != nil {
				workloads = append(workloads, *w)
			}
			if m != nil {
				monitors = append(monitors, *m)
			}
		}
	}
	report := ManifestReport{}
	for _, w := range workloads {
		report.Workloads++
		if checkWorkload(w, &ps) {
			report.CooperatingPods++
		}
	}
	for _, m := range monitors {
		report.PodMonitors++
		checkPodMonitor(m, workloads, &ps)
	}
	report.Problems = ps
	return report
}

// splitDocuments splits a YAML stream on its "---" lines; documents holding only comments
// and blank lines are dropped.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var current []string
	flush := func() {
		body := strings.Join(current, "\n")
		if hasContent(body) {
			docs = append(docs, []byte(body))
		}
		current = nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimRight(line, " \t\r")
		if trimmed == "---" || strings.HasPrefix(trimmed, "--- ") || strings.HasPrefix(trimmed, "---\t") {
			flush()
			continue
		}
		current = append(current, line)
	}
	flush()
	return docs
}

// hasContent says whether a document has a line that is neither blank nor a comment.
func hasContent(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			return true
		}
	}
	return false
}

// decode reads one document by its kind; an unknown kind is a problem, so that a new kind
// cannot join the folder unchecked.
func decode(file string, doc []byte, ps *problems) (*workload, *podMonitor) {
	var kind metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &kind); err != nil {
		ps.add(file, "", "not valid YAML: %v", err)
		return nil, nil
	}
	switch {
	case kind.APIVersion == "apps/v1" && kind.Kind == "Deployment":
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(doc, &d); err != nil {
			ps.add(file, "", "does not decode strictly as an apps/v1 Deployment (a misspelt or misplaced field?): %v", err)
			return nil, nil
		}
		checkDeployment(file, &d, ps)
		return &workload{file: file, prefix: "spec.template", meta: d.Spec.Template.ObjectMeta, spec: d.Spec.Template.Spec}, nil
	case kind.APIVersion == "v1" && kind.Kind == "Pod":
		var p corev1.Pod
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			ps.add(file, "", "does not decode strictly as a v1 Pod (a misspelt or misplaced field?): %v", err)
			return nil, nil
		}
		if p.Name == "" {
			ps.add(file, "metadata.name", "missing")
		}
		return &workload{file: file, prefix: "", meta: p.ObjectMeta, spec: p.Spec}, nil
	case kind.APIVersion == "monitoring.coreos.com/v1" && kind.Kind == "PodMonitor":
		var obj map[string]any
		if err := yaml.UnmarshalStrict(doc, &obj); err != nil {
			ps.add(file, "", "does not decode as a PodMonitor: %v", err)
			return nil, nil
		}
		return nil, &podMonitor{file: file, obj: obj}
	case kind.Kind == "":
		ps.add(file, "kind", "missing: every manifest names its kind")
	default:
		ps.add(file, "kind", "%s (apiVersion %q) is not a kind this check knows: decode and check it in deploy/check/manifests.go before adding it", kind.Kind, kind.APIVersion)
	}
	return nil, nil
}

// checkDeployment checks what the API server would refuse about a Deployment itself.
func checkDeployment(file string, d *appsv1.Deployment, ps *problems) {
	if d.Name == "" {
		ps.add(file, "metadata.name", "missing")
	}
	if d.Spec.Replicas != nil && *d.Spec.Replicas < 1 {
		ps.add(file, "spec.replicas", "is %d: no pod would run", *d.Spec.Replicas)
	}
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		ps.add(file, "spec.selector.matchLabels", "missing: an apps/v1 Deployment needs a selector")
		return
	}
	for _, key := range sortedKeys(d.Spec.Selector.MatchLabels) {
		want := d.Spec.Selector.MatchLabels[key]
		if got, ok := d.Spec.Template.Labels[key]; !ok || got != want {
			ps.add(file, "spec.template.metadata.labels", "does not carry the selector's label %s=%s: the API server refuses a Deployment whose selector does not match its template", key, want)
		}
	}
}

// checkPodMonitor checks that a PodMonitor selects some of the pods and names their ports.
func checkPodMonitor(m podMonitor, workloads []workload, ps *problems) {
	meta, _ := m.obj["metadata"].(map[string]any)
	if name, _ := meta["name"].(string); name == "" {
		ps.add(m.file, "metadata.name", "missing")
	}
	spec, _ := m.obj["spec"].(map[string]any)
	if spec == nil {
		ps.add(m.file, "spec", "missing")
		return
	}
	selector, _ := spec["selector"].(map[string]any)
	matchLabels, _ := selector["matchLabels"].(map[string]any)
	if len(matchLabels) == 0 {
		ps.add(m.file, "spec.selector.matchLabels", "missing or empty: the PodMonitor would select every pod of its namespace")
		return
	}
	var selected []workload
	for _, w := range workloads {
		if labelsMatch(w.meta.Labels, matchLabels) {
			selected = append(selected, w)
		}
	}
	if len(selected) == 0 {
		ps.add(m.file, "spec.selector.matchLabels", "selects none of the pods of these manifests")
	}
	endpoints, _ := spec["podMetricsEndpoints"].([]any)
	if len(endpoints) == 0 {
		ps.add(m.file, "spec.podMetricsEndpoints", "missing or empty: nothing would be scraped")
		return
	}
	for i, entry := range endpoints {
		field := fmt.Sprintf("spec.podMetricsEndpoints[%d]", i)
		endpoint, ok := entry.(map[string]any)
		if !ok {
			ps.add(m.file, field, "is not an object")
			continue
		}
		port, _ := endpoint["port"].(string)
		switch {
		case port == "":
			ps.add(m.file, field+".port", "missing: name the container port that serves the metrics")
		case len(selected) > 0 && !anyPortNamed(selected, port):
			ps.add(m.file, field+".port", "%q is not the name of a port of the pods the PodMonitor selects", port)
		}
		if value, present := endpoint["path"]; present {
			if text, _ := value.(string); text != metricsPath {
				ps.add(m.file, field+".path", "is %v, not %s: the path the services serve their metrics on", value, metricsPath)
			}
		}
	}
}

// labelsMatch says whether labels carry every label of want (a matchLabels map).
func labelsMatch(labels map[string]string, want map[string]any) bool {
	for key, value := range want {
		text, ok := value.(string)
		if !ok || labels[key] != text {
			return false
		}
	}
	return true
}

// anyPortNamed says whether a container of one of the workloads declares a port of that name.
func anyPortNamed(workloads []workload, name string) bool {
	for _, w := range workloads {
		for _, c := range w.spec.Containers {
			for _, p := range c.Ports {
				if p.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// runsCotenant says whether a container runs cotenant: its command starts with the cotenant
// command, or it runs the cotenant image (whose entrypoint is `cotenant run --`).
func runsCotenant(c *corev1.Container) bool {
	if len(c.Command) > 0 && path.Base(c.Command[0]) == "cotenant" {
		return true
	}
	return strings.Contains(c.Image, "cotenant")
}
