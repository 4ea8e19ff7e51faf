package components

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// gVisor is the sandboxes' runtime: containerd has a second CRI runtime, runsc, whose shim
// (containerd-shim-runsc-v1) and runsc come from the build cache (hack/build-gvisor.sh); nothing
// is installed on the host. RuntimeClass gvisor (manifests/cluster.yaml) selects it for a pod.
// Its config, its root (the containers' state) and its logs live in the state dir.

const (
	runscShim = "containerd-shim-runsc-v1"
	// runscRuntimeType is the shim containerd starts for the runsc runtime.
	runscRuntimeType = "io.containerd.runsc.v1"
	// runscOptionsType tells containerd's CRI plugin to hand the shim ConfigPath.
	runscOptionsType = "io.containerd.runsc.v1.options"
)

// gvisorDir asks hack/build-gvisor.sh where the pinned gVisor build lives.
func gvisorDir(e Env) (string, error) {
	root, err := e.Cfg.ResolveRepoRoot()
	if err != nil {
		return "", err
	}
	out, err := e.Host.Run(filepath.Join(root, "hack", "build-gvisor.sh"), "--print-dir")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// ensureGVisor builds runsc and its shim when one is missing (first time ~2 minutes on 2 cores)
// and returns their folder. The shim's stamp (.version) is written only by a build with the
// script's changes for this VM, so a shim built without them is rebuilt.
func ensureGVisor(ctx context.Context, e Env) (string, error) {
	dir, err := gvisorDir(e)
	if err != nil {
		return "", err
	}
	if spec.FileExists(filepath.Join(dir, "runsc")) && spec.FileExists(filepath.Join(dir, runscShim)) &&
		spec.FileExists(filepath.Join(dir, runscShim+".version")) {
		return dir, nil
	}
	e.Cfg.Progress("building gVisor (runsc, %s) into %s (first time: ~2 minutes on 2 cores)", runscShim, dir)
	cmd := exec.CommandContext(ctx, filepath.Join(e.Cfg.RepoRoot, "hack", "build-gvisor.sh"))
	cmd.Stdout, cmd.Stderr = e.Cfg.Out, e.Cfg.Out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building gVisor: %w", err)
	}
	return dir, nil
}

// runscRoot is runsc's --root: the state of its containers.
func runscRoot(e Env) string { return filepath.Join(e.Cfg.RunscDir(), "root") }

// runscConfigPath is the shim's options file, named by containerd's runtime options.
func runscConfigPath(e Env) string { return filepath.Join(e.Cfg.RunscDir(), "runsc.toml") }

// runscConfig is the shim's options file. restore-spec-validation = "warning": a sandbox restored
// into a new pod (the memory-keeping pause) has specs that name the new pod (the annotation
// dev.gvisor.spec.cgroup-parent holds its UID), which runsc's default, enforce, refuses when the
// pod's container joins its restored sandbox; the sandbox's config is fixed at its create, before
// any restore, so the flag is every sandbox's. The rest: runsc from the cache behind the restoring wrapper
// (runscWrapper), its root and logs in the state
// dir, the systrap platform (kvm hangs on this nested-virtualisation VM; ptrace is slower). Each
// shim logs to runsc-shim-<container>.log (a log_path ending in "/"; the shim replaces no %ID%),
// runsc per sandbox and command (info level; add debug = "true" to runsc_config for a trace).
func runscConfig(e Env, gvisorDir string) string {
	header := fmt.Sprintf("the wrapper's runsc (cleanupRunsc runs it directly):\n# runsc = %q", filepath.Join(gvisorDir, "runsc"))
	return spec.RunscOptions(header, runscWrapperPath(e), runscRoot(e), "info", e.Cfg.Path("logs", "runsc"))
}

// shimBinDir is first on containerd's PATH: it holds the shim as containerd 1.6 can start it.
func shimBinDir(e Env) string { return filepath.Join(e.Cfg.RunscDir(), "bin") }

// shimWrapper starts gVisor's shim for containerd 1.6: the shim is built on containerd 2's shim
// library, whose `start` prints its address as JSON ({"version":2,"address":"unix://…",
// "protocol":"ttrpc"}) where containerd 1.6 reads the bare address. Every other command runs the
// shim as it is; the shim's daemon runs the real binary (it re-executes itself).
func shimWrapper(e Env, gvisorDir string) string {
	return fmt.Sprintf(`#!/bin/sh
shim=%q
for last; do :; done
if [ "$last" != start ]; then exec "$shim" "$@"; fi
cp %q ./config.toml || exit 1
out="$("$shim" "$@")" || { printf '%%s' "$out"; exit 1; }
printf '%%s' "$out" | sed -n 's/^{.*"address":"\([^"]*\)".*}$/\1/p;t;p' | tr -d '\n'
`, filepath.Join(gvisorDir, runscShim), shimOwnConfigPath(e))
}

// The memory-keeping pause (docs/snapshots.md). The shim reads its own config.toml at start
// from /run/containerd/runsc, /etc/containerd/runsc or its working directory, the bundle: the
// wrapper copies ours into the bundle, so the system paths stay untouched (another containerd's
// shims on this machine would read them). It turns the hibernate server on: each pod's shim serves
// <Cfg.HibernateDir>/<id>_sandbox.sock, the node agent's way to checkpoint (the one folder outside
// the state dir, for the socket path's length). runsc is the node agent's restoring wrapper.

// shimOwnConfigPath is the shim's own config.toml, which shimWrapper puts in each bundle.
func shimOwnConfigPath(e Env) string { return filepath.Join(e.Cfg.RunscDir(), "shim-config.toml") }

func shimOwnConfig(e Env) string {
	return fmt.Sprintf("root = %q\nenable_hibernate_server = true\n", e.Cfg.HibernateDir)
}

// runscWrapperPath is the runsc the shim runs (runsc.toml's binary_name).
func runscWrapperPath(e Env) string { return filepath.Join(shimBinDir(e), "runsc") }

// runscWrapper runs the node agent's restoring wrapper on the cached runsc, restoring only images
// of the node agent's directory (restorewrap).
func runscWrapper(e Env, gvisorDir string) string {
	return fmt.Sprintf("#!/bin/sh\nexec %q runsc-wrapper --runsc=%q --images-dir=%q -- \"$@\"\n",
		e.Cfg.OurBin("node-agent"), filepath.Join(gvisorDir, "runsc"), nodeAgentImagesDir(e))
}

// nodeAgentImagesDir is where the node agent keeps images (its DaemonSet mounts it at the same path).
func nodeAgentImagesDir(e Env) string { return e.Cfg.Path("node-agent", "images") }

// containerdTasksDir is containerd's task bundles of the CRI namespace, where the node agent finds
// a pod's sandbox.
func containerdTasksDir(e Env) string {
	return filepath.Join(e.Cfg.Path("containerd", "state"), "io.containerd.runtime.v2.task", ctrNamespace)
}

// writeRunscConfig writes runsc.toml, the shim's wrapper and own config, the runsc wrapper, and
// makes runsc's root and the node agent's images directory.
func writeRunscConfig(e Env, gvisorDir string) error {
	for _, d := range []string{runscRoot(e), shimBinDir(e)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	for _, d := range []string{nodeAgentImagesDir(e), e.Cfg.HibernateDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	files := []struct {
		path, data string
		mode       os.FileMode
	}{
		{filepath.Join(shimBinDir(e), runscShim), shimWrapper(e, gvisorDir), 0o755},
		{shimOwnConfigPath(e), shimOwnConfig(e), 0o644},
		{runscWrapperPath(e), runscWrapper(e, gvisorDir), 0o755},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.data), f.mode); err != nil {
			return err
		}
	}
	return os.WriteFile(runscConfigPath(e), []byte(runscConfig(e, gvisorDir)), 0o644)
}

// cleanupRunsc runs once containerd and its shims are gone: it force-deletes every container
// runsc still knows (which stops its sandbox and gofer and removes its cgroups), kills any
// runsc process of ours left. Down of the state dir then unmounts anything left under it and
// removes runsc's folder.
func cleanupRunsc(e Env) error {
	root := runscRoot(e)
	// The shim keeps each containerd namespace's containers in a root of its own.
	nsRoot := filepath.Join(root, ctrNamespace)
	var errs []error
	if runsc, err := runscBinary(e); err == nil && e.Host.Exists(nsRoot) {
		out, err := e.Host.Run(runsc, "--root="+nsRoot, "list", "-quiet")
		errs = append(errs, err)
		for _, id := range strings.Fields(out) {
			if _, err := e.Host.Run(runsc, "--root="+nsRoot, "delete", "-force", id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, pid := range runscProcesses(root) {
		e.Cfg.Log.Info("killing leftover runsc process", "pid", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// The shims that served hibernate sockets are gone; their folder goes too, and the node
	// agent's images with the cluster.
	errs = append(errs, os.RemoveAll(e.Cfg.HibernateDir), os.RemoveAll(e.Cfg.Path("node-agent")))
	return errors.Join(errs...)
}

// runscBinary is the runsc behind the wrapper that runsc.toml names (the build dir may have moved
// since).
func runscBinary(e Env) (string, error) {
	data, err := e.Host.ReadFile(runscConfigPath(e))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "# runsc = "); ok {
			return strconv.Unquote(v)
		}
	}
	return "", fmt.Errorf("%s names no binary", runscConfigPath(e))
}

// runscProcesses are the runsc processes (runsc, runsc-sandbox, runsc-gofer) working on our
// root: they carry --root=<root> on their command line.
func runscProcesses(root string) []int {
	return processesWhere(func(args []string) bool {
		if !strings.HasPrefix(filepath.Base(args[0]), "runsc") {
			return false
		}
		for _, a := range args[1:] {
			if a == "--root="+root || strings.HasPrefix(a, "--root="+root+"/") {
				return true
			}
		}
		return false
	})
}
