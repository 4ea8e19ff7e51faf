package integration

import (
	"fmt"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The contract defaults automountServiceAccountToken to false only for pods made from a
// SandboxTemplate; a raw Sandbox's pod keeps what its pod spec says, unset included (Kubernetes'
// default then mounts the token), as upstream's does.
func TestPodServiceAccountTokenFollowsTheContract(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name         string
		fromTemplate bool
		set          *bool
		want         *bool
	}{
		{name: "raw sandbox, unset: stays unset (Kubernetes default)", set: nil, want: nil},
		{name: "raw sandbox, false: kept", set: ptr.To(false), want: ptr.To(false)},
		{name: "raw sandbox, true: kept", set: ptr.To(true), want: ptr.To(true)},
		{name: "template, unset: false (secure default)", fromTemplate: true, set: nil, want: ptr.To(false)},
		{name: "template, true: kept", fromTemplate: true, set: ptr.To(true), want: ptr.To(true)},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("token-%d", i)
			if tc.fromTemplate {
				mustCreateObj(t, testwrap.MakeTemplate(ns, name).AutomountServiceAccountToken(tc.set).Obj(),
					testwrap.MakeClaim(ns, name).Template(name).WarmPool("none").Obj())
			} else {
				mustCreateObj(t, testwrap.MakeSandbox(ns, name).AutomountServiceAccountToken(tc.set).Obj())
			}
			pod := waitForPod(t, ns, name)
			if got := pod.Spec.AutomountServiceAccountToken; deref(got) != deref(tc.want) {
				t.Errorf("pod automountServiceAccountToken = %s, want %s", deref(got), deref(tc.want))
			}
		})
	}
}

func deref(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}
