//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/sandbox"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// A tenant forks its running gVisor sandbox into 3: each fork answers from the parent's counter
// process (same pid, the count carried on from where it was), from a pod of its own with its
// own address and NetworkPolicy, and from then on has a state of its own; the parent carries
// on. Another tenant naming that parent from its own namespace gets a cold fork, never the
// parent's memory.
func TestAForkStartsWithItsParentsProcessesAndIsItsOwn(t *testing.T) {
	ns := newNamespace(t, "fork")
	dumpKeepMemoryOnFailure(t, ns)
	owner := sdkClientAs(t, ns, tenantConfig(t, ns))
	parent := startCounter(t, owner, ns, "parent", agentsv1beta1.PauseModeDelete)
	before := counterNow(t, parent)

	start := time.Now()
	forks, err := owner.Fork(t.Context(), "parent", 3)
	took := time.Since(start)
	mustf(t, err, "forking parent into 3 as its tenant")
	t.Logf("3 forks ready with the parent's memory %s after the call", took.Round(time.Millisecond))

	parentPod, err := podOf(t.Context(), ns, "parent")
	mustf(t, err, "reading the parent's pod")
	ips := map[string]string{parentPod.Status.PodIP: "parent"}
	for i, f := range forks {
		checkSameProcess(t, fmt.Sprintf("fork %d", i), before, runAnswer(t, f))
		pod, err := podOf(t.Context(), ns, f.Name())
		mustf(t, err, "reading fork %s's pod", f.Name())
		if other, seen := ips[pod.Status.PodIP]; seen || pod.Spec.NodeName != parentPod.Spec.NodeName {
			t.Errorf("fork %s: address %s (also %q's), node %s; want an address of its own on the parent's node %s",
				f.Name(), pod.Status.PodIP, other, pod.Spec.NodeName, parentPod.Spec.NodeName)
		}
		ips[pod.Status.PodIP] = f.Name()
		np := &networkingv1.NetworkPolicy{}
		mustf(t, kube.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: sandbox.EgressPolicyName(f.Name())}, np),
			"fork %s's own NetworkPolicy", f.Name())
	}
	checkSameProcess(t, "parent after the forks", before, runAnswer(t, parent))

	// From the fork on, each has its own state: a file one writes is in no other.
	_, err = forks[0].Run(t.Context(), sdk.Shell("echo mine > /tmp/only-fork-0"))
	mustf(t, err, "writing in fork 0")
	for _, s := range []*sdk.Sandbox{parent, forks[1], forks[2]} {
		res, err := s.Run(t.Context(), sdk.Shell("cat /tmp/only-fork-0 2>/dev/null || echo absent"))
		mustf(t, err, "reading in %s", s.Name())
		if strings.TrimSpace(res.Stdout) != "absent" {
			t.Errorf("%s sees fork 0's file (%q); want each fork its own files", s.Name(), res.Stdout)
		}
	}

	timeForkAgainstColdCreate(t, owner, ns)

	// Another tenant, in its own namespace, cannot name that parent: not by a path (admission),
	// and by its name only a Sandbox of its own namespace, of which there is none, so its fork
	// starts cold and says why.
	nsB := newNamespace(t, "fork-other")
	cfgB := tenantConfig(t, nsB)
	other := clientAs(t, cfgB)
	refusedWith(t, "the other tenant naming the parent by its namespace",
		other.Create(t.Context(), counterSandbox(nsB, "by-path", agentsv1beta1.PauseModeDelete).
			Annotation(agentsv1beta1.ForkOfAnnotation, ns+"/parent").Obj()),
		"the name of another Sandbox of this namespace")
	stolen := counterSandbox(nsB, "stolen", agentsv1beta1.PauseModeDelete).Annotation(agentsv1beta1.ForkOfAnnotation, "parent").Obj()
	mustf(t, other.Create(t.Context(), stolen), "the other tenant's fork naming parent")
	slow.EventuallyContext(t, "the other tenant's fork says it started cold", func(ctx context.Context) error {
		return memoryKept(ctx, nsB, "stolen", agentsv1beta1.ReasonForkFailed)
	})
	otherSDK := sdkClientAs(t, nsB, cfgB)
	s, err := otherSDK.Get(t.Context(), "stolen")
	mustf(t, err, "the other tenant's fork")
	mustf(t, s.WaitReady(t.Context()), "the other tenant's fork ready")
	res, err := s.Run(t.Context(), sdk.Shell(askServer))
	mustf(t, err, "asking the other tenant's fork")
	if strings.TrimSpace(res.Stdout) != "none" {
		t.Errorf("the other tenant's fork answers %q; want no counter: the first tenant's parent is not reachable from its namespace", res.Stdout)
	}
}

// timeForkAgainstColdCreate times, alternated, a fork of the parent (one, until ready) against
// the creation of the same Sandbox cold, E2E_FORK_ROUNDS times each (default 3), and logs the
// medians: what a fork costs beyond a cold start, before counting what the fork did not have to
// rebuild.
func timeForkAgainstColdCreate(t *testing.T, cli *sdk.Client, ns string) {
	t.Helper()
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("E2E_FORK_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	var fork, cold []time.Duration
	for i := range rounds {
		start := time.Now()
		forks, err := cli.Fork(t.Context(), "parent", 1)
		fork = append(fork, time.Since(start))
		mustf(t, err, "fork round %d", i)
		start = time.Now()
		fresh, err := cli.CreateSandbox(t.Context(), counterSandbox(ns, fmt.Sprintf("cold-%d", i), agentsv1beta1.PauseModeDelete).Obj())
		cold = append(cold, time.Since(start))
		mustf(t, err, "cold round %d", i)
		for _, s := range []*sdk.Sandbox{forks[0], fresh} {
			mustf(t, cli.Delete(t.Context(), s.Name()), "deleting %s", s.Name())
		}
	}
	slices.Sort(fork)
	slices.Sort(cold)
	t.Logf("create to ready, %d rounds alternated: fork of parent median %s (%v); cold create median %s (%v)",
		rounds, fork[rounds/2].Round(time.Millisecond), fork, cold[rounds/2].Round(time.Millisecond), cold)
}

// A snapshot pool: the namespace admin points a warm pool at a prepared sandbox of its
// template (here, one running the counter), and a tenant's claim from that pool is handed a
// member that already runs the prepared processes: the same pid, the count carried on.
func TestASnapshotPoolHandsOutThePreparedProcesses(t *testing.T) {
	ns := newNamespace(t, "snappool")
	dumpKeepMemoryOnFailure(t, ns)
	applyTemplate(t, templateFor(ns, "gvisor", false).RuntimeClass(ptr.To(spec.GVisorRuntimeClass)))
	cli := sdkClientAs(t, ns, tenantConfig(t, ns))
	prepared, err := cli.Create(t.Context(), "gvisor", sdk.WithName("prepared"), sdk.WithWarmPool("none"))
	mustf(t, err, "claiming the sandbox to prepare")
	for _, script := range []string{counterScript, serverScript} {
		_, err = prepared.Start(t.Context(), sdk.Shell(script))
		mustf(t, err, "preparing: %s", script)
	}
	before := counterNow(t, prepared)

	pool := testwrap.MakeWarmPool(ns, "prepared-pool").Template("gvisor").Replicas(2).Obj()
	pool.Annotations = map[string]string{agentsv1beta1.ForkOfAnnotation: prepared.SandboxName()}
	mustf(t, kube.Create(t.Context(), pool), "the namespace admin's snapshot pool")
	start := time.Now()
	waitPoolReady(t, pool)
	t.Logf("a snapshot pool of 2 members ready %s after it was made", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	claimed, err := cli.Create(t.Context(), "gvisor", sdk.WithWarmPool("prepared-pool"))
	mustf(t, err, "claiming from the snapshot pool")
	answer := runAnswer(t, claimed)
	t.Logf("claim from the snapshot pool to the prepared counter's answer: %s", time.Since(start).Round(time.Millisecond))
	checkSameProcess(t, "a claim from the snapshot pool", before, answer)
	if err := memoryKept(t.Context(), ns, claimed.SandboxName(), agentsv1beta1.ReasonMemoryRestored); err != nil {
		t.Errorf("the claimed member: %v", err)
	}
	// The pool's members came from one save of the prepared sandbox, linked into each image, and
	// each was restored from it.
	saves, shared := 0, 0
	slow.EventuallyContext(t, "every member restored from the prepared sandbox", func(ctx context.Context) error {
		var members agentsv1alpha1.SandboxList
		if err := kube.List(ctx, &members, client.InNamespace(ns)); err != nil {
			return err
		}
		saves, shared = 0, 0
		for _, m := range members.Items {
			rec := m.Annotations[agentsv1beta1.MemoryImageAnnotation]
			if !strings.Contains(rec, `"forkOf":"`) {
				continue
			}
			if strings.Contains(rec, `"shared":true`) {
				shared++
			} else {
				saves++
			}
			if err := memoryKept(ctx, ns, m.Name, agentsv1beta1.ReasonMemoryRestored); err != nil {
				return fmt.Errorf("member %s: %w", m.Name, err)
			}
		}
		return nil
	})
	if saves < 1 || shared < 1 {
		t.Errorf("the pool's members: %d saved the prepared sandbox, %d shared a save; want the first to save and the next to share", saves, shared)
	}
	t.Logf("snapshot pool members: %d saves of the prepared sandbox, %d members sharing one", saves, shared)
}
