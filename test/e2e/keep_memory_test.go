//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// The workload of the memory-keeping pause: a shell that counts in a variable (memory only; the
// file is its readout) and busybox's httpd serving that readout on port 7000.
const (
	counterScript = `mkdir -p /tmp/www; i=0; while :; do i=$((i+1)); echo "$$ $i" > /tmp/www/n; sleep 0.1; done`
	serverScript  = `exec httpd -f -p 7000 -h /tmp/www`
	// askServer is the request that wakes the sandbox: the counter, through the server's port.
	askServer = `wget -qO- http://127.0.0.1:7000/n || echo none`
)

// counterAnswer is "<pid> <count>" from the server, or "none".
func counterAnswer(body string) (pid, count int, ok bool) {
	var out struct {
		Stdout string `json:"stdout"`
	}
	if json.Unmarshal([]byte(body), &out) != nil {
		return 0, 0, false
	}
	fields := strings.Fields(out.Stdout)
	if len(fields) != 2 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(fields[0])
	count, err2 := strconv.Atoi(fields[1])
	return pid, count, err1 == nil && err2 == nil
}

// memoryKept is the Sandbox's MemoryKept condition with reason, or an error saying what it is.
func memoryKept(ctx context.Context, ns, name, reason string) error {
	sb, err := sandboxOf(ctx, ns, name)
	if err != nil {
		return err
	}
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionMemoryKept)
	if c == nil || c.Reason != reason {
		return fmt.Errorf("MemoryKept %+v; want reason %s", c, reason)
	}
	return nil
}

// A gVisor Sandbox annotated pause-mode KeepMemory: a pause deletes its pod after the node agent
// saved it, and a request through the router wakes it with the same processes, the counter where
// it was and the server on its port. Each wake is timed against a Sandbox paused as today (cold),
// E2E_KEEPMEM_WAKES times each (default 5), each on a Sandbox of its own. The first Sandbox is
// paused and woken once more after its restore: the same processes come back again (the
// kubelet's stand-in sandbox for the paused pod must not spend the new image, docs/snapshots.md).
func TestAPauseThatKeepsMemoryWakesTheSameProcesses(t *testing.T) {
	ns := newNamespace(t, "keepmem")
	dumpKeepMemoryOnFailure(t, ns)
	cli := sdkClient(t, ns)
	wakes := 5
	if v, err := strconv.Atoi(os.Getenv("E2E_KEEPMEM_WAKES")); err == nil && v > 0 {
		wakes = v
	}
	lat := map[string][]time.Duration{}
	for _, mode := range []string{agentsv1beta1.PauseModeKeepMemory, agentsv1beta1.PauseModeDelete} {
		for i := range wakes {
			name := fmt.Sprintf("%s-%d", strings.ToLower(mode), i)
			sb := startCounter(t, cli, ns, name, mode)
			d := keepMemoryCycle(t, sb, ns, name, mode, strconv.Itoa(i))
			lat[mode] = append(lat[mode], d)
			if mode == agentsv1beta1.PauseModeKeepMemory && i == 0 {
				// A restored sandbox's own pause and wake: its memory saved and restored again.
				keepMemoryCycle(t, sb, ns, name, mode, "0, again")
			}
		}
	}
	for _, mode := range []string{agentsv1beta1.PauseModeKeepMemory, agentsv1beta1.PauseModeDelete} {
		l := lat[mode]
		slices.Sort(l)
		t.Logf("wake to first answer, pause-mode %s, %d wakes: min %s, median %s, max %s (all %v)", mode, len(l),
			l[0].Round(time.Millisecond), l[len(l)/2].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond), l)
	}
}

// startCounter creates a gVisor Sandbox that wakes on request, with pause-mode mode, and starts
// the counter and its server in it.
func startCounter(t *testing.T, cli *sdk.Client, ns, name, mode string) *sdk.Sandbox {
	t.Helper()
	ctx := t.Context()
	sb, err := cli.CreateSandbox(ctx, counterSandbox(ns, name, mode).Obj())
	mustf(t, err, "creating the %s sandbox %s", mode, name)
	_, err = sb.Start(ctx, sdk.Shell(counterScript))
	mustf(t, err, "starting the counter")
	_, err = sb.Start(ctx, sdk.Shell(serverScript))
	mustf(t, err, "starting the server")
	return sb
}

// counterSandbox is the gVisor Sandbox the counter runs in: it wakes on request, with pause-mode mode.
func counterSandbox(ns, name, mode string) *testwrap.SandboxWrapper {
	return testwrap.MakeSandbox(ns, name).Containers(runtimeContainer()).TerminationGracePeriod(1).
		RuntimeClass(ptr.To(spec.GVisorRuntimeClass)).
		Annotation(agentsv1alpha1.WakeOnRequestAnnotation, "true").Annotation(agentsv1alpha1.PauseModeAnnotation, mode)
}

// keepMemoryCycle pauses and wakes the Sandbox once, timed; with KeepMemory the same counter
// answers after the wake, from a new pod restored from the image.
func keepMemoryCycle(t *testing.T, sb *sdk.Sandbox, ns, name, mode, wake string) time.Duration {
	t.Helper()
	ctx := t.Context()
	before := counterNow(t, sb)
	pod, err := podOf(ctx, ns, name)
	mustf(t, err, "reading the pod")
	d, body := pauseAndWake(t, sb, ns, name)
	if mode == agentsv1beta1.PauseModeDelete {
		return d
	}
	if _, _, ok := counterAnswer(body); !ok {
		// The wake's own request may meet the restored server mid-connection (busybox httpd
		// forks per connection); the processes are what must have survived: ask again.
		t.Logf("wake %s: the first answer after the wake is %s; asking the server again", wake, body)
		body = runAnswer(t, sb)
	}
	checkSameProcess(t, wake, before, body)
	after, err := podOf(ctx, ns, name)
	mustf(t, err, "reading the woken pod")
	if after.UID == pod.UID || after.Annotations[agentsv1alpha1.RestoreImageAnnotation] == "" {
		t.Fatalf("wake %s: pod %s (restore annotation %q); want a new pod restored from the image", wake, after.UID, after.Annotations[agentsv1alpha1.RestoreImageAnnotation])
	}
	slow.EventuallyContext(t, "MemoryKept says the memory came back", func(ctx context.Context) error {
		return memoryKept(ctx, ns, name, agentsv1beta1.ReasonMemoryRestored)
	})
	return d
}

// runAnswer is the server's answer through sandboxd, as the legacy execute API words it, once it
// is the counter's (bounded: a lost process never answers so, and the test then fails on it).
func runAnswer(t *testing.T, sb *sdk.Sandbox) string {
	t.Helper()
	var body string
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		res, err := sb.Run(ctx, sdk.Shell(askServer))
		if err == nil {
			raw, _ := json.Marshal(map[string]string{"stdout": res.Stdout})
			body = string(raw)
			if _, _, ok := counterAnswer(body); ok {
				return body
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return body
}

// counterNow waits until the server answers with the counter and returns that answer.
func counterNow(t *testing.T, sb *sdk.Sandbox) string {
	t.Helper()
	var now string
	slow.EventuallyContext(t, "the server answers with the counter", func(ctx context.Context) error {
		res, err := sb.Run(ctx, sdk.Shell(askServer))
		if err == nil && len(strings.Fields(res.Stdout)) != 2 {
			err = fmt.Errorf("answer %q", res.Stdout)
		}
		if err == nil {
			now = res.Stdout
		}
		return err
	})
	return now
}

// pauseAndWake pauses the Sandbox, waits for its pod to go, and times a request through the
// router that wakes it, until its answer.
func pauseAndWake(t *testing.T, sb *sdk.Sandbox, ns, name string) (time.Duration, string) {
	t.Helper()
	ctx := t.Context()
	mustf(t, sb.Pause(ctx), "pausing")
	slow.EventuallyContext(t, "paused, its pod gone", func(ctx context.Context) error {
		if _, err := podOf(ctx, ns, name); err == nil {
			return fmt.Errorf("pod still there")
		}
		s, err := sandboxOf(ctx, ns, name)
		if err == nil && s.Status.Replicas != 0 {
			err = fmt.Errorf("status replicas %d", s.Status.Replicas)
		}
		return err
	})
	if s, _ := sandboxOf(ctx, ns, name); s.Annotations[agentsv1alpha1.PauseModeAnnotation] == agentsv1beta1.PauseModeKeepMemory {
		slow.EventuallyContext(t, "MemoryKept says the memory was saved", func(ctx context.Context) error {
			return memoryKept(ctx, ns, name, agentsv1beta1.ReasonMemorySaved)
		})
	}
	time.Sleep(time.Second) // the routers' caches see the pause
	start := time.Now()
	code, body, err := legacyExecute(ctx, ns, name, cluster.RouterToken, askServer)
	d := time.Since(start)
	if err != nil || code != http.StatusOK {
		t.Fatalf("the wake: %d %s %v; want 200", code, body, err)
	}
	return d, body
}

// checkSameProcess: the answer after the wake comes from the counter that ran before the pause,
// carried on from where it was.
func checkSameProcess(t *testing.T, wake, before, body string) {
	t.Helper()
	var pid0, n0 int
	if _, err := fmt.Sscan(before, &pid0, &n0); err != nil {
		t.Fatalf("wake %s: the answer before the pause %q: %v", wake, before, err)
	}
	pid, n, ok := counterAnswer(body)
	if !ok {
		t.Fatalf("wake %s: the first answer after the wake is %s; want the counter's \"<pid> <count>\" from the server (the processes lost)", wake, body)
	}
	if pid != pid0 || n < n0 {
		t.Fatalf("wake %s: the counter answers pid %d count %d; before the pause pid %d count %d: want the same process, not reset", wake, pid, n, pid0, n0)
	}
	t.Logf("%s: pid %d, counter %d before, %d at the first answer after", wake, pid, n0, n)
}
