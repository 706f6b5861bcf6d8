package check

// The checks run on this repository's files (deploy/kubernetes, deploy/grafana,
// deploy/Dockerfile), then on copies broken one field at a time, to show that each check
// catches what it is for and names the file and the field.

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

const (
	kubernetesDir  = "../kubernetes"
	cooperatingPod = "../kubernetes/cooperating-pod.yaml"
	deploymentFile = "../kubernetes/deployment.yaml"
	podMonitorFile = "../kubernetes/podmonitor.yaml"
	dashboardFile  = "../grafana/cotenant-pools.json"
	dockerfile     = "../Dockerfile"
	metricsDoc     = "../../docs/metrics.md"
	kubernetesDoc  = "../../docs/kubernetes.md"
)

func readText(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return string(data)
}

// broken returns text with its first old replaced by replacement; the test fails if old is
// not there (the file changed: update the test with it).
func broken(t *testing.T, text, old, replacement string) string {
	t.Helper()
	if !strings.Contains(text, old) {
		t.Fatalf("the file no longer contains %q: update this test", old)
	}
	return strings.Replace(text, old, replacement, 1)
}

func listProblems(problems []Problem) string {
	if len(problems) == 0 {
		return "  (none)"
	}
	var lines []string
	for _, p := range problems {
		lines = append(lines, "  "+p.Error())
	}
	return strings.Join(lines, "\n")
}

// wantProblem asserts that a problem of that file mentions every fragment in its field or
// message.
func wantProblem(t *testing.T, problems []Problem, file string, fragments ...string) {
	t.Helper()
	for _, p := range problems {
		if !strings.HasPrefix(p.File, file) {
			continue
		}
		text := p.Field + ": " + p.Message
		found := true
		for _, fragment := range fragments {
			if !strings.Contains(text, fragment) {
				found = false
				break
			}
		}
		if found {
			return
		}
	}
	t.Errorf("no problem of %s mentions %q; the problems:\n%s", file, fragments, listProblems(problems))
}

func TestTheManifestsDecodeStrictlyAndCooperate(t *testing.T) {
	report, err := CheckManifestDir(kubernetesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range report.Problems {
		t.Error(p.Error())
	}
	if report.Workloads < 2 || report.CooperatingPods < 1 || report.PodMonitors < 1 {
		t.Errorf("checked %d pod specs, %d cooperating pods and %d PodMonitors: want at least 2, 1 and 1 (the Deployment, the cooperating pod, the PodMonitor)",
			report.Workloads, report.CooperatingPods, report.PodMonitors)
	}
}

func TestEachBrokenManifestFieldIsNamed(t *testing.T) {
	pod := readText(t, cooperatingPod)
	const file = "cooperating-pod.yaml"
	cases := []struct {
		name      string
		text      string
		fragments []string
	}{
		{"no /dev/shm in one container",
			broken(t, pod, "            - name: shm\n              mountPath: /dev/shm\n", ""),
			[]string{"containers[api].volumeMounts", "nothing is mounted at /dev/shm"}},
		{"a /dev/shm volume on disk",
			broken(t, pod, "medium: Memory", `medium: ""`),
			[]string{"volumes[shm].emptyDir.medium", "not Memory"}},
		{"two token sets",
			broken(t, pod, "value: pod-shared\n          ports:\n            - name: http-reports",
				"value: other\n          ports:\n            - name: http-reports"),
			[]string{"containers[reports].env[COTENANT_TOKENS_SET]", `"other"`}},
		{"two users",
			broken(t, pod, "port: http-reports\n            periodSeconds: 10\n          securityContext:\n",
				"port: http-reports\n            periodSeconds: 10\n          securityContext:\n            runAsUser: 1000\n"),
			[]string{"containers[reports].securityContext.runAsUser", "is 1000"}},
		{"the node's IPC namespace",
			broken(t, pod, "hostIPC: false", "hostIPC: true"),
			[]string{"spec.template.spec.hostIPC", "is true"}},
		{"a scrape port nobody serves",
			broken(t, pod, `prometheus.io/port: "8080"`, `prometheus.io/port: "9090"`),
			[]string{"spec.template.metadata.annotations", "prometheus.io/port is 9090"}},
		{"scraping not asked for",
			broken(t, pod, `prometheus.io/scrape: "true"`, `prometheus.io/scrape: "false"`),
			[]string{"spec.template.metadata.annotations", "prometheus.io/scrape"}},
		{"a misspelt field",
			broken(t, pod, "shareProcessNamespace: true", "shareProcessNamespaces: true"),
			[]string{"does not decode strictly", "shareProcessNamespaces"}},
		{"process ids not unique in the pod",
			broken(t, pod, "shareProcessNamespace: true", "shareProcessNamespace: false"),
			[]string{"spec.template.spec.shareProcessNamespace", "not true"}},
		{"no CPU limit",
			broken(t, pod, "limits:\n              cpu: \"2\"\n", "limits:\n"),
			[]string{"containers[api].resources.limits.cpu", "not set"}},
		{"a loopback address",
			broken(t, pod, `"0.0.0.0:8081"`, `"127.0.0.1:8081"`),
			[]string{"containers[reports].args", "loopback"}},
		{"started without cotenant run",
			broken(t, pod, "command: [\"/usr/local/bin/cotenant\", \"run\", \"--\"]\n          # The containers share",
				"command: [\"/usr/local/bin/http_service\"]\n          # The containers share"),
			[]string{"containers[reports].command", "does not start with cotenant run"}},
		{"one port for both containers",
			broken(t, pod, "containerPort: 8081", "containerPort: 8080"),
			[]string{"containers[reports].ports", "also declared by container api"}},
		{"a probe on a port that is not there",
			broken(t, pod, "port: http-reports\n", "port: metrics\n"),
			[]string{"containers[reports].readinessProbe.httpGet.port", "metrics"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			report := CheckManifests(map[string][]byte{file: []byte(c.text)})
			wantProblem(t, report.Problems, file, c.fragments...)
		})
	}
}

func TestHostIPCIsAcceptedWhenTheReasonIsGiven(t *testing.T) {
	pod := readText(t, cooperatingPod)
	text := broken(t, pod, "hostIPC: false", "hostIPC: true")
	text = broken(t, text, "      annotations:\n", "      annotations:\n        cotenant/host-ipc-reason: share tokens with the node's daemons\n")
	report := CheckManifests(map[string][]byte{"pod.yaml": []byte(text)})
	for _, p := range report.Problems {
		t.Errorf("unexpected: %s", p.Error())
	}
}

func TestUnknownKindsAndPodMonitorsAreChecked(t *testing.T) {
	monitor := readText(t, podMonitorFile)
	files := map[string][]byte{
		"cooperating-pod.yaml": []byte(readText(t, cooperatingPod)),
		"deployment.yaml":      []byte(readText(t, deploymentFile)),
		"podmonitor.yaml":      []byte(broken(t, monitor, "port: http-reports", "port: http-report")),
		"service.yaml":         []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n"),
	}
	report := CheckManifests(files)
	wantProblem(t, report.Problems, "podmonitor.yaml", "spec.podMetricsEndpoints[1].port", `"http-report"`)
	wantProblem(t, report.Problems, "service.yaml", "kind", "Service")
	if len(report.Problems) != 2 {
		t.Errorf("want exactly the two problems above; got:\n%s", listProblems(report.Problems))
	}
}

func TestSeveralDocumentsInOneFile(t *testing.T) {
	both := readText(t, deploymentFile) + "\n---\n# the second one\n" + readText(t, cooperatingPod) + "\n--- # nothing after\n"
	if docs := splitDocuments([]byte(both)); len(docs) != 2 {
		t.Fatalf("split into %d documents, want 2", len(docs))
	}
	report := CheckManifests(map[string][]byte{"both.yaml": []byte(both)})
	if len(report.Problems) != 0 || report.Workloads != 2 || report.CooperatingPods != 1 {
		t.Errorf("got %d pod specs, %d cooperating, problems:\n%s", report.Workloads, report.CooperatingPods, listProblems(report.Problems))
	}
	text := strings.Replace(both, "hostIPC: false", "hostIPC: true", 1)
	wantProblem(t, CheckManifests(map[string][]byte{"both.yaml": []byte(text)}).Problems, "both.yaml (document 2)", "hostIPC")
}

func TestTheDashboardNamesOnlyDocumentedSeries(t *testing.T) {
	report, err := CheckDashboardFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range report.Problems {
		t.Error(p.Error())
	}
	if report.Queries < 10 || report.Quantiles < 4 {
		t.Errorf("checked %d queries and %d histogram_quantile calls: want the panels' (at least 10 and 4)", report.Queries, report.Quantiles)
	}
	for _, family := range []string{"cotenant_pool_target", "cotenant_pool_queue_wait_seconds", "cotenant_pool_run_time_seconds",
		"cotenant_pool_host_tokens", "cotenant_pool_alert", "cotenant_cpu_limit", "cotenant_token_set_available"} {
		if !contains(report.Used, family) {
			t.Errorf("no panel shows %s (the dashboard shows %v)", family, report.Used)
		}
	}
}

func contains(list []string, want string) bool {
	for _, item := range list {
		if item == want {
			return true
		}
	}
	return false
}

// The families the dashboard shows are the library's documented ones: a rename in the library
// and its documentation must reach the dashboard.
func TestTheDashboardsFamiliesAreInTheMetricsDocumentation(t *testing.T) {
	report, err := CheckDashboardFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := readText(t, metricsDoc)
	for _, family := range report.Used {
		if !strings.Contains(doc, family) {
			t.Errorf("%s: the dashboard shows %s, which the metrics documentation does not mention", metricsDoc, family)
		}
	}
}

func TestEachBrokenDashboardFieldIsNamed(t *testing.T) {
	dashboard := readText(t, dashboardFile)
	const file = "dashboard.json"
	cases := []struct {
		name      string
		text      string
		fragments []string
	}{
		{"an undocumented series",
			broken(t, dashboard, "cotenant_pool_queued{", "cotenant_pool_queue_length{"),
			[]string{"cotenant_pool_queue_length", "not a documented"}},
		{"a quantile that drops le",
			broken(t, dashboard, "sum by (instance, pool, le)", "sum by (instance, pool)"),
			[]string{"drops `le`"}},
		{"a quantile over a sum",
			broken(t, dashboard, "(rate(cotenant_pool_queue_wait_seconds_bucket", "(rate(cotenant_pool_queue_wait_seconds_sum"),
			[]string{"needs the _bucket series"}},
		{"no pool variable",
			broken(t, dashboard, `"name": "pool"`, `"name": "pools"`),
			[]string{"templating.list", `"pool"`}},
		{"a query the pool variable does not filter",
			broken(t, dashboard, `cotenant_pool_queued{instance=~\"$instance\",pool=~\"$pool\"}`, `cotenant_pool_queued{instance=~\"$instance\"}`),
			[]string{"cotenant_pool_queued is not filtered by pool"}},
		{"a fixed datasource",
			broken(t, dashboard, `"uid": "${DS_PROMETHEUS}"`, `"uid": "prometheus"`),
			[]string{"templating.list[0 instance].datasource"}},
		{"an unknown function",
			broken(t, dashboard, "rate(cotenant_pool_completed_total", "ratee(cotenant_pool_completed_total"),
			[]string{"ratee( is not a PromQL function"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, CheckDashboard(file, []byte(c.text)).Problems, file, c.fragments...)
		})
	}
	wantProblem(t, CheckDashboard(file, []byte("{")).Problems, file, "not a dashboard's JSON")
}

func TestMetricNamesReadsPromQL(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum by (instance, pool, le) (rate(cotenant_pool_queue_wait_seconds_bucket{pool=~"$pool"}[5m])))`,
			[]string{"cotenant_pool_queue_wait_seconds_bucket"}},
		{`sum(rate(a_total[$__rate_interval])) / on(instance) group_left sum(b) offset 5m`, []string{"a_total", "b"}},
		{`foo{le="+Inf"} > bool 0.5e3`, []string{"foo"}},
		{`cotenant_pool_alert{pool=~"$pool"} == 1 and ignoring(alert) x`, []string{"cotenant_pool_alert", "x"}},
		{`rate(x{a="}"}[5m])`, []string{"x"}},
		{`max by (instance) (y) unless z`, []string{"y", "z"}},
		{`SUM BY (le) (c:recorded:rate5m)`, []string{"c:recorded:rate5m"}},
		{`$metric + ${other:raw}`, nil},
	}
	for _, c := range cases {
		got, err := metricNames(c.expr)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("metricNames(%q) = %q, %v; want %q", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`nosuchfn(x)`, `x{a="b"`, `rate(x[5m]`, `x{a="b}`} {
		if _, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q) found no error", bad)
		}
	}
}

func TestTheDockerfileBuildsASmallNonRootImageAroundCotenantRun(t *testing.T) {
	problems, err := CheckDockerfileFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p.Error())
	}
	stages := parseDockerfile(readText(t, dockerfile))
	if len(stages) != 2 || stages[0].name == "" {
		t.Fatalf("want two stages, the first named; got %+v", stages)
	}
	for _, in := range stages[0].instructions {
		if in.keyword == "RUN" && !strings.Contains(in.args, "--no-default-features") {
			t.Errorf("line %d: the build step does not build the command without the lab (--no-default-features): %s", in.line, in.args)
		}
	}
}

func TestEachBrokenDockerfileFieldIsNamed(t *testing.T) {
	text := readText(t, dockerfile)
	const file = "Dockerfile"
	entrypoint := `ENTRYPOINT ["/usr/local/bin/cotenant", "run", "--"]`
	cases := []struct {
		name      string
		text      string
		fragments []string
	}{
		{"one stage", "FROM debian:bookworm-slim\nUSER 1000\n" + entrypoint + "\n", []string{"FROM", "1 stage"}},
		{"root", broken(t, text, "USER 65532:65532", "USER root"), []string{"USER", `"root" is root`}},
		{"no user", broken(t, text, "USER 65532:65532", ""), []string{"USER", "sets no user"}},
		{"shell form", broken(t, text, entrypoint, "ENTRYPOINT /usr/local/bin/cotenant run --"), []string{"ENTRYPOINT", "exec form"}},
		{"not cotenant run", broken(t, text, entrypoint, `ENTRYPOINT ["/usr/local/bin/http_service"]`), []string{"ENTRYPOINT", "is not cotenant run"}},
		{"a program not copied in", broken(t, text, entrypoint, `ENTRYPOINT ["/usr/bin/cotenant", "run", "--"]`), []string{"ENTRYPOINT", "/usr/bin/cotenant is not copied"}},
		{"a loopback address", broken(t, text, `"0.0.0.0:8080"]`, `"127.0.0.1:8080"]`), []string{"CMD", "loopback"}},
		{"no stop signal", broken(t, text, "STOPSIGNAL SIGINT", ""), []string{"STOPSIGNAL", "SIGINT"}},
		{"the toolchain shipped", broken(t, text, "FROM gcr.io/distroless/cc-debian12:nonroot AS runtime", "FROM rust:1.95-bookworm AS runtime"),
			[]string{"FROM", "toolchain"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, CheckDockerfile(file, c.text), file, c.fragments...)
		})
	}
}

func TestParseDockerfileJoinsContinuedLines(t *testing.T) {
	text := "# syntax=docker/dockerfile:1\nARG X=1\nFROM a AS b\nRUN one \\\n    # a comment inside\n    two\n\nFROM --platform=linux/amd64 c\nCOPY --from=b /x /y/\n"
	stages := parseDockerfile(text)
	if len(stages) != 2 {
		t.Fatalf("got %d stages, want 2: %+v", len(stages), stages)
	}
	run := stages[0].instructions[0]
	if run.keyword != "RUN" || run.args != "one two" || run.line != 4 {
		t.Errorf("got %+v, want RUN \"one two\" at line 4", run)
	}
	if stages[0].name != "b" || stages[1].image != "c" {
		t.Errorf("got stages %+v", stages)
	}
	paths, from := stages[1].copied()
	if !reflect.DeepEqual(paths, []string{"/y/x"}) || !reflect.DeepEqual(from, []string{"b"}) {
		t.Errorf("copied() = %q from %q, want [/y/x] from [b]", paths, from)
	}
}

// The guide names every manifest and keeps its section on what was and was not tested.
func TestTheGuideNamesEveryManifest(t *testing.T) {
	guide := readText(t, kubernetesDoc)
	entries, err := os.ReadDir(kubernetesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if !strings.Contains(guide, entry.Name()) {
			t.Errorf("%s does not mention deploy/kubernetes/%s", kubernetesDoc, entry.Name())
		}
	}
	for _, section := range []string{"## What was tested", "cotenant-pools.json", "docker build -f deploy/Dockerfile"} {
		if !strings.Contains(guide, section) {
			t.Errorf("%s lacks %q", kubernetesDoc, section)
		}
	}
}
