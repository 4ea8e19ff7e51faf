//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// A claim's env on a template whose container runs sandboxd is served from the warm pool: every
// way the SDK starts a command sees the claim's variables, under the command's own; the next
// claim from the same pool sees only its own.
func TestAWarmClaimsEnvReachesItsCommandsAndNoOtherClaims(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "warmenv")
	tmpl := testwrap.MakeTemplate(ns, "runtime").Containers(runtimeContainer()).TerminationGracePeriod(5).
		EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed).
		Annotation(extv1alpha1.SandboxdContainerAnnotation, runtimeContainer().Name).Obj()
	mustf(t, kube.Create(t.Context(), tmpl), "creating template")
	createPool(t, ns, "pool", "runtime", 2)
	cli := sdkClient(t, ns)

	first, err := cli.Create(t.Context(), "runtime", sdk.WithWarmPool("pool"),
		sdk.WithEnv(map[string]string{"SESSION_KEY": "k-first", "USER_ID": "1", "NOTE": "two\nlines"}))
	mustf(t, err, "claiming the first sandbox")
	second, err := cli.Create(t.Context(), "runtime", sdk.WithWarmPool("pool"), sdk.WithEnv(map[string]string{"USER_ID": "2"}))
	mustf(t, err, "claiming the second sandbox")
	for _, sb := range []*sdk.Sandbox{first, second} {
		if sb.SandboxName() == sb.Name() {
			t.Fatalf("claim %s got Sandbox %s, made for it: a cold start; want a pool member", sb.Name(), sb.SandboxName())
		}
	}

	const probe = `printf '%s|%s|%s' "${SESSION_KEY-unset}" "$USER_ID" "$NOTE"`
	tests := []struct {
		name   string
		sb     *sdk.Sandbox
		env    map[string]string // the command's own
		stream string            // "", "ndjson" or "websocket"
		want   string
	}{
		{"buffered, the first claim's", first, nil, "", "k-first|1|two\nlines"},
		{"buffered, the second claim's: nothing of the first's", second, nil, "", "unset|2|"},
		{"the command's own env wins", first, map[string]string{"USER_ID": "override"}, "", "k-first|override|two\nlines"},
		{"streamed (NDJSON)", first, nil, "ndjson", "k-first|1|two\nlines"},
		{"WebSocket exec", first, nil, "websocket", "k-first|1|two\nlines"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := []sdk.RunOption{sdk.WithEnv(tc.env)}
			out := &testwrap.SyncBuffer{}
			switch tc.stream {
			case "ndjson":
				opts = append(opts, sdk.WithStdout(out))
			case "websocket":
				// Stdin from a pipe (not in memory) makes the SDK use the WebSocket exec.
				opts = append(opts, sdk.WithStdout(out), sdk.WithStdin(closedPipe()))
			}
			res, err := tc.sb.Run(t.Context(), sdk.Shell(probe), opts...)
			mustf(t, err, "running the probe")
			got := res.Stdout
			if tc.stream != "" {
				got = out.String()
			}
			if got != tc.want {
				t.Fatalf("SESSION_KEY|USER_ID|NOTE = %q; want %q", got, tc.want)
			}
		})
	}
	// A tenant of the namespace (the agent server's right: patch sandboxes) forges the header that
	// carries a claim's env: the router replaces it with the claim's own, or drops it.
	tenant := asServiceAccount(t, ns, "tenant", []rbacv1.PolicyRule{{APIGroups: []string{"agents.x-k8s.io"},
		Resources: []string{"sandboxes"}, Verbs: []string{"get", "patch"}}}, nil)
	forged, err := wire.EncodeSessionEnv(map[string]string{"SESSION_KEY": "forged", "USER_ID": "forged"})
	mustf(t, err, "encoding the forged env")
	for _, tc := range []struct {
		name string
		sb   *sdk.Sandbox
		want string
	}{
		{"the forged header on a warm claim's sandbox: its own env wins", first, "k-first|1|two\nlines"},
		{"the forged header on another claim's sandbox: dropped", second, "unset|2|"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]string{"command": probe})
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, cluster.RouterURL+"/execute", bytes.NewReader(body))
			mustf(t, err, "building the request")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Sandbox-ID", tc.sb.SandboxName())
			req.Header.Set("X-Sandbox-Namespace", ns)
			req.Header.Set("Authorization", "Bearer "+tenant.BearerToken)
			req.Header.Set(wire.HeaderSessionEnv, forged)
			resp, err := http.DefaultClient.Do(req)
			mustf(t, err, "sending the forged header as a tenant")
			defer resp.Body.Close()
			var out struct{ Stdout string }
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Stdout != tc.want {
				t.Fatalf("answer %d %q (%v); want 200 with SESSION_KEY|USER_ID|NOTE = %q", resp.StatusCode, out.Stdout, err, tc.want)
			}
		})
	}

	t.Run("a background process", func(t *testing.T) {
		_, err := first.Start(t.Context(), sdk.Shell(probe+" > bg.out.tmp && mv bg.out.tmp bg.out"))
		mustf(t, err, "starting the probe in the background")
		slow.EventuallyContext(t, "the background probe's output", func(ctx context.Context) error {
			res, err := first.Run(ctx, sdk.Shell("cat bg.out"))
			if err != nil || res.ExitCode != 0 {
				return fmt.Errorf("cat bg.out: %v %+v", err, res)
			}
			if want := "k-first|1|two\nlines"; res.Stdout != want {
				t.Fatalf("SESSION_KEY|USER_ID|NOTE = %q; want %q", res.Stdout, want)
			}
			return nil
		})
	})
}

// closedPipe is stdin that is a pipe, already at its end.
func closedPipe() io.Reader {
	r, w := io.Pipe()
	_ = w.Close()
	return r
}
