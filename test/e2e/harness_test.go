//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// Harness runs and workspaces (docs/integrations.md), a TypeScript agent harness's flow: raw Sandboxes running `sleep infinity`, commands through the
// Kubernetes exec API with streamed output, persistent sandboxes paused and resumed by scaling
// replicas with the home on a PVC, shutdownTime refreshed, and egress modes as per-Sandbox
// NetworkPolicies.

const harnessLabel = "broods.dev/sandbox"

// harnessSandbox is the executor's Sandbox: the runtime image kept alive by `sleep infinity`,
// its pod labelled with the harness's own label.
func harnessSandbox(ns, name string, env map[string]string) *testwrap.SandboxWrapper {
	sb := testwrap.MakeSandbox(ns, name).Containers(corev1.Container{
		Name: "runtime", Image: runtimeContainer().Image, ImagePullPolicy: corev1.PullNever,
		Command: []string{"sleep", "infinity"},
		// The harness's own image runs as root (it writes /mnt/workspaces); ours runs as uid
		// 1000 unless the pod says otherwise, and a raw Sandbox is taken as written.
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)},
	}).PodLabel(harnessLabel, name).TerminationGracePeriod(1)
	for k, v := range env {
		sb.Env(k, v)
	}
	return sb
}

// waitPodReady waits for the Sandbox's pod to be Ready, as the executor does, and returns it.
func waitPodReady(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	slow.EventuallyContext(t, "pod of "+name+" ready", func(ctx context.Context) error {
		p, err := podOf(ctx, ns, name)
		if err != nil {
			return err
		}
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s is being deleted", name)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("pod %s not Ready: %+v", name, p.Status.Conditions)
	})
	return pod
}

// The harness's ephemeral mode: a raw Sandbox per run, commands through the kube exec API with
// stdout and stderr streamed apart, deleted after the run.
func TestRawSandboxPerRunExecsWithSeparateStreamsAndIsDeleted(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "harness")
	name := "fp-" + ns + "-" + rand.String(5)
	sb := harnessSandbox(ns, name, map[string]string{"EXTRA_VAR": "from-config"}).Obj()
	mustf(t, kube.Create(t.Context(), sb), "creating sandbox")
	pod := waitPodReady(t, ns, name)

	var stdout, stderr bytes.Buffer
	script := `mkdir -p /mnt/workspaces/ns && cd /mnt/workspaces/ns && echo "out:$EXTRA_VAR" && echo err-line >&2 && pwd`
	mustf(t, kubeExec(t.Context(), ns, pod.Name, "runtime", []string{"sh", "-c", script}, &stdout, &stderr), "exec")
	if got := stdout.String(); got != "out:from-config\n/mnt/workspaces/ns\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := stderr.String(); got != "err-line\n" {
		t.Errorf("stderr = %q", got)
	}
	// The harness runs bash-style scripts and python3 files natively.
	stdout.Reset()
	stderr.Reset()
	py := `printf 'import sys\nprint(sum(range(10)), file=sys.stderr)\nprint("py ok")\n' > /tmp/run.py && python3 /tmp/run.py`
	mustf(t, kubeExec(t.Context(), ns, pod.Name, "runtime", []string{"sh", "-c", py}, &stdout, &stderr), "exec python3")
	if stdout.String() != "py ok\n" || stderr.String() != "45\n" {
		t.Errorf("python3: stdout %q stderr %q", stdout.String(), stderr.String())
	}
	// A failing command surfaces its exit status through the exec API.
	err := kubeExec(t.Context(), ns, pod.Name, "runtime", []string{"sh", "-c", "exit 3"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("exit 3: got %v", err)
	}

	mustf(t, kube.Delete(t.Context(), sb), "deleting sandbox")
	slow.EventuallyContext(t, "pod gone", func(ctx context.Context) error { return gone(ctx, pod) })
}

// The harness's persistent mode: one deterministic Sandbox per workspace, paused and resumed by
// scaling replicas 0↔1 with the home on a PVC, its shutdownTime refreshed on use.
func TestWorkspaceSandboxKeepsItsHomeAcrossPauseResumeAndTakesShutdownTimeRefreshes(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "harness-ws")
	sum := sha256.Sum256([]byte(ns + "/workspace-a"))
	name := "fp-p-workspace-a-" + hex.EncodeToString(sum[:])[:8] // deterministic per workspace
	sb := harnessSandbox(ns, name, map[string]string{"HOME": "/home/node"}).Volume(localVolume("home", "1Gi"), "/home/node").
		ShutdownTime(time.Now().Add(time.Hour).Truncate(time.Second)).Obj()
	mustf(t, kube.Create(t.Context(), sb), "creating persistent sandbox")
	pod := waitPodReady(t, ns, name)
	execOut(t, ns, pod.Name, `echo "venv cache" > "$HOME/state.txt"`)

	for i, replicas := range []int32{0, 1, 0, 1} {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
		mustf(t, kube.Patch(t.Context(), sb, patch), "scaling to %d", replicas)
		if replicas == 0 {
			slow.EventuallyContext(t, "pod deleted on pause", func(ctx context.Context) error { return gone(ctx, pod) })
			continue
		}
		pod = waitPodReady(t, ns, name)
		if out, _ := execOut(t, ns, pod.Name, `cat "$HOME/state.txt"`); out != "venv cache\n" {
			t.Fatalf("resume %d: home file = %q, want it kept on the PVC", i, out)
		}
	}

	// The harness refreshes shutdownTime on every use, so an idle reaper only deletes sandboxes
	// whose time has passed.
	for _, d := range []time.Duration{2 * time.Hour, 3 * time.Hour} {
		at := metav1.NewTime(time.Now().Add(d).Truncate(time.Second))
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"shutdownTime":%q}}`, at.UTC().Format(time.RFC3339)))
		mustf(t, kube.Patch(t.Context(), sb, patch), "refreshing shutdownTime")
		mustf(t, kube.Get(t.Context(), client.ObjectKeyFromObject(sb), sb), "reading sandbox")
		if sb.Spec.ShutdownTime == nil || !sb.Spec.ShutdownTime.Equal(&at) {
			t.Fatalf("shutdownTime = %v, want %v", sb.Spec.ShutdownTime, at)
		}
	}
	var all agentsv1alpha1.SandboxList
	mustf(t, kube.List(t.Context(), &all, client.InNamespace(ns)), "listing for the reaper")
	for _, s := range all.Items {
		if s.Spec.ShutdownTime != nil && s.Spec.ShutdownTime.Time.Before(time.Now()) {
			t.Errorf("reaper would delete %s, whose shutdownTime was refreshed", s.Name)
		}
	}
	if !sandboxReady(sb) {
		slow.EventuallyContext(t, "sandbox ready after refresh", func(ctx context.Context) error {
			if err := kube.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
				return err
			}
			if !sandboxReady(sb) {
				return fmt.Errorf("sandbox status %+v", sb.Status)
			}
			return nil
		})
	}
}

// egressPolicy renders the harness's per-Sandbox NetworkPolicy for a network mode; nil for
// allow-all, which removes the policy.
func egressPolicy(ns, sandbox, mode string, cidrs []string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sandbox + "-egress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{harnessLabel: sandbox}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{},
		},
	}
	switch mode {
	case "allow-all":
		return nil
	case "restricted":
		var to []networkingv1.NetworkPolicyPeer
		for _, c := range cidrs {
			to = append(to, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
		}
		dns := intstr.FromInt32(53)
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{
			{To: to},
			{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: &dns}, {Protocol: ptr.To(corev1.ProtocolTCP), Port: &dns}}},
		}
	}
	return np
}

// The harness's egress modes (deny-all default, restricted CIDRs with DNS, allow-all) as a
// per-Sandbox NetworkPolicy that selects the sandbox's pod by the harness's own label.
func TestPerSandboxEgressPolicyFollowsTheModeAndSelectsThePod(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "harness-egress")
	name := "fp-net-" + rand.String(5)
	mustf(t, kube.Create(t.Context(), harnessSandbox(ns, name, nil).Obj()), "creating sandbox")
	pod := waitPodReady(t, ns, name)

	for _, tc := range []struct {
		mode      string
		cidrs     []string
		wantRules int // -1: no policy
	}{
		{mode: "deny-all", wantRules: 0},
		{mode: "restricted", cidrs: []string{"203.0.113.0/24", "198.51.100.7/32"}, wantRules: 2},
		{mode: "allow-all", wantRules: -1},
		{mode: "deny-all", wantRules: 0},
	} {
		want := egressPolicy(ns, name, tc.mode, tc.cidrs)
		key := client.ObjectKey{Namespace: ns, Name: name + "-egress"}
		existing := &networkingv1.NetworkPolicy{}
		err := kube.Get(t.Context(), key, existing)
		switch {
		case want == nil && err == nil:
			mustf(t, kube.Delete(t.Context(), existing), "%s: removing policy", tc.mode)
		case want != nil && apierrors.IsNotFound(err):
			mustf(t, kube.Create(t.Context(), want), "%s: creating policy", tc.mode)
		case want != nil && err == nil:
			existing.Spec = want.Spec
			mustf(t, kube.Update(t.Context(), existing), "%s: updating policy", tc.mode)
		}
		got := &networkingv1.NetworkPolicy{}
		err = kube.Get(t.Context(), key, got)
		if tc.wantRules < 0 {
			if !apierrors.IsNotFound(err) {
				t.Fatalf("%s: policy still there (%v)", tc.mode, err)
			}
			continue
		}
		mustf(t, err, "%s: reading policy", tc.mode)
		if len(got.Spec.Egress) != tc.wantRules || len(got.Spec.PolicyTypes) != 1 || got.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress {
			t.Fatalf("%s: policy spec %+v", tc.mode, got.Spec)
		}
		sel, err := metav1.LabelSelectorAsSelector(&got.Spec.PodSelector)
		mustf(t, err, "selector")
		if !sel.Matches(labels.Set(pod.Labels)) {
			t.Fatalf("%s: policy selector %s does not select the sandbox pod (labels %v)", tc.mode, sel, pod.Labels)
		}
	}
}
