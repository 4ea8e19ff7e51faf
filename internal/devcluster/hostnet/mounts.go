package hostnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
)

// BPFFSPath is where the BPF filesystem Cilium pins its maps in is mounted.
const BPFFSPath = "/sys/fs/bpf"

// BPFFS mounts the BPF filesystem unless it is mounted; Down unmounts it only if Up mounted it.
type BPFFS struct{ Env }

type bpffsRecord struct {
	Mounted bool `json:"mounted"`
}

func (BPFFS) Name() string { return "bpffs" }

func (s BPFFS) Up(context.Context) error {
	if host.IsMountPoint(s.Host, BPFFSPath, "bpf") {
		return nil
	}
	if err := s.Store.Save(s.Name(), bpffsRecord{Mounted: true}); err != nil {
		return err
	}
	if err := s.Host.Mount("bpffs", BPFFSPath, "bpf", 0); err != nil {
		return fmt.Errorf("mounting bpffs at %s: %w", BPFFSPath, err)
	}
	return nil
}

func (s BPFFS) Down(context.Context) error {
	rec, ok, err := load[bpffsRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	if rec.Mounted && host.IsMountPoint(s.Host, BPFFSPath, "bpf") {
		if err := s.Host.Unmount(BPFFSPath, 0); err != nil {
			return fmt.Errorf("unmounting %s: %w", BPFFSPath, err)
		}
	}
	return finish(s.Env, s.Name(), nil)
}

// cniResultsDir is libcni's cache of ADD results, outside our state dir whatever we configure.
const cniResultsDir = "/var/lib/cni/results"

// CNICache records the CNI network's name; Down removes libcni's cached results of it (the
// pods' networks are gone by then).
type CNICache struct {
	Env
	Network string
}

type cniCacheRecord struct {
	Network string `json:"network"`
}

func (CNICache) Name() string { return "cni-cache" }

func (s CNICache) Up(context.Context) error {
	return s.Store.Save(s.Name(), cniCacheRecord{Network: s.Network})
}

func (s CNICache) Down(context.Context) error {
	rec, ok, err := load[cniCacheRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	entries, _ := s.Host.ReadDir(cniResultsDir)
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name, rec.Network+"-") {
			errs = append(errs, s.Host.RemoveAll(filepath.Join(cniResultsDir, e.Name)))
		}
	}
	return finish(s.Env, s.Name(), errors.Join(errs...))
}

// StateDir holds the components' data in the state dir: Down unmounts whatever the kubelet and
// containerd left mounted under it, then removes their data (certificates, logs and built
// binaries stay).
type StateDir struct {
	Env
	Dir string
}

// stateDataDirs are the state dir's folders Down removes.
var stateDataDirs = []string{"etcd", "containerd", "kubelet", "kube-proxy", "cilium", "cni", "run", "pod-logs", "pids", "kwok", "images", "runsc"}

type stateDirRecord struct {
	Dir string `json:"dir"`
}

func (StateDir) Name() string { return "state-dir" }

func (s StateDir) Up(context.Context) error {
	return s.Store.Save(s.Name(), stateDirRecord{Dir: s.Dir})
}

func (s StateDir) Down(context.Context) error {
	rec, ok, err := load[stateDirRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	errs := []error{host.UnmountAll(s.Host, rec.Dir)}
	for _, d := range stateDataDirs {
		// The state dir is ours, not the host's: plain file removal.
		errs = append(errs, os.RemoveAll(filepath.Join(rec.Dir, d)))
	}
	return finish(s.Env, s.Name(), errors.Join(errs...))
}
