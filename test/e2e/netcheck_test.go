//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/antispoof"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// TestRoutersStartOnlyAfterTheirNetworkCheckPasses: every router pod of the install ran
// check-network (it names tokenless callers by their pod) and it found forged sources dropped.
func TestRoutersStartOnlyAfterTheirNetworkCheckPasses(t *testing.T) {
	var routers corev1.PodList
	mustf(t, kube.List(t.Context(), &routers, client.InNamespace(spec.SystemNS), client.MatchingLabels{"app": "sandbox-router"}), "listing routers")
	if len(routers.Items) == 0 {
		t.Fatal("no router pods")
	}
	for _, p := range routers.Items {
		st := initStatus(p, "check-network")
		if st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			t.Errorf("router %s: check-network status %+v, want terminated with exit code 0", p.Name, st)
			continue
		}
		logs, err := kcs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "check-network"}).DoRaw(t.Context())
		mustf(t, err, "reading check-network's log in %s", p.Name)
		if !strings.Contains(string(logs), "forged source addresses are dropped") {
			t.Errorf("router %s: check-network said %q, want it to have seen forged sources dropped", p.Name, logs)
		}
	}
}

// TestTheNetworkCheckRefusesWhereAPodsForgedSourcesPass runs check-network in a pod whose
// bridge port the test has taken out of the anti-spoofing table (as on a bridge without the
// plugin): it must fail and say why, as a router pod's init container would.
func TestTheNetworkCheckRefusesWhereAPodsForgedSourcesPass(t *testing.T) {
	ns := newNamespace(t, "netcheck")
	pod := clientPod(ns, "check", "default", asRootOnRunc, func(s *corev1.PodSpec) {
		// The check waits for the test to open the port: the pod's network exists while this runs.
		s.InitContainers = []corev1.Container{{Name: "wait", Image: runtimeContainer().Image, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", "until [ -e /tmp/go ]; do sleep 0.2; done"}}}
		s.Containers[0].Image, s.Containers[0].Command, s.Containers[0].Args = spec.RouterImage, nil, []string{"check-network"}
		s.RestartPolicy = corev1.RestartPolicyNever
	})
	mustf(t, kube.Create(t.Context(), pod), "creating the check's pod")
	var iflink string
	slow.Eventually(t, "reading the pod's host-side interface", func() error {
		var out strings.Builder
		if err := kubeExec(t.Context(), ns, "check", "wait", []string{"cat", "/sys/class/net/eth0/iflink"}, &out, &out); err != nil {
			return fmt.Errorf("%w: %s", err, out.String())
		}
		iflink = strings.TrimSpace(out.String())
		return nil
	})
	veth := hostLinkByIndex(t, iflink)
	if out, err := exec.Command("nft", "delete", "element", antispoof.Family, antispoof.Table, "ports", "{ \""+veth+"\" }").CombinedOutput(); err != nil {
		t.Fatalf("taking %s out of the anti-spoofing table: %v %s", veth, err, out)
	}
	mustf(t, kubeExec(t.Context(), ns, "check", "wait", []string{"touch", "/tmp/go"}, &strings.Builder{}, &strings.Builder{}), "starting the check")

	slow.Eventually(t, "the check to end", func() error {
		if err := kube.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", pod.Status.Phase)
		}
		return nil
	})
	if pod.Status.Phase != corev1.PodFailed {
		t.Errorf("the check's pod ended %s, want Failed (check-network exits 1 where forged sources pass)", pod.Status.Phase)
	}
	logs, err := kcs.CoreV1().Pods(ns).GetLogs("check", &corev1.PodLogOptions{Container: "runtime"}).DoRaw(t.Context())
	mustf(t, err, "reading the check's log")
	if !strings.Contains(string(logs), "forged source addresses pass") || !strings.Contains(string(logs), "Refusing") {
		t.Errorf("check-network said %q; want it to refuse, saying forged source addresses pass", logs)
	}
}

func initStatus(p corev1.Pod, name string) *corev1.ContainerStatus {
	for i, st := range p.Status.InitContainerStatuses {
		if st.Name == name {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// hostLinkByIndex names the host's interface with ifindex index (a pod's veth peer).
func hostLinkByIndex(t *testing.T, index string) string {
	t.Helper()
	out, err := exec.Command("ip", "-j", "link", "show").Output()
	mustf(t, err, "ip link")
	var links []struct {
		Index int    `json:"ifindex"`
		Name  string `json:"ifname"`
	}
	mustf(t, json.Unmarshal(out, &links), "parsing ip link")
	for _, l := range links {
		if index == strconv.Itoa(l.Index) {
			return l.Name
		}
	}
	t.Fatalf("no host interface with index %s", index)
	return ""
}
