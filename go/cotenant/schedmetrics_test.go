// Tests of the runtime-metrics reader: the quantile of a histogram, and a live read.

package cotenant

import (
	"math"
	"testing"
	"time"
)

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	buckets := []float64{math.Inf(-1), 0, 1e-6, 1e-3, 1, inf}
	for _, c := range []struct {
		counts []uint64
		want   float64
	}{
		{[]uint64{0, 0, 0, 0, 0}, 0},
		{[]uint64{0, 100, 0, 0, 0}, 1e-6},
		{[]uint64{0, 98, 1, 1, 0}, 1e-3}, // the 99th of 100 is in (1µs, 1ms]
		{[]uint64{0, 90, 0, 10, 0}, 1},   // ... in (1ms, 1s]
		{[]uint64{0, 0, 0, 0, 5}, 1},     // the unbounded bucket reports its lower bound
		{[]uint64{3, 0, 0, 0, 0}, 0},     // negative latencies (clock skew) count as 0
	} {
		if got := histogramQuantile(c.counts, buckets, 0.99); got != c.want {
			t.Errorf("%v: %v, want %v", c.counts, got, c.want)
		}
	}
}

func TestTheRuntimeMetricsCanBeRead(t *testing.T) {
	m := newSchedMetrics(time.Now())
	m.read(time.Now())
	done := make(chan struct{})
	for range 100 {
		go func() { done <- struct{}{} }()
		<-done
	}
	if _, p99 := m.read(time.Now().Add(2 * latencyWindow)); p99 < 0 || m.windowP99 < 0 {
		t.Fatalf("p99 %v, window %v", p99, m.windowP99)
	}
}
