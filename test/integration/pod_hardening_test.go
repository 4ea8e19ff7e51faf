package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// newRestrictedNamespace makes a namespace whose pods must pass Pod Security "restricted".
func newRestrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := "it-restricted-" + rand.String(6)
	restrictedNamespace(t, ns)
	return ns
}

// A template that says nothing about security makes pods the API server admits under Pod
// Security "restricted", on the installation's default runtime class.
func TestTemplatePodsPassPodSecurityRestricted(t *testing.T) {
	ns := newRestrictedNamespace(t)
	cases := []struct {
		name             string
		template         *testwrap.TemplateWrapper
		wantRuntimeClass *string
	}{
		{"a template that says nothing", testwrap.MakeTemplate(ns, "plain"), ptr.To(defaultRuntimeClass)},
		{"a template with a PVC home", testwrap.MakeTemplate(ns, "home").Volume(homeVolume(), "/home/agent"), ptr.To(defaultRuntimeClass)},
		{"a template on the node's default runtime", testwrap.MakeTemplate(ns, "noderuntime").RuntimeClass(ptr.To("")), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := tc.template.Obj()
			mustCreateObj(t, tmpl, testwrap.MakeClaim(ns, tmpl.Name).Template(tmpl.Name).WarmPool("none").Obj())
			pod := waitForPod(t, ns, tmpl.Name)
			if got := pod.Spec.RuntimeClassName; ptr.Deref(got, "<none>") != ptr.Deref(tc.wantRuntimeClass, "<none>") {
				t.Errorf("pod runtimeClassName %s, want %s", ptr.Deref(got, "<none>"), ptr.Deref(tc.wantRuntimeClass, "<none>"))
			}
			if sc := pod.Spec.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) {
				t.Errorf("pod securityContext %+v, want runAsNonRoot", sc)
			}
		})
	}
}

// A raw Sandbox keeps its pod spec as written: in a restricted namespace the API server refuses
// its unhardened pod, and the Sandbox says why.
func TestRawSandboxPodsAreNotHardened(t *testing.T) {
	ns := newRestrictedNamespace(t)
	mustCreateObj(t, testwrap.MakeSandbox(ns, "raw").Obj())
	testwrap.Eventually(t, "Ready=False/ReconcilerError naming PodSecurity", func() error {
		c := meta.FindStatusCondition(getSandbox(t, ns, "raw").Status.Conditions, agentsv1alpha1.SandboxConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != agentsv1alpha1.ReasonReconcilerError {
			return fmt.Errorf("Ready condition %+v, want False/%s", c, agentsv1alpha1.ReasonReconcilerError)
		}
		if !strings.Contains(c.Message, "PodSecurity") {
			return fmt.Errorf("message %q does not name PodSecurity", c.Message)
		}
		return nil
	})
	if err := exists(podOf(ns, "raw"), false)(); err != nil {
		t.Error(err)
	}
}

// A default runtime class the cluster lacks is a configuration error the Sandbox reports.
func TestAMissingRuntimeClassIsReported(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "kata").RuntimeClass(ptr.To("no-such-class")).Obj(),
		testwrap.MakeClaim(ns, "kata").Template("kata").WarmPool("none").Obj())
	testwrap.Eventually(t, "the Sandbox names the missing RuntimeClass", func() error {
		sb := &agentsv1alpha1.Sandbox{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kata"}, sb); err != nil {
			return err
		}
		c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
		if c == nil || !strings.Contains(c.Message, "no-such-class") {
			return errors.New("no Ready condition naming RuntimeClass no-such-class yet")
		}
		return nil
	})
}
