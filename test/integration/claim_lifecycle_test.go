package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestClaimEnvInjectionPolicies(t *testing.T) {
	cases := []struct {
		name       string
		policy     extv1alpha1.EnvVarsInjectionPolicy
		env        []extv1alpha1.EnvVar
		wantReason string            // Ready reason when rejected
		wantEnv    map[string]string // env of the first container when accepted
	}{
		{"disallowed rejects any env", extv1alpha1.EnvVarsInjectionPolicyDisallowed,
			[]extv1alpha1.EnvVar{{Name: "NEW", Value: "1"}}, extv1alpha1.ReasonEnvVarsInjectionRejected, nil},
		{"allowed adds a new variable", extv1alpha1.EnvVarsInjectionPolicyAllowed,
			[]extv1alpha1.EnvVar{{Name: "NEW", Value: "1"}}, "", map[string]string{"PRESET": "template", "NEW": "1"}},
		{"allowed never overrides", extv1alpha1.EnvVarsInjectionPolicyAllowed,
			[]extv1alpha1.EnvVar{{Name: "PRESET", Value: "claim"}}, extv1alpha1.ReasonEnvVarsInjectionRejected, nil},
		{"overrides replaces", extv1alpha1.EnvVarsInjectionPolicyOverrides,
			[]extv1alpha1.EnvVar{{Name: "PRESET", Value: "claim"}}, "", map[string]string{"PRESET": "claim"}},
		{"unknown container is rejected", extv1alpha1.EnvVarsInjectionPolicyOverrides,
			[]extv1alpha1.EnvVar{{Name: "X", Value: "1", ContainerName: "nope"}}, extv1alpha1.ReasonEnvVarsInjectionRejected, nil},
	}
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmplName, claimName := fmt.Sprintf("env-%d", i), fmt.Sprintf("env-claim-%d", i)
			tmpl := testwrap.MakeTemplate(ns, tmplName).Env("PRESET", "template").EnvInjection(tc.policy).Obj()
			claim := testwrap.MakeClaim(ns, claimName).Template(tmplName).EnvVars(tc.env...).Obj()
			mustCreateObj(t, tmpl, claim)
			if tc.wantReason != "" {
				testwrap.Eventually(t, "rejected", claimReadyIs(t, ns, claimName, metav1.ConditionFalse, tc.wantReason))
				if err := exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName}}, false)(); err != nil {
					t.Errorf("a rejected claim got a sandbox: %s", err)
				}
				return
			}
			testwrap.Eventually(t, "Ready", claimReadyIs(t, ns, claimName, metav1.ConditionTrue, ""))
			pod := podOf(ns, claimName)
			testwrap.Eventually(t, "pod", exists(pod, true))
			got := map[string]string{}
			for _, e := range pod.Spec.Containers[0].Env {
				got[e.Name] = e.Value
			}
			for k, v := range tc.wantEnv {
				if got[k] != v {
					t.Errorf("pod env %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func TestClaimWithAnInvalidPodLabelGetsAReason(t *testing.T) {
	ns := newNamespace(t)
	claim := testwrap.MakeClaim(ns, "bad-label").Template("tpl").PodLabel("team", "not a valid label value!").Obj()
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), claim)
	testwrap.Eventually(t, "Ready=False/InvalidMetadata", claimReadyIs(t, ns, "bad-label", metav1.ConditionFalse, extv1alpha1.ReasonInvalidMetadata))
}

func TestClaimWarmPoolPolicySelectsPools(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(),
		testwrap.MakeWarmPool(ns, "fast").Template("tpl").Replicas(1).Obj(), testwrap.MakeWarmPool(ns, "secure").Template("tpl").Replicas(1).Obj())
	testwrap.Eventually(t, "fast ready", poolReady(t, ns, "fast", 1))
	testwrap.Eventually(t, "secure ready", poolReady(t, ns, "secure", 1))

	mustCreateObj(t, testwrap.MakeClaim(ns, "fresh").Template("tpl").WarmPool("none").Obj(),
		testwrap.MakeClaim(ns, "picky").Template("tpl").WarmPool("secure").Obj())
	testwrap.Eventually(t, "fresh Ready", claimReadyIs(t, ns, "fresh", metav1.ConditionTrue, ""))
	testwrap.Eventually(t, "picky Ready", claimReadyIs(t, ns, "picky", metav1.ConditionTrue, ""))
	if got := getClaim(t, ns, "fresh").Status.SandboxStatus.Name; got != "fresh" {
		t.Errorf("warmpool none got %q, want a fresh sandbox named after the claim", got)
	}
	picked := getSandbox(t, ns, getClaim(t, ns, "picky").Status.SandboxStatus.Name)
	if picked.GenerateName != "secure-" {
		t.Errorf("warmpool secure adopted %s (generateName %q), want a member of pool secure", picked.Name, picked.GenerateName)
	}
}

func TestClaimShutdownPolicies(t *testing.T) {
	cases := []struct {
		policy    extv1alpha1.ShutdownPolicy
		wantClaim bool
	}{
		{extv1alpha1.ShutdownPolicyDelete, false},
		{extv1alpha1.ShutdownPolicyDeleteForeground, false},
		{extv1alpha1.ShutdownPolicyRetain, true},
	}
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj())
	for i, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			name := fmt.Sprintf("expiring-%d", i)
			claim := testwrap.MakeClaim(ns, name).Template("tpl").ShutdownTime(time.Now().Add(3 * time.Second)).ShutdownPolicy(tc.policy).Obj()
			mustCreateObj(t, claim)
			testwrap.Eventually(t, "Ready before expiry", claimReadyIs(t, ns, name, metav1.ConditionTrue, ""))

			sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			testwrap.Eventually(t, "sandbox deleted at shutdownTime", exists(sb, false))
			testwrap.Eventually(t, "pod deleted", exists(podOf(ns, name), false))
			testwrap.Eventually(t, "claim presence", exists(&extv1alpha1.SandboxClaim{ObjectMeta: claim.ObjectMeta}, tc.wantClaim))
			if tc.wantClaim {
				testwrap.Eventually(t, "Ready=False/ClaimExpired", claimReadyIs(t, ns, name, metav1.ConditionFalse, extv1alpha1.ReasonClaimExpired))
			}
		})
	}
}

func TestClaimRemovedTTLAfterFinishing(t *testing.T) {
	ns := newNamespace(t)
	claim := testwrap.MakeClaim(ns, "job").Template("tpl").TTLAfterFinished(1).Obj()
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), claim)
	setPodStatus(t, waitForPod(t, ns, "job"), podState{phase: corev1.PodSucceeded})
	testwrap.Eventually(t, "claim removed after it finished", exists(&extv1alpha1.SandboxClaim{ObjectMeta: claim.ObjectMeta}, false))
}

func TestDeletingAClaimLeavesNothingBehind(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	tmpl := testwrap.MakeTemplate(ns, "tpl").Volume(homeVolume(), "").Obj()
	claim := testwrap.MakeClaim(ns, "gone").Template("tpl").Obj()
	mustCreateObj(t, tmpl, claim)
	testwrap.Eventually(t, "Ready", claimReadyIs(t, ns, "gone", metav1.ConditionTrue, ""))
	if err := k8s.Delete(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	testwrap.Eventually(t, "sandbox gone", exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}, false))
	testwrap.Eventually(t, "pod gone", exists(podOf(ns, "gone"), false))
	testwrap.Eventually(t, "service gone", exists(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}, false))
	testwrap.Eventually(t, "PVC gone", exists(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-gone"}}, false))
}

func TestClaimNamingAMissingPoolStartsColdAndSaysSo(t *testing.T) {
	ns := newNamespace(t)
	startFakeKubelet(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tpl").Obj(), testwrap.MakeClaim(ns, "typo").Template("tpl").WarmPool("fast-pol").Obj())
	testwrap.Eventually(t, "Ready from a cold start", claimReadyIs(t, ns, "typo", metav1.ConditionTrue, ""))
	testwrap.Eventually(t, "WarmPoolNotFound event", func() error {
		events := &corev1.EventList{}
		if err := k8s.List(context.Background(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == extv1alpha1.ReasonWarmPoolNotFound && e.InvolvedObject.Name == "typo" {
				return nil
			}
		}
		return errors.New("no WarmPoolNotFound event on the claim")
	})
}
