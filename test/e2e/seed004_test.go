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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// Seed 004 (a Python agent server): validate the installation at startup, create the sandbox
// lazily on the first tool call with scoping labels, set a TTL by patching shutdownTime, run
// every command as `sh -c` through the router's X-Sandbox-ID routing to :8888 /execute (file
// operations as base64 through execute), and terminate when the session is deleted.

// execute is the Python SDK's commands.run through the router: POST /execute.
func execute(t *testing.T, ns, sandbox, command string) (string, string, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"command": command})
	var out struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}
	eventually(t, "router /execute on "+sandbox, func(ctx context.Context) (bool, error) {
		code, resp, err := routerPost(ctx, ns, sandbox, "/execute", string(body))
		if err != nil || code != http.StatusOK {
			return false, fmt.Errorf("%d %s %v", code, resp, err)
		}
		return true, json.Unmarshal([]byte(resp), &out)
	})
	return out.Stdout, out.Stderr, out.ExitCode
}

// shQuote is shlex.quote: the backend wraps every command as sh -c '<command>'.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

func TestSeed004SessionThroughRouter(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "seed004")
	createTemplate(t, ns, "cognition-sandbox", false)
	cli := sdkClient(t, ns)

	// Startup validation: CRDs served, router /healthz, the template exists; a missing template
	// is reported with what to do.
	mustf(t, cli.CheckCluster(t.Context(), sdk.RequireTemplate("cognition-sandbox")), "startup validation")
	var ce *sdk.CheckError
	if err := cli.CheckCluster(t.Context(), sdk.RequireTemplate("no-such-template")); !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("validation with a missing template: %v", err)
	}

	// Lazy creation: a session alone creates nothing.
	session := "s-" + rand.String(6)
	sel := client.MatchingLabels{"cognition.io/session": session}
	var claims extv1alpha1.SandboxClaimList
	mustf(t, kube.List(t.Context(), &claims, client.InNamespace(ns), sel), "listing claims")
	if len(claims.Items) != 0 {
		t.Fatalf("claims exist before the first tool call: %d", len(claims.Items))
	}

	// First tool call: create with scoping labels, then the TTL patch.
	sb, err := cli.Create(t.Context(), "cognition-sandbox", sdk.WithLabels(map[string]string{
		"cognition.io/session": session, "cognition.io/user": "alice", "cognition.io/org": "acme",
	}))
	mustf(t, err, "creating sandbox")
	ttl := metav1.NewTime(time.Now().Add(3600 * time.Second).Truncate(time.Second))
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"lifecycle":{"shutdownTime":%q}}}`, ttl.UTC().Format(time.RFC3339)))
	claim := &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sb.Name()}}
	mustf(t, kube.Patch(t.Context(), claim, patch), "patching TTL")
	if claim.Spec.Lifecycle == nil || !claim.Spec.Lifecycle.ShutdownTime.Equal(&ttl) {
		t.Fatalf("claim lifecycle after TTL patch: %+v", claim.Spec.Lifecycle)
	}

	// Labels are queryable on Sandboxes (multi-tenant visibility).
	var sbs agentsv1alpha1.SandboxList
	mustf(t, kube.List(t.Context(), &sbs, client.InNamespace(ns), client.MatchingLabels{"cognition.io/user": "alice"}), "listing sandboxes by label")
	if len(sbs.Items) != 1 || sbs.Items[0].Name != sb.SandboxName() || sbs.Items[0].Labels["cognition.io/session"] != session {
		t.Fatalf("sandboxes of user alice: %+v", sbs.Items)
	}

	// Tool calls through the router: shell semantics and base64 file operations.
	name := sb.SandboxName()
	if out, _, code := execute(t, ns, name, "sh -c "+shQuote("echo Hello from K8s sandbox! | tr a-z A-Z")); code != 0 || out != "HELLO FROM K8S SANDBOX!\n" {
		t.Fatalf("execute: %q exit %d", out, code)
	}
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
	sandbox := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	eventually(t, "sandbox gone after terminate", func(ctx context.Context) (bool, error) { return gone(ctx, sandbox) })
	// The router's watch cache drops the Sandbox a moment after the API does.
	eventually(t, "router to answer 404 for the terminated sandbox", func(ctx context.Context) (bool, error) {
		code, body, err := routerPost(ctx, ns, name, "/execute", `{"command":"true"}`)
		if err != nil || code != http.StatusNotFound {
			return false, fmt.Errorf("%d %s %v", code, body, err)
		}
		return true, nil
	})
}

// The TTL safety net: a session whose server never calls terminate is cleaned up by the
// controller when the patched shutdownTime passes.
func TestSeed004TTLExpiry(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "seed004t")
	createTemplate(t, ns, "cognition-sandbox", false)
	cli := sdkClient(t, ns)
	sb, err := cli.Create(t.Context(), "cognition-sandbox", sdk.WithShutdownPolicy(extv1alpha1.ShutdownPolicyDelete))
	mustf(t, err, "creating sandbox")
	sandboxName := sb.SandboxName()

	soon := metav1.NewTime(time.Now().Add(3 * time.Second).Truncate(time.Second))
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"lifecycle":{"shutdownTime":%q}}}`, soon.UTC().Format(time.RFC3339)))
	claim := &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sb.Name()}}
	mustf(t, kube.Patch(t.Context(), claim, patch), "patching TTL")
	eventually(t, "claim deleted at its shutdownTime", func(ctx context.Context) (bool, error) { return gone(ctx, claim) })
	sandbox := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sandboxName}}
	eventually(t, "sandbox deleted with the claim", func(ctx context.Context) (bool, error) { return gone(ctx, sandbox) })
}
