// Package restorewrap is the runsc that gVisor's shim runs on a node that keeps memory: `runsc
// start` of a container whose spec carries the restore annotation becomes `runsc restore` from
// the named image, when that image is the node agent's, saved from a pod of the same namespace
// and name, and complete; every other call, and every image refused, passes through to runsc
// unchanged (a cold start). What happened is written beside the image for the node agent
// (docs/snapshots.md). The shim restores only when an extension asks it to, and none is built
// in; runsc restore of a created container is a start that loads the image instead of running
// the entrypoint.
package restorewrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

// CRI's annotations on every OCI spec of a pod (containerd pkg/cri/annotations).
const (
	containerTypeAnnotation    = "io.kubernetes.cri.container-type"
	sandboxIDAnnotation        = "io.kubernetes.cri.sandbox-id"
	sandboxNamespaceAnnotation = "io.kubernetes.cri.sandbox-namespace"
	sandboxNameAnnotation      = "io.kubernetes.cri.sandbox-name"
	podUIDAnnotation           = "io.kubernetes.cri.sandbox-uid"
	containerTypeSandbox       = "sandbox"
)

// Config is the wrapper's: the real runsc and the node agent's images.
type Config struct {
	Runsc  string
	Images imagestore.Store
	Stderr io.Writer // runsc's errors go here too (the shim's log); default os.Stderr
	Now    func() time.Time
	// Exec replaces the process (default syscall.Exec); it returns only when that fails.
	Exec func(path string, argv, env []string) error
}

// Decision is what to do with one container's start.
type Decision struct {
	Restore bool
	Image   string
	// Outcome, when set, is recorded beside the image (a sandbox's start, restored or refused).
	Outcome *imagestore.Outcome
}

// Decide reads a container's annotations and the image they name. A pod's sandbox (its pause
// container, the runsc sandbox's root) is restored when its image passes every check; each of
// its containers follows what the sandbox did, so a pod is restored whole or started cold.
func Decide(images imagestore.Store, ann map[string]string) Decision {
	image := ann[agentsv1beta1.RestoreImageAnnotation]
	if image == "" {
		return Decision{}
	}
	sandboxID := ann[sandboxIDAnnotation]
	uid, err := images.Resolve(image)
	if err != nil {
		// Not an image folder of ours: nothing is written anywhere, the start is cold.
		return Decision{}
	}
	prior, tried, err := images.Outcome(uid)
	if err != nil {
		return Decision{}
	}
	if ann[containerTypeAnnotation] != containerTypeSandbox {
		restore := tried && prior.Restored && prior.SandboxID == sandboxID
		return Decision{Restore: restore, Image: image}
	}
	refuse := func(reason, msg string) Decision {
		return Decision{Image: image, Outcome: &imagestore.Outcome{SandboxID: sandboxID, Reason: reason, Message: msg}}
	}
	owner, err := images.Verify(image, ann[sandboxNamespaceAnnotation], ann[sandboxNameAnnotation])
	switch reason := imagestore.ReasonOf(err); {
	case err != nil && (reason == imagestore.ReasonNotOwner || reason == imagestore.ReasonNoImage):
		// Not this pod's image (or none): it starts cold and leaves the image as it was, so
		// another pod naming it cannot spoil its owner's restore.
		return Decision{}
	case err == nil && owner.PodUID != "" && owner.PodUID == ann[podUIDAnnotation]:
		// The pod the image was saved from: a checkpoint ends its sandbox, and the kubelet makes
		// it another before the pause deletes the pod. A restored pod still names the image its
		// restore used, now holding this new save; restoring it here would spend it on a pod
		// about to go. It starts cold and leaves the image to the pod the wake makes.
		return Decision{}
	case tried:
		// A second sandbox for the pod (the kubelet retries after a failed restore, or replaces
		// a dead sandbox): the image was used or is broken; start cold.
		return refuse(imagestore.ReasonFailed, fmt.Sprintf("the image was tried before by sandbox %s (restored %t: %s)", prior.SandboxID, prior.Restored, prior.Message))
	case err != nil:
		return refuse(reason, err.Error())
	}
	return Decision{Restore: true, Image: image}
}

// Run is the wrapper's main: it returns the exit code when it does not exec runsc.
func Run(cfg Config, args []string) int {
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Exec == nil {
		cfg.Exec = syscall.Exec
	}
	globals, id, ok := startCall(args)
	if !ok {
		return execRunsc(cfg, args)
	}
	ann, err := annotations(cfg.Runsc, globals, id)
	if err != nil {
		fmt.Fprintf(cfg.Stderr, "runsc-restore: reading %s's spec: %v; starting it as it is\n", id, err)
		return execRunsc(cfg, args)
	}
	d := Decide(cfg.Images, ann)
	uid := filepath.Base(d.Image)
	if !d.Restore {
		if d.Outcome != nil {
			fmt.Fprintf(cfg.Stderr, "runsc-restore: %s starts cold: %s\n", id, d.Outcome.Message)
			_ = cfg.Images.SetOutcome(uid, *d.Outcome)
		}
		return execRunsc(cfg, args)
	}
	start := cfg.Now()
	// A new pod's specs differ from the saved ones in gVisor annotations that name the pod
	// (dev.gvisor.spec.cgroup-parent holds its UID), which runsc's default validation refuses:
	// it only warns here. The image passed Decide's checks; runsc still refuses a version change.
	restoreArgs := append(append([]string{}, globals...), "--restore-spec-validation=warning", "restore", "--detach", "--image-path", d.Image, id)
	runErr := runCapturingStderr(cfg, restoreArgs)
	out := imagestore.Outcome{SandboxID: ann[sandboxIDAnnotation], Restored: runErr == nil, Seconds: cfg.Now().Sub(start).Seconds()}
	if ann[containerTypeAnnotation] != containerTypeSandbox {
		if runErr == nil {
			return 0
		}
		// A container that cannot be restored into its restored sandbox: the pod as a whole is
		// given up. The node agent kills its sandbox (shim and runsc), the kubelet makes a new
		// one, and that one starts cold (the image was tried).
		out.Seconds = 0
	}
	if runErr != nil {
		out.Reason, out.Message, out.ShimPID = agentsv1beta1.ReasonRestoreFailed, runErr.Error(), os.Getppid()
	}
	if err := cfg.Images.SetOutcome(uid, out); err != nil {
		fmt.Fprintf(cfg.Stderr, "runsc-restore: recording the outcome of %s: %v\n", id, err)
	}
	if runErr != nil {
		return 1
	}
	return 0
}

// startCall recognises `runsc [--global...] start <id>`.
func startCall(args []string) (globals []string, id string, ok bool) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "--") {
		i++
	}
	if i+2 != len(args) || args[i] != "start" {
		return nil, "", false
	}
	return args[:i], args[i+1], true
}

// annotations reads the OCI spec of container id from its bundle, which runsc's state names.
func annotations(runsc string, globals []string, id string) (map[string]string, error) {
	out, err := exec.Command(runsc, append(append([]string{}, globals...), "state", id)...).Output()
	if err != nil {
		return nil, fmt.Errorf("runsc state: %w", err)
	}
	var state struct {
		Bundle string `json:"bundle"`
	}
	if err := json.Unmarshal(out, &state); err != nil || state.Bundle == "" {
		return nil, fmt.Errorf("runsc state names no bundle: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(state.Bundle, "config.json"))
	if err != nil {
		return nil, err
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	return spec.Annotations, json.Unmarshal(data, &spec)
}

// runCapturingStderr runs runsc and returns its error with the last line it wrote to stderr.
// runsc's stderr is a file, never a pipe: the sandbox and gofer runsc starts inherit it and
// outlive runsc, so a pipe would never reach EOF and the wrapper would wait forever (the shim's
// start then times out).
func runCapturingStderr(cfg Config, args []string) error {
	f, err := os.CreateTemp("", "runsc-restore-*.log")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.Command(cfg.Runsc, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, f
	runErr := cmd.Run()
	data, _ := os.ReadFile(f.Name())
	_, _ = cfg.Stderr.Write(data)
	if runErr != nil {
		return errors.New(lastLine(string(data), runErr))
	}
	return nil
}

func lastLine(stderr string, err error) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return last
	}
	return err.Error()
}
