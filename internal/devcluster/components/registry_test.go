package components

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host/hosttest"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
)

// Every list the registry is the source of names the parts of the cluster as the rows do.
func TestTheRegistryDerivesEveryListFromItsRows(t *testing.T) {
	c, _ := fakeCluster(t)
	steps := Steps(c)
	var stepNames []string
	for _, s := range steps {
		stepNames = append(stepNames, s.Name())
	}
	var rowNames []string
	for _, row := range registry {
		rowNames = append(rowNames, row.Name)
	}
	if want := slices.Insert(slices.Clone(rowNames), slices.Index(rowNames, "etcd"), "preflight"); !slices.Equal(stepNames, want) {
		t.Errorf("steps %v, want the registry's rows with preflight before the first process: %v", stepNames, want)
	}
	wantProcs := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "hostpath-provisioner",
		"containerd", "kubelet", "kube-proxy", "cilium-agent", "kwok", "agent-sandbox-controller", "sandbox-router"}
	if got := ProcessNames(); !slices.Equal(got, wantProcs) {
		t.Errorf("ProcessNames() = %v, want %v (start order)", got, wantProcs)
	}
	var statusNames []string
	for _, st := range Status(t.Context(), c) {
		statusNames = append(statusNames, st.Name)
	}
	if want := append(slices.Clone(wantProcs), "coredns"); !slices.Equal(statusNames, want) {
		t.Errorf("status reports %v, want every process in start order, then CoreDNS: %v", statusNames, want)
	}
	if got, want := Restartable(), []string{"etcd", "kube-apiserver", "containerd", "kubelet"}; !slices.Equal(got, want) {
		t.Errorf("Restartable() = %v, want %v (the fault tests restart these)", got, want)
	}
}

// What status and restart rely on of each row.
func TestEveryRowHasWhatItsUsesNeed(t *testing.T) {
	seen := map[string]bool{}
	for _, row := range registry {
		if seen[row.Name] {
			t.Errorf("two rows are named %s", row.Name)
		}
		seen[row.Name] = true
		if row.Step == nil && (len(row.Processes) != 1 || row.Processes[0].Name != row.Name) {
			t.Errorf("row %s has no step of its own, so it needs exactly one process of its name: %+v", row.Name, row.Processes)
		}
		for _, p := range row.Processes {
			if p.Name != row.Name && seen[p.Name] {
				t.Errorf("process %s is named twice", p.Name)
			}
			seen[p.Name] = true
			if p.Check == nil {
				t.Errorf("process %s has no status check", p.Name)
			}
			if (row.Step == nil || p.Restartable) && p.Build == nil {
				t.Errorf("process %s is started by its process step or by Restart, but has no Build", p.Name)
			}
			if p.Restartable && p.When != Always {
				t.Errorf("process %s is restartable but does not always run", p.Name)
			}
		}
	}
}

func TestAllRunningWantsWhatUpAlwaysRunsAndTheHostProcessesOfThatMode(t *testing.T) {
	always := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "hostpath-provisioner",
		"containerd", "kubelet", "kube-proxy", "cilium-agent"}
	ours := []string{"agent-sandbox-controller", "sandbox-router"}
	cases := []struct {
		name          string
		hostProcesses bool
		running       []string
		want          bool
	}{
		{"nothing runs", false, nil, false},
		{"the chart runs ours; kwok never counts", false, always, true},
		{"one process is missing", false, slices.DeleteFunc(slices.Clone(always), func(n string) bool { return n == "kubelet" }), false},
		{"host processes, ours missing", true, always, false},
		{"host processes, ours running", true, slices.Concat(always, ours), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := fakeCluster(t)
			c.Cfg.HostProcesses = tc.hostProcesses
			for _, name := range tc.running {
				startSleeper(t, c, name)
			}
			if got := AllRunning(c); got != tc.want {
				t.Errorf("AllRunning with %v running (host processes %v) = %v, want %v", tc.running, tc.hostProcesses, got, tc.want)
			}
		})
	}
}

// startSleeper runs a process recorded under name until the test ends.
func startSleeper(t *testing.T, c Env, name string) *proc.Record {
	t.Helper()
	r, err := c.Proc.Start(name, "/bin/sleep", []string{"300"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Proc.Stop(name) })
	return r
}

func TestRestartRefusesWhatItCannotRestart(t *testing.T) {
	cases := []struct {
		name, component, want string
	}{
		{"an unknown component", "kube-dns", "kube-dns cannot be restarted on its own (restartable: [etcd kube-apiserver containerd kubelet])"},
		{"a component that is not restartable on its own", "cilium-agent", "cilium-agent cannot be restarted on its own"},
		{"a part that runs no process", "coredns", "coredns cannot be restarted on its own"},
		{"a restartable component that does not run", "etcd", "etcd is not running: bring the cluster up first"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, f := fakeCluster(t)
			_, err := Restart(t.Context(), c, tc.component, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restart(%s) = %v, want an error saying %q", tc.component, err, tc.want)
			}
			if len(f.Calls) > 0 {
				t.Errorf("a refused restart ran %q, want nothing run", f.Calls)
			}
		})
	}
}

func TestRestartStartsTheNamedProcessAgainAndWaitsForIt(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "stopped", true: "killed"}[kill], func(t *testing.T) {
			c, _ := fakeCluster(t)
			old := startSleeper(t, c, "sleeper")
			checked := 0
			p := Process{Name: "sleeper", Build: func(e Env) (proc.Component, error) {
				return sleeper("sleeper", func(context.Context) error { checked++; return nil }), nil
			}}
			away, err := restart(t.Context(), c, p, kill)
			if err != nil {
				t.Fatal(err)
			}
			if !proc.WaitGone(old, 5*time.Second) {
				t.Errorf("the old process (pid %d) still runs after the restart", old.PID)
			}
			now := c.Proc.Running("sleeper")
			if now == nil || now.PID == old.PID {
				t.Fatalf("after the restart the process is %+v, want a new one (old pid %d)", now, old.PID)
			}
			if checked == 0 || away <= 0 {
				t.Errorf("the restart did not wait for the new process to be ready (checks %d, away %s)", checked, away)
			}
		})
	}
}

// The binaries are found once, by asking each build script, and reach the steps through Env.
func TestTheStepsStartTheBinariesTheyAreHanded(t *testing.T) {
	c, f := fakeCluster(t)
	c.Cfg.RepoRoot = "/src"
	f.OnRun = func(_ *hosttest.Fake, name string, args []string) (string, bool, error) {
		dirs := map[string]string{"build-k8s.sh": "/cache/k8s\n", "build-cilium.sh": "/cache/cilium\n", "build-gvisor.sh": "/cache/gvisor\n"}
		if out, ok := dirs[filepath.Base(name)]; ok && slices.Equal(args, []string{"--print-dir"}) && strings.HasPrefix(name, "/src/hack/") {
			return out, true, nil
		}
		return "", false, nil
	}
	bins, err := LocateBinaries(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Binaries{K8s: "/cache/k8s", Cilium: "/cache/cilium", GVisor: "/cache/gvisor"}); bins != want {
		t.Fatalf("LocateBinaries = %+v, want %+v", bins, want)
	}
	c.Bins = bins
	wantExe := map[string]string{
		"etcd": "/cache/k8s/etcd", "kube-apiserver": "/cache/k8s/kube-apiserver", "kube-controller-manager": "/cache/k8s/kube-controller-manager",
		"kube-scheduler": "/cache/k8s/kube-scheduler", "kubelet": "/cache/k8s/kubelet", "kube-proxy": "/cache/k8s/kube-proxy",
		"hostpath-provisioner": c.Cfg.OurBin("devcluster"), "containerd": "/usr/bin/containerd",
	}
	for _, s := range Steps(c) {
		p, ok := s.(*processStep)
		if !ok || wantExe[s.Name()] == "" {
			continue
		}
		comps, err := p.components()
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		if comps[0].Exe != wantExe[s.Name()] {
			t.Errorf("%s runs %s, want %s", s.Name(), comps[0].Exe, wantExe[s.Name()])
		}
		delete(wantExe, s.Name())
	}
	if len(wantExe) > 0 {
		t.Errorf("no process step for %v", wantExe)
	}
	if cfg, err := os.ReadFile(c.Cfg.Path("containerd", "config.toml")); err != nil || !strings.Contains(string(cfg), "runs /cache/gvisor/"+runscShim) {
		t.Errorf("containerd's config does not run the handed gVisor shim: %v\n%s", err, cfg)
	}
}

func TestLocateBinariesSaysWhichScriptFailed(t *testing.T) {
	c, f := fakeCluster(t)
	c.Cfg.RepoRoot = "/src"
	f.FailOn = map[string]error{"build-cilium.sh --print-dir": errors.New("no cache")}
	f.OnRun = func(_ *hosttest.Fake, name string, _ []string) (string, bool, error) {
		return "/cache/" + filepath.Base(name) + "\n", strings.HasPrefix(name, "/src/hack/"), nil
	}
	if _, err := LocateBinaries(c); err == nil || !strings.Contains(err.Error(), "build-cilium.sh --print-dir") {
		t.Fatalf("LocateBinaries = %v, want the failing script named", err)
	}
}

func TestProcessStatusReportsThePidAndTheCheck(t *testing.T) {
	failing := func(Env) func(context.Context) error {
		return func(context.Context) error { return errors.New("GET /healthz: 503") }
	}
	passing := func(Env) func(context.Context) error { return func(context.Context) error { return nil } }
	cases := []struct {
		name    string
		process Process
		run     bool
		healthy bool
		detail  string
	}{
		{"running and healthy", Process{Name: "sleeper", Check: passing}, true, true, "ok"},
		{"running, check failing", Process{Name: "sleeper", Check: failing}, true, false, "GET /healthz: 503"},
		{"not running", Process{Name: "sleeper", Check: passing}, false, false, "not running"},
		{"kwok without --kwok-nodes", Process{Name: "sleeper", When: WithKwokNodes, Check: passing}, false, false, "not running (no --kwok-nodes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := fakeCluster(t)
			pid := 0
			if tc.run {
				pid = startSleeper(t, c, "sleeper").PID
			}
			st := processStatus(t.Context(), c, tc.process)
			if want := (ComponentStatus{Name: "sleeper", PID: pid, Healthy: tc.healthy, Detail: tc.detail}); st != want {
				t.Errorf("status %+v, want %+v", st, want)
			}
		})
	}
}

// The controller and router, when no host processes, are the chart's Deployments, which
// status reads through the API (here: there is no cluster to read).
func TestTheHostProcessesAreReportedAsTheChartsDeploymentsWhenTheyDoNotRun(t *testing.T) {
	c, _ := fakeCluster(t)
	for _, p := range ourProcesses {
		st := processStatus(t.Context(), c, p)
		if st.Name != p.Name || st.PID != 0 || st.Healthy || !strings.Contains(st.Detail, c.Cfg.KubeconfigPath()) {
			t.Errorf("status %+v, want %s's Deployment read through %s", st, p.Name, c.Cfg.KubeconfigPath())
		}
	}
}
