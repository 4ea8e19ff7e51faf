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
	"time"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/images"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
)

const ctrNamespace = "k8s.io" // the containerd namespace the CRI plugin (and so the kubelet) uses

// containerdConfig is containerd's own config: everything under the state dir, overlayfs, runc
// with cgroupfs, our CNI network, our pause image. restrict_oom_score_adj is required on VMs
// without CAP_SYS_RESOURCE, where runc otherwise fails to set the sandbox's oom_score_adj.
// runsc is the second runtime (RuntimeClass gvisor): its shim is found on containerd's PATH,
// which starts with the shim's wrapper (shimWrapper; containerd 1.6.20 ignores runtime_path when
// it starts a pod's shim: "binary not installed"), its options are in runsc.toml. CRI passes the
// pod annotation that names a memory image into the OCI specs of runsc pods (pod_annotations),
// where the restoring runsc wrapper reads it.
func containerdConfig(e Env, gvisorDir string) string {
	return fmt.Sprintf(`# runsc's shim: %s (first on containerd's PATH) runs %s
version = 2
root = %q
state = %q
oom_score = 0

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s]
      runtime_type = %q
      pod_annotations = [%q]

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%s.options]
        TypeUrl = %q
        ConfigPath = %q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(shimBinDir(e), runscShim), filepath.Join(gvisorDir, runscShim), e.Cfg.Path("containerd", "root"), e.Cfg.Path("containerd", "state"), e.Cfg.ContainerdSock(), e.Cfg.ContainerdSock()+".ttrpc",
		e.Cfg.Path("containerd", "opt"), "docker.io/"+spec.PauseImage,
		spec.RunscHandler, runscRuntimeType, agentsv1beta1.RestoreImageAnnotation,
		spec.RunscHandler, runscOptionsType, runscConfigPath(e),
		e.Cfg.CNIBinDir(), e.Cfg.Path("cni", "net.d"))
}

func containerd(e Env) (proc.Component, error) {
	if err := os.MkdirAll(e.Cfg.Path("run"), 0o755); err != nil {
		return proc.Component{}, err
	}
	if err := os.MkdirAll(e.Cfg.Path("containerd"), 0o755); err != nil {
		return proc.Component{}, err
	}
	if err := writeRunscConfig(e, e.Bins.GVisor); err != nil {
		return proc.Component{}, err
	}
	// A changed config (and PATH) takes a restart; pods survive it, their shims outlive containerd.
	cfg := e.Cfg.Path("containerd", "config.toml")
	if cur, err := os.ReadFile(cfg); err != nil || string(cur) != containerdConfig(e, e.Bins.GVisor) {
		if err := e.Proc.Stop("containerd"); err != nil {
			return proc.Component{}, err
		}
		if err := os.WriteFile(cfg, []byte(containerdConfig(e, e.Bins.GVisor)), 0o644); err != nil {
			return proc.Component{}, err
		}
	}
	return proc.Component{
		Name: "containerd", Exe: "/usr/bin/containerd", Timeout: time.Minute,
		Args:  []string{"--config=" + cfg, "--log-level=warn"},
		Env:   []string{"PATH=" + shimBinDir(e) + ":" + os.Getenv("PATH")},
		Ready: containerdReady(e),
	}, nil
}

// containerdReady: containerd answers its own CLI.
func containerdReady(e Env) func(context.Context) error {
	return func(ctx context.Context) error { return ctr(ctx, e, "version") }
}

// importPodImages imports the runtime and pause images once containerd runs, before the
// kubelet: it must find the pause image when it starts pods.
func importPodImages(ctx context.Context, e Env) error {
	e.Cfg.Progress("importing images %s and %s into containerd", spec.RuntimeImage, spec.PauseImage)
	return importImages(ctx, e, "runtime", "pause")
}

// cleanupContainerd runs once containerd stopped: shims outlive it by design, and runsc's
// sandboxes may outlive their shims.
func cleanupContainerd(e Env) error {
	killShims(e)
	return cleanupRunsc(e)
}

// ctr runs containerd's own CLI against our socket in the k8s.io namespace.
func ctr(ctx context.Context, e Env, args ...string) error {
	_, err := ctrOutput(ctx, e, args...)
	return err
}

func ctrOutput(ctx context.Context, e Env, args ...string) (string, error) {
	full := append([]string{"--address", e.Cfg.ContainerdSock(), "--namespace", ctrNamespace}, args...)
	out, err := exec.CommandContext(ctx, "ctr", full...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// ourImages builds the images of our binaries: the sandbox runtime and pause images the
// cluster needs, and the controller, router and node agent images of an in-cluster install
// (config/, charts/). bin/ must hold fresh binaries (buildOurs).
func ourImages(e Env) (map[string]*images.Image, error) {
	// python3 is a nicety (agents run `python3 file.py`); the image works without it.
	python, err := images.Python()
	if err != nil {
		e.Cfg.Log.Warn("runtime image without python3", "reason", err)
	}
	runtime, err := images.Runtime("docker.io/"+spec.RuntimeImage, e.Cfg.OurBin("sandboxd"), "/bin/busybox", python...)
	if err != nil {
		return nil, err
	}
	return map[string]*images.Image{
		"runtime":    runtime,
		"pause":      images.Pause("docker.io/"+spec.PauseImage, e.Cfg.OurBin("pause")),
		"controller": images.Server("docker.io/"+spec.ControllerImage, e.Cfg.OurBin("controller"), 8080, 8081),
		"router":     images.Server("docker.io/"+spec.RouterImage, e.Cfg.OurBin("router"), 8080, 8081),
		"node-agent": images.Server("docker.io/"+spec.NodeAgentImage, e.Cfg.OurBin("node-agent"), nodeagent.DefaultPort),
	}, nil
}

// writeImages writes the named images as docker-archives <dir>/<name>.tar and returns their
// paths and image ids.
func writeImages(e Env, dir string, names ...string) (paths, ids []string, err error) {
	imgs, err := ourImages(e)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		img := imgs[name]
		if img == nil {
			return nil, nil, fmt.Errorf("no image %q", name)
		}
		tarPath := filepath.Join(dir, name+".tar")
		id, err := img.WriteArchiveFile(tarPath)
		if err != nil {
			return nil, nil, fmt.Errorf("building image %s: %w", img.Ref, err)
		}
		e.Cfg.Log.Info("image written", "image", img.Ref, "id", id, "archive", tarPath)
		paths, ids = append(paths, tarPath), append(ids, id)
	}
	return paths, ids, nil
}

// importImages builds the named images and imports them into the cluster's containerd. The
// archives are deterministic, so an unchanged image re-imports as a no-op.
func importImages(ctx context.Context, e Env, names ...string) error {
	_, err := importImageIDs(ctx, e, names...)
	return err
}

// importImageIDs is importImages returning each image's id by name.
func importImageIDs(ctx context.Context, e Env, names ...string) (map[string]string, error) {
	paths, ids, err := writeImages(e, e.Cfg.Path("images"), names...)
	if err != nil {
		return nil, err
	}
	byName := map[string]string{}
	for i, p := range paths {
		if err := ctr(ctx, e, "images", "import", "--snapshotter", "overlayfs", p); err != nil {
			return nil, err
		}
		byName[names[i]] = ids[i]
	}
	return byName, nil
}

// killTasks kills and deletes every container task left in containerd, so that no shim or
// container survives containerd. Pods are deleted through the API before this; this catches
// what the kubelet could not clean up.
func killTasks(ctx context.Context, e Env) error {
	out, err := ctrOutput(ctx, e, "tasks", "ls", "-q")
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		_ = ctr(ctx, e, "tasks", "kill", "--signal", "SIGKILL", id)
		if err := ctr(ctx, e, "tasks", "delete", "--force", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killShims ends containerd-shim processes serving our containerd (they outlive it by design).
// They are found by the socket address on their command line, which is unique to our state dir.
func killShims(e Env) {
	for _, pid := range processesWhere(func(args []string) bool {
		if !strings.Contains(args[0], "containerd-shim") {
			return false
		}
		for i := range args {
			if args[i] == "-address" && i+1 < len(args) && args[i+1] == e.Cfg.ContainerdSock() {
				return true
			}
		}
		return false
	}) {
		e.Cfg.Log.Info("killing leftover shim", "pid", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processesWhere lists the processes whose command line (argv) match accepts.
func processesWhere(match func(args []string) bool) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(strings.Split(string(cmdline), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
