package bench

import (
	"testing"
	"time"
)

func TestSummarizePicksNearestRankPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarize(ds)
	want := Latency{P50: 50, P90: 90, P99: 99, Max: 100, N: 100}
	if got != want {
		t.Errorf("summarize(1..100ms) = %+v, want %+v", got, want)
	}
	if empty := summarize(nil); empty != (Latency{}) {
		t.Errorf("summarize(nil) = %+v, want zero", empty)
	}
}
