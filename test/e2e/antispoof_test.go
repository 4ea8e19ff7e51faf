//go:build e2e

package e2e

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

//go:embed testdata/spoof.py
var spoofScript string

// fenceWait bounds the wait for a fence: it travels a bridge on this machine.
var fenceWait = testwrap.Wait{Timeout: 20 * time.Second, Interval: 200 * time.Millisecond}

// nobodysMAC is owned by no interface: the bridge floods frames sent to it to every port.
const nobodysMAC = "02:5b:ad:00:00:01"

// asRootOnRunc makes a pod whose container runs as root under runc, so it holds the runtime's
// default capabilities, NET_RAW among them: not a sandbox (admission and the template defaults
// keep those unprivileged), but any pod a tenant or an admin may run.
func asRootOnRunc(s *corev1.PodSpec) {
	s.AutomountServiceAccountToken = ptr.To(false)
	s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false)}
}

// TestAPodWithNetRawCannotSendAsAnotherPod is issue 37's attack 1 on the local cluster: a pod
// with NET_RAW writes Ethernet frames claiming another pod's IP (ARP, and a TCP SYN) to a
// listening pod, which records what reaches its interface. The CNI chain's anti-spoofing plugin
// (docs/dev-cluster.md) must drop the forged frames and pass the attacker's own. Each frame is
// followed by a fence from the attacker's own address; the fence's arrival, not a timeout, says
// the forged frame had its chance. TestAPodCannotSendAsAnotherPodsAddress
// (internal/devcluster/antispoof) shows the same frames arriving without the plugin.
func TestAPodWithNetRawCannotSendAsAnotherPod(t *testing.T) {
	ns := newNamespace(t, "spoof")
	listen := func(s *corev1.PodSpec) {
		s.Containers[0].Command = []string{"python3", "-c", spoofScript, "listen", "8080", "/tmp/seen"}
	}
	for _, p := range []*corev1.Pod{
		clientPod(ns, "listener", "default", asRootOnRunc, listen),
		clientPod(ns, "victim", "default"),
		clientPod(ns, "attacker", "default", asRootOnRunc),
	} {
		mustf(t, kube.Create(t.Context(), p), "creating pod %s", p.Name)
	}
	ip := podIPs(t, ns, "listener", "victim", "attacker")
	listenerMAC := strings.TrimSpace(podOut(t, ns, "listener", "cat", "/sys/class/net/eth0/address"))
	ownMAC := strings.TrimSpace(podOut(t, ns, "attacker", "cat", "/sys/class/net/eth0/address"))

	cases := []struct {
		name, kind, ethSrc, sha, srcIP string
		through                        bool
	}{
		// ARP first: later SYNs make the listener resolve the attacker's address by itself.
		{"ARP: the victim's IP is at a MAC nobody owns", "arp", nobodysMAC, nobodysMAC, ip["victim"], false},
		{"ARP: the victim's IP is at the attacker's MAC", "arp", ownMAC, ownMAC, ip["victim"], false},
		{"control: ARP with the attacker's own IP and MAC", "arp", ownMAC, ownMAC, ip["attacker"], true},
		{"SYN from the victim's IP and a MAC nobody owns", "syn", nobodysMAC, "-", ip["victim"], false},
		{"SYN from the victim's IP and the attacker's MAC", "syn", ownMAC, "-", ip["victim"], false},
		{"control: SYN from the attacker's own IP and MAC", "syn", ownMAC, "-", ip["attacker"], true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sport, fence := fmt.Sprint(41000+i), fmt.Sprint(100+i)
			podOut(t, ns, "attacker", "python3", "-c", spoofScript, "send", tc.kind, listenerMAC, tc.ethSrc, tc.srcIP, ip["listener"],
				sport, tc.sha, ownMAC, ip["attacker"], fence)
			var seen []string
			fenceLine := "FENCE " + ip["attacker"] + " " + fence
			fenceWait.Eventually(t, "the fence from the attacker's own address reached the listener", func() error {
				seen = strings.Split(strings.TrimSpace(podOut(t, ns, "listener", "cat", "/tmp/seen")), "\n")
				if !slices.Contains(seen, fenceLine) {
					return fmt.Errorf("listener saw %q", seen)
				}
				return nil
			})
			var got bool
			if tc.kind == "arp" {
				got = arpEntry(podOut(t, ns, "listener", "cat", "/proc/net/arp"), tc.srcIP) == tc.sha
			} else {
				got = slices.Contains(seen[:slices.Index(seen, fenceLine)], "SYN "+tc.srcIP+" "+sport)
			}
			if got != tc.through {
				t.Errorf("%s from %s (ether %s) reached the listener: %v, want %v (listener saw %q)", tc.kind, tc.srcIP, tc.ethSrc, got, tc.through, seen)
			}
		})
	}
}

// podOut runs argv in a pod's runtime container and returns its stdout.
func podOut(t *testing.T, ns, pod string, argv ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	mustf(t, kubeExec(t.Context(), ns, pod, "runtime", argv, &stdout, &stderr), "%s in %s (stderr %q)", argv[0], pod, stderr.String())
	return stdout.String()
}

// arpEntry is the hardware address /proc/net/arp holds for ip ("" when none).
func arpEntry(table, ip string) string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == ip {
			return f[3]
		}
	}
	return ""
}
