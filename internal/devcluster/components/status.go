package components

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/kube"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// Status reports each process of the cluster and whether it answers its health check, in
// start order, then what runs only in pods (CoreDNS).
func Status(ctx context.Context, e Env) []ComponentStatus {
	e.Cfg.HostProcesses = e.Cfg.HostProcesses || recordedHostProcesses(e)
	var procs, pods []ComponentStatus
	for _, c := range registry {
		for _, p := range c.Processes {
			procs = append(procs, processStatus(ctx, e, p))
		}
		if c.Status != nil {
			pods = append(pods, c.Status(ctx, e))
		}
	}
	return append(procs, pods...)
}

// processStatus reports one process: its pid and its check, or, for the controller and router
// when they are no host processes, their Deployments.
func processStatus(ctx context.Context, e Env, p Process) ComponentStatus {
	st := ComponentStatus{Name: p.Name}
	r := e.Proc.Running(p.Name)
	switch {
	case r == nil && p.When == WithHostProcesses:
		return deploymentStatus(ctx, e, p.Name)
	case r == nil && p.When == WithKwokNodes:
		st.Detail = "not running (no --kwok-nodes)"
		return st
	case r == nil:
		st.Detail = "not running"
		return st
	}
	st.PID = r.PID
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Check(e)(cctx); err != nil {
		st.Detail = err.Error()
	} else {
		st.Healthy, st.Detail = true, "ok"
	}
	return st
}

// PrintStatus writes the status as a table.
func PrintStatus(w io.Writer, sts []ComponentStatus, e Env) {
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
	e.Cfg.HostProcesses = e.Cfg.HostProcesses || recordedHostProcesses(e)
	fmt.Fprintf(w, "\nstate dir: %s\nexport KUBECONFIG=%s\nrouter: %s\nsandbox runtime: %s\n", e.Cfg.Dir, e.Cfg.KubeconfigPath(), e.Cfg.RouterURL(),
		sandboxRuntimeLine(recordedSandboxRuntime(e)))
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
func deploymentStatus(ctx context.Context, e Env, name string) ComponentStatus {
	st := ComponentStatus{Name: name}
	cl, err := kube.Client(e.Cfg.KubeconfigPath())
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
