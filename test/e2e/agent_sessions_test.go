//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// Lazy agent sessions (docs/integrations.md), a Python agent server's flow: validate the installation at startup, create the sandbox
// lazily on the first tool call with scoping labels, set a TTL by patching shutdownTime, run
// every command as `sh -c` through the router's X-Sandbox-ID routing to :8888 /execute (file
// operations as base64 through execute), and terminate when the session is deleted.

// sessionCommandTimeout bounds one commands.run through the router (the SDK's per-call
// timeout); it is a failure bound, the command itself takes milliseconds.
const sessionCommandTimeout = time.Minute

// execute is the Python SDK's commands.run through the router: one POST /execute, no retry,
// as the integrator sends it right after create_sandbox returns.
func execute(t *testing.T, ns, sandbox, command string) (string, string, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": command})
	var out struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}
	ctx, cancel := context.WithTimeout(t.Context(), sessionCommandTimeout)
	defer cancel()
	code, resp, err := routerPost(ctx, ns, sandbox, "/execute", string(body))
	if err != nil || code != http.StatusOK {
		t.Fatalf("router POST /execute on %s: %d %s %v, want 200", sandbox, code, resp, err)
	}
	mustf(t, json.Unmarshal([]byte(resp), &out), "decoding %q", resp)
	return out.Stdout, out.Stderr, out.ExitCode
}

// sessionBackend is the integrator's K8sSandbox: it stores its configuration when the session
// is created and creates the sandbox on the first execute() only.
type sessionBackend struct {
	cli    *sdk.Client
	kube   client.Client // the server's own identity, for the TTL patch
	labels map[string]string
	ttl    time.Duration
	sb     *sdk.Sandbox
}

// ensureSandbox is _ensure_sandbox(): create with the scoping labels, then the TTL patch on
// the Sandbox's spec.shutdownTime.
func (b *sessionBackend) ensureSandbox(t *testing.T) string {
	t.Helper()
	if b.sb != nil {
		return b.sb.SandboxName()
	}
	sb, err := b.cli.Create(t.Context(), "cognition-sandbox", sdk.WithLabels(b.labels))
	mustf(t, err, "create_sandbox")
	b.sb = sb
	patchSandboxShutdownTime(t, b.kube, b.cli.Namespace(), sb.SandboxName(), time.Now().Add(b.ttl))
	return sb.SandboxName()
}

func (b *sessionBackend) execute(t *testing.T, command string) (string, string, int) {
	t.Helper()
	name := b.ensureSandbox(t)
	return execute(t, b.cli.Namespace(), name, "sh -c "+shQuote(command))
}

// patchSandboxShutdownTime is the TTL: a merge patch of the Sandbox's spec.shutdownTime.
func patchSandboxShutdownTime(t *testing.T, cl client.Client, ns, sandbox string, at time.Time) metav1.Time {
	t.Helper()
	ttl := metav1.NewTime(at.Truncate(time.Second))
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"shutdownTime":%q}}`, ttl.UTC().Format(time.RFC3339)))
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sandbox}}
	mustf(t, cl.Patch(t.Context(), sb, patch), "patching the TTL of sandbox %s", sandbox)
	return ttl
}

// objectsIn counts claims and Sandboxes in a namespace.
func objectsIn(t *testing.T, ns string) int {
	t.Helper()
	var claims extv1alpha1.SandboxClaimList
	var sbs agentsv1alpha1.SandboxList
	mustf(t, kube.List(t.Context(), &claims, client.InNamespace(ns)), "listing claims")
	mustf(t, kube.List(t.Context(), &sbs, client.InNamespace(ns)), "listing sandboxes")
	return len(claims.Items) + len(sbs.Items)
}

// shQuote is shlex.quote: the backend wraps every command as sh -c '<command>'.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// The agent server's startup validation: CRDs and template are fatal when missing, an unreachable
// router only a warning.
func TestStartupValidationFailsOnlyOnMissingPiecesAndWarnsOnTheRouter(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "cogcheck")
	mustf(t, kube.Create(t.Context(), hardenedTemplate(ns, "cognition-sandbox")), "creating the agent server's template")
	identity := asServiceAccount(t, ns, "cognition", agentServerRole, agentServerClusterRole)
	cli := sdkClientAs(t, ns, identity)
	mustf(t, cli.CheckCluster(t.Context(), sdk.RequireTemplate("cognition-sandbox")), "startup validation of a working install")

	var ce *sdk.CheckError
	err := cli.CheckCluster(t.Context(), sdk.RequireTemplate("no-such-template"))
	if !sdk.IsFatal(err) || !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], "no-such-template does not exist") {
		t.Fatalf("validation with a missing template = %v, want one fatal problem naming it", err)
	}

	down, err := sdk.New(sdk.Options{RESTConfig: identity, Namespace: ns, RouterURL: "http://127.0.0.1:1", Mode: sdk.ModeRouter})
	mustf(t, err, "sdk client")
	defer down.Close()
	err = down.CheckCluster(t.Context(), sdk.RequireTemplate("cognition-sandbox"))
	if sdk.IsFatal(err) || !errors.As(err, &ce) || len(ce.Warnings) != 1 || !strings.Contains(ce.Warnings[0], "is not reachable") {
		t.Fatalf("validation with the router down = %v, want only a warning about the router", err)
	}
}

// An agent session: nothing is created until the first tool call, which creates one sandbox
// with the session's scoping labels and a TTL on the Sandbox; every call runs as `sh -c` through
// the router's X-Sandbox-ID routing to :8888 /execute (files as base64 through execute); deleting
// the session terminates the sandbox.
func TestLazySessionSandboxRunsShellCommandsThroughTheRouter(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "session")
	mustf(t, kube.Create(t.Context(), hardenedTemplate(ns, "cognition-sandbox")), "creating the agent server's template")
	identity := asServiceAccount(t, ns, "cognition", agentServerRole, agentServerClusterRole)
	cli := sdkClientAs(t, ns, identity)
	mustf(t, cli.CheckCluster(t.Context(), sdk.RequireTemplate("cognition-sandbox")), "startup validation")

	session := "s-" + rand.String(6)
	backend := &sessionBackend{cli: cli, kube: clientAs(t, identity), ttl: 3600 * time.Second, labels: map[string]string{
		"cognition.io/session": session, "cognition.io/user": "alice", "cognition.io/org": "acme",
	}}
	// Session created, client built, installation validated: nothing exists yet.
	if n := objectsIn(t, ns); n != 0 {
		t.Fatalf("%d claims and sandboxes exist before the first tool call, want 0", n)
	}
	// The first tool call creates the sandbox; the second reuses it.
	if out, _, code := backend.execute(t, "echo Hello from K8s sandbox! | tr a-z A-Z"); code != 0 || out != "HELLO FROM K8S SANDBOX!\n" {
		t.Fatalf("first tool call: %q exit %d", out, code)
	}
	if out, _, code := backend.execute(t, "echo again"); code != 0 || out != "again\n" {
		t.Fatalf("second tool call: %q exit %d", out, code)
	}
	if n := objectsIn(t, ns); n != 2 {
		t.Fatalf("%d claims and sandboxes after two tool calls, want one claim and its sandbox", n)
	}
	sb := backend.sb
	name := sb.SandboxName()
	sandbox := &agentsv1alpha1.Sandbox{}
	mustf(t, kube.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, sandbox), "reading sandbox")
	if sandbox.Spec.ShutdownTime == nil || time.Until(sandbox.Spec.ShutdownTime.Time) < 50*time.Minute {
		t.Fatalf("sandbox spec.shutdownTime = %v, want the TTL patch (~1h ahead) kept", sandbox.Spec.ShutdownTime)
	}

	// Labels are queryable on Sandboxes (multi-tenant visibility).
	var sbs agentsv1alpha1.SandboxList
	mustf(t, kube.List(t.Context(), &sbs, client.InNamespace(ns), client.MatchingLabels{"cognition.io/user": "alice"}), "listing sandboxes by label")
	if len(sbs.Items) != 1 || sbs.Items[0].Name != name || sbs.Items[0].Labels["cognition.io/session"] != session {
		t.Fatalf("sandboxes of user alice: %+v", sbs.Items)
	}

	// Tool calls through the router: shell semantics and base64 file operations.
	// The runtime image carries python3 (the integrator's own demo runs a platform check).
	if out, _, code := execute(t, ns, name, "sh -c "+shQuote(`python3 -c 'import platform, socket; print(socket.gethostname(), platform.python_version())'`)); code != 0 || !strings.HasPrefix(out, name+" 3.") {
		t.Fatalf("python3 platform check: %q exit %d", out, code)
	}
	content := "line 1\nit's 'quoted' & <odd>\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(content))
	write := fmt.Sprintf("mkdir -p notes/2026 && printf %%s %s | base64 -d > notes/2026/today.md", b64)
	if _, errOut, code := execute(t, ns, name, "sh -c "+shQuote(write)); code != 0 {
		t.Fatalf("write via execute: exit %d: %s", code, errOut)
	}
	out, _, code := execute(t, ns, name, "sh -c "+shQuote("base64 notes/2026/today.md"))
	got, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(strings.TrimSpace(out), "\n", ""))
	if code != 0 || err != nil || string(got) != content {
		t.Fatalf("read via execute: %q (%v), want %q", got, err, content)
	}
	if _, errOut, code := execute(t, ns, name, "sh -c "+shQuote("exit 7; echo never")); code != 7 || errOut != "" {
		t.Fatalf("failing command: exit %d stderr %q", code, errOut)
	}

	// Session deleted: terminate deletes the claim, the controller the Sandbox and pod.
	mustf(t, sb.Delete(t.Context()), "terminate")
	sandbox = &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	slow.EventuallyContext(t, "sandbox gone after terminate", func(ctx context.Context) error { return gone(ctx, sandbox) })
	// The router's watch cache drops the Sandbox a moment after the API does.
	slow.EventuallyContext(t, "router to answer 404 for the terminated sandbox", func(ctx context.Context) error {
		code, body, err := routerPost(ctx, ns, name, "/execute", `{"command":"true"}`)
		if err != nil || code != http.StatusNotFound {
			return fmt.Errorf("%d %s %v", code, body, err)
		}
		return nil
	})
}

// An agent session's TTL safety net: a session whose server never calls terminate. Its SDK patches the
// Sandbox's spec.shutdownTime and leaves shutdownPolicy at the default (Retain): at that time the
// controller deletes the pod and Service, keeps the Sandbox marked expired, and the router stops
// routing to it; the claim reports it. A later terminate removes what is left.
func TestSandboxShutdownTimePatchExpiresAnAbandonedSession(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "session-ttl")
	mustf(t, kube.Create(t.Context(), hardenedTemplate(ns, "cognition-sandbox")), "creating the agent server's template")
	identity := asServiceAccount(t, ns, "cognition", agentServerRole, nil)
	backend := &sessionBackend{cli: sdkClientAs(t, ns, identity), kube: clientAs(t, identity), ttl: 3 * time.Second,
		labels: map[string]string{"cognition.io/session": "abandoned"}}
	if out, _, code := backend.execute(t, "echo before"); code != 0 || out != "before\n" {
		t.Fatalf("tool call before the TTL: %q exit %d", out, code)
	}
	name := backend.sb.SandboxName()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	slow.EventuallyContext(t, "pod deleted at shutdownTime", func(ctx context.Context) error { return gone(ctx, pod) })
	sandbox := &agentsv1alpha1.Sandbox{}
	slow.EventuallyContext(t, "Sandbox kept with Ready=False/SandboxExpired (shutdownPolicy Retain)", func(ctx context.Context) error {
		if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sandbox); err != nil {
			return err
		}
		c := meta.FindStatusCondition(sandbox.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
		if c == nil || c.Reason != agentsv1alpha1.ReasonExpired || len(sandbox.Status.PodIPs) != 0 {
			return fmt.Errorf("Ready condition %+v, pod IPs %v", c, sandbox.Status.PodIPs)
		}
		return nil
	})
	slow.EventuallyContext(t, "claim no longer Ready", func(ctx context.Context) error {
		claim := &extv1alpha1.SandboxClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: backend.sb.Name()}, claim); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(claim.Status.Conditions, extv1alpha1.ClaimConditionReady) {
			return errors.New("the claim is still Ready")
		}
		return nil
	})
	slow.EventuallyContext(t, "router to stop routing to the expired sandbox", func(ctx context.Context) error {
		code, body, err := routerPost(ctx, ns, name, "/execute", `{"command":"true"}`)
		if err != nil || code == http.StatusOK {
			return fmt.Errorf("%d %s %v", code, body, err)
		}
		return nil
	})

	mustf(t, backend.sb.Delete(t.Context()), "terminate")
	slow.EventuallyContext(t, "sandbox gone after terminate", func(ctx context.Context) error {
		return gone(ctx, &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	})
}
