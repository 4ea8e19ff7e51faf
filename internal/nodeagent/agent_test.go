package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/hibernate"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

const (
	sandboxUID = "0e0e0e0e-1111-2222-3333-444444444444"
	podUID     = "pod-uid-1"
	sandboxID  = "0123abcd"
)

// fakeProcs records what it was asked to kill.
type fakeProcs struct{ killed []string }

func (f *fakeProcs) KillSandbox(id string, shim int) []int {
	f.killed = append(f.killed, fmt.Sprintf("%s/%d", id, shim))
	return []int{shim}
}

// node is an agent on a fake node: containerd's tasks holding the pod's sandbox (gVisor: with a
// hibernate socket, unless runc), a checkpoint that writes what runsc writes unless it fails.
func node(t *testing.T, runc bool, checkpointErr error) (*Agent, *fakeProcs) {
	t.Helper()
	root := t.TempDir()
	// The shim's root is short, as a socket path must be (t.TempDir's names are long).
	shimRoot, err := os.MkdirTemp("", "na")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(shimRoot) })
	a := &Agent{Node: "n1", Images: imagestore.Store{Dir: filepath.Join(root, "images")}, Tasks: filepath.Join(root, "tasks"), ShimRoot: shimRoot}
	for _, d := range []string{filepath.Join(a.Tasks, sandboxID), filepath.Join(a.Tasks, "workload"), a.ShimRoot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(a.Tasks, sandboxID, "config.json"),
		`{"annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-uid":"`+podUID+`"}}`)
	write(filepath.Join(a.Tasks, "workload", "config.json"),
		`{"annotations":{"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.sandbox-uid":"`+podUID+`"}}`)
	if !runc {
		write(hibernate.Socket(a.ShimRoot, sandboxID), "")
	}
	a.Checkpoint = func(_ context.Context, socket, id string, opts hibernate.CheckpointOptions) error {
		image := opts.ImagePath
		if socket != hibernate.Socket(a.ShimRoot, sandboxID) || id != sandboxID {
			return fmt.Errorf("checkpoint of %s through %s; want the pod's sandbox %s", id, socket, sandboxID)
		}
		if checkpointErr != nil {
			write(filepath.Join(image, "pages.img"), "half")
			return checkpointErr
		}
		write(filepath.Join(image, "checkpoint.img"), "kernel")
		write(filepath.Join(image, "pages.img"), "0123456789")
		return nil
	}
	procs := &fakeProcs{}
	a.Procs = procs
	return a, procs
}

var request = CheckpointRequest{PodUID: podUID, SandboxUID: sandboxUID, Namespace: "ns", PodName: "pod"}

func TestEachWayACheckpointFailsHasItsReasonAndLeavesNoImage(t *testing.T) {
	for _, tc := range []struct {
		name          string
		runc          bool
		checkpointErr error
		req           CheckpointRequest
		longRoot      bool
		wantReason    string
	}{
		{name: "saved", req: request},
		{name: "a pod not on this node", req: CheckpointRequest{PodUID: "elsewhere", SandboxUID: sandboxUID}, wantReason: imagestore.ReasonNoSandbox},
		{name: "a pod on runc", runc: true, req: request, wantReason: imagestore.ReasonNotGVisor},
		{name: "a full disk", req: request, checkpointErr: fmt.Errorf("ttrpc: checkpoint failed: write pages.img: %w", syscall.ENOSPC), wantReason: imagestore.ReasonNoSpace},
		{name: "the disk full, as the shim's text says it", req: request, checkpointErr: errors.New("rpc error: no space left on device"), wantReason: imagestore.ReasonNoSpace},
		{name: "runsc fails", req: request, checkpointErr: errors.New("runsc checkpoint: sandbox is not running"), wantReason: imagestore.ReasonFailed},
		{name: "a shim root too long for a socket", req: request, longRoot: true, wantReason: imagestore.ReasonFailed},
		{name: "a Sandbox UID that is a path", req: CheckpointRequest{PodUID: podUID, SandboxUID: "../../etc"}, wantReason: imagestore.ReasonBadPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := node(t, tc.runc, tc.checkpointErr)
			if tc.longRoot {
				a.ShimRoot = "/" + strings.Repeat("r", 100)
			}
			res, err := a.Save(t.Context(), tc.req)
			if tc.wantReason == "" {
				if err != nil || res.Bytes != 16 || res.Image != a.Images.Path(sandboxUID) || res.Node != "n1" {
					t.Fatalf("Save = %+v, %v; want 16 bytes in %s on n1", res, err, a.Images.Path(sandboxUID))
				}
				if _, err := a.Images.Verify(res.Image, "ns", "pod"); err != nil {
					t.Errorf("the saved image does not verify for its pod: %v", err)
				}
				return
			}
			if imagestore.ReasonOf(err) != tc.wantReason {
				t.Fatalf("Save = %v; want reason %s", err, tc.wantReason)
			}
			if uids, _ := a.Images.List(); len(uids) != 0 {
				t.Errorf("images left after a failed checkpoint: %v", uids)
			}
		})
	}
}

func TestDeleteEndsAFailedRestoreAndSaysWhatHappened(t *testing.T) {
	for _, tc := range []struct {
		name       string
		outcome    *imagestore.Outcome
		wantKilled []string
	}{
		{name: "never restored"},
		{name: "restored", outcome: &imagestore.Outcome{SandboxID: "sb1", Restored: true, Seconds: 0.4}},
		{name: "a failed restore's shim and runsc are killed", outcome: &imagestore.Outcome{SandboxID: "sb1", Reason: "RestoreFailed", ShimPID: 42},
			wantKilled: []string{"sb1/42"}},
		{name: "a refused image started cold: nothing to kill", outcome: &imagestore.Outcome{SandboxID: "sb1", Reason: imagestore.ReasonCorrupt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, procs := node(t, false, nil)
			if _, err := a.Save(t.Context(), request); err != nil {
				t.Fatal(err)
			}
			if tc.outcome != nil {
				if err := a.Images.SetOutcome(sandboxUID, *tc.outcome); err != nil {
					t.Fatal(err)
				}
			}
			res, err := a.Delete(sandboxUID)
			if err != nil {
				t.Fatal(err)
			}
			if res.Tried != (tc.outcome != nil) || (tc.outcome != nil && res.Outcome.Restored != tc.outcome.Restored) {
				t.Errorf("Delete = %+v; want the outcome %+v", res, tc.outcome)
			}
			if !slices.Equal(procs.killed, tc.wantKilled) {
				t.Errorf("killed %v; want %v", procs.killed, tc.wantKilled)
			}
			if _, err := os.Stat(a.Images.Path(sandboxUID)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the image is still there: %v", err)
			}
		})
	}
}

func TestTheSweepDeletesOnlyImagesOfSandboxesThatAreGone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exists    bool
		err       error
		wantImage bool
	}{
		{name: "the Sandbox exists", exists: true, wantImage: true},
		{name: "the Sandbox is gone (or has another UID)", exists: false, wantImage: false},
		{name: "the API server does not answer", err: errors.New("timeout"), wantImage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := node(t, false, nil)
			if _, err := a.Save(t.Context(), request); err != nil {
				t.Fatal(err)
			}
			var asked string
			a.Sweep(t.Context(), func(_ context.Context, ns, name, uid string) (bool, error) {
				asked = ns + "/" + name + "/" + uid
				return tc.exists, tc.err
			})
			if want := "ns/pod/" + sandboxUID; asked != want {
				t.Errorf("asked about %q; want %q", asked, want)
			}
			_, err := os.Stat(a.Images.Path(sandboxUID))
			if (err == nil) != tc.wantImage {
				t.Errorf("image present %t; want %t", err == nil, tc.wantImage)
			}
		})
	}
}

func TestAForkSavesTheParentRunningIntoEachChildsImage(t *testing.T) {
	a, _ := node(t, false, nil)
	save := a.Checkpoint
	var (
		mu             sync.Mutex
		inFlight, most int
		leftRunning    []bool
	)
	a.Checkpoint = func(ctx context.Context, socket, id string, opts hibernate.CheckpointOptions) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		leftRunning = append(leftRunning, opts.LeaveRunning)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // long enough for a second save to overlap, were they not one at a time
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		return save(ctx, socket, id, opts)
	}
	children := []string{"1e0e0e0e-1111-2222-3333-444444444444", "2e0e0e0e-1111-2222-3333-444444444444", "3e0e0e0e-1111-2222-3333-444444444444"}
	var wg sync.WaitGroup
	errs := make([]error, len(children))
	for i, uid := range children {
		wg.Go(func() {
			_, errs[i] = a.Save(t.Context(), CheckpointRequest{PodUID: podUID, SandboxUID: uid, Namespace: "ns", PodName: fmt.Sprintf("child-%d", i), LeaveRunning: true})
		})
	}
	wg.Wait()
	for i, uid := range children {
		if errs[i] != nil {
			t.Fatalf("saving child %d: %v", i, errs[i])
		}
		o, err := a.Images.Verify(a.Images.Path(uid), "ns", fmt.Sprintf("child-%d", i))
		if err != nil || o.PodUID != podUID {
			t.Errorf("child %d's image = %+v, %v; want one the child may restore, saved from the parent's pod %s", i, o, err, podUID)
		}
	}
	if most != 1 {
		t.Errorf("%d saves of one sandbox ran at once; want one at a time", most)
	}
	if !slices.Equal(leftRunning, []bool{true, true, true}) {
		t.Errorf("LeaveRunning per save = %v; want the parent left running by each", leftRunning)
	}
}

// A snapshot pool's forks of one sandbox share a save while it is fresh: one checkpoint,
// hard-linked into each fork's own image; past its window the next fork saves again, and the
// sweep removes the shared save, not the forks' images.
func TestForksThatMayShareASaveShareItWhileItIsFresh(t *testing.T) {
	a, _ := node(t, false, nil)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	a.Now = func() time.Time { return now }
	save := a.Checkpoint
	saves := 0
	a.Checkpoint = func(ctx context.Context, socket, id string, opts hibernate.CheckpointOptions) error {
		saves++
		return save(ctx, socket, id, opts)
	}
	fork := func(uid string, shareSeconds float64) CheckpointResult {
		t.Helper()
		res, err := a.Save(t.Context(), CheckpointRequest{PodUID: podUID, SandboxUID: uid, Namespace: "ns", PodName: "m-" + uid[:1],
			LeaveRunning: true, ShareSeconds: shareSeconds})
		if err != nil {
			t.Fatalf("fork %s: %v", uid, err)
		}
		if _, err := a.Images.Verify(res.Image, "ns", "m-"+uid[:1]); err != nil {
			t.Fatalf("fork %s's image does not verify for its pod: %v", uid, err)
		}
		return res
	}
	first := fork("1e0e0e0e-1111-2222-3333-444444444444", 60)
	now = now.Add(30 * time.Second)
	second := fork("2e0e0e0e-1111-2222-3333-444444444444", 60)
	if saves != 1 || first.Shared || !second.Shared || second.Bytes != first.Bytes {
		t.Fatalf("saves %d, first %+v, second %+v; want one save, the second fork sharing it", saves, first, second)
	}
	a1, _ := os.Stat(filepath.Join(first.Image, "pages.img"))
	a2, _ := os.Stat(filepath.Join(second.Image, "pages.img"))
	if !os.SameFile(a1, a2) {
		t.Error("the second fork's pages.img is a copy; want the shared save's file linked")
	}
	if unshared := fork("3e0e0e0e-1111-2222-3333-444444444444", 0); unshared.Shared || saves != 2 {
		t.Errorf("a fork that may not share: %+v after %d saves; want a save of its own", unshared, saves)
	}

	now = now.Add(31 * time.Second) // past the first save's window
	if third := fork("4e0e0e0e-1111-2222-3333-444444444444", 60); third.Shared || saves != 3 {
		t.Errorf("a fork past the shared save's window: %+v after %d saves; want a fresh save", third, saves)
	}
	now = now.Add(61 * time.Second)
	a.Sweep(t.Context(), func(context.Context, string, string, string) (bool, error) { return true, nil })
	if entries, _ := os.ReadDir(filepath.Join(a.Images.Dir, ".shared")); len(entries) != 0 {
		t.Errorf("shared saves left after their window: %v", entries)
	}
	if _, err := a.Images.Verify(second.Image, "ns", "m-2"); err != nil {
		t.Errorf("a fork's image after its shared save expired: %v; want it whole", err)
	}
}
