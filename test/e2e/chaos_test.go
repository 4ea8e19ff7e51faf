//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// Faults on the installed system (issue 24): clients keep creating and reading claims, in
// v1beta1 (kubectl's default version and upstream's Python SDK, both through the conversion
// webhook) and v1alpha1, while the containers of controller pods, the controller and the
// conversion webhook beside it, are SIGKILLed in turn and restarted by the kubelet. The install
// runs two controller pods; both processes of each serve the webhook on one shared port.

// controllerKills is how many containers of controller pods the test kills: E2E_CONTROLLER_KILLS
// (`make chaos-cluster` asks for 10), else 2.
func controllerKills(t *testing.T) int {
	v := os.Getenv("E2E_CONTROLLER_KILLS")
	if v == "" {
		return 2
	}
	n, err := strconv.Atoi(v)
	mustf(t, err, "E2E_CONTROLLER_KILLS")
	return n
}

// controllerExe is the controller's binary; its pods run it twice, as the controller and, with
// --webhook-only, as the conversion webhook beside it.
const controllerExe = "/usr/local/bin/controller"

// callLog counts the clients' API calls and keeps the failures.
type callLog struct {
	mu       sync.Mutex
	calls    map[string]int
	failures []failedCall
	created  []string // claims whose create was acknowledged
	// claims whose create failed: made or not (an answer lost to a killed API server is no
	// proof that nothing happened)
	uncertain []string
}

type failedCall struct {
	at   time.Time
	what string
	err  error
}

func (f failedCall) String() string {
	return fmt.Sprintf("%s %s: %v", f.at.Format("15:04:05.000"), f.what, f.err)
}

func newCallLog() *callLog { return &callLog{calls: map[string]int{}} }

func (l *callLog) record(what string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[what]++
	if err != nil {
		l.failures = append(l.failures, failedCall{time.Now(), what, err})
	}
}

// between returns the failures, of calls whose name starts with prefix, from from to to.
func (l *callLog) between(from, to time.Time, prefix string) []failedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []failedCall
	for _, f := range l.failures {
		if strings.HasPrefix(f.what, prefix) && !f.at.Before(from) && !f.at.After(to) {
			out = append(out, f)
		}
	}
	return out
}

// expectNoFailure logs the calls made and fails the test with the first failures.
func (l *callLog) expectNoFailure(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("calls %v; failed %d", l.calls, len(l.failures))
	for i, f := range l.failures {
		if i == 10 {
			t.Errorf("... and %d more", len(l.failures)-10)
			break
		}
		t.Errorf("failed call: %s", f)
	}
}

// claimLoad creates claims in both versions and lists them in v1beta1 until stop is closed;
// a call under way then finishes (a create cut short would leave a claim nobody saw made). Their
// template pins pods to a node that does not exist: the controller does every write of a claim
// (Sandbox, Service, NetworkPolicy, Pod), no container starts.
func claimLoad(ctx context.Context, stop <-chan struct{}, ns string, log *callLog) *sync.WaitGroup {
	var wg sync.WaitGroup
	every := func(period time.Duration, f func(i int)) {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f(i)
				select {
				case <-stop:
				case <-time.After(period):
				}
			}
		})
	}
	create := func(what string, obj client.Object) {
		err := kube.Create(ctx, obj)
		log.record(what, err)
		log.mu.Lock()
		defer log.mu.Unlock()
		if err == nil {
			log.created = append(log.created, obj.GetName())
		} else {
			log.uncertain = append(log.uncertain, obj.GetName())
		}
	}
	every(500*time.Millisecond, func(i int) {
		claim := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
			"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("beta-%03d", i)},
			// Upstream's Python SDK names a pool; shadow-pool-<template> is its template, cold.
			"spec": map[string]any{"warmPoolRef": map[string]any{"name": "shadow-pool-pinned"}},
		}}
		create("create claim v1beta1", claim)
	})
	every(time.Second, func(i int) {
		create("create claim v1alpha1", testwrap.MakeClaim(ns, fmt.Sprintf("alpha-%03d", i)).Template("pinned").WarmPool("none").Obj())
	})
	list := func(what, kind string) {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(kind)
		l.SetKind(strings.Split(what, " ")[1] + "List")
		log.record("list "+what, kube.List(ctx, l, client.InNamespace(ns)))
	}
	every(100*time.Millisecond, func(int) { list("v1beta1 SandboxClaim", "extensions.agents.x-k8s.io/v1beta1") })
	every(100*time.Millisecond, func(int) { list("v1beta1 Sandbox", "agents.x-k8s.io/v1beta1") })
	return &wg
}

// killContainer SIGKILLs the process of exe in pod whose arguments match (nil: any) and returns
// its pid.
func killContainer(t *testing.T, pod *corev1.Pod, exe string, match func(args []string) bool) int {
	t.Helper()
	pid := processOf(t, pod, exe, match)
	mustf(t, syscall.Kill(pid, syscall.SIGKILL), "killing %s (pid %d) of pod %s", exe, pid, pod.Name)
	return pid
}

// processOf returns the pid of exe in pod, found by the pod's cgroup as the node sees it, among
// the processes whose arguments match (nil: any).
func processOf(t *testing.T, pod *corev1.Pod, exe string, match func(args []string) bool) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err1 := os.ReadFile(p)
		cg, err2 := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup"))
		if err1 != nil || err2 != nil || !strings.Contains(string(cg), "pod"+string(pod.UID)) {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(cmd), "\x00"), "\x00")
		if argv[0] == exe && (match == nil || match(argv[1:])) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no process %s in pod %s", exe, pod.Name)
	return 0
}

// The two processes of a controller pod: the controller, and the conversion webhook beside it.
var (
	theController = func(args []string) bool { return !slices.Contains(args, "--webhook-only") }
	theWebhook    = func(args []string) bool { return slices.Contains(args, "--webhook-only") }
)

// controllerPods returns the controller's pods, by name.
func controllerPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	mustf(t, kube.List(t.Context(), &pods, client.InNamespace(spec.SystemNS), client.MatchingLabels{"app": "agent-sandbox-controller"}), "listing controller pods")
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

func TestClientsLoseNoCallWhileControllersAreKilled(t *testing.T) {
	kills := controllerKills(t)
	ns := newNamespace(t, "chaos")
	mustf(t, kube.Create(t.Context(), testwrap.MakeTemplate(ns, "pinned").Containers(runtimeContainer()).
		NodeSelector("kubernetes.io/hostname", "nowhere").Obj()), "creating the template")
	pods := controllerPods(t)
	if len(pods) < 2 {
		t.Fatalf("%d controller replicas, want the install's 2", len(pods))
	}

	stop := make(chan struct{})
	stopLoad := sync.OnceFunc(func() { close(stop) })
	log := newCallLog()
	load := claimLoad(t.Context(), stop, ns, log)
	t.Cleanup(func() { stopLoad(); load.Wait() }) // also when a wait below fails the test
	time.Sleep(2 * time.Second)                   // calls before the first fault
	var recovery []time.Duration
	var killedAt []time.Time
	for i := range kills {
		// In turn: pod 0's controller, pod 0's webhook, pod 1's controller, pod 1's webhook…
		victim, process, which := controllerPods(t)[(i/2)%2], theController, "controller"
		if i%2 == 1 {
			process, which = theWebhook, "webhook"
		}
		before := restarts(&victim)
		pid := killContainer(t, &victim, controllerExe, process)
		killed := time.Now()
		killedAt = append(killedAt, killed)
		slow.EventuallyContext(t, "controller "+victim.Name+" back after kill "+strconv.Itoa(i+1), func(ctx context.Context) error {
			p := &corev1.Pod{}
			if err := kube.Get(ctx, client.ObjectKeyFromObject(&victim), p); err != nil {
				return err
			}
			d := &appsv1.Deployment{}
			if err := kube.Get(ctx, client.ObjectKey{Namespace: spec.SystemNS, Name: "agent-sandbox-controller"}, d); err != nil {
				return err
			}
			if restarts(p) == before || d.Status.ReadyReplicas < 2 {
				return fmt.Errorf("restarts %d (were %d), %d replicas ready", restarts(p), before, d.Status.ReadyReplicas)
			}
			return nil
		})
		recovery = append(recovery, time.Since(killed).Round(100*time.Millisecond))
		t.Logf("kill %d: the %s (pid %d) of %s; both replicas ready again after %s", i+1, which, pid, victim.Name, recovery[i])
	}
	time.Sleep(2 * time.Second)
	stopLoad()
	load.Wait()

	t.Logf("%d kills of controller and webhook containers", kills)
	log.expectNoFailureButTheConversionRace(t, killedAt)
	expectOneSandboxPerAcknowledgedClaim(t, ns, log)
}

// conversionRaceWindow bounds how long after a kill the API server may still send a conversion
// request on its connection to the killed process: the moment it takes to read that connection's
// close. Seen: once, 2026-11-28, in CI, some milliseconds after a kill.
const conversionRaceWindow = time.Second

// expectNoFailureButTheConversionRace is expectNoFailure, but for the one failure no server can
// prevent (docs/availability.md, "The one call a kill may cost"): kube-apiserver keeps one HTTP/2
// connection to the conversion webhook and never retries a conversion, so a v1alpha1 call it sends
// on that connection between the death of the process holding it and its reading of the close
// fails with the connection's error. It is allowed once per kill, within conversionRaceWindow of
// it, and only with that error; anything else fails the test.
func (l *callLog) expectNoFailureButTheConversionRace(t *testing.T, kills []time.Time) {
	t.Helper()
	l.mu.Lock()
	var others []failedCall
	raced := map[int]bool{} // kills that cost a call
	for _, f := range l.failures {
		if k := conversionRaceOf(f, kills); k >= 0 && !raced[k] {
			raced[k] = true
			t.Logf("lost to the conversion race of kill %d (%s after it): %s", k+1, f.at.Sub(kills[k]).Round(time.Millisecond), f)
			continue
		}
		others = append(others, f)
	}
	l.failures = others
	l.mu.Unlock()
	l.expectNoFailure(t)
}

// conversionRaceOf is the index of the kill whose conversion race f is, or -1: a v1alpha1 call
// whose conversion webhook call lost its connection, within conversionRaceWindow after that kill.
func conversionRaceOf(f failedCall, kills []time.Time) int {
	msg := f.err.Error()
	lost := strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset by peer") ||
		strings.Contains(msg, "EOF") || strings.Contains(msg, "http2: client connection lost")
	if !strings.Contains(f.what, "v1alpha1") || !strings.Contains(msg, "conversion webhook for") || !lost {
		return -1
	}
	for i, k := range kills {
		if !f.at.Before(k) && f.at.Sub(k) <= conversionRaceWindow {
			return i
		}
	}
	return -1
}

// expectOneSandboxPerAcknowledgedClaim waits until every claim whose create was acknowledged
// exists with exactly one Sandbox, and every other claim that exists is one whose create failed
// (its answer may have been lost) and has exactly one Sandbox too: none lost, doubled or made
// unseen.
func expectOneSandboxPerAcknowledgedClaim(t *testing.T, ns string, log *callLog) {
	t.Helper()
	log.mu.Lock()
	created, uncertain := slices.Clone(log.created), slices.Clone(log.uncertain)
	log.mu.Unlock()
	slow.EventuallyContext(t, "one Sandbox per acknowledged claim", func(ctx context.Context) error {
		var claims extv1alpha1.SandboxClaimList
		var sbs agentsv1alpha1.SandboxList
		if err := kube.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := kube.List(ctx, &sbs, client.InNamespace(ns)); err != nil {
			return err
		}
		have := map[string]int{}
		for _, c := range claims.Items {
			have[c.Name] = 0
		}
		for _, sb := range sbs.Items {
			if owner := metav1ControllerName(&sb); owner != "" {
				have[owner]++
			}
		}
		for _, name := range created {
			if _, ok := have[name]; !ok {
				return fmt.Errorf("claim %s was acknowledged and is gone", name)
			}
		}
		for name, n := range have {
			switch {
			case !slices.Contains(created, name) && !slices.Contains(uncertain, name):
				return fmt.Errorf("claim %s exists, and no client created it", name)
			case n != 1:
				return fmt.Errorf("claim %s has %d Sandboxes, want 1", name, n)
			}
		}
		if len(uncertain) > 0 {
			t.Logf("%d claims acknowledged; of %d creates that failed, %d made their claim all the same", len(created), len(uncertain), len(have)-len(created))
		}
		return nil
	})
}

// metav1ControllerName is the name of the object's controller (its claim), or "".
func metav1ControllerName(o client.Object) string {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return ref.Name
		}
	}
	return ""
}
