package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// One claim per conversation, reattached after a restart (the claim-per-conversation flow).
func ExampleClient_GetOrCreate() {
	ctx := context.Background()
	c, err := sdk.New(sdk.Options{Namespace: "agent-platform"})
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.GetOrCreate(ctx, "conv-1234", "python-sandbox-template")
	if errors.Is(err, sdk.ErrTimeout) {
		log.Fatalf("not ready: %v", err) // names the last Ready reason
	}
	if err != nil {
		log.Fatal(err)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort(sb.PodIP(), "8494"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	defer func() { _ = c.Delete(ctx, "conv-1234") }()
}

// Run with argv, env, cwd, stdin and streamed output (the task-workspaces flow).
func ExampleSandbox_Run() {
	ctx := context.Background()
	c, _ := sdk.New(sdk.Options{})
	sb, err := c.Create(ctx, "coding-agent", sdk.WithWarmPool("default"), sdk.WithTTL(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = sb.Delete(ctx) }()
	_ = sb.Files().Write(ctx, "tasks/42/prompt.md", []byte("fix the bug"), 0o644)
	res, err := sb.Run(ctx, sdk.Argv("agent-cli", "--task", "tasks/42/prompt.md"),
		sdk.WithCwd("repo"),
		sdk.WithEnv(map[string]string{"TASK": "42"}),
		sdk.WithStdin(bytes.NewReader([]byte(`{"ctx":1}`))),
		sdk.WithStdout(os.Stdout), sdk.WithStderr(os.Stderr),
		sdk.WithTimeout(30*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	if err := res.Err(); err != nil {
		log.Fatal(err)
	}
}

// Startup validation, lazy creation, labels, TTL refresh and shell
// commands (the lazy-agent-sessions flow).
func ExampleClient_CheckCluster() {
	ctx := context.Background()
	c, _ := sdk.New(sdk.Options{RouterURL: "http://sandbox-router-svc.default.svc:8080"})
	if err := c.CheckCluster(ctx, sdk.RequireTemplate("cognition-sandbox")); err != nil {
		log.Fatal(err)
	}
	sb, err := c.GetOrCreate(ctx, "cog-session-1", "cognition-sandbox",
		sdk.WithLabels(map[string]string{"cognition.io/session": "session-1"}),
		sdk.WithTTL(time.Hour), sdk.WithShutdownPolicy(extv1alpha1.ShutdownPolicyDelete))
	if err != nil {
		log.Fatal(err)
	}
	_ = sb.KeepAlive(ctx, time.Hour)
	res, err := sb.Run(ctx, sdk.Shell("cat <<'EOF' > notes.md\nhello\nEOF\nwc -c notes.md"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
}

// A persistent raw Sandbox per workspace, paused when idle (the harness-runs-and-workspaces flow).
func ExampleClient_GetOrCreateSandbox() {
	ctx := context.Background()
	c, _ := sdk.New(sdk.Options{Mode: sdk.ModeExec}) // the image has no sandboxd
	spec := &agentsv1alpha1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "ws-alice"},
		Spec: agentsv1alpha1.SandboxSpec{PodTemplate: agentsv1alpha1.PodTemplate{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "runtime", Image: "node:22", Command: []string{"sleep", "infinity"}}},
		}}},
	}
	sb, err := c.GetOrCreateSandbox(ctx, spec, sdk.WithTTL(24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sb.Run(ctx, sdk.Shell("npm test"), sdk.WithStdout(os.Stdout), sdk.WithStderr(os.Stderr)); err != nil {
		log.Fatal(err)
	}
	_ = sb.Pause(ctx)
	_ = sb.Resume(ctx)
	_ = sb.KeepAlive(ctx, 24*time.Hour)
}
