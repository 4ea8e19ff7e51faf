package snapshotlab

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/snapshotlab/report"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/hibernate"
)

// Sample is one cycle's measurements: a cold start, a checkpoint, a restore into a new container
// in another network namespace.
type Sample struct {
	MiB    int   // the workload's buffer
	RSSKiB int64 // the workload's resident memory before the checkpoint, as the sandbox counts it
	// ColdStart is from `ctr run` of a fresh container to its first probe's answer, the buffer
	// filled (today's cold wake, with the state rebuilt).
	ColdStart time.Duration
	// Checkpoint is the shim's Checkpoint call: runsc checkpoint, image written, sandbox stopped.
	Checkpoint time.Duration
	// Restore is `ctr run` of the new container: create, then runsc restore until it returns.
	Restore time.Duration
	// RestoreToAnswer is from that `ctr run` to the restored workload's first probe answer.
	RestoreToAnswer time.Duration
	ImageBytes      int64
	Before, After   report.Report // the probes just before the checkpoint and after the restore
}

// Cycle runs one cycle with a workload of mib MiB; name keeps its containers, namespaces and
// image apart from other cycles'. It removes all of them before returning.
func (l *Lab) Cycle(ctx context.Context, name string, mib int, opts hibernate.CheckpointOptions) (s Sample, err error) {
	s.MiB = mib
	first, second := name+"-a", name+"-b"
	nsA, err := l.NewNetns(first, "10.231.0.1/24")
	if err != nil {
		return s, err
	}
	defer func() { err = joinErr(err, l.DeleteNetns(first)) }()
	nsB, err := l.NewNetns(second, "10.231.0.2/24")
	if err != nil {
		return s, err
	}
	defer func() { err = joinErr(err, l.DeleteNetns(second)) }()
	opts.ImagePath = filepath.Join(l.ImagesDir(), name)
	if err := os.MkdirAll(opts.ImagePath, 0o700); err != nil {
		return s, err
	}
	defer func() { err = joinErr(err, os.RemoveAll(opts.ImagePath)) }()

	if err := l.coldStartAndCheckpoint(ctx, &s, Container{ID: first, MiB: mib, Netns: nsA}, opts); err != nil {
		return s, err
	}
	if s.ImageBytes, err = dirBytes(opts.ImagePath); err != nil {
		return s, err
	}
	l.logf("%s: restoring into %s", name, second)
	start := time.Now()
	defer func() { err = joinErr(err, l.Remove(ctx, second)) }()
	if err := l.Run(ctx, Container{ID: second, MiB: mib, Netns: nsB, RestoreImage: opts.ImagePath}); err != nil {
		return s, err
	}
	s.Restore = time.Since(start)
	if s.After, err = l.WaitProbe(ctx, second, 2*time.Minute); err != nil {
		return s, fmt.Errorf("restored %s never answered: %w", second, err)
	}
	s.RestoreToAnswer = time.Since(start)
	return s, nil
}

func (l *Lab) coldStartAndCheckpoint(ctx context.Context, s *Sample, c Container, opts hibernate.CheckpointOptions) error {
	l.logf("%s: cold start with %d MiB", c.ID, c.MiB)
	start := time.Now()
	if err := l.Run(ctx, c); err != nil {
		return err
	}
	if _, err := l.WaitProbe(ctx, c.ID, 5*time.Minute); err != nil {
		return fmt.Errorf("%s never answered: %w", c.ID, err)
	}
	s.ColdStart = time.Since(start)
	var err error
	// The token lives only in the workload's memory (and in the files it writes).
	if s.Before, err = l.Probe(ctx, c.ID, "token-"+c.ID); err != nil {
		return err
	}
	s.RSSKiB = s.Before.RSSKiB
	l.logf("%s: checkpoint into %s", c.ID, opts.ImagePath)
	start = time.Now()
	if err := hibernate.Checkpoint(ctx, hibernate.Socket(l.RunscRoot(), c.ID), c.ID, opts); err != nil {
		return err
	}
	s.Checkpoint = time.Since(start)
	return l.Remove(ctx, c.ID)
}

func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}

func joinErr(err, more error) error {
	if more == nil {
		return err
	}
	if err == nil {
		return more
	}
	return fmt.Errorf("%w; then: %w", err, more)
}
