package components

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// EnsureBinaries installs the node packages, builds what is missing of the Kubernetes
// binaries, Cilium and gVisor, and (incrementally) ours, and returns where they are: up's first
// step, ahead of every other. Nothing of it is undone.
func EnsureBinaries(ctx context.Context, e Env) (Binaries, error) {
	if err := ensureNodeDeps(ctx, e); err != nil {
		return Binaries{}, fmt.Errorf("installing node packages: %w", err)
	}
	var b Binaries
	var err error
	if b.K8s, err = ensureK8sBinaries(ctx, e); err != nil {
		return Binaries{}, err
	}
	if b.Cilium, err = ensureCilium(ctx, e); err != nil {
		return Binaries{}, err
	}
	if b.GVisor, err = ensureGVisor(ctx, e); err != nil {
		return Binaries{}, err
	}
	return b, buildOurs(ctx, e)
}

// LocateBinaries says where the binaries are without building any, for a restart of a
// component of a running cluster (whose up built them).
func LocateBinaries(e Env) (Binaries, error) {
	var b Binaries
	var err error
	if b.K8s, err = k8sBinDir(e); err != nil {
		return Binaries{}, err
	}
	if b.Cilium, err = ciliumDir(e); err != nil {
		return Binaries{}, err
	}
	if b.GVisor, err = gvisorDir(e); err != nil {
		return Binaries{}, err
	}
	return b, nil
}

// k8sBinDir asks hack/build-k8s.sh where the pinned Kubernetes binaries live.
func k8sBinDir(e Env) (string, error) {
	root, err := e.Cfg.ResolveRepoRoot()
	if err != nil {
		return "", err
	}
	out, err := e.Host.Run(filepath.Join(root, "hack", "build-k8s.sh"), "--print-dir")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

func k8sBinaries(e Env) []string {
	bins := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "helm", "coredns"}
	if e.Cfg.KwokNodes > 0 {
		bins = append(bins, "kwok")
	}
	return bins
}

// ensureK8sBinaries builds the missing Kubernetes binaries; the script skips what exists and
// serialises concurrent builds. Its progress goes straight to the user: a first build takes
// many minutes.
func ensureK8sBinaries(ctx context.Context, e Env) (string, error) {
	dir, err := k8sBinDir(e)
	if err != nil {
		return "", err
	}
	var missing []string
	for _, b := range k8sBinaries(e) {
		if !spec.FileExists(filepath.Join(dir, b)) {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return dir, nil
	}
	e.Cfg.Progress("building Kubernetes binaries %v into %s (first time: ~10-15 minutes on 2 cores)", missing, dir)
	cmd := exec.CommandContext(ctx, filepath.Join(e.Cfg.RepoRoot, "hack", "build-k8s.sh"), missing...)
	cmd.Stdout, cmd.Stderr = e.Cfg.Out, e.Cfg.Out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %v: %w", missing, err)
	}
	return dir, nil
}

// ensureNodeDeps installs containerd, runc, the CNI plugins and friends when missing.
func ensureNodeDeps(ctx context.Context, e Env) error {
	script := filepath.Join(e.Cfg.RepoRoot, "hack", "install-node-deps.sh")
	if exec.CommandContext(ctx, script, "--check").Run() == nil {
		return nil
	}
	e.Cfg.Progress("installing node packages (containerd, runc, CNI plugins, busybox-static, iptables, clang-19)")
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = e.Cfg.Out, e.Cfg.Out
	return cmd.Run()
}

// Our own programs, built from the working tree; the binary is named after the package's
// folder. Static, so that sandboxd and pause run in images with nothing but busybox.
// devcluster runs the cluster's PV provisioner (devcluster hostpath-provisioner); cni-antispoof
// is the pod network's anti-spoofing CNI plugin (linkCNIPlugins).
// node-agent is the node agent of the memory-keeping pause and the restoring runsc wrapper.
var ourPackages = []string{"./cmd/controller", "./cmd/router", "./cmd/sandboxd", "./internal/devcluster/images/pause", "./cmd/devcluster", "./cmd/cni-antispoof", "./cmd/node-agent"}

// buildOurs builds our binaries into bin/ in one go invocation (incremental: an unchanged tree
// costs seconds). A binary that changed is renamed into place, so a running old one is not
// disturbed; one that did not keeps its inode, so its running process is known to be current.
func buildOurs(ctx context.Context, e Env) error {
	binDir, newDir := e.Cfg.Path("bin"), e.Cfg.Path("bin", ".new")
	if err := os.MkdirAll(newDir, 0o755); err != nil {
		return err
	}
	e.Cfg.Progress("building controller, router, sandboxd, pause, devcluster, cni-antispoof and node-agent from %s", e.Cfg.RepoRoot)
	args := append([]string{"build", "-trimpath", "-o", newDir + "/"}, ourPackages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = e.Cfg.RepoRoot
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
func WriteImages(ctx context.Context, e Env, dir string) ([]string, error) {
	if _, err := e.Cfg.ResolveRepoRoot(); err != nil {
		return nil, err
	}
	if dir == "" {
		dir = filepath.Join(e.Cfg.RepoRoot, "bin", "images")
	}
	if err := buildOurs(ctx, e); err != nil {
		return nil, err
	}
	paths, _, err := writeImages(e, dir, "runtime", "controller", "router")
	return paths, err
}
