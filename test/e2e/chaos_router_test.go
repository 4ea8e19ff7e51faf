//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// connectedTo reports whether the process pid has an established TCP connection to ip:port in
// its network namespace (/proc/<pid>/net/tcp: little-endian hex addresses, state 01).
func connectedTo(pid int, ip string, port int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return false
	}
	v4 := net.ParseIP(ip).To4()
	want := fmt.Sprintf("%08X:%04X", binary.LittleEndian.Uint32(v4), port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == want && f[3] == "01" {
			return true
		}
	}
	return false
}

// inFlight is how a test starts a call through the router that is still running when the
// router carrying it is killed; the call's error goes to the channel when it ends.
type inFlight struct {
	name    string
	op      string // the request the error must name
	streams bool   // output arrives before the end
	call    func(ctx context.Context, sb *sdk.Sandbox, out io.Writer) error
}

// lines30 writes a line a second for 30 s.
const lines30 = "for i in $(seq 30); do echo line $i; sleep 1; done"

var callsInFlight = []inFlight{
	{"a buffered command", "POST /v1/exec", false, func(ctx context.Context, sb *sdk.Sandbox, _ io.Writer) error {
		res, err := sb.Run(ctx, sdk.Shell("sleep 30; echo finished"))
		if err == nil {
			return fmt.Errorf("finished: %q", res.Stdout)
		}
		return err
	}},
	{"a command streaming its output (NDJSON)", "POST /v1/exec", true, func(ctx context.Context, sb *sdk.Sandbox, out io.Writer) error {
		res, err := sb.Run(ctx, sdk.Shell(lines30), sdk.WithStdout(out))
		if err == nil {
			return fmt.Errorf("finished: %q", res.Stdout)
		}
		return err
	}},
	{"a WebSocket exec streaming its output", "GET /v1/exec/ws", true, func(ctx context.Context, sb *sdk.Sandbox, out io.Writer) error {
		// Stdin from a pipe (not in memory) makes the SDK use the WebSocket exec.
		stdin, w := io.Pipe()
		defer w.Close()
		res, err := sb.Run(ctx, sdk.Shell(lines30), sdk.WithStdin(stdin), sdk.WithStdout(out))
		if err == nil {
			return fmt.Errorf("finished: %q", res.Stdout)
		}
		return err
	}},
}

func TestARouterKilledMidCallCutsItWithAnErrorAndTheOtherServes(t *testing.T) {
	ns := newNamespace(t, "rtrkill")
	cli := sdkClient(t, ns)
	for i, tc := range callsInFlight {
		t.Run(tc.name, func(t *testing.T) {
			// A sandbox of its own per call: the routers keep idle connections to the sandboxes
			// they served, so after an earlier kill both would be connected to a shared one and
			// the carrier could not be told apart.
			name := fmt.Sprintf("target-%d", i)
			sb, err := cli.CreateSandbox(t.Context(), runtimeSandbox(ns, name))
			mustf(t, err, "creating sandbox %s", name)
			slow.EventuallyContext(t, "every replica of the install ready", systemReady)
			killRouterMidCall(t, sb, tc)
		})
	}
}

// killRouterMidCall starts the call, SIGKILLs the router replica that carries it, and checks
// that the call ends at once with an error naming it, and that new commands reach the sandbox
// through the other replica.
func killRouterMidCall(t *testing.T, sb *sdk.Sandbox, tc inFlight) {
	ctx := t.Context()
	ip := sb.PodIP()
	type result struct {
		err error
		at  time.Time
	}
	ended := make(chan result, 1)
	out := &testwrap.SyncBuffer{}
	go func() {
		err := tc.call(ctx, sb, out)
		ended <- result{err, time.Now()}
	}()
	var routers corev1.PodList
	var carrier *corev1.Pod
	var pid int
	slow.EventuallyContext(t, "the router replica carrying the call", func(ctx context.Context) error {
		if err := kube.List(ctx, &routers, client.InNamespace(spec.SystemNS), client.MatchingLabels{"app": "sandbox-router"}); err != nil {
			return err
		}
		carrier, pid = nil, 0
		connected := 0
		for i := range routers.Items {
			if p := processOf(t, &routers.Items[i], "/usr/local/bin/router", nil); connectedTo(p, ip, 8888) {
				carrier, pid = &routers.Items[i], p
				connected++
			}
		}
		if connected != 1 {
			return fmt.Errorf("%d of %d routers connected to %s:8888, want exactly the one carrying the call", connected, len(routers.Items), ip)
		}
		return nil
	})
	if len(routers.Items) < 2 {
		t.Fatalf("%d router replicas, want the install's 2", len(routers.Items))
	}
	time.Sleep(1500 * time.Millisecond) // output on the way for a streaming call
	killContainer(t, carrier, "/usr/local/bin/router", nil)
	killed := time.Now()
	t.Logf("killed router %s (pid %d) with %s in flight", carrier.Name, pid, tc.name)

	// The call in flight ends at once, with an error naming it (it may have run: it is not sent
	// again), and a streaming call has delivered what came before the cut.
	select {
	case r := <-ended:
		t.Logf("the call in flight ended %s after the kill: %v; output before the cut %q", r.at.Sub(killed).Round(time.Millisecond), r.err, out.String())
		if !errors.Is(r.err, sdk.ErrConnectionLost) || !strings.Contains(r.err.Error(), tc.op) {
			t.Errorf("in-flight error %q: want sdk.ErrConnectionLost naming %s", r.err, tc.op)
		}
		if tc.streams && !strings.Contains(out.String(), "line 1\n") {
			t.Errorf("output before the cut %q: want the lines streamed until then", out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the call in flight through the killed router still hangs a minute after the kill")
	}

	// New commands, one after another: one sent in the first second, while the client may still
	// hold another connection to the dead replica, may end the same way, with ErrConnectionLost;
	// every one sent a second after the kill or later succeeds (the SDK dials again, past the
	// dead replica, until the Service routes to the other). None is answered 404: the router
	// that restarts answers only from a synced cache.
	var firstOK time.Duration
	for i := 0; i < 20 || time.Since(killed) < 2*time.Second; i++ {
		start := time.Now()
		res, err := sb.Run(ctx, sdk.Shell("echo after "+strconv.Itoa(i)))
		after := start.Sub(killed)
		switch {
		case err != nil && after < time.Second && errors.Is(err, sdk.ErrConnectionLost):
			t.Logf("command %d, %s after the kill, on a connection to the dead replica: %v", i, after.Round(time.Millisecond), err)
		case err != nil:
			t.Errorf("command %d, %s after the kill: %v", i, after.Round(time.Millisecond), err)
		case firstOK == 0:
			firstOK = time.Since(killed)
			t.Logf("first command after the kill answered %s after it (%q)", firstOK.Round(time.Millisecond), strings.TrimSpace(res.Stdout))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
