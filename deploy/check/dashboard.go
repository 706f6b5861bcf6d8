package check

// The Grafana dashboard: its datasource input, its template variables, and every panel's
// PromQL, which may name only the documented metric families (promql.go reads the names out).

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// dsInput is the datasource input a user picks when importing the dashboard.
const dsInput = "DS_PROMETHEUS"

// dsRef is how every panel, query and variable refers to that datasource.
const dsRef = "${" + dsInput + "}"

// Families lists the metric families the library documents (docs/metrics.md) and exports, with
// their Prometheus type. Every pool family carries a `pool` label. A dashboard query may name
// a counter or gauge family as is, and a histogram family only through its _bucket, _sum and
// _count series.
var Families = map[string]string{
	"cotenant_pool_threads":                      "gauge",
	"cotenant_pool_target":                       "gauge",
	"cotenant_pool_running":                      "gauge",
	"cotenant_pool_queued":                       "gauge",
	"cotenant_pool_queue_capacity":               "gauge",
	"cotenant_pool_completed_total":              "counter",
	"cotenant_pool_caller_ran_total":             "counter",
	"cotenant_pool_rejected_total":               "counter",
	"cotenant_pool_panicked_total":               "counter",
	"cotenant_pool_future_polls_total":           "counter",
	"cotenant_pool_future_wakeups_total":         "counter",
	"cotenant_pool_decisions_total":              "counter",
	"cotenant_pool_sample_errors_total":          "counter",
	"cotenant_pool_borrows_total":                "counter",
	"cotenant_pool_token_takes_total":            "counter",
	"cotenant_pool_token_timeouts_total":         "counter",
	"cotenant_pool_token_errors_total":           "counter",
	"cotenant_pool_token_fallback_periods_total": "counter",
	"cotenant_pool_token_takebacks_total":        "counter",
	"cotenant_pool_degradations_total":           "counter",
	"cotenant_pool_host_tokens":                  "gauge", // {state}
	"cotenant_pool_alert":                        "gauge", // {alert}
	"cotenant_pool_queue_wait_seconds":           "histogram",
	"cotenant_pool_run_time_seconds":             "histogram",
	"cotenant_cpu_limit":                         "gauge",
	"cotenant_cpu_limit_threads":                 "gauge",
	"cotenant_cpu_limit_binding":                 "gauge", // {source}
	"cotenant_cpu_limit_errors_total":            "counter",
	"cotenant_token_set_tokens":                  "gauge", // {set}
	"cotenant_token_set_available":               "gauge", // {set}
	"cotenant_token_set_waiting":                 "gauge", // {set}
	"cotenant_token_set_members":                 "gauge", // {set}
}

// familyOf returns the family a series name belongs to ("" if none): the name itself for a
// counter or gauge, the name without _bucket, _sum or _count for a histogram.
func familyOf(series string) string {
	if kind, ok := Families[series]; ok && kind != "histogram" {
		return series
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok && Families[base] == "histogram" {
			return base
		}
	}
	return ""
}

// dashboard holds the fields of a Grafana dashboard the check reads; the rest is ignored.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Inputs        []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Definition string          `json:"definition"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasource     `json:"datasource"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    *struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	// Panels are a row's panels (a collapsed row keeps them inside).
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// DashboardReport is what [CheckDashboard] found, and how much it looked at.
type DashboardReport struct {
	// Problems lists the findings.
	Problems []Problem
	// Queries counts the panel queries checked.
	Queries int
	// Quantiles counts the histogram_quantile calls checked.
	Quantiles int
	// Used lists the families the queries name, sorted.
	Used []string
}

// CheckDashboardFile reads and checks a dashboard file ([CheckDashboard]); the error is for a
// file that cannot be read.
func CheckDashboardFile(file string) (DashboardReport, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return DashboardReport{}, fmt.Errorf("reading the dashboard %s: %w", file, err)
	}
	return CheckDashboard(file, data), nil
}

var (
	instanceMatcher = regexp.MustCompile(`instance\s*=~\s*"\$instance"`)
	poolMatcher     = regexp.MustCompile(`pool\s*=~\s*"\$pool"`)
	// selector finds each cotenant series and its label matchers, if any.
	selector = regexp.MustCompile(`(cotenant_[A-Za-z0-9_:]*)\s*(\{[^}]*\})?`)
)

// CheckDashboard checks a dashboard's JSON (file names it in the findings).
func CheckDashboard(file string, data []byte) DashboardReport {
	var ps problems
	report := DashboardReport{}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		ps.add(file, "", "not a dashboard's JSON: %v", err)
		report.Problems = ps
		return report
	}
	if d.Title == "" {
		ps.add(file, "title", "missing")
	}
	if d.UID == "" {
		ps.add(file, "uid", "missing: links to the dashboard and re-imports use it")
	}
	if d.SchemaVersion < 36 {
		ps.add(file, "schemaVersion", "is %d: datasource references as objects need 36 or later", d.SchemaVersion)
	}
	hasInput := false
	for _, input := range d.Inputs {
		if input.Name == dsInput && input.Type == "datasource" && input.PluginID == "prometheus" {
			hasInput = true
		}
	}
	if !hasInput {
		ps.add(file, "__inputs", "no Prometheus datasource input named %s: importing the dashboard would not ask which Prometheus to use", dsInput)
	}
	used := map[string]bool{}
	checkVariables(file, d.Templating.List, used, &ps)
	ids := map[int]string{}
	for _, p := range flatten(d.Panels) {
		field := fmt.Sprintf("panels[id %d %q]", p.ID, p.Title)
		if p.ID <= 0 {
			ps.add(file, field+".id", "missing or not positive")
		} else if other, taken := ids[p.ID]; taken {
			ps.add(file, field+".id", "also the id of panel %q", other)
		}
		ids[p.ID] = p.Title
		if p.GridPos == nil || p.GridPos.W < 1 || p.GridPos.H < 1 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			ps.add(file, field+".gridPos", "missing or outside the 24-column grid")
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != dsRef {
			ps.add(file, field+".datasource", "does not use the datasource input: want uid %q", dsRef)
		}
		if len(p.Targets) == 0 {
			ps.add(file, field+".targets", "no query")
		}
		refIDs := map[string]bool{}
		for i, t := range p.Targets {
			targetField := fmt.Sprintf("%s.targets[%d]", field, i)
			if t.RefID == "" || refIDs[t.RefID] {
				ps.add(file, targetField+".refId", "%q is missing or not unique in the panel", t.RefID)
			}
			refIDs[t.RefID] = true
			if t.Datasource != nil && t.Datasource.UID != dsRef {
				ps.add(file, targetField+".datasource", "uid %q is not the datasource input %q", t.Datasource.UID, dsRef)
			}
			report.Queries++
			report.Quantiles += checkExpr(file, targetField+".expr", t.Expr, used, &ps)
		}
	}
	report.Used = sortedKeys(used)
	report.Problems = ps
	return report
}

// flatten lists the panels with each row's own panels after it.
func flatten(panels []panel) []panel {
	var out []panel
	for _, p := range panels {
		out = append(out, p)
		out = append(out, flatten(p.Panels)...)
	}
	return out
}

// checkVariables: the `instance` and `pool` variables exist, query the datasource input, and
// name documented families only.
func checkVariables(file string, list []variable, used map[string]bool, ps *problems) {
	found := map[string]bool{}
	for i, v := range list {
		field := fmt.Sprintf("templating.list[%d %s]", i, v.Name)
		found[v.Name] = true
		if v.Type != "query" {
			continue
		}
		if v.Datasource == nil || v.Datasource.UID != dsRef {
			ps.add(file, field+".datasource", "does not use the datasource input: want uid %q", dsRef)
		}
		query := variableQuery(v)
		if query == "" {
			ps.add(file, field+".query", "missing")
			continue
		}
		// label_values(SELECTOR, LABEL): the label is not a metric; only the selector names one.
		if inner, ok := strings.CutPrefix(query, "label_values("); ok {
			if comma := strings.LastIndex(inner, ","); comma >= 0 {
				query = inner[:comma]
			} else {
				query = strings.TrimSuffix(inner, ")")
			}
		}
		names, err := metricNames(query)
		if err != nil {
			ps.add(file, field+".query", "%q: %v", query, err)
		}
		for _, name := range names {
			if family := familyOf(name); family == "" {
				ps.add(file, field+".query", "names %s, which is not a documented cotenant series", name)
			} else {
				used[family] = true
			}
		}
	}
	for _, name := range []string{"instance", "pool"} {
		if !found[name] {
			ps.add(file, "templating.list", "no %q variable: the panels filter on $%s", name, name)
		}
	}
}

// variableQuery is a query variable's PromQL: its query as a string, or the object form's
// "query" field, or its definition.
func variableQuery(v variable) string {
	var text string
	if json.Unmarshal(v.Query, &text) == nil && text != "" {
		return text
	}
	var object struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &object) == nil && object.Query != "" {
		return object.Query
	}
	return v.Definition
}

// checkExpr checks one panel query: documented series only, filtered by the dashboard's
// variables, and histogram_quantile over _bucket series by `le`. It returns how many
// histogram_quantile calls it checked.
func checkExpr(file, field, expr string, used map[string]bool, ps *problems) int {
	if strings.TrimSpace(expr) == "" {
		ps.add(file, field, "empty")
		return 0
	}
	names, err := metricNames(expr)
	if err != nil {
		ps.add(file, field, "%q: %v", expr, err)
	}
	if len(names) == 0 && err == nil {
		ps.add(file, field, "%q names no series", expr)
	}
	for _, name := range names {
		if family := familyOf(name); family == "" {
			ps.add(file, field, "names %s, which is not a documented cotenant series (deploy/check/dashboard.go lists them)", name)
		} else {
			used[family] = true
		}
	}
	for _, match := range selector.FindAllStringSubmatch(expr, -1) {
		name, matchers := match[1], match[2]
		if !instanceMatcher.MatchString(matchers) {
			ps.add(file, field, "%s is not filtered by instance=~\"$instance\": the instance variable would not apply", name)
		}
		if strings.HasPrefix(name, "cotenant_pool_") && !poolMatcher.MatchString(matchers) {
			ps.add(file, field, "%s is not filtered by pool=~\"$pool\": the pool variable would not apply", name)
		}
	}
	calls := histogramQuantileArgs(expr)
	for _, args := range calls {
		checkQuantile(file, field, args, ps)
	}
	return len(calls)
}

// checkQuantile checks the arguments of one histogram_quantile call: a quantile between 0 and
// 1, _bucket series of documented histograms, and `le` kept by any aggregation.
func checkQuantile(file, field, args string, ps *problems) {
	first, rest, ok := strings.Cut(args, ",")
	if !ok {
		ps.add(file, field, "histogram_quantile(%s) takes a quantile and a vector", args)
		return
	}
	if q, err := strconv.ParseFloat(strings.TrimSpace(first), 64); err != nil || q < 0 || q > 1 {
		ps.add(file, field, "histogram_quantile's quantile %q is not a number from 0 to 1", strings.TrimSpace(first))
	}
	names, _ := metricNames(rest)
	buckets := 0
	for _, name := range names {
		base, isBucket := strings.CutSuffix(name, "_bucket")
		if !isBucket || Families[base] != "histogram" {
			ps.add(file, field, "histogram_quantile over %s: it needs the _bucket series of a documented histogram", name)
			continue
		}
		buckets++
	}
	if buckets == 0 {
		ps.add(file, field, "histogram_quantile(%s) reads no _bucket series", args)
	}
	if aggregates(rest) {
		kind, labels := groupingLabels(rest)
		keepsLe := (kind == "by" && labels["le"]) || (kind == "without" && !labels["le"])
		if !keepsLe {
			ps.add(file, field, "histogram_quantile over an aggregation that drops `le`: write sum by (..., le) (rate(..._bucket[5m]))")
		}
	}
}
