//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// routerResumes counts the router's log lines saying it resumed ns/name, over its pods (the
// wakes metric has no per-Sandbox label, and other tests wake their own sandboxes meanwhile).
func routerResumes(t *testing.T, ns, name string) int {
	t.Helper()
	var routers corev1.PodList
	mustf(t, kube.List(t.Context(), &routers, client.InNamespace(spec.SystemNS), client.MatchingLabels{"app": "sandbox-router"}), "listing routers")
	total := 0
	for _, p := range routers.Items {
		logs, err := kcs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
		mustf(t, err, "reading the logs of router %s", p.Name)
		sc := bufio.NewScanner(strings.NewReader(string(logs)))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, `"resumed a paused sandbox on request"`) && strings.Contains(line, `"namespace":"`+ns+`"`) &&
				strings.Contains(line, `"sandbox":"`+name+`"`) {
				total++
			}
		}
	}
	return total
}

// legacyExecute sends the upstream Python SDK's POST /execute through the router with token.
func legacyExecute(ctx context.Context, ns, sandbox, token, command string) (int, string, error) {
	body, _ := json.Marshal(map[string]string{"command": command})
	return routerPostAs(ctx, token, ns, sandbox, "/execute", string(body))
}

// sandboxOf reads the Sandbox.
func sandboxOf(ctx context.Context, ns, name string) (*agentsv1alpha1.Sandbox, error) {
	sb := &agentsv1alpha1.Sandbox{}
	return sb, kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sb)
}

// idlePaused: paused by the controller for being idle, its pod gone.
func idlePaused(ctx context.Context, ns, name string) error {
	sb, err := sandboxOf(ctx, ns, name)
	if err != nil {
		return err
	}
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
	if sb.DesiredReplicas() != 0 || ready == nil || ready.Reason != agentsv1alpha1.ReasonIdlePaused || sb.Status.Replicas != 0 {
		return fmt.Errorf("replicas %d (status %d), Ready %+v", sb.DesiredReplicas(), sb.Status.Replicas, ready)
	}
	return nil
}

// A claimed sandbox left alone pauses itself after its idle timeout while one running a
// background job stays up; a caller without rights cannot wake it; 50 concurrent requests,
// through the SDK and in the upstream Python SDK's shape, resume it once and are all answered.
func TestAnIdleSandboxPausesItselfAndARequestWakesIt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "idle")
	createTemplate(t, ns, "runtime", false)
	cli := sdkClient(t, ns)
	idle, err := cli.Create(ctx, "runtime", sdk.WithWarmPool("none"), sdk.WithIdleTimeout(10*time.Second))
	mustf(t, err, "claiming the sandbox left idle")
	busy, err := cli.Create(ctx, "runtime", sdk.WithWarmPool("none"), sdk.WithIdleTimeout(10*time.Second))
	mustf(t, err, "claiming the busy sandbox")
	_, err = busy.Start(ctx, sdk.Shell("sleep 600"))
	mustf(t, err, "starting the background job")

	lastUse := time.Now()
	slow.EventuallyContext(t, "the idle sandbox paused itself", func(ctx context.Context) error { return idlePaused(ctx, ns, idle.SandboxName()) })
	t.Logf("paused %s after the test's last request (to the other sandbox; idle timeout 10s)", time.Since(lastUse).Round(100*time.Millisecond))
	if sb, err := sandboxOf(ctx, ns, busy.SandboxName()); err != nil || !sandboxReady(sb) || sb.DesiredReplicas() != 1 {
		t.Fatalf("the sandbox running a background job: %v, replicas %d; want it still up", err, sb.DesiredReplicas())
	}

	nobody := asServiceAccount(t, ns, "nobody", nil, nil)
	code, body, err := legacyExecute(ctx, ns, idle.SandboxName(), nobody.BearerToken, "echo hi")
	mustf(t, err, "request without rights")
	if code != http.StatusForbidden {
		t.Fatalf("a caller without rights got %d %s; want 403", code, body)
	}
	time.Sleep(2 * time.Second) // a resume would have landed by now
	mustf(t, idlePaused(ctx, ns, idle.SandboxName()), "the sandbox after a refused request: still paused")

	start := time.Now()
	var wg sync.WaitGroup
	answers := make([]string, 50)
	took := make([]time.Duration, 50)
	for i := range answers {
		wg.Go(func() {
			if i%2 == 0 {
				res, err := idle.Run(ctx, sdk.Shell("echo awake"))
				if err != nil {
					answers[i] = err.Error()
				} else {
					answers[i] = strings.TrimSpace(res.Stdout)
				}
			} else {
				code, body, err := legacyExecute(ctx, ns, idle.SandboxName(), cluster.RouterToken, "echo awake")
				switch {
				case err != nil:
					answers[i] = err.Error()
				case code != http.StatusOK:
					answers[i] = fmt.Sprintf("%d %s", code, body)
				default:
					var out struct{ Stdout string }
					_ = json.Unmarshal([]byte(body), &out)
					answers[i] = strings.TrimSpace(out.Stdout)
				}
			}
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a != "awake" {
			t.Errorf("request %d (%s): %q; want awake", i, []string{"SDK", "legacy /execute"}[i%2], a)
		}
	}
	slices.Sort(took)
	t.Logf("50 concurrent requests to the paused sandbox: first answered after %s, last after %s",
		took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	if n := routerResumes(t, ns, idle.SandboxName()); n != 1 {
		t.Errorf("%d resumes across the routers for 50 requests; want exactly 1", n)
	}
	sb, err := sandboxOf(ctx, ns, idle.SandboxName())
	mustf(t, err, "reading the woken sandbox")
	if _, marked := sb.Annotations[agentsv1alpha1.IdlePausedAnnotation]; marked {
		slow.EventuallyContext(t, "the idle mark dropped", func(ctx context.Context) error {
			sb, err := sandboxOf(ctx, ns, idle.SandboxName())
			if err == nil && sb.Annotations[agentsv1alpha1.IdlePausedAnnotation] != "" {
				err = fmt.Errorf("idle-paused-at still %q", sb.Annotations[agentsv1alpha1.IdlePausedAnnotation])
			}
			return err
		})
	}
}

// Wake latency on the real kubelet: a sandbox paused by hand that wakes on request, resumed by
// one request at a time, E2E_WAKES times (default 3; docs/bench.md has a run of 10), with the
// runtime's readiness probe (every 1 s: the kubelet probes on its tick, up to a second after the
// container starts) and without one (the pod is ready when the container starts, on the node's
// runtime, where sandboxd listens before the router's first dial).
func TestWakeLatencyOnTheLocalCluster(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "wake")
	cli := sdkClient(t, ns)
	wakes := 3
	if v, err := strconv.Atoi(os.Getenv("E2E_WAKES")); err == nil && v > 0 {
		wakes = v
	}
	noProbe := runtimeContainer()
	noProbe.ReadinessProbe = nil
	for _, tc := range []struct {
		name      string
		container corev1.Container
	}{
		{"readiness probe every 1s", runtimeContainer()},
		{"no readiness probe", noProbe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			name := "sleeper"
			if tc.container.ReadinessProbe == nil {
				name = "sleeper-noprobe"
			}
			sandbox := testwrap.MakeSandbox(ns, name).Containers(tc.container).TerminationGracePeriod(1).
				Annotation(agentsv1alpha1.WakeOnRequestAnnotation, "true")
			if tc.container.ReadinessProbe == nil {
				// On the node's runtime, as raw Sandboxes ran before they got the default
				// (gVisor) class: without a probe the pod is Ready when the container starts, and
				// the router does not retry a refused dial, so sandboxd must listen before the
				// router's first dial; under gVisor it starts later and a wake got 502 once in
				// three runs.
				sandbox.RuntimeClass(ptr.To(""))
			}
			sb, err := cli.CreateSandbox(ctx, sandbox.Obj())
			mustf(t, err, "creating the sandbox")
			var lat []time.Duration
			for i := range wakes {
				mustf(t, sb.Pause(ctx), "pausing")
				slow.EventuallyContext(t, "paused, its pod gone", func(ctx context.Context) error {
					if _, err := podOf(ctx, ns, name); err == nil {
						return fmt.Errorf("pod still there")
					}
					s, err := sandboxOf(ctx, ns, name)
					if err == nil && (s.Status.Replicas != 0 || meta.IsStatusConditionTrue(s.Status.Conditions, agentsv1alpha1.SandboxConditionReady)) {
						err = fmt.Errorf("status replicas %d", s.Status.Replicas)
					}
					return err
				})
				time.Sleep(time.Second) // the routers' caches see the pause
				start := time.Now()
				code, body, err := legacyExecute(ctx, ns, name, cluster.RouterToken, "echo up")
				d := time.Since(start)
				if err != nil || code != http.StatusOK || !strings.Contains(body, "up") {
					t.Fatalf("wake %d: %d %s %v; want 200 with the command's output", i, code, body, err)
				}
				lat = append(lat, d)
			}
			slices.Sort(lat)
			pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
			t.Logf("wake latency (request arrives -> answer), %s, over %d wakes: p50 %s, p95 %s, max %s (all %v)", tc.name,
				len(lat), pct(0.5).Round(time.Millisecond), pct(0.95).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), lat)
		})
	}
}

// A scripted bursty agent session (E2E_BURSTY=1; docs/bench.md): bursts of commands with
// silences between them, on a sandbox that pauses itself after 10 s idle and wakes on the next
// request. It reports the pod-seconds the session held against its length; the pod must have
// been gone for part of every silence.
func TestABurstySessionHoldsAPodOnlyWhileItWorks(t *testing.T) {
	if os.Getenv("E2E_BURSTY") == "" {
		t.Skip("a 2-minute measurement; run with E2E_BURSTY=1")
	}
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "bursty")
	createTemplate(t, ns, "runtime", false)
	sb, err := sdkClient(t, ns).Create(ctx, "runtime", sdk.WithWarmPool("none"), sdk.WithIdleTimeout(10*time.Second))
	mustf(t, err, "claiming the sandbox")
	name := sb.SandboxName()

	// Sample the pod's presence every 100 ms for the whole session.
	var podTime time.Duration
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := podOf(ctx, ns, name); err == nil {
					podTime += 100 * time.Millisecond
				}
			}
		}
	}()
	start := time.Now()
	const bursts, silence = 4, 30 * time.Second
	for b := range bursts {
		for c := range 5 {
			res, err := sb.Run(ctx, sdk.Shell(fmt.Sprintf("echo burst %d command %d; sleep 0.2", b, c)))
			mustf(t, err, "burst %d command %d", b, c)
			if res.ExitCode != 0 {
				t.Fatalf("burst %d command %d: %+v", b, c, res)
			}
		}
		if b < bursts-1 {
			time.Sleep(silence)
		}
	}
	session := time.Since(start)
	close(stop)
	<-sampled
	t.Logf("bursty session: %d bursts of 5 commands, %s silences, idle timeout 10s: %.0f s long, the pod existed %.0f s (%.0f%%): %.0f pod-seconds saved",
		bursts, silence, session.Seconds(), podTime.Seconds(), 100*podTime.Seconds()/session.Seconds(), (session - podTime).Seconds())
	if podTime > session-time.Duration(bursts-1)*5*time.Second {
		t.Errorf("the pod existed %s of a %s session; want it gone for part of each of the %d silences", podTime, session, bursts-1)
	}
}
