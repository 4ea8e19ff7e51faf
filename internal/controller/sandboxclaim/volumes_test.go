package sandboxclaim

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestClaimVolumes(t *testing.T) {
	vol := func(name, size string) agentsv1beta1.PersistentVolumeClaimTemplate {
		return testwrap.MakeVolumeClaim(name, size).ObjV1beta1()
	}
	cases := []struct {
		name       string
		policy     extv1beta1.VolumeClaimTemplatesPolicy
		claim      []agentsv1beta1.PersistentVolumeClaimTemplate
		wantOrder  []string // name=storage of the Sandbox's volume claim templates, in order
		wantReject string
	}{
		{"a claim without volumes keeps the template's (nil)", extv1beta1.VolumeClaimTemplatesPolicyOverrides, nil, nil, ""},
		{"Disallowed (the default) rejects the claim's", "", []agentsv1beta1.PersistentVolumeClaimTemplate{vol("scratch", "2Gi")},
			nil, `SandboxTemplate "tpl" does not allow it`},
		{"Allowed adds a new volume after the template's", extv1beta1.VolumeClaimTemplatesPolicyAllowed,
			[]agentsv1beta1.PersistentVolumeClaimTemplate{vol("scratch", "2Gi")}, []string{"home=1Gi", "scratch=2Gi"}, ""},
		{"Allowed refuses to replace the template's", extv1beta1.VolumeClaimTemplatesPolicyAllowed,
			[]agentsv1beta1.PersistentVolumeClaimTemplate{vol("home", "5Gi")}, nil, `volume claim template "home" is defined by SandboxTemplate "tpl"`},
		{"Overrides replaces the template's in place", extv1beta1.VolumeClaimTemplatesPolicyOverrides,
			[]agentsv1beta1.PersistentVolumeClaimTemplate{vol("home", "5Gi"), vol("scratch", "2Gi")}, []string{"home=5Gi", "scratch=2Gi"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := testwrap.MakeTemplateV1beta1("ns", "tpl").VolumeClaimTemplatesPolicy(tc.policy).
				VolumeClaimTemplates(vol("home", "1Gi")).Obj()
			claim := testwrap.MakeClaimV1beta1("ns", "c").WarmPool("pool").VolumeClaimTemplates(tc.claim...).Obj()
			before := tmpl.DeepCopy()
			got, err := claimVolumes(claim, tmpl)
			if tc.wantReject != "" {
				var ue *userError
				if !errors.As(err, &ue) || ue.reason != extv1beta1.ReasonVolumeClaimTemplatesError || !strings.Contains(ue.message, tc.wantReject) {
					t.Fatalf("err = %v, want a %s user error containing %q", err, extv1beta1.ReasonVolumeClaimTemplatesError, tc.wantReject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, v := range got {
				q := v.Spec.Resources.Requests[corev1.ResourceStorage]
				order = append(order, v.Name+"="+q.String())
			}
			if d := cmp.Diff(tc.wantOrder, order); d != "" {
				t.Errorf("the Sandbox's volume claim templates (-want +got):\n%s", d)
			}
			if d := cmp.Diff(before, tmpl); d != "" {
				t.Errorf("claimVolumes changed the template (-before +after):\n%s", d)
			}
		})
	}
}
