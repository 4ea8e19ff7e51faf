package components

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// ComponentStatus is one line of `dev status`.
type ComponentStatus struct {
	Name    string
	PID     int // 0 when not running
	Healthy bool
	Detail  string
}

// Status reports each process of the cluster and whether it answers its health check.
func Status(ctx context.Context, c *Cluster) ([]ComponentStatus, error) {
	c.HostProcesses = c.HostProcesses || c.recordedHostProcesses()
	checks := map[string]func(context.Context) error{
		"etcd":                     c.etcd("").Ready,
		"kube-apiserver":           c.apiserver("").Ready,
		"kube-controller-manager":  c.controllerManager("").Ready,
		"kube-scheduler":           c.scheduler("").Ready,
		hostPathProvisionerName:    c.hostPathProvisioner().Ready,
		"containerd":               func(ctx context.Context) error { return c.ctr(ctx, "version") },
		"kubelet":                  c.nodeReady(spec.NodeName),
		"kube-proxy":               c.kubeProxyReady,
		"cilium-agent":             c.ciliumReady,
		"agent-sandbox-controller": c.controller().Ready,
		"sandbox-router":           c.router().Ready,
		"kwok":                     c.kwokNodesReady,
	}
	var out []ComponentStatus
	for _, name := range ProcessNames {
		st := ComponentStatus{Name: name}
		r := c.Proc.Running(name)
		if r == nil && (name == "agent-sandbox-controller" || name == "sandbox-router") {
			out = append(out, c.deploymentStatus(ctx, name))
			continue
		}
		if r == nil {
			st.Detail = "not running"
			if name == "kwok" {
				st.Detail = "not running (no --kwok-nodes)"
			}
			out = append(out, st)
			continue
		}
		st.PID = r.PID
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := checks[name](cctx); err != nil {
			st.Detail = err.Error()
		} else {
			st.Healthy, st.Detail = true, "ok"
		}
		cancel()
		out = append(out, st)
	}
	return append(out, c.dnsStatus(ctx)), nil
}

// dnsStatus reports CoreDNS, a Deployment rather than a process.
func (c *Cluster) dnsStatus(ctx context.Context) ComponentStatus {
	st := ComponentStatus{Name: "coredns"}
	if c.Proc.Running("kube-apiserver") == nil {
		st.Detail = "not running"
		return st
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.dnsReady(cctx); err != nil {
		st.Detail = "Deployment: " + err.Error()
		return st
	}
	st.Healthy, st.Detail = true, "Deployment kube-system/coredns available, Service kube-dns "+spec.ClusterDNSIP
	return st
}

func (c *Cluster) kwokNodesReady(ctx context.Context) error {
	cs, err := kube.Clientset(c.KubeconfigPath())
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if err := c.nodeReady(n.Name)(ctx); err != nil {
			return err
		}
	}
	if len(nodes.Items) == 0 {
		return fmt.Errorf("no simulated nodes registered")
	}
	return nil
}

// PrintStatus writes the status as a table.
func PrintStatus(w io.Writer, sts []ComponentStatus, c *Cluster) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tHEALTHY\tDETAIL")
	for _, s := range sts {
		pid := "-"
		if s.PID != 0 {
			pid = fmt.Sprint(s.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", s.Name, pid, s.Healthy, s.Detail)
	}
	_ = tw.Flush()
	c.HostProcesses = c.HostProcesses || c.recordedHostProcesses()
	fmt.Fprintf(w, "\nstate dir: %s\nexport KUBECONFIG=%s\nrouter: %s\nsandbox runtime: %s\n", c.Dir, c.KubeconfigPath(), c.RouterURL(),
		sandboxRuntimeLine(c.recordedSandboxRuntime()))
}

// sandboxRuntimeLine says which runtime the last `up` gave sandbox pods.
func sandboxRuntimeLine(recorded string) string {
	switch recorded {
	case "":
		return "unknown (no up yet)"
	case spec.SandboxRuntimeGVisor:
		return recorded + " (RuntimeClass " + spec.GVisorRuntimeClass + ", containerd handler " + spec.RunscHandler + ")"
	}
	return recorded + " (no RuntimeClass)"
}

// deploymentStatus reports a component the chart runs as a Deployment.
func (c *Cluster) deploymentStatus(ctx context.Context, name string) ComponentStatus {
	st := ComponentStatus{Name: name}
	cl, err := kube.Client(c.KubeconfigPath())
	if err != nil {
		st.Detail = err.Error()
		return st
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := kube.DeploymentRolledOut(cl, name)(cctx); err != nil {
		st.Detail = "Deployment: " + err.Error()
		return st
	}
	st.Healthy, st.Detail = true, "Deployment "+spec.SystemNS+"/"+name+" available"
	return st
}

// ProcessNames lists every process the cluster may run, in start order.
var ProcessNames = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", hostPathProvisionerName,
	"containerd", "kubelet", "kube-proxy", "cilium-agent", "kwok", "agent-sandbox-controller", "sandbox-router",
}
