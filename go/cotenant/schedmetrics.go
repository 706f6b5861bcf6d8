// This file owns what the Go runtime itself says about scheduling, read through
// runtime/metrics each period: the runnable goroutines (the Go analogue of the Rust pool's
// queued tasks) and the /sched/latencies:seconds histogram, of which the controller reports
// the 99th percentile.
//
// Why the latency histogram is reported but not decided on: it is the time goroutines spent
// runnable before running, which mixes two opposite causes. A goroutine waits when every P is
// busy (our own work exceeds GOMAXPROCS: if CPUs are idle, the answer is to grow) and when the
// thread of its P is preempted by a neighbour (the answer is to shrink). The kernel's
// per-thread run-queue wait (threads.go) measures only the second, which is what the adaptive
// policy's contention rule needs, and the runnable-goroutine count already says "work is
// queued". The histogram is also sampled by the runtime (not every transition is recorded)
// and quantised to its buckets. Stats exposes its p99 so that users can watch what they care
// about, the latency their goroutines see, move as GOMAXPROCS changes.

package cotenant

import (
	"math"
	"runtime/metrics"
	"time"
)

const (
	metricSchedLatencies = "/sched/latencies:seconds"
	// Go 1.26 and later; on older runtimes the value is metrics.KindBad and nothing counts as
	// queued except busy workers.
	metricRunnable = "/sched/goroutines/runnable:goroutines"
	// latencyWindow is how long the p99 reported in Stats is computed over.
	latencyWindow = time.Second
)

// schedMetrics reads the runtime's scheduling metrics.
type schedMetrics struct {
	samples     []metrics.Sample // [latencies, runnable]
	prev        []uint64         // the histogram's cumulative counts at the last reading
	window      []uint64         // counts since windowStart
	delta       []uint64         // counts since the last reading (reused)
	windowStart time.Time
	windowP99   time.Duration // the last completed window's p99
}

func newSchedMetrics(now time.Time) *schedMetrics {
	return &schedMetrics{
		samples:     []metrics.Sample{{Name: metricSchedLatencies}, {Name: metricRunnable}},
		windowStart: now,
	}
}

// read returns the runnable goroutines now and the p99 of the latencies recorded since the
// last read (0 when none were).
func (m *schedMetrics) read(now time.Time) (runnable uint32, periodP99 time.Duration) {
	metrics.Read(m.samples)
	if v := m.samples[1].Value; v.Kind() == metrics.KindUint64 {
		runnable = uint32(min(v.Uint64(), math.MaxUint32))
	}
	v := m.samples[0].Value
	if v.Kind() != metrics.KindFloat64Histogram {
		return runnable, 0
	}
	h := v.Float64Histogram()
	if len(m.prev) != len(h.Counts) {
		m.prev = append(m.prev[:0], h.Counts...)
		m.window = make([]uint64, len(h.Counts))
		return runnable, 0
	}
	m.delta = append(m.delta[:0], h.Counts...)
	for i, c := range h.Counts {
		m.delta[i] = satSub(c, m.prev[i])
		m.window[i] += m.delta[i]
		m.prev[i] = c
	}
	if now.Sub(m.windowStart) >= latencyWindow {
		m.windowP99 = seconds(histogramQuantile(m.window, h.Buckets, 0.99))
		clear(m.window)
		m.windowStart = now
	}
	return runnable, seconds(histogramQuantile(m.delta, h.Buckets, 0.99))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// histogramQuantile is the q-quantile of a histogram of counts over buckets (boundaries,
// len(counts)+1 of them), as the upper bound of the bucket it falls in (the lower one for
// the unbounded last bucket); 0 for an empty histogram.
func histogramQuantile(counts []uint64, buckets []float64, q float64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 || len(buckets) != len(counts)+1 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum < max(rank, 1) {
			continue
		}
		v := buckets[i+1]
		if math.IsInf(v, 0) {
			v = buckets[i]
		}
		if math.IsInf(v, 0) {
			return 0
		}
		return max(v, 0)
	}
	return 0
}
