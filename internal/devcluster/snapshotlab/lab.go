// Package snapshotlab proves gVisor checkpoint and restore on this machine, the way a node of
// ours would drive them: a containerd of its own (its own config, root, state and sockets under
// one temp dir), gVisor's shim and runsc from the build cache (hack/build-gvisor.sh), a workload
// that holds state in memory, files and sockets. It checkpoints through the shim's hibernate
// server and restores into a new container through containerd, with runsc wrapped so that
// `runsc start` of a container whose spec names a checkpoint becomes `runsc restore`
// (docs/snapshots.md says why). Everything it starts it stops by pid; Close leaves no process,
// mount, network namespace or file behind. It needs root; its tests run only when asked.
package snapshotlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Namespace is the containerd namespace the lab's containers live in.
const Namespace = "lab"

// RestoreAnnotation names, in a container's OCI spec, the checkpoint image its start restores.
const RestoreAnnotation = "dev.agent-sandbox.restore-image"

// Lab is one containerd with gVisor's shim, under Dir.
type Lab struct {
	Dir       string
	GVisorDir string // holds runsc and containerd-shim-runsc-v1
	// Progress, when set, receives what the lab does (for a person watching).
	Progress func(format string, args ...any)

	containerd *exec.Cmd
	exited     chan struct{}
	netns      []string
}

func (l *Lab) path(parts ...string) string {
	return filepath.Join(append([]string{l.Dir}, parts...)...)
}

// Socket is the lab containerd's gRPC socket.
func (l *Lab) Socket() string { return l.path("run", "containerd.sock") }

// RunscRoot is the shim's runsc root; the containers of Namespace live in RunscRoot()/Namespace.
func (l *Lab) RunscRoot() string { return l.path("runsc-root") }

// ImagesDir holds the checkpoint images.
func (l *Lab) ImagesDir() string { return l.path("images") }

// BindDir is the host dir mounted into every container at /pvc, as a PVC would be.
func (l *Lab) BindDir() string { return l.path("pvc") }

func (l *Lab) logf(format string, args ...any) {
	if l.Progress != nil {
		l.Progress(format, args...)
	}
}

// Start writes the configs and wrappers and starts containerd; Close undoes all of it.
func Start(ctx context.Context, dir, gvisorDir string) (*Lab, error) {
	l := &Lab{Dir: dir, GVisorDir: gvisorDir}
	for _, d := range []string{"root", "state", "run", "bin", "runsc-root", "logs", "pvc", "images"} {
		if err := os.MkdirAll(l.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := l.writeConfigs(); err != nil {
		return nil, err
	}
	if err := l.startContainerd(ctx); err != nil {
		return l, err
	}
	return l, nil
}

func (l *Lab) startContainerd(ctx context.Context) error {
	logFile, err := os.OpenFile(l.path("logs", "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command("/usr/bin/containerd", "--config", l.path("containerd.toml"), "--log-level=info")
	// The shim is found on containerd's PATH: our wrapper first.
	cmd.Env = append(os.Environ(), "PATH="+l.path("bin")+":"+os.Getenv("PATH"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = l.Dir, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting containerd: %w", err)
	}
	l.containerd, l.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(l.exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := l.ctr(ctx, "version"); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer in 20 s (logs in %s): %w", l.path("logs"), err)
		}
		select {
		case <-l.exited:
			return fmt.Errorf("containerd exited; see %s", l.path("logs", "containerd.log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ctr runs containerd's CLI against the lab's socket, in the lab's namespace.
func (l *Lab) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"-a", l.Socket(), "-n", Namespace}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Import builds nothing: it imports a docker-archive tar into the lab's containerd.
func (l *Lab) Import(ctx context.Context, archive string) error {
	_, err := l.ctr(ctx, "images", "import", archive)
	return err
}

// Close removes every container, stops containerd and whatever runsc left, unmounts what is
// mounted under Dir, deletes the lab's network namespaces and Dir itself.
func (l *Lab) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if l.containerd != nil {
		out, _ := l.ctr(ctx, "containers", "list", "-q")
		for _, id := range strings.Fields(out) {
			errs = append(errs, l.Remove(ctx, id))
		}
		errs = append(errs, l.stopContainerd())
	}
	errs = append(errs, l.deleteRunscContainers(ctx))
	for _, pid := range processesMentioning(l.Dir) {
		l.logf("killing leftover process %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	errs = append(errs, unmountUnder(l.Dir))
	for _, ns := range l.netns {
		if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns delete %s: %w: %s", ns, err, out))
		}
	}
	errs = append(errs, os.RemoveAll(l.Dir))
	return errors.Join(errs...)
}

func (l *Lab) stopContainerd() error {
	_ = l.containerd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = l.containerd.Process.Kill()
		<-l.exited
		return errors.New("containerd did not stop on SIGTERM in 10 s; killed")
	}
}

// deleteRunscContainers force-deletes what runsc still knows under the lab's root (a sandbox
// outlives its shim when the shim is killed).
func (l *Lab) deleteRunscContainers(ctx context.Context) error {
	root := filepath.Join(l.RunscRoot(), Namespace)
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	runsc := filepath.Join(l.GVisorDir, "runsc")
	out, err := exec.CommandContext(ctx, runsc, "--root="+root, "list", "-quiet").Output()
	if err != nil {
		return fmt.Errorf("runsc list: %w", err)
	}
	var errs []error
	for _, id := range strings.Fields(string(out)) {
		if b, err := exec.CommandContext(ctx, runsc, "--root="+root, "delete", "-force", id).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("runsc delete %s: %w: %s", id, err, b))
		}
	}
	return errors.Join(errs...)
}
