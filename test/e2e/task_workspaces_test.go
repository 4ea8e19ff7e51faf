//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// Task workspaces (docs/integrations.md), a Kubernetes task controller's flow on the Go SDK: worker jobs claim a workspace and
// wait, run commands, write nested files, then delete or retain the workspace; session reuse
// through a deterministic claim name; the warm pool policy mapped onto the claim's warmpool.

// sessionClaimName derives the claim name from the namespaced session and template, so a later
// job of the same session reattaches.
func sessionClaimName(ns, session, template string) string {
	sum := sha256.Sum256([]byte(ns + "/" + session + "/" + template))
	return "task-ws-" + hex.EncodeToString(sum[:])[:12]
}

// The worker's timeouts (controller flags --agent-sandbox-claim-timeout and
// --agent-sandbox-command-timeout, defaults).
const (
	taskClaimTimeout   = 2 * time.Minute
	taskCommandTimeout = 30 * time.Minute
)

// job is one worker run: claim-or-reattach within the claim timeout, then work at once (no
// waiting for the router: the SDK hands back a sandbox that takes commands), then apply the
// cleanup policy.
func job(t *testing.T, cli *sdk.Client, name, template, warmpool, cleanup string, work func(context.Context, *sdk.Sandbox)) *sdk.Sandbox {
	t.Helper()
	claimCtx, cancel := context.WithTimeout(t.Context(), taskClaimTimeout)
	sb, err := cli.GetOrCreate(claimCtx, name, template, sdk.WithWarmPool(warmpool))
	cancel()
	mustf(t, err, "claiming workspace %s within %s", name, taskClaimTimeout)
	cmdCtx, cancel := context.WithTimeout(t.Context(), taskCommandTimeout)
	defer cancel()
	work(cmdCtx, sb)
	switch cleanup {
	case "delete":
		mustf(t, sb.Delete(t.Context(), sdk.DeleteOption{Wait: true}), "deleting workspace")
	case "retain":
		mustf(t, sb.Close(), "releasing workspace")
	}
	return sb
}

// Task workspaces: a deterministic claim name per session lets a later job reattach to a retained
// workspace and find its nested files; cleanupPolicy delete removes it.
func TestDeterministicClaimNameReattachesARetainedWorkspace(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "task")
	createTemplate(t, ns, "coding-agent", true)
	cli := sdkClientAs(t, ns, asServiceAccount(t, ns, "task-worker", taskWorkerRole, nil))
	name := sessionClaimName(ns, "feature-123", "coding-agent")
	files := map[string]string{
		"repo/src/pkg/main.go":       "package main\n",
		"repo/docs/design/notes.md":  "# notes\n",
		"home/.cache/tool/state.txt": "warm cache\n",
	}

	first := job(t, cli, name, "coding-agent", "none", "retain", func(ctx context.Context, sb *sdk.Sandbox) {
		for p, content := range files {
			mustf(t, sb.Files().Write(ctx, p, []byte(content), 0), "writing %s", p)
		}
		res, err := sb.Run(ctx, sdk.Shell(`cd repo && echo "$GREETING from $(pwd)" && cat -`),
			sdk.WithEnv(map[string]string{"GREETING": "hello"}), sdk.WithStdin(strings.NewReader("stdin works\n")))
		mustf(t, err, "running command")
		if res.ExitCode != 0 || res.Stdout != "hello from /workspace/repo\nstdin works\n" {
			t.Fatalf("command result %+v", res)
		}
	})

	// A later job of the same session reattaches to the retained workspace and finds its files.
	second := job(t, cli, name, "coding-agent", "none", "delete", func(ctx context.Context, sb *sdk.Sandbox) {
		if sb.SandboxName() != first.SandboxName() {
			t.Fatalf("second job got sandbox %s, want the retained %s", sb.SandboxName(), first.SandboxName())
		}
		for p, content := range files {
			got, err := sb.Files().Read(ctx, p)
			mustf(t, err, "reading %s", p)
			if string(got) != content {
				t.Fatalf("%s = %q, want %q", p, got, content)
			}
		}
		entries, err := sb.Files().List(ctx, "repo", true)
		mustf(t, err, "listing repo")
		if len(entries) != 6 { // src, src/pkg, src/pkg/main.go, docs, docs/design, docs/design/notes.md
			t.Fatalf("recursive list of repo has %d entries: %+v", len(entries), entries)
		}
	})
	if _, err := cli.Get(t.Context(), second.Name()); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("after delete, Get = %v, want ErrNotFound", err)
	}
	sandbox := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.SandboxName()}}
	slow.EventuallyContext(t, "sandbox of the deleted workspace gone", func(ctx context.Context) error { return gone(ctx, sandbox) })
}

// The task controller's warm-pool policy mapped onto the claim's warmpool field: none starts cold,
// default adopts from the template's pool.
func TestClaimWarmpoolFieldChoosesColdOrWarm(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "task-warm")
	createTemplate(t, ns, "coding-agent", false)
	createPool(t, ns, "coding-agent-pool", "coding-agent", 1)
	cli := sdkClientAs(t, ns, asServiceAccount(t, ns, "task-worker", taskWorkerRole, nil))

	for _, tc := range []struct {
		policy   string // the task controller's "template" -> default, "disabled" -> none
		wantWarm bool
	}{
		{policy: "none", wantWarm: false},
		{policy: "default", wantWarm: true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			name := sessionClaimName(ns, "task-"+tc.policy, "coding-agent")
			job(t, cli, name, "coding-agent", tc.policy, "delete", func(ctx context.Context, sb *sdk.Sandbox) {
				claim := &extv1alpha1.SandboxClaim{}
				mustf(t, kube.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, claim), "reading claim")
				if got := string(*claim.Spec.WarmPool); got != tc.policy {
					t.Fatalf("claim warmpool = %q, want %q", got, tc.policy)
				}
				sandbox := &agentsv1alpha1.Sandbox{}
				mustf(t, kube.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: sb.SandboxName()}, sandbox), "reading sandbox")
				warm := sandbox.Labels[extv1alpha1.LaunchTypeLabel] == "warm"
				if warm != tc.wantWarm || (sb.SandboxName() == name) == tc.wantWarm {
					t.Fatalf("sandbox %s of claim %s: launch-type %q, want warm=%v", sb.SandboxName(), name, sandbox.Labels[extv1alpha1.LaunchTypeLabel], tc.wantWarm)
				}
				res, err := sb.Run(ctx, sdk.Shell("echo ok"))
				mustf(t, err, "running")
				if res.Stdout != "ok\n" {
					t.Fatalf("stdout %q", res.Stdout)
				}
			})
		})
	}
}
