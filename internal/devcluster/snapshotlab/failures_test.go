package snapshotlab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/hibernate"
)

// TestRestoreOutcomes restores one checkpoint in the ways a controller could get wrong, and twice
// at once (what a fork would do). Each case logs containerd's answer for docs/snapshots.md.
func TestRestoreOutcomes(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	image := checkpointedWorkload(ctx, t, l, "outcomes", "token-outcomes")
	corrupt := filepath.Join(l.ImagesDir(), "corrupt")
	copyTruncated(t, image, corrupt)

	for i, tc := range []struct {
		name      string
		c         Container
		wantToken bool // false: the restore must fail
	}{
		{"an image path with no image fails", Container{RestoreImage: filepath.Join(l.ImagesDir(), "missing")}, false},
		{"an image whose pages file is cut short fails", Container{RestoreImage: corrupt}, false},
		{"a spec without the bind mount the sandbox had fails", Container{RestoreImage: image, NoBindMount: true}, false},
		{"a spec with another environment restores the saved process", Container{RestoreImage: image, Env: []string{"EXTRA=1"}}, true},
		{"the same image restores into a first container", Container{RestoreImage: image}, true},
		{"and into a second one while the first runs", Container{RestoreImage: image}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.ID, c.MiB = fmt.Sprintf("outcome-%d", i), 32
			nsName := fmt.Sprintf("outcome-%d", i)
			var err error
			if c.Netns, err = l.NewNetns(nsName, fmt.Sprintf("10.231.0.%d/24", 10+i)); err != nil {
				t.Fatal(err)
			}
			caseCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			runErr := l.Run(caseCtx, c)
			var answer string
			if runErr == nil {
				r, err := l.WaitProbe(caseCtx, c.ID, 20*time.Second)
				answer = fmt.Sprintf("token %q, err %v", r.Token, err)
				runErr = err
				if err == nil && r.Token != "token-outcomes" {
					runErr = fmt.Errorf("answered with token %q, not the checkpoint's", r.Token)
				}
			}
			t.Logf("restore: %v; probe: %s", runErr, answer)
			if runErr != nil {
				t.Logf("runsc's restore log ends with:\n%s", l.LogTail(c.ID, "runsc.restore.log", 8))
			}
			if tc.wantToken && runErr != nil {
				t.Errorf("expected the saved workload to answer, got %v", runErr)
			}
			if !tc.wantToken && runErr == nil {
				t.Errorf("expected the restore to fail, but the saved workload answered")
			}
			if !strings.HasPrefix(tc.name, "the same image restores into a first") {
				if err := l.Remove(ctx, c.ID); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// checkpointedWorkload runs a 32 MiB workload as container id, gives it token, checkpoints it
// into ImagesDir()/id, removes the container and returns the image's path.
func checkpointedWorkload(ctx context.Context, t *testing.T, l *Lab, id, token string) string {
	t.Helper()
	image := filepath.Join(l.ImagesDir(), id)
	ns, err := l.NewNetns(id, "10.231.0.1/24")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(ctx, Container{ID: id, MiB: 32, Netns: ns}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitProbe(ctx, id, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Probe(ctx, id, token); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(image, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := hibernate.Checkpoint(ctx, hibernate.Socket(l.RunscRoot(), id), id, hibernate.CheckpointOptions{ImagePath: image}); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	return image
}

// copyTruncated copies a checkpoint image with its pages file cut to half its size.
func copyTruncated(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "pages.img" {
			data = data[:len(data)/2]
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
