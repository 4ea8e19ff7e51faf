//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// The task worker reaches its workspace the way its Role allows (pods/portforward, no router)
// and reads no claim: the whole job, through the SDK's port-forward transport, against a live pod.

// sdkPortForwardAs is an SDK client of ns under that identity that tunnels to sandboxd through
// the kube-apiserver's pods/portforward.
func sdkPortForwardAs(t *testing.T, ns string, cfg *rest.Config) *sdk.Client {
	t.Helper()
	cli, err := sdk.New(sdk.Options{RESTConfig: cfg, Namespace: ns, Mode: sdk.ModePortForward})
	mustf(t, err, "sdk client")
	t.Cleanup(cli.Close)
	return cli
}

// lineTimes records when each output line arrived.
type lineTimes struct {
	mu    sync.Mutex
	buf   []byte
	lines []string
	at    []time.Time
}

func (l *lineTimes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.lines = append(l.lines, string(l.buf[:i]))
		l.at = append(l.at, time.Now())
		l.buf = l.buf[i+1:]
	}
}

func TestTaskJobThroughPortForwardUnderTheWorkerRights(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "task-pf")
	// kubectl port-forward does not reach a gVisor pod (docs/security.md): containerd dials the
	// port in the pod's network namespace, where gVisor's own network stack has no socket. A
	// template whose clients use it runs on the node's runtime.
	applyTemplate(t, templateFor(ns, "coding-agent", false).RuntimeClass(ptr.To("")))
	cli := sdkPortForwardAs(t, ns, asServiceAccount(t, ns, "task-worker", taskWorkerRole, nil))
	name := sessionClaimName(ns, "pf-1", "coding-agent")

	job(t, cli, name, "coding-agent", "none", "delete", func(ctx context.Context, sb *sdk.Sandbox) {
		for _, tc := range []struct {
			name string
			run  func(t *testing.T)
		}{
			{"a command gets its env and stdin", func(t *testing.T) {
				res, err := sb.Run(ctx, sdk.Shell(`echo "task=$TASK_ID" && tr a-z A-Z`),
					sdk.WithEnv(map[string]string{"TASK_ID": "42"}), sdk.WithStdin(strings.NewReader("from stdin\n")))
				mustf(t, err, "running through the port-forward")
				if res.ExitCode != 0 || res.Stdout != "task=42\nFROM STDIN\n" {
					t.Fatalf("result %+v, want exit 0 and stdout %q", res, "task=42\nFROM STDIN\n")
				}
			}},
			{"a nested file is written and read back", func(t *testing.T) {
				const p, content = "tasks/42/inputs/prompt.md", "# do the thing\n"
				mustf(t, sb.Files().Write(ctx, p, []byte(content), 0o644), "writing %s", p)
				got, err := sb.Files().Read(ctx, p)
				mustf(t, err, "reading %s", p)
				if string(got) != content {
					t.Fatalf("%s = %q, want %q", p, got, content)
				}
			}},
			{"a long command's output streams while it runs", func(t *testing.T) {
				out := &lineTimes{}
				res, err := sb.Run(ctx, sdk.Shell(`for i in 1 2 3 4 5; do echo $i; sleep 1; done`), sdk.WithStdout(out))
				end := time.Now()
				mustf(t, err, "running the long command")
				out.mu.Lock()
				defer out.mu.Unlock()
				if res.ExitCode != 0 || strings.Join(out.lines, ",") != "1,2,3,4,5" {
					t.Fatalf("exit %d, streamed lines %q; want 0 and 1..5", res.ExitCode, out.lines)
				}
				// Line 1 is printed ~5 s before the end: buffered output would arrive at the end.
				if early := end.Sub(out.at[0]); early < 3*time.Second {
					t.Fatalf("the first line arrived %s before the command ended; want >= 3s (not streamed)", early)
				}
				if spread := out.at[4].Sub(out.at[0]); spread < 3*time.Second {
					t.Fatalf("lines 1..5 arrived within %s; want them spread over >= 3s", spread)
				}
			}},
		} {
			t.Run(tc.name, tc.run)
		}
	})
}
