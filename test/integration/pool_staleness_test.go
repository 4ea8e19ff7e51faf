package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func editTemplate(t *testing.T, tmpl *extv1alpha1.SandboxTemplate, change func(*extv1alpha1.SandboxTemplate)) {
	t.Helper()
	edit(t, tmpl.DeepCopy(), change)
}

// membersFrom checks that the pool has exactly n live members and that all were made from the
// named template.
func membersFrom(t *testing.T, ns string, n int, template string) func() error {
	return func() error {
		live := liveMembers(t, ns)
		if len(live) != n {
			return fmt.Errorf("%d members, want %d", len(live), n)
		}
		for _, sb := range sandboxesIn(t, ns) {
			if live[sb.Name] && sb.Annotations[extv1alpha1.TemplateRefAnnotation] != template {
				return fmt.Errorf("member %s made from template %q, want %q", sb.Name, sb.Annotations[extv1alpha1.TemplateRefAnnotation], template)
			}
		}
		return nil
	}
}

// The contract, Recreate: "stale pods are deleted immediately … This applies to PodTemplate spec
// changes only. Changes to annotations or labels in the template do not trigger recreate."
func TestRecreatePoolReplacesMembersOnlyWhenThePodSpecChanges(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(*extv1alpha1.SandboxTemplate)
		wantStale bool
	}{
		{"pod labels and annotations edited: members kept", func(tm *extv1alpha1.SandboxTemplate) {
			tm.Spec.PodTemplate.Metadata.Labels["team"] = "blue"
			tm.Spec.PodTemplate.Metadata.Annotations = map[string]string{"note": "edited"}
		}, false},
		{"template object's own labels edited: members kept", func(tm *extv1alpha1.SandboxTemplate) {
			tm.Labels = map[string]string{"owner": "platform"}
		}, false},
		{"container env edited: members replaced", func(tm *extv1alpha1.SandboxTemplate) {
			tm.Spec.PodTemplate.Spec.Containers[0].Env = append(tm.Spec.PodTemplate.Spec.Containers[0].Env, corev1.EnvVar{Name: "NEW", Value: "1"})
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			startFakeKubelet(t, ns)
			tmpl := testwrap.MakeTemplate(ns, "tpl").PodLabel("app", "agent").Obj()
			pool := testwrap.MakeWarmPool(ns, "pool").Template("tpl").Replicas(2).
				UpdateStrategy(extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType).Obj()
			mustCreateObj(t, tmpl, pool)
			testwrap.Eventually(t, "2 ready", poolReady(t, ns, "pool", 2))
			old := liveMembers(t, ns)

			editTemplate(t, tmpl, tc.edit)
			if tc.wantStale {
				testwrap.Eventually(t, "both members replaced", func() error {
					for name := range liveMembers(t, ns) {
						if old[name] {
							return errors.New("stale member " + name + " still in the pool")
						}
					}
					return poolReady(t, ns, "pool", 2)()
				})
				return
			}
			// The template edit alone reconciles the pool (template watch); a scale-up after it
			// proves the pool has seen the edited template.
			patchPoolReplicas(t, pool, 3)
			testwrap.Eventually(t, "3 ready", poolReady(t, ns, "pool", 3))
			testwrap.Consistently(t, "the original members stay", 2*time.Second, func() error {
				now := liveMembers(t, ns)
				for name := range old {
					if !now[name] {
						return errors.New("member " + name + " was replaced after a metadata-only edit")
					}
				}
				return nil
			})
		})
	}
}

// The contract: the update strategy governs "sandboxTemplateRef name change or underlying template
// changes". Pointing a pool at another template makes every member stale: Recreate replaces them
// at once; OnReplenish keeps them until they go, and builds their replacements from the new one.
func TestPoolWhoseTemplateRefChangesReplacesItsMembers(t *testing.T) {
	cases := []struct {
		strategy extv1alpha1.SandboxWarmPoolUpdateStrategyType
	}{
		{extv1alpha1.RecreateSandboxWarmPoolUpdateStrategyType},
		{extv1alpha1.OnReplenishSandboxWarmPoolUpdateStrategyType},
	}
	for _, tc := range cases {
		t.Run(string(tc.strategy), func(t *testing.T) {
			ns := newNamespace(t)
			startFakeKubelet(t, ns)
			pool := testwrap.MakeWarmPool(ns, "pool").Template("python").Replicas(2).UpdateStrategy(tc.strategy).Obj()
			mustCreateObj(t, testwrap.MakeTemplate(ns, "python").Obj(), testwrap.MakeTemplate(ns, "node").Obj(), pool)
			testwrap.Eventually(t, "2 members from python", membersFrom(t, ns, 2, "python"))
			testwrap.Eventually(t, "2 ready", poolReady(t, ns, "pool", 2))

			edit(t, pool.DeepCopy(), func(p *extv1alpha1.SandboxWarmPool) { p.Spec.TemplateRef.Name = "node" })
			if tc.strategy == extv1alpha1.OnReplenishSandboxWarmPoolUpdateStrategyType {
				testwrap.Consistently(t, "OnReplenish keeps the python members", 2*time.Second, membersFrom(t, ns, 2, "python"))
				for _, sb := range sandboxesIn(t, ns) {
					if err := k8s.Delete(context.Background(), &sb); err != nil {
						t.Fatal(err)
					}
				}
			}
			testwrap.Eventually(t, "2 members from node", membersFrom(t, ns, 2, "node"))
			testwrap.Eventually(t, "2 ready", poolReady(t, ns, "pool", 2))
		})
	}
}
