package snapshotlab

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/hibernate"
)

// TestCheckpointRestoreCost measures cycles at each size in SNAPSHOT_LAB_SIZES (MiB, default
// "64,256,1024"), SNAPSHOT_LAB_RUNS times each (default 3), with SNAPSHOT_LAB_COMPRESSION as the
// checkpoint's compression (default none), and logs the medians as a Markdown table. Every cycle
// must also restore the workload's memory, or the numbers would measure nothing.
func TestCheckpointRestoreCost(t *testing.T) {
	sizes, err := intList(envOr("SNAPSHOT_LAB_SIZES", "64,256,1024"))
	if err != nil {
		t.Fatalf("SNAPSHOT_LAB_SIZES: %v", err)
	}
	runs, err := strconv.Atoi(envOr("SNAPSHOT_LAB_RUNS", "3"))
	if err != nil || runs < 1 {
		t.Fatalf("SNAPSHOT_LAB_RUNS must be a positive number, got %q", os.Getenv("SNAPSHOT_LAB_RUNS"))
	}
	l := startLab(t)
	opts := hibernate.CheckpointOptions{Compression: os.Getenv("SNAPSHOT_LAB_COMPRESSION")}
	var rows []string
	for _, mib := range sizes {
		var samples []Sample
		for run := range runs {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			s, err := l.Cycle(ctx, fmt.Sprintf("m%d-%d", mib, run), mib, opts)
			cancel()
			if err != nil {
				t.Fatalf("%d MiB, run %d: %v", mib, run, err)
			}
			if s.After.Token != s.Before.Token || !s.After.MemoryIntact || s.After.PID != s.Before.PID {
				t.Fatalf("%d MiB, run %d: the restore lost the workload's state: before %+v, after %+v", mib, run, s.Before, s.After)
			}
			t.Logf("%d MiB run %d: %s", mib, run, s.row())
			samples = append(samples, s)
		}
		rows = append(rows, median(samples).row())
	}
	t.Logf("medians of %d runs, compression %q:\n%s\n%s", runs, opts.Compression, header, strings.Join(rows, "\n"))
}

const header = "| buffer MiB | resident MiB | cold start s | checkpoint s | restore s | restore to answer s | image MiB |\n|---|---|---|---|---|---|---|"

func (s Sample) row() string {
	return fmt.Sprintf("| %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f |", s.MiB, float64(s.RSSKiB)/1024,
		s.ColdStart.Seconds(), s.Checkpoint.Seconds(), s.Restore.Seconds(), s.RestoreToAnswer.Seconds(),
		float64(s.ImageBytes)/(1<<20))
}

// median takes each column's median on its own.
func median(samples []Sample) Sample {
	pick := func(f func(Sample) int64) int64 {
		v := make([]int64, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	dur := func(f func(Sample) time.Duration) time.Duration {
		return time.Duration(pick(func(s Sample) int64 { return int64(f(s)) }))
	}
	return Sample{
		MiB:             samples[0].MiB,
		RSSKiB:          pick(func(s Sample) int64 { return s.RSSKiB }),
		ColdStart:       dur(func(s Sample) time.Duration { return s.ColdStart }),
		Checkpoint:      dur(func(s Sample) time.Duration { return s.Checkpoint }),
		Restore:         dur(func(s Sample) time.Duration { return s.Restore }),
		RestoreToAnswer: dur(func(s Sample) time.Duration { return s.RestoreToAnswer }),
		ImageBytes:      pick(func(s Sample) int64 { return s.ImageBytes }),
	}
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
