// Command promcheck checks Prometheus text expositions with the Prometheus project's own text
// parser (github.com/prometheus/common/expfmt), as a scraper would read them, and then checks
// what cotenant's metrics promise on top:
//
//   - each file parses (the parser refuses a second HELP or TYPE line for a family);
//   - each family's samples are in one block (a family split in two is what several
//     one-pool texts put together look like);
//   - every histogram's buckets are cumulative, and its +Inf bucket equals its _count;
//   - for every pool label, cotenant_pool_queue_wait_seconds_count and
//     cotenant_pool_run_time_seconds_count equal cotenant_pool_completed_total (so every pool
//     of the input must time its tasks, which is off by default: the exposition example that
//     `make metrics-check` feeds it turns them on);
//   - with -pools N, exactly N distinct pool labels.
//
// Usage:
//
//	promcheck [-pools N] FILE...
//
// It prints one line per file and exits 1 if any file fails, 2 on a usage error.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The families whose counts must agree, per pool.
const (
	completedFamily = "cotenant_pool_completed_total"
	queueWaitFamily = "cotenant_pool_queue_wait_seconds"
	runTimeFamily   = "cotenant_pool_run_time_seconds"
	poolLabel       = "pool"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: arguments in, exit code out.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("promcheck", flag.ContinueOnError)
	flags.SetOutput(stderr)
	pools := flags.Int("pools", -1, "the number of distinct pool labels each file must have (-1: any number)")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: promcheck [-pools N] FILE...")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() == 0 {
		fmt.Fprintln(stderr, "promcheck: no exposition file named")
		flags.Usage()
		return 2
	}
	if *pools < -1 {
		fmt.Fprintf(stderr, "promcheck: -pools must be -1 (any) or a count, not %d\n", *pools)
		return 2
	}
	failed := false
	for _, path := range flags.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stdout, "FAIL %s: %v\n", path, err)
			failed = true
			continue
		}
		got, err := check(data, *pools)
		if err != nil {
			fmt.Fprintf(stdout, "FAIL %s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Fprintf(stdout, "ok   %s: %s\n", path, got)
	}
	if failed {
		return 1
	}
	return 0
}

// summary says what a file that passed holds.
type summary struct {
	families   int
	histograms int
	pools      []string
}

func (s summary) String() string {
	return fmt.Sprintf("%d families (%d histograms), %d pools [%s]",
		s.families, s.histograms, len(s.pools), strings.Join(s.pools, ", "))
}

// check runs every check on one exposition; wantPools < 0 accepts any number of pools.
func check(data []byte, wantPools int) (summary, error) {
	if err := oneBlockPerFamily(data); err != nil {
		return summary{}, err
	}
	families, err := parse(data)
	if err != nil {
		return summary{}, fmt.Errorf("the Prometheus text parser refused it: %w", err)
	}
	if len(families) == 0 {
		return summary{}, fmt.Errorf("no metric family in it")
	}
	s := summary{families: len(families)}
	for _, name := range sortedNames(families) {
		family := families[name]
		if family.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		s.histograms++
		for _, metric := range family.GetMetric() {
			if err := cumulative(metric.GetHistogram()); err != nil {
				return summary{}, fmt.Errorf("histogram %s%s: %w", name, labelText(metric), err)
			}
		}
	}
	pools, err := poolCounts(families)
	if err != nil {
		return summary{}, err
	}
	s.pools = pools
	if wantPools >= 0 && len(pools) != wantPools {
		return summary{}, fmt.Errorf("%d pools (%s), expected %d", len(pools), strings.Join(pools, ", "), wantPools)
	}
	return s, nil
}

// parse reads the text with the Prometheus text parser, classic metric and label names.
func parse(data []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	return parser.TextToMetricFamilies(bytes.NewReader(data))
}

// cumulative checks that a histogram's buckets rise with their bounds, never fall, and end
// with a +Inf bucket equal to the sample count.
func cumulative(h *dto.Histogram) error {
	buckets := h.GetBucket()
	if len(buckets) == 0 {
		return fmt.Errorf("no bucket")
	}
	for i := 1; i < len(buckets); i++ {
		before, now := buckets[i-1], buckets[i]
		if now.GetUpperBound() <= before.GetUpperBound() {
			return fmt.Errorf("bucket le=%v after le=%v: bounds must rise", now.GetUpperBound(), before.GetUpperBound())
		}
		if now.GetCumulativeCount() < before.GetCumulativeCount() {
			return fmt.Errorf("bucket le=%v holds %d, fewer than le=%v's %d: buckets must be cumulative",
				now.GetUpperBound(), now.GetCumulativeCount(), before.GetUpperBound(), before.GetCumulativeCount())
		}
	}
	last := buckets[len(buckets)-1]
	if !math.IsInf(last.GetUpperBound(), 1) {
		return fmt.Errorf("no le=\"+Inf\" bucket (the last is le=%v)", last.GetUpperBound())
	}
	if last.GetCumulativeCount() != h.GetSampleCount() {
		return fmt.Errorf("the +Inf bucket holds %d but _count is %d", last.GetCumulativeCount(), h.GetSampleCount())
	}
	return nil
}

// poolCounts returns the pool labels, sorted, after checking that each pool's histograms
// count its completed tasks.
func poolCounts(families map[string]*dto.MetricFamily) ([]string, error) {
	seen := map[string]bool{}
	for name, family := range families {
		if !strings.HasPrefix(name, "cotenant_pool_") {
			continue
		}
		for _, metric := range family.GetMetric() {
			if pool, ok := label(metric, poolLabel); ok {
				seen[pool] = true
			}
		}
	}
	pools := make([]string, 0, len(seen))
	for pool := range seen {
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	completed := perPool(families[completedFamily], func(m *dto.Metric) uint64 {
		return uint64(m.GetCounter().GetValue())
	})
	for _, histogram := range []string{queueWaitFamily, runTimeFamily} {
		counts := perPool(families[histogram], func(m *dto.Metric) uint64 {
			return m.GetHistogram().GetSampleCount()
		})
		for _, pool := range pools {
			done, ok := completed[pool]
			if !ok {
				return nil, fmt.Errorf("pool %q has no %s", pool, completedFamily)
			}
			count, ok := counts[pool]
			if !ok {
				return nil, fmt.Errorf("pool %q has no %s histogram", pool, histogram)
			}
			if count != done {
				return nil, fmt.Errorf("pool %q: %s_count is %d but %s is %d", pool, histogram, count, completedFamily, done)
			}
		}
	}
	return pools, nil
}

// perPool reads one number per pool label from a family (nil: none).
func perPool(family *dto.MetricFamily, value func(*dto.Metric) uint64) map[string]uint64 {
	out := map[string]uint64{}
	if family == nil {
		return out
	}
	for _, metric := range family.GetMetric() {
		if pool, ok := label(metric, poolLabel); ok {
			out[pool] = value(metric)
		}
	}
	return out
}

// label returns the value of a metric's label name.
func label(metric *dto.Metric, name string) (string, bool) {
	for _, pair := range metric.GetLabel() {
		if pair.GetName() == name {
			return pair.GetValue(), true
		}
	}
	return "", false
}

// labelText writes a metric's labels for a message.
func labelText(metric *dto.Metric) string {
	var parts []string
	for _, pair := range metric.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", pair.GetName(), pair.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func sortedNames(families map[string]*dto.MetricFamily) []string {
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// oneBlockPerFamily checks, line by line, that no family's lines resume after another
// family's began. A histogram's or summary's _bucket, _sum and _count samples belong to the
// family its TYPE line names.
func oneBlockPerFamily(data []byte) error {
	typed := map[string]string{} // family name -> type
	done := map[string]bool{}    // families whose block ended
	current := ""
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for number := 1; scanner.Scan(); number++ {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		var family string
		if strings.HasPrefix(line, "#") {
			fields := strings.Fields(line)
			if len(fields) < 3 || (fields[1] != "HELP" && fields[1] != "TYPE") {
				continue // a comment
			}
			family = fields[2]
			if fields[1] == "TYPE" && len(fields) >= 4 {
				typed[family] = fields[3]
			}
		} else {
			family = familyOf(sampleName(line), typed)
		}
		if family == current {
			continue
		}
		if done[family] {
			return fmt.Errorf("line %d: family %s resumes after other families (split in two blocks)", number, family)
		}
		if current != "" {
			done[current] = true
		}
		current = family
	}
	return scanner.Err()
}

// sampleName is the metric name at the start of a sample line.
func sampleName(line string) string {
	if i := strings.IndexAny(line, "{ \t"); i >= 0 {
		return line[:i]
	}
	return line
}

// familyOf maps a sample's name to its family: itself, or, for _bucket, _sum and _count, the
// histogram or summary it belongs to.
func familyOf(name string, typed map[string]string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if !found {
			continue
		}
		if kind := typed[base]; kind == "histogram" || kind == "summary" {
			return base
		}
	}
	return name
}
