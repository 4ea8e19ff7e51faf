//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
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

func TestARouterKilledMidCommandCutsItWithAnErrorAndTheOtherServes(t *testing.T) {
	ns := newNamespace(t, "rtrkill")
	ctx := t.Context()
	cli := sdkClient(t, ns)
	sb, err := cli.CreateSandbox(ctx, runtimeSandbox(ns, "target"))
	mustf(t, err, "creating sandbox target")
	ip := sb.PodIP()

	// A command in flight through one router replica.
	type result struct {
		res *sdk.Result
		err error
		at  time.Time
	}
	inFlight := make(chan result, 1)
	go func() {
		res, err := sb.Run(ctx, sdk.Shell("sleep 30; echo finished"))
		inFlight <- result{res, err, time.Now()}
	}()
	var routers corev1.PodList
	var carrier *corev1.Pod
	var pid int
	slow.EventuallyContext(t, "the router replica carrying the command", func(ctx context.Context) error {
		if err := kube.List(ctx, &routers, client.InNamespace(devcluster.SystemNS), client.MatchingLabels{"app": "sandbox-router"}); err != nil {
			return err
		}
		for i := range routers.Items {
			if p := processOf(t, &routers.Items[i], "/usr/local/bin/router", ""); connectedTo(p, ip, 8888) {
				carrier, pid = &routers.Items[i], p
				return nil
			}
		}
		return fmt.Errorf("no router connected to %s:8888 among %d", ip, len(routers.Items))
	})
	if len(routers.Items) < 2 {
		t.Fatalf("%d router replicas, want the install's 2", len(routers.Items))
	}
	killContainer(t, carrier, "/usr/local/bin/router", "")
	killed := time.Now()
	t.Logf("killed router %s (pid %d) with a command in flight", carrier.Name, pid)

	// The command in flight ends at once, with an error naming the call (it may have run: it is
	// not sent again).
	select {
	case r := <-inFlight:
		if r.err == nil {
			t.Fatalf("the command in flight through the killed router finished: %q, want an error", r.res.Stdout)
		}
		t.Logf("the command in flight ended %s after the kill: %v", r.at.Sub(killed).Round(time.Millisecond), r.err)
		if !errors.Is(r.err, sdk.ErrConnectionLost) || !strings.Contains(r.err.Error(), "POST /v1/exec") {
			t.Errorf("in-flight error %q: want sdk.ErrConnectionLost naming the call", r.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the command in flight through the killed router still hangs a minute after the kill")
	}

	// New commands, one after another: one sent in the first second, while the client may still
	// hold another connection to the dead replica, may end the same way, with ErrConnectionLost;
	// every one sent a second after the kill or later succeeds (the SDK dials again, past the
	// dead replica, until the Service routes to the other).
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
