package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The memory-keeping pause's admission rules (config/admission/keep_memory.yaml).
const (
	keepMemoryPolicy   = "agent-sandbox-keep-memory"
	restoreImagePolicy = "agent-sandbox-restore-image"
	restoreRefusal     = "spec.podTemplate.metadata.annotations[dev.agent-sandbox.restore-image]: only the agent-sandbox " +
		"controller names a memory image to restore (update on sandboxes/ownership, agents.x-k8s.io); ask for it with " +
		"agents.x-k8s.io/pause-mode: KeepMemory"
	memoryRecordRefusal = "metadata.annotations[agents.x-k8s.io/memory-image]: the record of a Sandbox's memory image is " +
		"written only by the agent-sandbox controller (update on sandboxes/ownership, agents.x-k8s.io)"
	podRestoreRefusal = "metadata.annotations[dev.agent-sandbox.restore-image]: only the agent-sandbox controller names a " +
		"memory image to restore into a pod (update on sandboxes/ownership, agents.x-k8s.io)"
)

func pauseModeRefusal(fields ...string) string {
	return strings.Join(fields, ", ") + ": the pause mode is KeepMemory (a pause saves the sandbox's memory, on gVisor) " +
		"or Delete (the pod is deleted, the next starts cold)"
}

// A tenant asks for a pause that keeps memory with the pause-mode annotation (KeepMemory or
// Delete, nothing else), but cannot name a memory image, in a pod template or in the Sandbox's
// record: that is the controller's, which can.
func TestOnlyTheControllerNamesAMemoryImage(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	grantIdentitiesIn(t, ns)
	ids[asTemplateWriter] = actAs(t, ns, asTemplateWriter)
	mustCreateObj(t, testwrap.MakeSandbox(ns, "paused").Obj())
	image := "/var/lib/agent-sandbox/images/0e0e0e0e-1111-2222-3333-444444444444"
	// The controller's keys, each on a Sandbox of its own: the one it recorded a memory image
	// of, and the one it restores an image into.
	mustCreateObj(t, testwrap.MakeSandbox(ns, "recorded").Annotation(agentsv1alpha1.MemoryImageAnnotation, `{"node":"n1"}`).Obj())
	mustCreateObj(t, testwrap.MakeSandbox(ns, "restoring").PodAnnotation(agentsv1alpha1.RestoreImageAnnotation, image).Obj())
	annotation := func(k, v string) string { return fmt.Sprintf("metadata: {annotations: {%s: %q}}", k, v) }
	podAnnotation := func(k, v string) string {
		return fmt.Sprintf("spec: {podTemplate: {metadata: {annotations: {%s: %q}}}}", k, v)
	}
	cases := []admissionCase{
		{name: "tenant asks a Sandbox to keep its memory", as: asTenant, create: annotation(agentsv1alpha1.PauseModeAnnotation, "KeepMemory")},
		{name: "tenant asks for today's pause", as: asTenant, create: annotation(agentsv1alpha1.PauseModeAnnotation, "Delete")},
		{name: "a template writer asks its pods to keep their memory", as: asTemplateWriter, kind: "SandboxTemplate",
			create: podAnnotation(agentsv1alpha1.PauseModeAnnotation, "KeepMemory")},
		{name: "tenant misspells the mode", as: asTenant, create: annotation(agentsv1alpha1.PauseModeAnnotation, "keepmemory"),
			policy: keepMemoryPolicy, want: pauseModeRefusal("metadata.annotations[agents.x-k8s.io/pause-mode]"), invalid: true},
		{name: "a template writer misspells the mode in v1beta1", as: asTemplateWriter, kind: "SandboxTemplate", version: "v1beta1",
			create: podAnnotation(agentsv1alpha1.PauseModeAnnotation, "Forever"), policy: keepMemoryPolicy,
			want: pauseModeRefusal("spec.podTemplate.metadata.annotations[agents.x-k8s.io/pause-mode]"), invalid: true},
		{name: "tenant names an image in a Sandbox's pod template", as: asTenant, create: podAnnotation(agentsv1alpha1.RestoreImageAnnotation, image),
			policy: keepMemoryPolicy, want: restoreRefusal},
		{name: "tenant names an image in v1beta1", as: asTenant, version: "v1beta1", create: podAnnotation(agentsv1alpha1.RestoreImageAnnotation, "/etc"),
			policy: keepMemoryPolicy, want: restoreRefusal},
		{name: "a template writer names an image", as: asTemplateWriter, kind: "SandboxTemplate", create: podAnnotation(agentsv1alpha1.RestoreImageAnnotation, image),
			policy: keepMemoryPolicy, want: restoreRefusal},
		{name: "tenant adds an image to its Sandbox", as: asTenant, target: "paused",
			patch:  `{"spec":{"podTemplate":{"metadata":{"annotations":{"` + agentsv1alpha1.RestoreImageAnnotation + `":"` + image + `"}}}}}`,
			policy: keepMemoryPolicy, want: restoreRefusal},
		{name: "tenant forges the record of a memory image", as: asTenant, target: "paused",
			patch:  `{"metadata":{"annotations":{"` + agentsv1alpha1.MemoryImageAnnotation + `":"{\"node\":\"other\"}"}}}`,
			policy: keepMemoryPolicy, want: memoryRecordRefusal},
		{name: "tenant drops the record of a memory image", as: asTenant, target: "recorded",
			patch:  `{"metadata":{"annotations":{"` + agentsv1alpha1.MemoryImageAnnotation + `":null}}}`,
			policy: keepMemoryPolicy, want: memoryRecordRefusal},
		{name: "tenant drops the image from a pod template", as: asTenant, target: "restoring",
			patch:  `{"spec":{"podTemplate":{"metadata":{"annotations":{"` + agentsv1alpha1.RestoreImageAnnotation + `":null}}}}}`,
			policy: keepMemoryPolicy, want: restoreRefusal},
		{name: "controller drops a restored image", as: asController, target: "restoring",
			patch: `{"spec":{"podTemplate":{"metadata":{"annotations":{"` + agentsv1alpha1.RestoreImageAnnotation + `":null}}}}}`},
		{name: "controller names an image in a pod template", as: asController, create: podAnnotation(agentsv1alpha1.RestoreImageAnnotation, image)},
		{name: "controller records a memory image", as: asController, target: "paused",
			patch: `{"metadata":{"annotations":{"` + agentsv1alpha1.MemoryImageAnnotation + `":"{\"node\":\"n1\"}"}}}`},
	}
	runAdmissionCases(t, ns, ids, cases)
}

// A pod that names a memory image is refused to anyone but the controller, even to a tenant
// allowed to create pods (a pod it made would restore whatever image it named), and a pod
// without one is not judged at all.
func TestAPodNamingAMemoryImageNeedsTheController(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	mustCreateObj(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "update", "patch"},
	}}})
	bindRoles(t, ns, "pod-maker", "ClusterRole/agent-sandbox-user", "Role/pods")
	podMaker := actAs(t, ns, "pod-maker")
	pod := func(name, image string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "runtime:1"}}},
		}
		if image != "" {
			p.Annotations = map[string]string{agentsv1alpha1.RestoreImageAnnotation: image}
		}
		return p
	}
	testwrap.Eventually(t, "the pod maker may create pods", func() error {
		return podMaker.Create(context.Background(), pod("plain", ""), client.DryRunAll)
	})
	image := "/var/lib/agent-sandbox/images/0e0e0e0e-1111-2222-3333-444444444444"
	for _, tc := range []struct {
		name    string
		as      client.Client
		image   string
		refused bool
	}{
		{name: "a tenant's pod without an image", as: podMaker},
		{name: "a tenant's pod naming an image", as: podMaker, image: image, refused: true},
		{name: "a tenant's pod naming any file", as: podMaker, image: "/etc/shadow", refused: true},
		{name: "the controller's pod naming an image", as: ids[asController], image: image},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.as.Create(context.Background(), pod("p", tc.image), client.DryRunAll)
			want := fmt.Sprintf("pods %q is forbidden: ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s",
				"p", restoreImagePolicy, restoreImagePolicy, podRestoreRefusal)
			switch {
			case tc.refused && (err == nil || err.Error() != want):
				t.Fatalf("got %v; want %q", err, want)
			case !tc.refused && err != nil:
				t.Fatalf("got %v; want it allowed", err)
			}
		})
	}
	// A pod the controller made with an image: a tenant allowed to patch pods cannot repoint it.
	made := pod("restoring", image)
	if err := ids[asController].Create(context.Background(), made); err != nil {
		t.Fatalf("the controller creating a restoring pod: %v", err)
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+agentsv1alpha1.RestoreImageAnnotation+`":"/etc"}}}`))
	if err := podMaker.Patch(context.Background(), made, patch, client.DryRunAll); err == nil || !strings.Contains(err.Error(), podRestoreRefusal) {
		t.Errorf("a tenant repointing a restoring pod's image: %v; want refused with %q", err, podRestoreRefusal)
	}
	if err := podMaker.Patch(context.Background(), made, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`)), client.DryRunAll); err != nil {
		t.Errorf("a tenant labelling a restoring pod (its image untouched): %v; want it allowed", err)
	}
}

func forkRefusal(parent string) string {
	return "metadata.annotations[agents.x-k8s.io/fork-of]: forking " + parent + " copies its memory, and needs the right to " +
		"run code in it (create on sandboxes/proxy, agents.x-k8s.io, of " + parent + ")"
}

const (
	forkNameRefusal  = "metadata.annotations[agents.x-k8s.io/fork-of]: the name of another Sandbox of this namespace"
	forkLaterRefusal = "metadata.annotations[agents.x-k8s.io/fork-of]: a fork's parent is named only when the Sandbox is created"
)

// A fork copies its parent's memory (whatever secrets its processes hold), so its author must
// hold the right to run code in that parent: create on its sandboxes/proxy. A tenant allowed
// to create Sandboxes but to reach only its own cannot fork another's; it names a parent only
// at creation, and only by a Sandbox name.
func TestAForkNeedsTheRightToRunCodeInItsParent(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	const reachesMine = "reaches-mine"
	mustCreateObj(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sandboxes-reach-mine"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"create", "get", "list", "watch", "patch", "update"}},
		{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxclaims"}, Verbs: []string{"create", "get", "patch", "update"}},
		{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes/proxy"}, Verbs: []string{"create"}, ResourceNames: []string{"mine"}},
	}})
	bindRoles(t, ns, reachesMine, "Role/sandboxes-reach-mine")
	waitForRight(t, ns, reachesMine, "create", "proxy", "mine")
	ids[reachesMine] = actAs(t, ns, reachesMine)
	mustCreateObj(t, testwrap.MakeSandbox(ns, "mine").Obj())
	mustCreateObj(t, testwrap.MakeSandbox(ns, "theirs").Obj())
	mustCreateObj(t, testwrap.MakeSandbox(ns, "a-fork").Annotation(agentsv1alpha1.ForkOfAnnotation, "theirs").Obj())
	forkOf := func(parent string) string {
		return fmt.Sprintf("metadata: {annotations: {%s: %q}}", agentsv1alpha1.ForkOfAnnotation, parent)
	}
	cases := []admissionCase{
		{name: "a tenant forks a Sandbox it may run code in", as: asTenant, create: forkOf("theirs")},
		{name: "a tenant who reaches only its own forks its own", as: reachesMine, create: forkOf("mine")},
		{name: "a tenant who reaches only its own forks another's", as: reachesMine, create: forkOf("theirs"),
			policy: keepMemoryPolicy, want: forkRefusal("theirs")},
		{name: "the same in v1beta1", as: reachesMine, version: "v1beta1", create: forkOf("theirs"),
			policy: keepMemoryPolicy, want: forkRefusal("theirs")},
		{name: "a parent named by a path", as: asTenant, create: forkOf("../other-namespace/theirs"),
			policy: keepMemoryPolicy, want: forkNameRefusal, invalid: true},
		{name: "a Sandbox forking itself", as: asTenant, createName: "self", create: forkOf("self"),
			policy: keepMemoryPolicy, want: forkNameRefusal, invalid: true},
		{name: "a tenant names a parent after the creation", as: asTenant, target: "mine",
			patch:  `{"metadata":{"annotations":{"` + agentsv1alpha1.ForkOfAnnotation + `":"theirs"}}}`,
			policy: keepMemoryPolicy, want: forkLaterRefusal, invalid: true},
		{name: "a tenant unnames a fork's parent", as: asTenant, target: "a-fork",
			patch:  `{"metadata":{"annotations":{"` + agentsv1alpha1.ForkOfAnnotation + `":null}}}`,
			policy: keepMemoryPolicy, want: forkLaterRefusal, invalid: true},
	}
	runAdmissionCases(t, ns, ids, cases)

	// A claim forks too (E2B's fork): the same right, named only at creation.
	claim := func(parent string) *extv1alpha1.SandboxClaim {
		c := testwrap.MakeClaim(ns, "fork-claim").Template("python").Obj()
		c.Annotations = map[string]string{agentsv1alpha1.ForkOfAnnotation: parent}
		return c
	}
	mustCreateObj(t, testwrap.MakeClaim(ns, "plain-claim").Template("python").Obj())
	runForkAttempts(t, []forkAttempt{
		{"a claim forking a Sandbox its author may run code in", func() error {
			return ids[reachesMine].Create(t.Context(), claim("mine"), client.DryRunAll)
		}, ""},
		{"a claim forking a Sandbox its author may not run code in", func() error {
			return ids[reachesMine].Create(t.Context(), claim("theirs"), client.DryRunAll)
		}, forkRefusal("theirs")},
		{"a claim given a parent after its creation", func() error {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+agentsv1alpha1.ForkOfAnnotation+`":"mine"}}}`))
			return ids[reachesMine].Patch(t.Context(), testwrap.MakeClaim(ns, "plain-claim").Obj(), patch, client.DryRunAll)
		}, forkLaterRefusal},
	})
}

// A snapshot pool (agents.x-k8s.io/fork-of on a SandboxWarmPool) makes every member a fork of
// the Sandbox it names, so its writer needs the right to run code in that Sandbox, when the pool
// is written and whenever it is pointed elsewhere. The controller, which creates the members,
// is not asked again.
func TestASnapshotPoolNeedsTheRightToRunCodeInItsPreparedSandbox(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	const poolWriter = "pool-writer"
	mustCreateObj(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "writes-pools-reaches-mine"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxwarmpools"}, Verbs: []string{"create", "get", "update", "patch"}},
		{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes/proxy"}, Verbs: []string{"create"}, ResourceNames: []string{"mine"}},
	}})
	bindRoles(t, ns, poolWriter, "Role/writes-pools-reaches-mine")
	waitForRight(t, ns, poolWriter, "create", "proxy", "mine")
	writer := actAs(t, ns, poolWriter)
	pool := func(name, source string) *extv1alpha1.SandboxWarmPool {
		p := testwrap.MakeWarmPool(ns, name).Template("python").Replicas(1).Obj()
		if source != "" {
			p.Annotations = map[string]string{agentsv1alpha1.ForkOfAnnotation: source}
		}
		return p
	}
	mustCreateObj(t, pool("plain", ""))
	repoint := func(source string) client.Patch {
		return client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+agentsv1alpha1.ForkOfAnnotation+`":"`+source+`"}}}`))
	}
	runForkAttempts(t, []forkAttempt{
		{"a writer makes a pool of forks of a Sandbox it may run code in", func() error {
			return writer.Create(t.Context(), pool("of-mine", "mine"), client.DryRunAll)
		}, ""},
		{"a writer makes a pool of forks of a Sandbox it may not run code in", func() error {
			return writer.Create(t.Context(), pool("of-theirs", "theirs"), client.DryRunAll)
		}, forkRefusal("theirs")},
		{"a writer points a pool at a Sandbox it may not run code in", func() error {
			return writer.Patch(t.Context(), pool("plain", ""), repoint("theirs"), client.DryRunAll)
		}, forkRefusal("theirs")},
		{"a writer points a pool at its own Sandbox", func() error {
			return writer.Patch(t.Context(), pool("plain", ""), repoint("mine"), client.DryRunAll)
		}, ""},
		{"the controller makes a snapshot pool's member", func() error {
			member := testwrap.MakeSandbox(ns, "plain-x1").Annotation(agentsv1alpha1.ForkOfAnnotation, "theirs").Obj()
			return ids[asController].Create(t.Context(), member, client.DryRunAll)
		}, ""},
	})
}

// forkAttempt is one write that names a parent to fork, and the refusal it must get ("" when
// allowed).
type forkAttempt struct {
	name string
	do   func() error
	want string
}

func runForkAttempts(t *testing.T, attempts []forkAttempt) {
	t.Helper()
	for _, tc := range attempts {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v; want it allowed", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v; want refused by %s with %q", err, keepMemoryPolicy, tc.want)
			}
		})
	}
}
