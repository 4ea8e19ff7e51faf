//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// Traffic proves policy: on the local cluster NetworkPolicy is enforced (docs/dev-cluster.md),
// so each rule is checked by sending packets, to other pods and to servers this test starts on
// this machine in network namespaces of their own: one at a public address (198.51.100.10, a
// documentation range, standing in for the internet) and one at a private one (192.168.77.10).

const (
	publicHost  = "198.51.100.10"
	privateHost = "192.168.77.10"
	clusterDNS  = "10.96.0.10"
	routerFQDN  = "sandbox-router-svc.agent-sandbox-system.svc.cluster.local"
)

// testHost puts a TCP server answering "ok" on port 80 (or the ports given) of addr, in network
// namespace name, behind a veth pair whose host end is gw (both /24), and removes it all after
// the test.
func testHost(t *testing.T, name, gw, addr string, ports ...int) {
	t.Helper()
	testHostAt(t, name, gw, []string{addr}, ports...)
}

// testHostAt is testHost answering on several addresses of the same /24; it returns the network
// namespace's name.
func testHostAt(t *testing.T, name, gw string, addrs []string, ports ...int) string {
	t.Helper()
	ns, hostIf := "sbxt-"+name, "sbxt-"+name+"0"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// Leftovers of an interrupted run: its server keeps the namespace (and so the veth) alive.
	if pids, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		_ = exec.Command("kill", append([]string{"-9"}, strings.Fields(string(pids))...)...).Run()
	}
	_ = exec.Command("ip", "netns", "delete", ns).Run()
	_ = exec.Command("ip", "link", "delete", hostIf).Run()
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() })
	run("ip", "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns)
	run("ip", "addr", "add", gw+"/24", "dev", hostIf)
	run("ip", "link", "set", hostIf, "up")
	in := []string{"ip", "netns", "exec", ns}
	for _, addr := range addrs {
		run(append(in, "ip", "addr", "add", addr+"/24", "dev", "eth0")...)
	}
	run(append(in, "ip", "link", "set", "eth0", "up")...)
	run(append(in, "ip", "link", "set", "lo", "up")...)
	run(append(in, "ip", "route", "add", "default", "via", gw)...)
	// The host forwards between the pod bridge and this veth whatever else FORWARD says; the
	// policy engine decides at the pods' own interfaces, before this chain.
	for _, dir := range []string{"-i", "-o"} {
		run("iptables", "-I", "FORWARD", "1", dir, hostIf, "-j", "ACCEPT")
		t.Cleanup(func() { _ = exec.Command("iptables", "-D", "FORWARD", dir, hostIf, "-j", "ACCEPT").Run() })
	}
	if len(ports) == 0 {
		ports = []int{80}
	}
	for _, port := range ports {
		srv := exec.Command("ip", append(in[1:], "socat", fmt.Sprintf("TCP-LISTEN:%d,fork,reuseaddr", port), "SYSTEM:echo ok")...)
		if err := srv.Start(); err != nil {
			t.Fatalf("starting the server of %s on port %d: %v", name, port, err)
		}
		t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	}
	return ns
}

// reach reports whether a TCP connection from the pod's runtime container to addr:port opens
// within 3 s (busybox nc exits 0 once connected and stdin is at its end).
func reach(t *testing.T, ns, pod, addr string, port int) bool {
	t.Helper()
	out, _ := execOut(t, ns, pod, fmt.Sprintf("if nc -w 3 %s %d </dev/null >/dev/null 2>&1; then echo open; else echo closed; fi", addr, port))
	return strings.TrimSpace(out) == "open"
}

// expectReach checks one path and names it in the failure.
func expectReach(t *testing.T, ns, from, to, addr string, port int, want bool) {
	t.Helper()
	if got := reach(t, ns, from, addr, port); got != want {
		t.Errorf("%s → %s (%s:%d): connected = %v, want %v", from, to, addr, port, got, want)
	}
}

// podIPs waits for the pods of the named Sandboxes and returns their IPs, concurrently: the
// sandboxes start together.
func podIPs(t *testing.T, ns string, names ...string) map[string]string {
	t.Helper()
	var mu sync.Mutex
	ips := map[string]string{}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			pod := waitPodReady(t, ns, n)
			mu.Lock()
			ips[n] = pod.Status.PodIP
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ips) != len(names) {
		t.FailNow()
	}
	return ips
}

// One test, so the test hosts exist once; its sandboxes start together.
func TestNetworkPolicyIsEnforced(t *testing.T) {
	testHost(t, "pub", "198.51.100.1", publicHost)
	testHost(t, "priv", "192.168.77.1", privateHost)
	ns := newNamespace(t, "netpol")
	ctx := t.Context()

	createTemplate(t, ns, "secure", false) // the secure default policy
	open := createTemplate(t, ns, "open", false)
	open.Spec.NetworkPolicyManagement = extv1alpha1.NetworkPolicyManagementUnmanaged
	mustf(t, kube.Update(ctx, open), "making template open Unmanaged")
	objs := []client.Object{
		testwrap.MakeClaim(ns, "secure-a").Template("secure").Obj(),
		testwrap.MakeClaim(ns, "secure-b").Template("secure").Obj(),
		testwrap.MakeClaim(ns, "open-c").Template("open").Obj(),
		harnessSandbox(ns, "neighbour", nil).Obj(),
		harnessSandbox(ns, "deny", nil).Annotation(agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressDenyAll).Obj(),
		harnessSandbox(ns, "restricted", nil).Annotation(agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressRestricted).
			Annotation(agentsv1alpha1.EgressCIDRsAnnotation, "192.168.77.0/24").Obj(),
		harnessSandbox(ns, "allow", nil).Annotation(agentsv1alpha1.EgressAnnotation, agentsv1alpha1.EgressAllowAll).Obj(),
	}
	for _, o := range objs {
		mustf(t, kube.Create(ctx, o), "creating %s", o.GetName())
	}
	ip := podIPs(t, ns, "secure-a", "secure-b", "open-c", "neighbour", "deny", "restricted", "allow")

	t.Run("a pod without policy reaches both test hosts (the paths exist)", func(t *testing.T) {
		expectReach(t, ns, "neighbour", "public host", publicHost, 80, true)
		expectReach(t, ns, "neighbour", "private host", privateHost, 80, true)
	})
	t.Run("the secure default admits only the router and lets out only to public addresses", func(t *testing.T) {
		expectReach(t, ns, "secure-a", "sandbox secure-b", ip["secure-b"], 8888, false)
		expectReach(t, ns, "neighbour", "sandbox secure-a", ip["secure-a"], 8888, false)
		expectReach(t, ns, "secure-a", "private host", privateHost, 80, false)
		expectReach(t, ns, "secure-a", "public host", publicHost, 80, true)
		code, body, err := routerPost(ctx, ns, "secure-a", "/execute", `{"command":"echo through the router"}`)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "through the router") {
			t.Errorf("router → secure-a: %d %s %v, want 200 with the output", code, body, err)
		}
	})
	t.Run("an Unmanaged template's sandbox is reachable and reaches private addresses", func(t *testing.T) {
		expectReach(t, ns, "neighbour", "sandbox open-c", ip["open-c"], 8888, true)
		expectReach(t, ns, "open-c", "private host", privateHost, 80, true)
	})
	t.Run("deny-all lets nothing out, DNS included", func(t *testing.T) {
		expectReach(t, ns, "deny", "public host", publicHost, 80, false)
		expectReach(t, ns, "deny", "private host", privateHost, 80, false)
		expectReach(t, ns, "deny", "cluster DNS", clusterDNS, 53, false)
	})
	t.Run("restricted lets out its CIDRs and DNS only", func(t *testing.T) {
		expectReach(t, ns, "restricted", "private host (listed)", privateHost, 80, true)
		expectReach(t, ns, "restricted", "public host (not listed)", publicHost, 80, false)
		expectReach(t, ns, "restricted", "cluster DNS", clusterDNS, 53, true)
	})
	t.Run("allow-all lets everything out", func(t *testing.T) {
		expectReach(t, ns, "allow", "public host", publicHost, 80, true)
		expectReach(t, ns, "allow", "private host", privateHost, 80, true)
	})
	t.Run("a pod reaches the router by its Service name and through it a sandbox", func(t *testing.T) {
		// busybox-static resolves names only through its own nslookup (its libc resolver is
		// not usable statically): resolve, then speak HTTP/1.0 with nc, keeping nc's stdin open
		// while the answer comes (at stdin's end it closes, and the router sees the client go).
		// The router names the tokenless caller by its pod: the neighbour's ServiceAccount may
		// reach secure-a, and only it.
		grantProxy(t, ns, "default", "secure-a")
		body := `{"command":"echo via dns"}`
		script := fmt.Sprintf(`ip=$(nslookup %s | awk '/^Address/ { a = $NF } END { print a }') && `+
			`(printf 'POST /execute HTTP/1.0\r\nX-Sandbox-ID: secure-a\r\nX-Sandbox-Namespace: %s\r\n`+
			`Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s'; sleep 3) | nc -w 10 "$ip" 8080`, routerFQDN, ns, len(body), body)
		// A failed lookup (CoreDNS not answering yet: "nc: bad address ''") is tried again, not fatal.
		slow.EventuallyContext(t, "the router by name from a pod", func(ctx context.Context) error {
			var out, errOut bytes.Buffer
			err := kubeExec(ctx, ns, "neighbour", "runtime", []string{"sh", "-c", script}, &out, &errOut)
			if err != nil || !strings.Contains(out.String(), "via dns") {
				return fmt.Errorf("answer %q, stderr %q, exec: %v", out.String(), errOut.String(), err)
			}
			return nil
		})
	})
	t.Run("the egress policy goes with its Sandbox", func(t *testing.T) {
		sb := &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny"}}
		mustf(t, kube.Delete(ctx, sb), "deleting sandbox deny")
		slow.EventuallyContext(t, "no NetworkPolicy controlled by the deleted Sandbox", func(ctx context.Context) error {
			return noPolicyOwnedBy(ctx, ns, "deny")
		})
	})
}

// noPolicyOwnedBy checks that no NetworkPolicy of ns has the named Sandbox as its controller.
func noPolicyOwnedBy(ctx context.Context, ns, sandbox string) error {
	var nps networkingv1.NetworkPolicyList
	if err := kube.List(ctx, &nps, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, np := range nps.Items {
		if ref := metav1.GetControllerOf(&np); ref != nil && ref.Kind == "Sandbox" && ref.Name == sandbox {
			return fmt.Errorf("NetworkPolicy %s is still controlled by Sandbox %s", np.Name, sandbox)
		}
	}
	return nil
}
