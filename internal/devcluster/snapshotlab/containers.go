package snapshotlab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/snapshotlab/report"
)

// Container is what the lab runs: the workload holding MiB of memory, in a network namespace.
type Container struct {
	ID    string
	MiB   int
	Netns string // a path under /var/run/netns
	// RestoreImage, when set, makes the start restore this checkpoint instead of running.
	RestoreImage string
	// Env is added to the container's environment (after LAB_MIB).
	Env []string
	// NoBindMount leaves /pvc out of the spec.
	NoBindMount bool
	// Name is CRI's container name (io.kubernetes.cri.container-name), by which runsc matches
	// a pod's saved containers to the new ones.
	Name string
	// Sandbox, when set, makes this container a second one in that sandbox (as a pod's app
	// container joins its pause container) instead of a sandbox of its own.
	Sandbox string
	// Args replaces the image's command ("/workload", "sleep" makes a pause container).
	Args []string
	// Annotations are added to the spec (as gVisor's shim adds some that name the pod).
	Annotations map[string]string
}

// Run creates and starts c (ctr run -d) and returns when containerd has started (or restored) it.
func (l *Lab) Run(ctx context.Context, c Container) error {
	args := []string{
		"run", "-d", "--runtime", "io.containerd.runsc.v1", "--runtime-config-path", l.path("runsc.toml"),
		"--with-ns", "network:" + c.Netns,
		"--env", "LAB_MIB=" + strconv.Itoa(c.MiB),
	}
	for _, e := range c.Env {
		args = append(args, "--env", e)
	}
	if !c.NoBindMount {
		args = append(args, "--mount", "type=bind,src="+l.BindDir()+",dst=/pvc,options=rbind:rw")
	}
	// gVisor's shim hands the container's stdio to runsc only for a sandbox's root container,
	// which it recognises by CRI's annotation; without it `runsc create` never returns.
	if c.Sandbox == "" {
		args = append(args, "--annotation", "io.kubernetes.cri.container-type=sandbox")
	} else {
		args = append(args, "--annotation", "io.kubernetes.cri.container-type=container",
			"--annotation", "io.kubernetes.cri.sandbox-id="+c.Sandbox)
	}
	if c.Name != "" {
		args = append(args, "--annotation", "io.kubernetes.cri.container-name="+c.Name)
	}
	if c.RestoreImage != "" {
		args = append(args, "--annotation", RestoreAnnotation+"="+c.RestoreImage)
	}
	for k, v := range c.Annotations {
		args = append(args, "--annotation", k+"="+v)
	}
	_, err := l.ctr(ctx, append(append(args, ImageRef, c.ID), c.Args...)...)
	return err
}

// Probe runs `workload probe [token]` in container id and decodes its answer.
func (l *Lab) Probe(ctx context.Context, id, token string) (report.Report, error) {
	args := []string{"tasks", "exec", "--exec-id", fmt.Sprintf("probe-%d", time.Now().UnixNano()), id, "/workload", "probe"}
	if token != "" {
		args = append(args, token)
	}
	var r report.Report
	out, err := l.ctr(ctx, args...)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return r, fmt.Errorf("probe of %s answered %q: %w", id, out, err)
	}
	return r, nil
}

// WaitProbe probes id until it answers (the workload may still be filling its memory).
func (l *Lab) WaitProbe(ctx context.Context, id string, timeout time.Duration) (report.Report, error) {
	deadline := time.Now().Add(timeout)
	for {
		r, err := l.Probe(ctx, id, "")
		if err == nil || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Remove kills and deletes container id. Right after a checkpoint the task may still be
// stopping, and runsc's first delete may fail on the filestore it already removed
// ("failed to delete filestore file"), so it retries. After a failed restore the shim's delete
// does not return (docs/snapshots.md): each try is bounded, and after the first one that times
// out the container's shim and runsc processes are killed, which lets containerd delete it.
func (l *Lab) Remove(ctx context.Context, id string) error {
	var err error
	for try := range 10 {
		tryCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = l.removeOnce(tryCtx, id)
		timedOut := tryCtx.Err() != nil
		cancel()
		if err == nil {
			return nil
		}
		if timedOut {
			l.logf("removing %s timed out (try %d): killing its shim and runsc processes", id, try)
			for _, pid := range processesMentioning(l.path("state", "io.containerd.runtime.v2.task", Namespace, id)) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			for _, pid := range shimsOf(id, l.Socket()) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			l.removeShimSocket(id)
		}
		time.Sleep(300 * time.Millisecond)
	}
	return err
}

// removeShimSocket removes the socket of a killed shim: a shim removes it when it exits, not when
// killed, and it lives outside the lab's dir (/run/containerd/s/<hash>). The shim wrote its
// address in the bundle.
func (l *Lab) removeShimSocket(id string) {
	data, err := os.ReadFile(l.path("state", "io.containerd.runtime.v2.task", Namespace, id, "address"))
	if err != nil {
		return
	}
	if p, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "unix://"); ok && strings.HasPrefix(p, "/run/containerd/s/") {
		_ = os.Remove(p)
	}
}

func (l *Lab) removeOnce(ctx context.Context, id string) error {
	_, _ = l.ctr(ctx, "tasks", "kill", "-s", "KILL", id)
	if _, err := l.ctr(ctx, "tasks", "delete", "-f", id); err != nil && !strings.Contains(err.Error(), "not found") {
		return err
	}
	if _, err := l.ctr(ctx, "containers", "delete", id); err != nil && !strings.Contains(err.Error(), "not found") {
		return err
	}
	return nil
}

// NewNetns makes a network namespace with loopback and a veth pair whose end v0 has addr
// (e.g. 10.231.0.1/24): runsc takes v0's address into the sandbox (and off the host side), so
// each container needs a fresh one. Close deletes it.
func (l *Lab) NewNetns(name, addr string) (string, error) {
	cmds := [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"-n", name, "addr", "add", addr, "dev", "v0"},
		{"-n", name, "link", "set", "v0", "up"},
		{"-n", name, "link", "set", "v1", "up"},
	}
	for i, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		if i == 0 {
			l.netns = append(l.netns, name)
		}
	}
	return "/var/run/netns/" + name, nil
}

// DeleteNetns deletes a namespace NewNetns made.
func (l *Lab) DeleteNetns(name string) error {
	for i, ns := range l.netns {
		if ns == name {
			l.netns = append(l.netns[:i], l.netns[i+1:]...)
			break
		}
	}
	if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns delete %s: %w: %s", name, err, out)
	}
	return nil
}

// LogTail is the last n lines of one of container id's runsc logs (e.g. "runsc.restore.log").
func (l *Lab) LogTail(id, name string, n int) string {
	data, err := os.ReadFile(l.path("logs", id, name))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
