//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// Claim per conversation (docs/integrations.md), a Go agent platform's flow: one SandboxClaim per conversation through a plain
// controller-runtime client, adopt the claim on AlreadyExists (a restarted server reconnects),
// poll status.sandbox.podIPs as the readiness signal (2-minute default), speak its own protocol
// to podIP:port at once — podIPs must mean "serving" — and delete the claim on disconnect.
func TestClaimPerConversationIsAdoptedOnReconnectAndServesAtItsPodIP(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "conversation")
	createTemplate(t, ns, "python-sandbox-template", false)

	conv := "conv-" + rand.String(6)
	first := connectConversation(t, ns, conv)
	if first.Status.SandboxStatus.Name == "" {
		t.Fatalf("claim %s reports no sandbox name", conv)
	}
	talk(t, first.Status.SandboxStatus.PodIPs[0])

	// The server restarts and reconnects to the same conversation: Create conflicts, the claim
	// is adopted, and it points at the same sandbox.
	again := connectConversation(t, ns, conv)
	if again.UID != first.UID || again.Status.SandboxStatus.Name != first.Status.SandboxStatus.Name {
		t.Fatalf("reconnect got claim %s/%s, want the adopted %s/%s", again.UID, again.Status.SandboxStatus.Name, first.UID, first.Status.SandboxStatus.Name)
	}
	talk(t, again.Status.SandboxStatus.PodIPs[0])

	// Disconnect: the claim is deleted and takes its Sandbox and pod with it.
	mustf(t, kube.Delete(t.Context(), again), "deleting claim")
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.Status.SandboxStatus.Name}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sb.Name}}
	slow.EventuallyContext(t, "sandbox and pod gone", func(ctx context.Context) error {
		if err := gone(ctx, sb); err != nil {
			return err
		}
		return gone(ctx, pod)
	})
}

// connectConversation is the integrator's Connect: create the claim, adopt it on conflict, and
// poll until it reports a pod IP (2-minute default timeout).
func connectConversation(t *testing.T, ns, name string) *extv1alpha1.SandboxClaim {
	t.Helper()
	claim := testwrap.MakeClaim(ns, name).Template("python-sandbox-template").Label("ax/conversation", name).Obj()
	err := kube.Create(t.Context(), claim)
	if apierrors.IsAlreadyExists(err) {
		err = kube.Get(t.Context(), client.ObjectKeyFromObject(claim), claim)
	}
	mustf(t, err, "creating or adopting claim %s", name)
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return false, err
		}
		return len(claim.Status.SandboxStatus.PodIPs) > 0, nil
	})
	mustf(t, err, "waiting for status.sandbox.podIPs of %s", name)
	return claim
}

// talk speaks to the sandbox at podIP:8888 directly, as the platform's RemoteAgent does: one
// request, no retry. The claim reports podIPs only once the Sandbox is Ready (the template's
// readiness probe), so the server must already be listening.
func talk(t *testing.T, podIP string) {
	t.Helper()
	var out struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s:8888/execute", podIP), strings.NewReader(`{"command":"echo conversation-ok"}`))
	resp, err := http.DefaultClient.Do(req)
	mustf(t, err, "first request to %s:8888 right after podIPs appeared", podIP)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	mustf(t, json.Unmarshal(b, &out), "decoding %d %q", resp.StatusCode, b)
	if out.ExitCode != 0 || out.Stdout != "conversation-ok\n" {
		t.Fatalf("sandbox answered %+v, want exit 0 and stdout %q", out, "conversation-ok\n")
	}
}

// Claim per conversation: a raw Sandbox with an empty pod spec fails admission; the template must drive the
// pod spec.
func TestRawSandboxWithoutContainersFailsAdmission(t *testing.T) {
	t.Parallel()
	sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "empty-podspec"}}
	err := kube.Create(t.Context(), sb)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "containers") {
		t.Fatalf("creating a Sandbox without containers: got %v, want an Invalid error about spec.podTemplate.spec.containers", err)
	}
}
