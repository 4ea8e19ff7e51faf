//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// execClient is the agent harness's way in: the Kubernetes exec API, no sandboxd needed in the image.
func execClient(t *testing.T, ns string) *sdk.Client {
	t.Helper()
	cli, err := sdk.New(sdk.Options{Kubeconfig: cluster.Kubeconfig, Namespace: ns, Mode: sdk.ModeExec})
	mustf(t, err, "sdk client")
	t.Cleanup(cli.Close)
	return cli
}

func shOut(t *testing.T, sb *sdk.Sandbox, script string) string {
	t.Helper()
	res, err := sb.Run(t.Context(), sdk.Shell(script))
	mustf(t, err, "running %q", script)
	mustf(t, res.Err(), "running %q", script)
	return res.Stdout
}

// The agent harness's persistent workspace with its hooks: onCreate runs once when the workspace Sandbox is
// created, onResume each time it is resumed, both before the SDK hands the sandbox back; a
// detached background job outlives the call and the client that started it; a failing onCreate
// reports the hook and removes the half-set-up Sandbox.
func TestWorkspaceHooksAndADetachedBackgroundJob(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "hooks")
	spec := harnessSandbox(ns, "fp-p-hooks-"+rand.String(5), map[string]string{"HOME": "/home/node"}).
		Volume(localVolume("home", "1Gi"), "/home/node").Obj()
	hooks := []sdk.CreateOption{
		sdk.OnCreate(sdk.Shell(`echo "created $PHASE" >> "$HOME/hooks.log"`), sdk.WithEnv(map[string]string{"PHASE": "setup"})),
		sdk.OnResume(sdk.Shell(`echo resumed >> "$HOME/hooks.log"`)),
	}

	cli := execClient(t, ns)
	sb, err := cli.GetOrCreateSandbox(t.Context(), spec, hooks...)
	mustf(t, err, "creating the workspace with hooks")
	if got := shOut(t, sb, `cat "$HOME/hooks.log"`); got != "created setup\n" {
		t.Fatalf("hooks.log after create = %q, want the onCreate line only", got)
	}

	// A detached job: Start returns at once, the job finishes later on its own.
	started := time.Now()
	job, err := sb.Start(t.Context(), sdk.Shell(`sleep 3; echo done > "$HOME/job.out"`))
	mustf(t, err, "starting a background job")
	if took := time.Since(started); took > 3*time.Second || job.PID == 0 {
		t.Fatalf("Start took %s (pid %d), want it to return before the 3s job ends, with a PID", took, job.PID)
	}
	cli.Close() // the client that started the job goes away
	cli = execClient(t, ns)
	sb, err = cli.Get(t.Context(), spec.Name)
	mustf(t, err, "finding the workspace again")
	slow.EventuallyContext(t, "the background job's output", func(ctx context.Context) error {
		res, err := sb.Run(ctx, sdk.Shell(`cat "$HOME/job.out" 2>/dev/null`))
		if err != nil {
			return err
		}
		if res.Stdout != "done\n" {
			return fmt.Errorf("job.out = %q", res.Stdout)
		}
		return nil
	})

	// Idle, then back: onResume runs, onCreate does not run again.
	mustf(t, sb.Pause(t.Context()), "pausing")
	sb, err = cli.GetOrCreateSandbox(t.Context(), spec, hooks...)
	mustf(t, err, "resuming the workspace with hooks")
	if got := shOut(t, sb, `cat "$HOME/hooks.log"`); got != "created setup\nresumed\n" {
		t.Fatalf("hooks.log after resume = %q, want the onCreate line then one onResume line", got)
	}

	// A broken set-up: the error names the hook and its output, and the Sandbox is gone.
	bad := harnessSandbox(ns, "fp-p-bad-"+rand.String(5), nil).Obj()
	_, err = cli.GetOrCreateSandbox(t.Context(), bad, sdk.OnCreate(sdk.Shell("echo no-bucket >&2; exit 2")))
	var he *sdk.HookError
	if !errors.As(err, &he) || he.Result == nil || he.Result.ExitCode != 2 || !he.Deleted || !strings.Contains(err.Error(), "no-bucket") {
		t.Fatalf("failing onCreate = %v, want a *HookError with exit 2, its stderr, and the sandbox deleted", err)
	}
	slow.EventuallyContext(t, "the half-set-up Sandbox gone", func(ctx context.Context) error {
		return gone(ctx, &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bad.Name}})
	})
}

// The same through the router on a template's sandbox running sandboxd: onCreate before Create
// returns, and a detached background job that sandboxd lists and whose output it keeps after the
// client that started it is gone.
func TestClaimHooksAndABackgroundJobThroughTheRouter(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "hooksr")
	createTemplate(t, ns, "python", false)
	cli := sdkClient(t, ns)
	sb, err := cli.Create(t.Context(), "python", sdk.OnCreate(sdk.Shell("mkdir -p app && echo ready > app/setup.txt")))
	mustf(t, err, "create with onCreate")
	got, err := sb.Files().Read(t.Context(), "app/setup.txt")
	mustf(t, err, "reading the onCreate hook's file")
	if string(got) != "ready\n" {
		t.Fatalf("app/setup.txt = %q, want the onCreate hook's output", got)
	}

	job, err := sb.Start(t.Context(), sdk.Shell("sleep 2; echo job-finished"), sdk.WithCwd("app"))
	mustf(t, err, "starting a background job")
	cli.Close()
	again := sdkClient(t, ns)
	sb, err = again.Get(t.Context(), sb.Name())
	mustf(t, err, "finding the sandbox again")
	var stdout bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	code, err := sb.FollowLogs(ctx, job.ID, &stdout, nil)
	mustf(t, err, "following the job's logs from a new client")
	if code != 0 || stdout.String() != "job-finished\n" {
		t.Fatalf("background job: exit %d stdout %q, want 0 and %q", code, stdout.String(), "job-finished\n")
	}
	procs, err := sb.Processes(t.Context())
	mustf(t, err, "listing processes")
	if !containsProcess(procs, job.ID) {
		t.Fatalf("processes %+v do not list the job %s", procs, job.ID)
	}
	mustf(t, sb.Delete(t.Context()), "deleting")
}

func containsProcess(procs []sdk.Process, id string) bool {
	for _, p := range procs {
		if p.ID == id && !p.Running && p.ExitCode == 0 {
			return true
		}
	}
	return false
}
