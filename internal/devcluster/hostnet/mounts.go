package hostnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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

// VolumeRootPath is where the dev cluster's provisioner makes its volumes
// (hostpathprov.DefaultRoot; hostnet does not import the provisioner).
const VolumeRootPath = "/tmp/hostpath_pv"

// VolumeRoot bind-mounts VolumeRootPath onto itself with nodev and nosuid, so that a device node
// or a setuid file a sandbox leaves in its volume is inert on the node (the volumes are 0777
// directories of the host's filesystem). Down unmounts it only if Up mounted it.
type VolumeRoot struct{ Env }

type volumeRootRecord struct {
	Mounted    bool `json:"mounted"`
	CreatedDir bool `json:"createdDir"`
}

func (VolumeRoot) Name() string { return "volume-root" }

func (s VolumeRoot) Up(context.Context) error {
	if host.IsMountPoint(s.Host, VolumeRootPath, "") {
		return nil
	}
	rec := volumeRootRecord{Mounted: true, CreatedDir: !s.Host.Exists(VolumeRootPath)}
	if err := s.Store.Save(s.Name(), rec); err != nil {
		return err
	}
	if err := s.Host.MkdirAll(VolumeRootPath); err != nil {
		return err
	}
	if err := s.Host.Mount(VolumeRootPath, VolumeRootPath, "", syscall.MS_BIND); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", VolumeRootPath, err)
	}
	// A bind mount takes its flags only from a remount.
	if err := s.Host.Mount("", VolumeRootPath, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_NODEV|syscall.MS_NOSUID); err != nil {
		return fmt.Errorf("remounting %s nodev,nosuid: %w", VolumeRootPath, err)
	}
	return nil
}

func (s VolumeRoot) Down(context.Context) error {
	rec, ok, err := load[volumeRootRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	if rec.Mounted && host.IsMountPoint(s.Host, VolumeRootPath, "") {
		// Detached: a volume directory still open somewhere must not keep the host mounted.
		if err := s.Host.Unmount(VolumeRootPath, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting %s: %w", VolumeRootPath, err)
		}
	}
	if rec.CreatedDir && s.Host.Exists(VolumeRootPath) {
		// Only while empty: the volumes are the Paths step's to remove.
		_ = s.Host.Remove(VolumeRootPath)
	}
	return finish(s.Env, s.Name(), nil)
}
