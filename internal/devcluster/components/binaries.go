package components

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// k8sBinDir asks hack/build-k8s.sh where the pinned Kubernetes binaries live.
func (c *Cluster) k8sBinDir() (string, error) {
	root, err := c.ResolveRepoRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(root, "hack", "build-k8s.sh"), "--print-dir").Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-k8s.sh --print-dir: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (c *Cluster) k8sBinaries() []string {
	bins := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "helm", "coredns"}
	if c.KwokNodes > 0 {
		bins = append(bins, "kwok")
	}
	return bins
}

// ensureK8sBinaries builds the missing Kubernetes binaries; the script skips what exists and
// serialises concurrent builds. Its progress goes straight to the user: a first build takes
// many minutes.
func (c *Cluster) ensureK8sBinaries(ctx context.Context) (string, error) {
	dir, err := c.k8sBinDir()
	if err != nil {
		return "", err
	}
	var missing []string
	for _, b := range c.k8sBinaries() {
		if !spec.FileExists(filepath.Join(dir, b)) {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return dir, nil
	}
	c.Progress("building Kubernetes binaries %v into %s (first time: ~10-15 minutes on 2 cores)", missing, dir)
	cmd := exec.CommandContext(ctx, filepath.Join(c.RepoRoot, "hack", "build-k8s.sh"), missing...)
	cmd.Stdout, cmd.Stderr = c.Out, c.Out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %v: %w", missing, err)
	}
	return dir, nil
}

// ensureNodeDeps installs containerd, runc, the CNI plugins and friends when missing.
func (c *Cluster) ensureNodeDeps(ctx context.Context) error {
	script := filepath.Join(c.RepoRoot, "hack", "install-node-deps.sh")
	if exec.CommandContext(ctx, script, "--check").Run() == nil {
		return nil
	}
	c.Progress("installing node packages (containerd, runc, CNI plugins, busybox-static, iptables, clang-19)")
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = c.Out, c.Out
	return cmd.Run()
}

// Our own programs, built from the working tree; the binary is named after the package's
// folder. Static, so that sandboxd and pause run in images with nothing but busybox.
// devcluster runs the cluster's PV provisioner (devcluster hostpath-provisioner); cni-antispoof
// is the pod network's anti-spoofing CNI plugin (linkCNIPlugins).
var ourPackages = []string{"./cmd/controller", "./cmd/router", "./cmd/sandboxd", "./internal/devcluster/images/pause", "./cmd/devcluster", "./cmd/cni-antispoof"}

// buildOurs builds our binaries into bin/ in one go invocation (incremental: an unchanged tree
// costs seconds). A binary that changed is renamed into place, so a running old one is not
// disturbed; one that did not keeps its inode, so its running process is known to be current.
func (c *Cluster) buildOurs(ctx context.Context) error {
	binDir, newDir := c.Path("bin"), c.Path("bin", ".new")
	if err := os.MkdirAll(newDir, 0o755); err != nil {
		return err
	}
	c.Progress("building controller, router, sandboxd, pause, devcluster and cni-antispoof from %s", c.RepoRoot)
	args := append([]string{"build", "-trimpath", "-o", newDir + "/"}, ourPackages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = c.RepoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	for _, pkg := range ourPackages {
		name := filepath.Base(pkg)
		src, dst := filepath.Join(newDir, name), filepath.Join(binDir, name)
		if sameFile(src, dst) {
			if err := os.Remove(src); err != nil {
				return err
			}
			continue
		}
		if err := os.Rename(src, dst); err != nil {
			return err
		}
	}
	return nil
}

func sameFile(a, b string) bool {
	x, err := os.ReadFile(a)
	if err != nil {
		return false
	}
	y, err := os.ReadFile(b)
	return err == nil && bytes.Equal(x, y)
}

// WriteImages builds our binaries from the source tree and writes the runtime, controller and
// router images as docker-archive tars into dir (default bin/images of the tree).
func (c *Cluster) WriteImages(ctx context.Context, dir string) ([]string, error) {
	if _, err := c.ResolveRepoRoot(); err != nil {
		return nil, err
	}
	if dir == "" {
		dir = filepath.Join(c.RepoRoot, "bin", "images")
	}
	if err := c.buildOurs(ctx); err != nil {
		return nil, err
	}
	paths, _, err := c.writeImages(dir, "runtime", "controller", "router")
	return paths, err
}

// Restartable builds the named component as Up does, for a restart on its own.
func (c *Cluster) Restartable(name string) (proc.Component, error) {
	bin, err := c.k8sBinDir()
	if err != nil {
		return proc.Component{}, err
	}
	switch name {
	case "etcd":
		return c.etcd(bin), nil
	case "kube-apiserver":
		return c.apiserver(bin), nil
	case "containerd":
		return c.containerd()
	case "kubelet":
		return c.kubelet(bin)
	}
	return proc.Component{}, fmt.Errorf("no component %s", name)
}

// AllRunning reports whether every process Up runs (kwok aside) is running.
func (c *Cluster) AllRunning() bool {
	for _, n := range ProcessNames {
		if n == "kwok" || (!c.HostProcesses && (n == "agent-sandbox-controller" || n == "sandbox-router")) {
			continue
		}
		if c.Proc.Running(n) == nil {
			return false
		}
	}
	return true
}
