package hostnet

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
)

// HostPaths are the paths the cluster's components create outside the state dir.
var HostPaths = []string{
	"/var/run/netns",   // pod network namespaces (containerd)
	"/var/lib/cni",     // libcni's result cache
	"/run/containerd",  // shim sockets (containerd 1.6 puts them there whatever its state dir)
	"/tmp/hostpath_pv", // the PV provisioner's volumes (hostpathprov.DefaultRoot)
	"/var/lib/kubelet", // kubelet keeps a few files at the default root regardless
	"/var/log/pods",    // in case a component ignores our log dirs
	"/var/log/containers",
}

const cgroupRoot = "/sys/fs/cgroup"

// cgroupDirs are the cgroups the kubelet (kubepods) and containerd (k8s.io) create in every
// hierarchy.
func cgroupDirs(h host.Host) []string {
	var out []string
	entries, _ := h.ReadDir(cgroupRoot)
	for _, e := range entries {
		if e.Dir {
			r := filepath.Join(cgroupRoot, e.Name)
			out = append(out, filepath.Join(r, "kubepods"), filepath.Join(r, "k8s.io"))
		}
	}
	return out
}

// Paths records which of HostPaths and the cgroup dirs did not exist before the first Up;
// Down removes those (once every process is gone, as it runs late).
type Paths struct{ Env }

type pathsRecord struct {
	Created []string `json:"created"`
}

func (Paths) Name() string { return "host-paths" }

func (s Paths) Up(context.Context) error {
	if _, ok, err := load[pathsRecord](s.Env, s.Name()); ok || err != nil {
		return err // the first Up's record stands
	}
	var rec pathsRecord
	for _, p := range append(append([]string{}, HostPaths...), cgroupDirs(s.Host)...) {
		if !s.Host.Exists(p) {
			rec.Created = append(rec.Created, p)
		}
	}
	return s.Store.Save(s.Name(), rec)
}

func (s Paths) Down(context.Context) error {
	rec, ok, err := load[pathsRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	var errs []error
	for _, p := range rec.Created {
		errs = append(errs, s.removeCreated(p))
	}
	return finish(s.Env, s.Name(), errors.Join(errs...))
}

// removeCreated removes a host path the cluster created; the kubelet and containerd leave
// only their own state there, and /var/run/netns holds only mount points already released.
func (s Paths) removeCreated(p string) error {
	if !s.Host.Exists(p) {
		return nil
	}
	switch {
	case strings.HasPrefix(p, cgroupRoot+"/"):
		return host.RemoveTree(s.Host, p)
	case p == "/var/run/netns":
		return s.Host.Remove(p) // fails, and so keeps it, if a netns of someone else appeared
	}
	return s.Host.RemoveAll(p)
}
