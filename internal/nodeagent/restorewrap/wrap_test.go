package restorewrap

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

const (
	uid = "0e0e0e0e-1111-2222-3333-444444444444"
	// savedFromPod is the UID of the pod the image was saved from; podSpec's pods are later ones.
	savedFromPod = "5a5a5a5a-1111-2222-3333-444444444444"
)

// withImage is a store holding a complete image of uid saved from pod ns/pod.
func withImage(t *testing.T) imagestore.Store {
	t.Helper()
	s := imagestore.Store{Dir: t.TempDir()}
	dir, err := s.Prepare(imagestore.Owner{SandboxUID: uid, Namespace: "ns", PodName: "pod", PodUID: savedFromPod})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.img"), []byte("kernel"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(uid, time.Now()); err != nil {
		t.Fatal(err)
	}
	return s
}

// podSpec is the annotations CRI gives a pod's sandbox (or, with container true, its container).
func podSpec(image, ns, pod string, container bool) map[string]string {
	ann := map[string]string{sandboxIDAnnotation: "sb1", sandboxNamespaceAnnotation: ns, sandboxNameAnnotation: pod,
		podUIDAnnotation: "7b7b7b7b-1111-2222-3333-444444444444", containerTypeAnnotation: containerTypeSandbox}
	if container {
		ann[containerTypeAnnotation] = "container"
	}
	if image != "" {
		ann[agentsv1beta1.RestoreImageAnnotation] = image
	}
	return ann
}

func TestOnlyThePodsOwnCompleteImageIsRestored(t *testing.T) {
	for _, tc := range []struct {
		name        string
		prior       *imagestore.Outcome
		spoil       bool
		ann         func(s imagestore.Store) map[string]string
		wantRestore bool
		wantReason  string // of the outcome recorded; "" for none
	}{
		{name: "no annotation: a plain start", ann: func(imagestore.Store) map[string]string { return podSpec("", "ns", "pod", false) }},
		{name: "the pod's own image", wantRestore: true,
			ann: func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "ns", "pod", false) }},
		{name: "a path outside the store: nothing read, nothing written",
			ann: func(imagestore.Store) map[string]string { return podSpec("/etc/"+uid, "ns", "pod", false) }},
		{name: "a path that climbs out of the store",
			ann: func(s imagestore.Store) map[string]string { return podSpec(s.Dir+"/../"+uid, "ns", "pod", false) }},
		{name: "another namespace's pod of the same name: cold, the image left as it was",
			ann: func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "thief", "pod", false) }},
		{name: "an image of a UID with no image",
			ann: func(s imagestore.Store) map[string]string {
				return podSpec(filepath.Join(s.Dir, "0e0e0e0e-1111-2222-3333-555555555555"), "ns", "pod", false)
			}},
		{name: "a pod of the image's own after another's refused try", wantRestore: true,
			prior: nil,
			ann:   func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "ns", "pod", false) }},
		{name: "the kubelet's new sandbox for the pod the image was saved from: cold, the image left for the wake",
			ann: func(s imagestore.Store) map[string]string {
				ann := podSpec(s.Path(uid), "ns", "pod", false)
				ann[podUIDAnnotation] = savedFromPod
				return ann
			}},
		{name: "a truncated image is recorded as such", wantReason: imagestore.ReasonCorrupt, spoil: true,
			ann: func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "ns", "pod", false) }},
		{name: "a second sandbox after a failed restore starts cold", wantReason: imagestore.ReasonFailed,
			prior: &imagestore.Outcome{SandboxID: "sb0", Reason: agentsv1beta1.ReasonRestoreFailed, Message: "EOF"},
			ann:   func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "ns", "pod", false) }},
		{name: "the container of a restored sandbox is restored", wantRestore: true,
			prior: &imagestore.Outcome{SandboxID: "sb1", Restored: true},
			ann:   func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "ns", "pod", true) }},
		{name: "the container of a sandbox that started cold starts cold",
			prior: &imagestore.Outcome{SandboxID: "sb1", Reason: imagestore.ReasonCorrupt},
			ann:   func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "ns", "pod", true) }},
		{name: "the container of another sandbox starts cold",
			prior: &imagestore.Outcome{SandboxID: "sb0", Restored: true},
			ann:   func(s imagestore.Store) map[string]string { return podSpec(s.Path(uid), "ns", "pod", true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := withImage(t)
			if tc.prior != nil {
				if err := s.SetOutcome(uid, *tc.prior); err != nil {
					t.Fatal(err)
				}
			}
			if tc.spoil {
				if err := os.Truncate(filepath.Join(s.Path(uid), "checkpoint.img"), 1); err != nil {
					t.Fatal(err)
				}
			}
			if d := Decide(s, podSpec(s.Path(uid), "thief", "pod", false)); d.Restore || d.Outcome != nil {
				t.Fatalf("another namespace's pod: %+v; want a cold start that records nothing", d)
			}
			d := Decide(s, tc.ann(s))
			if d.Restore != tc.wantRestore {
				t.Errorf("restore = %t; want %t", d.Restore, tc.wantRestore)
			}
			got := ""
			if d.Outcome != nil {
				got = d.Outcome.Reason
			}
			if got != tc.wantReason {
				t.Errorf("outcome reason %q (%+v); want %q", got, d.Outcome, tc.wantReason)
			}
		})
	}
}

// fakeRunsc answers `state` with the bundle and fails `restore` when FAIL_RESTORE is set.
const fakeRunsc = `#!/bin/sh
for a; do :; done
case " $* " in
*" state "*) printf '{\n  "id": "%s",\n  "bundle": "%s",\n  "status": "created"\n}\n' "$a" "$BUNDLE" ;;
*" restore "*)
  # As runsc does, leave a sandbox behind that holds stdout and stderr.
  sleep 60 & echo $! > "$CALLS.sandbox"
  [ -n "$FAIL_RESTORE" ] && { echo 'starting container: urpc method "containerManager.Restore" failed: EOF' >&2; exit 1; }; echo "$*" >> "$CALLS" ;;
esac
`

func TestTheWrapperRestoresStartsAndRecordsWhatHappened(t *testing.T) {
	for _, tc := range []struct {
		name, failRestore string
		args              []string
		container         bool
		wantExec          bool
		wantCode          int
		wantOutcome       *imagestore.Outcome
	}{
		{name: "create passes through", args: []string{"--root=/r", "create", "--bundle", "/b", "sb1"}, wantExec: true},
		{name: "start of the pod's sandbox restores", args: []string{"--root=/r", "--platform=systrap", "start", "sb1"},
			wantOutcome: &imagestore.Outcome{SandboxID: "sb1", Restored: true}},
		{name: "a failed restore is recorded with its shim", args: []string{"--root=/r", "start", "sb1"}, failRestore: "1", wantCode: 1,
			wantOutcome: &imagestore.Outcome{SandboxID: "sb1", Reason: agentsv1beta1.ReasonRestoreFailed,
				Message: `starting container: urpc method "containerManager.Restore" failed: EOF`, ShimPID: os.Getppid()}}, // the wrapper's parent is the shim
		{name: "a container that cannot join its restored sandbox gives the pod up", args: []string{"--root=/r", "start", "c1"}, container: true,
			failRestore: "1", wantCode: 1,
			wantOutcome: &imagestore.Outcome{SandboxID: "sb1", Reason: agentsv1beta1.ReasonRestoreFailed,
				Message: `starting container: urpc method "containerManager.Restore" failed: EOF`, ShimPID: os.Getppid()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := withImage(t)
			if tc.container {
				if err := s.SetOutcome(uid, imagestore.Outcome{SandboxID: "sb1", Restored: true}); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			runsc := filepath.Join(dir, "runsc")
			if err := os.WriteFile(runsc, []byte(fakeRunsc), 0o755); err != nil {
				t.Fatal(err)
			}
			spec, _ := json.Marshal(map[string]any{"annotations": podSpec(s.Path(uid), "ns", "pod", tc.container)})
			if err := os.WriteFile(filepath.Join(dir, "config.json"), spec, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("BUNDLE", dir)
			t.Setenv("CALLS", filepath.Join(dir, "calls"))
			t.Setenv("FAIL_RESTORE", tc.failRestore)
			t.Cleanup(func() { killSandbox(filepath.Join(dir, "calls.sandbox")) })
			var execd []string
			done := make(chan int)
			go func() {
				done <- Run(Config{Runsc: runsc, Images: s, Stderr: io.Discard,
					Exec: func(_ string, argv, _ []string) error { execd = argv[1:]; return errors.New("exec'd") }}, tc.args)
			}()
			var code int
			select {
			case code = <-done:
			case <-time.After(30 * time.Second): // a limit, not a measure: the sandbox lives 60 s
				t.Fatal("the wrapper still waits for runsc after it exited: it must not wait for the sandbox runsc left running")
			}
			if tc.wantExec != (execd != nil) || (tc.wantExec && !slices.Equal(execd, tc.args)) {
				t.Errorf("runsc exec'd with %q; want exec %t with %q", execd, tc.wantExec, tc.args)
			}
			if !tc.wantExec && code != tc.wantCode {
				t.Errorf("exit code %d; want %d", code, tc.wantCode)
			}
			out, tried, _ := s.Outcome(uid)
			out.Seconds = 0
			if tc.wantOutcome == nil {
				if tried {
					t.Errorf("outcome %+v recorded; want none", out)
				}
				return
			}
			if out != *tc.wantOutcome {
				t.Errorf("outcome %+v; want %+v", out, *tc.wantOutcome)
			}
			calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
			want := "--restore-spec-validation=warning restore --detach --image-path " + s.Path(uid) + " sb1"
			if restored := strings.Contains(string(calls), want); restored != tc.wantOutcome.Restored {
				t.Errorf("runsc calls %q; want %q: %t", calls, want, tc.wantOutcome.Restored)
			}
		})
	}
}

// killSandbox ends the process the fake runsc left running.
func killSandbox(pidFile string) {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
