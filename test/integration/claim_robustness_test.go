package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// A Sandbox deleted under a live claim took its state with it; a fresh one silently put in its
// place would look like the same session but have lost its files and its lifecycle. The claim
// says what happened instead.
func TestClaimReportsItsDeletedSandboxInsteadOfReplacingIt(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj(), testwrap.MakeClaim(ns, "session").Template("tmpl").Obj())
	setPodStatus(t, waitForPod(t, ns, "session"), running("10.0.0.7"))
	testwrap.Eventually(t, "the claim is Ready", claimReadyIs(t, ns, "session", metav1.ConditionTrue, ""))

	if err := k8s.Delete(context.Background(), getSandbox(t, ns, "session")); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "the claim reports SandboxMissing", claimReadyIs(t, ns, "session", metav1.ConditionFalse, extv1alpha1.ReasonSandboxMissing))
	testwrap.Eventually(t, "the deleted Sandbox is gone", exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "session"}}, false))

	c := getClaim(t, ns, "session")
	if c.Status.SandboxStatus.Name != "session" || len(c.Status.SandboxStatus.PodIPs) != 0 {
		t.Errorf("status.sandbox = %+v, want the old name kept as a record and no pod IPs", c.Status.SandboxStatus)
	}
	// Touch the claim: a reconcile must still not make a replacement.
	edit(t, c, func(c *extv1alpha1.SandboxClaim) { c.Labels = map[string]string{"touched": "yes"} })
	testwrap.Eventually(t, "the claim still reports SandboxMissing after an update", claimReadyIs(t, ns, "session", metav1.ConditionFalse, extv1alpha1.ReasonSandboxMissing))
	if sbs := sandboxesIn(t, ns); len(sbs) != 0 {
		t.Fatalf("%d Sandboxes exist, want none: the claim replaced its deleted Sandbox", len(sbs))
	}
}

// The claim-per-conversation flow polls status.sandbox.podIPs as its readiness signal and connects at once: the IPs
// must not appear while the pod is still starting.
func TestClaimPodIPsAppearOnlyOnceTheSandboxIsReady(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj(), testwrap.MakeClaim(ns, "cold").Template("tmpl").Obj())
	pod := waitForPod(t, ns, "cold")
	setPodStatus(t, pod, podState{phase: corev1.PodRunning, ready: false, ips: []string{"10.0.0.8"}})
	testwrap.Eventually(t, "the Sandbox reports the pod IP while not Ready", func() error {
		sb := getSandbox(t, ns, "cold")
		if len(sb.Status.PodIPs) == 0 {
			return errors.New("no pod IPs on the Sandbox yet")
		}
		return nil
	})
	testwrap.Eventually(t, "the claim mirrors the not-ready state", claimReadyIs(t, ns, "cold", metav1.ConditionFalse, agentsv1alpha1.ReasonPodNotReady))
	if ips := getClaim(t, ns, "cold").Status.SandboxStatus.PodIPs; len(ips) != 0 {
		t.Fatalf("claim podIPs = %v while the Sandbox is not Ready; want none", ips)
	}
	setPodStatus(t, pod, running("10.0.0.8"))
	testwrap.Eventually(t, "the claim has its pod IPs once Ready", func() error {
		c := getClaim(t, ns, "cold")
		if fmt.Sprint(c.Status.SandboxStatus.PodIPs) != "[10.0.0.8]" {
			return fmt.Errorf("podIPs = %v", c.Status.SandboxStatus.PodIPs)
		}
		return nil
	})
}
