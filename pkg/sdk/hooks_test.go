package sdk

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// hookPlane is a client whose sandboxes all run on one real sandboxd, with the stand-in
// controller making claims and Sandboxes ready.
func hookPlane(t *testing.T) (*Client, *sdktest.Sandboxd) {
	t.Helper()
	d := sdktest.NewSandboxd(t)
	c := newClusterClient(t, ModeDirect, func(o *Options) { o.SandboxPort = d.Port })
	sdktest.StartController(t, c.KubeClient(), c.Namespace())
	return c, d
}

func fileIn(t *testing.T, d *sdktest.Sandboxd, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Root, name))
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The harness flow's onCreate: set-up commands run in order once the sandbox is ready, before Create
// hands it back; with their own run options.
func TestOnCreateRunsInOrderBeforeCreateReturns(t *testing.T) {
	ctx := testCtx(t)
	c, d := hookPlane(t)
	sb, err := c.Create(ctx, "py", WithName("hooked"),
		OnCreate(Shell(`echo "one $STEP" > created.log`), WithEnv(map[string]string{"STEP": "env"})),
		OnCreate(Argv("sh", "-c", "echo two >> created.log")))
	if err != nil {
		t.Fatalf("Create with OnCreate hooks: %v", err)
	}
	defer sb.Close()
	if got, want := fileIn(t, d, "created.log"), "one env\ntwo\n"; got != want {
		t.Errorf("created.log right after Create = %q, want %q (both hooks, in order, before Create returned)", got, want)
	}
}

// A failing onCreate ends the call with a *HookError carrying the hook's result; the sandbox the
// call created is deleted (so a later GetOrCreate never hands out one whose set-up failed),
// unless KeepOnFailure.
func TestFailingOnCreateDeletesTheSandboxItCreated(t *testing.T) {
	cases := []struct {
		name        string
		keep        bool
		wantDeleted bool
		wantMessage string
	}{
		{"deleted by default", false, true, "the sandbox was deleted"},
		{"kept with KeepOnFailure", true, false, "the sandbox was kept"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c, d := hookPlane(t)
			opts := []CreateOption{WithName("bad-setup"), OnCreate(Shell("echo boom >&2; exit 3")), OnCreate(Shell("touch never-runs"))}
			if tc.keep {
				opts = append(opts, KeepOnFailure())
			}
			sb, err := c.Create(ctx, "py", opts...)
			var he *HookError
			if sb != nil || !errors.As(err, &he) {
				t.Fatalf("Create = %v, %v; want no sandbox and a *HookError", sb, err)
			}
			if he.Hook != "onCreate" || he.Result == nil || he.Result.ExitCode != 3 || he.Deleted != tc.wantDeleted {
				t.Errorf("HookError = %+v, want onCreate, exit 3, Deleted=%v", he, tc.wantDeleted)
			}
			var exit *ExitError
			if !errors.As(err, &exit) || exit.ExitCode != 3 {
				t.Errorf("errors.As(err, *ExitError) = %v, want exit code 3 unwrapped", exit)
			}
			msg := err.Error()
			for _, want := range []string{`onCreate hook "echo boom >&2; exit 3"`, c.Namespace() + "/bad-setup", "exited with code 3: boom", tc.wantMessage} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			if got := fileIn(t, d, "never-runs"); got != "<missing>" {
				t.Errorf("the hook after the failing one ran")
			}
			_, err = c.Get(ctx, "bad-setup")
			if gotDeleted := errors.Is(err, ErrNotFound); gotDeleted != tc.wantDeleted {
				t.Errorf("Get after the failed hook = %v, want deleted=%v", err, tc.wantDeleted)
			}
		})
	}
}

// onCreate belongs to whoever created the sandbox: GetOrCreate and GetOrCreateSandbox run it on a
// sandbox they create, not on one they find.
func TestOnCreateRunsOnlyForTheCallThatCreates(t *testing.T) {
	ctx := testCtx(t)
	c, d := hookPlane(t)
	hook := OnCreate(Shell("echo x >> creations.log"))
	for range 2 {
		sb, err := c.GetOrCreate(ctx, "session-1", "py", hook)
		if err != nil {
			t.Fatal(err)
		}
		sb.Close()
	}
	for range 2 {
		sb, err := c.GetOrCreateSandbox(ctx, testwrap.MakeSandbox("", "ws-1").Image("runtime").Obj(), hook)
		if err != nil {
			t.Fatal(err)
		}
		sb.Close()
	}
	if got, want := fileIn(t, d, "creations.log"), "x\nx\n"; got != want {
		t.Errorf("creations.log = %q, want %q (one run per created sandbox, none for a found one)", got, want)
	}
}

func TestOnCreateWithNoWaitIsRefusedBeforeCreating(t *testing.T) {
	ctx := testCtx(t)
	c, _ := hookPlane(t)
	_, err := c.Create(ctx, "py", WithName("nowait"), NoWait(), OnCreate(Shell("true")))
	if err == nil || !strings.Contains(err.Error(), "NoWait") {
		t.Fatalf("Create(NoWait, OnCreate) = %v, want an error naming NoWait", err)
	}
	if _, err := c.Get(ctx, "nowait"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound: nothing may be created", err)
	}
}

// The harness flow's onResume: runs once Resume (or GetOrCreateSandbox resuming a paused workspace) has
// the sandbox ready again, before the call returns.
func TestOnResumeRunsAfterEveryResume(t *testing.T) {
	ctx := testCtx(t)
	c, d := hookPlane(t)
	onCreate, onResume := OnCreate(Shell("echo created >> life.log")), OnResume(Shell("echo resumed >> life.log"))
	sb, err := c.GetOrCreateSandbox(ctx, testwrap.MakeSandbox("", "ws-2").Image("runtime").Obj(), onCreate, onResume)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, "ws-2", onResume); err != nil {
		t.Fatalf("Resume with OnResume: %v", err)
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := c.GetOrCreateSandbox(ctx, testwrap.MakeSandbox("", "ws-2").Image("runtime").Obj(), onCreate, onResume)
	if err != nil {
		t.Fatalf("GetOrCreateSandbox of a paused workspace: %v", err)
	}
	defer again.Close()
	if got, want := fileIn(t, d, "life.log"), "created\nresumed\nresumed\n"; got != want {
		t.Errorf("life.log = %q, want %q", got, want)
	}
}

// A failing onResume returns a *HookError and leaves the sandbox running: it holds the
// workspace's state, which the SDK never deletes on its own.
func TestFailingOnResumeLeavesTheSandboxRunning(t *testing.T) {
	ctx := testCtx(t)
	c, _ := hookPlane(t)
	sb, err := c.CreateSandbox(ctx, testwrap.MakeSandbox("", "ws-3").Image("runtime").Obj())
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	err = sb.Resume(ctx, OnResume(Shell("exit 9")))
	var he *HookError
	if !errors.As(err, &he) || he.Hook != "onResume" || he.Deleted || !strings.Contains(err.Error(), "the sandbox is left running") {
		t.Fatalf("Resume = %v, want an onResume *HookError that leaves the sandbox", err)
	}
	got, err := c.Get(ctx, "ws-3")
	if err != nil || got.Status().Paused || !got.Status().Ready {
		t.Errorf("sandbox after the failed hook: %v %+v, want it running and ready", err, got)
	}
}
