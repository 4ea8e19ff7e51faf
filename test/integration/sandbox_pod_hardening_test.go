package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// A raw Sandbox's pod is hardened like a template's: in a restricted namespace the API server
// admits it, on the installation's default runtime class, non-root, without capabilities or
// escalation. One that runs as root on purpose keeps root, without capabilities.
func TestRawSandboxPodsAreHardened(t *testing.T) {
	ns := newRestrictedNamespace(t)
	cases := []struct {
		name        string
		sandbox     *testwrap.SandboxWrapper
		wantNonRoot bool
	}{
		{"a raw Sandbox that says nothing", testwrap.MakeSandbox(ns, "raw"), true},
		// Pod Security "restricted" refuses root: this one runs in a namespace without it.
		{"a raw Sandbox that runs as root", testwrap.MakeSandbox(newNamespace(t), "root").PodSecurity(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := tc.sandbox.Obj()
			mustCreateObj(t, sb)
			pod := waitForPod(t, sb.Namespace, sb.Name)
			if got := ptr.Deref(pod.Spec.RuntimeClassName, "<none>"); got != defaultRuntimeClass {
				t.Errorf("pod runtimeClassName %s, want the default %s", got, defaultRuntimeClass)
			}
			sc := pod.Spec.SecurityContext
			if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v, want seccomp RuntimeDefault", sc)
			}
			if sc != nil && ptr.Deref(sc.RunAsNonRoot, false) != tc.wantNonRoot {
				t.Errorf("pod runAsNonRoot %v, want %v", sc.RunAsNonRoot, tc.wantNonRoot)
			}
			for _, c := range pod.Spec.Containers {
				csc := c.SecurityContext
				if csc == nil || ptr.Deref(csc.AllowPrivilegeEscalation, true) || csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
					t.Errorf("container %s securityContext %+v, want no escalation and drop ALL", c.Name, csc)
				}
			}
		})
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
