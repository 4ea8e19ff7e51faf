package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// onlyMember waits for the pool to have exactly one member and returns its name.
func onlyMember(t *testing.T, ns string) string {
	t.Helper()
	var name string
	testwrap.Eventually(t, "the pool has one member", func() error {
		sbs := sandboxesIn(t, ns)
		if len(sbs) != 1 || !sbs[0].DeletionTimestamp.IsZero() {
			return fmt.Errorf("%d members", len(sbs))
		}
		name = sbs[0].Name
		return nil
	})
	return name
}

func poolConditionIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		p := &extv1alpha1.SandboxWarmPool{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, extv1alpha1.PoolConditionReady)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("Ready condition %+v, want %s/%s", c, status, reason)
		}
		if p.Status.ObservedGeneration != p.Generation || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("observedGeneration %d (condition %d), want %d", p.Status.ObservedGeneration, c.ObservedGeneration, p.Generation)
		}
		return nil
	}
}

// A member whose pod never becomes Ready (a crash loop, an image that cannot be pulled) would
// hold a pool slot for good; after the timeout it is replaced and the pool's owner is told.
func TestPoolReplacesAMemberThatNeverBecomesReady(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tmpl").Replicas(1).
		Annotation(extv1alpha1.MemberReadyTimeoutAnnotation, "2s").Obj()) // the controller's default is minutes
	stuck := onlyMember(t, ns)
	setPodStatus(t, waitForPod(t, ns, stuck), podState{phase: corev1.PodRunning, ready: false, ips: []string{"10.0.0.9"}})

	testwrap.Eventually(t, "the stuck member is replaced by a new one", func() error {
		sbs := sandboxesIn(t, ns)
		for _, sb := range sbs {
			if sb.Name == stuck && sb.DeletionTimestamp.IsZero() {
				return errors.New("the stuck member is still there")
			}
		}
		if len(sbs) == 0 {
			return errors.New("no replacement yet")
		}
		return nil
	})
	testwrap.Eventually(t, "a MemberNotReady warning names it", warningNames(ns, "SandboxWarmPool", "pool", extv1alpha1.EventMemberNotReady, stuck, "PodNotReady"))
}

// An unschedulable member would be unschedulable again if replaced: it is kept and reported.
func TestPoolReportsUnschedulableMembersInsteadOfChurningThem(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tmpl").Replicas(1).
		Annotation(extv1alpha1.MemberReadyTimeoutAnnotation, "1s").Obj())
	member := onlyMember(t, ns)
	setPodStatus(t, waitForPod(t, ns, member), podState{phase: corev1.PodPending, unschedulable: true})

	testwrap.Eventually(t, "the pool says its members cannot be scheduled", poolConditionIs(t, ns, "pool", metav1.ConditionFalse, extv1alpha1.ReasonMembersUnschedulable))
	testwrap.Eventually(t, "a MembersUnschedulable warning", warningNames(ns, "SandboxWarmPool", "pool", extv1alpha1.ReasonMembersUnschedulable, "cannot be scheduled"))
	time.Sleep(3 * time.Second) // three timeouts: a churning pool would have replaced it by now
	if got := onlyMember(t, ns); got != member {
		t.Fatalf("member %s was replaced by %s; unschedulable members must be kept", member, got)
	}
}

func TestPoolStatusCarriesConditionsAndObservedGeneration(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj(), testwrap.MakeWarmPool(ns, "pool").Template("tmpl").Replicas(1).Obj())
	testwrap.Eventually(t, "Filling while the member starts", poolConditionIs(t, ns, "pool", metav1.ConditionFalse, extv1alpha1.ReasonPoolFilling))
	setPodStatus(t, waitForPod(t, ns, onlyMember(t, ns)), running("10.0.0.10"))
	testwrap.Eventually(t, "Ready once full", poolConditionIs(t, ns, "pool", metav1.ConditionTrue, extv1alpha1.ReasonPoolReady))

	pool := &extv1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}}
	edit(t, pool, func(p *extv1alpha1.SandboxWarmPool) { p.Spec.Replicas = 2 })
	testwrap.Eventually(t, "Filling again at the new generation", poolConditionIs(t, ns, "pool", metav1.ConditionFalse, extv1alpha1.ReasonPoolFilling))
}
