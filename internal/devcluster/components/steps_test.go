package components

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host/hosttest"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/step"
)

// fakeCluster is a cluster whose host is a fake and whose state dir is short enough for
// containerd's socket; its processes are real (sleep) where a test starts them.
func fakeCluster(t *testing.T) (Env, *hosttest.Fake) {
	t.Helper()
	dir, err := os.MkdirTemp("", "dev")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cfg, err := (&spec.Config{Dir: dir, Out: io.Discard, StopTimeout: 5 * time.Second, HibernateDir: filepath.Join(dir, "hib")}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c, f := NewEnv(cfg), hosttest.New()
	c.Host = f
	return c, f
}

// sleeper is a process component that runs until stopped and is ready once check says so.
func sleeper(name string, check func(context.Context) error) proc.Component {
	return proc.Component{Name: name, Exe: "/bin/sleep", Args: []string{"300"}, Timeout: time.Second, Ready: check}
}

func ready(context.Context) error { return nil }

func TestEveryStepsDownWithNothingRecordedChangesNothing(t *testing.T) {
	c, f := fakeCluster(t)
	// What another cluster's Cilium leaves on this machine.
	f.AddLink("cilium_host", "veth")
	f.Mkdir(ciliumRunDir)
	before := f.State()
	for _, s := range Steps(c) {
		t.Run(s.Name(), func(t *testing.T) {
			if err := s.Down(t.Context()); err != nil {
				t.Fatalf("Down with nothing recorded: %v", err)
			}
			if after := f.State(); after != before {
				t.Errorf("Down with nothing recorded changed the host:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
	for _, call := range f.Calls {
		if !strings.Contains(call, " show") && !strings.Contains(call, " list") && !strings.Contains(call, " -S") {
			t.Errorf("Down with nothing recorded ran %q, which changes the host", call)
		}
	}
}

func TestTheStepsRunInTheOrderTheirDependenciesNeed(t *testing.T) {
	c, _ := fakeCluster(t)
	var names []string
	for _, s := range Steps(c) {
		names = append(names, s.Name())
	}
	// Each pair: the first must come before the second in Up (and so after it in Down).
	for _, pair := range [][2]string{
		{"pki", "state-dir"}, {"host-paths", "netns"}, {"netfilter", "bridge"}, {"sysctls", "bridge"},
		{"bridge", "preflight"}, {"preflight", "etcd"}, {"etcd", "kube-apiserver"}, {"kube-apiserver", "containerd"},
		// The PV provisioner talks to the API server and serves the class install applies.
		{"kube-apiserver", "hostpath-provisioner"}, {"hostpath-provisioner", "agent-sandbox"},
		{"containerd", "kubelet"}, {"kubelet", "cilium-agent"}, {"bpffs", "cilium-agent"},
		// Down: our controllers and kwok stop, then Drain deletes pods while the kubelet and
		// cilium-agent run, and stops the kubelet and containerd before cilium-agent goes.
		{"cilium-agent", "drain"}, {"drain", "kwok"}, {"drain", "agent-sandbox"}, {"agent-sandbox", "ready"},
	} {
		i, j := slices.Index(names, pair[0]), slices.Index(names, pair[1])
		if i < 0 || j < 0 || i > j {
			t.Errorf("%s must come before %s: %v", pair[0], pair[1], names)
		}
	}
}

func TestAProcessStepStartsOnceAndStopsFromItsPidFile(t *testing.T) {
	c, _ := fakeCluster(t)
	builds, befores := 0, 0
	newStep := func(c Env) *processStep {
		return &processStep{env: c, process: Process{Name: "sleeper",
			Build:  func(Env) (proc.Component, error) { builds++; return sleeper("sleeper", ready), nil },
			Before: func(context.Context, Env) error { befores++; return nil }}}
	}
	p := newStep(c)
	// Preflight builds the component (writing its config) before Up; Up builds it no more.
	if _, err := p.components(); err != nil {
		t.Fatal(err)
	}
	if err := p.Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if builds != 1 {
		t.Errorf("the component was built %d times in one run, want once", builds)
	}
	first := c.Proc.Running("sleeper")
	if first == nil {
		t.Fatal("Up did not leave the process running")
	}
	// Up again (a second `dev up`) keeps it.
	if err := newStep(c).Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again := c.Proc.Running("sleeper"); again == nil || again.PID != first.PID {
		t.Fatalf("a second Up replaced the running process: %+v, was %+v", again, first)
	}
	if befores != 1 {
		t.Errorf("the before hook ran %d times, want once (only ahead of a start)", befores)
	}
	// Down in a later process knows it from the pid file alone.
	later, _ := fakeCluster(t)
	later.Cfg, later.Proc.Dir = c.Cfg, c.Cfg.Dir
	if err := newStep(later).Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !first.Exited() {
		t.Error("Down left the process running")
	}
	if _, err := os.Stat(c.Proc.PidFile("sleeper")); !os.IsNotExist(err) {
		t.Errorf("Down kept the pid file: %v", err)
	}
}

func TestDownAfterAnUpThatFailedStopsWhatItStarted(t *testing.T) {
	c, _ := fakeCluster(t)
	never := func(context.Context) error { return errors.New("not ready") }
	s := &processStep{env: c, process: Process{Name: "sleeper", Build: func(Env) (proc.Component, error) { return sleeper("sleeper", never), nil }}}
	if err := s.Up(t.Context()); err == nil {
		t.Fatal("Up succeeded though the process never got ready")
	}
	r := c.Proc.Running("sleeper")
	if r == nil {
		t.Fatal("the process of the failed Up is not recorded")
	}
	if err := s.Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !r.Exited() {
		t.Error("Down after a failed Up left its process running")
	}
}

// The steps whose Down stops processes other steps' Ups started, and which ones.
func TestDownStopsTheProcessesOfItsStep(t *testing.T) {
	cases := []struct {
		step  func(c Env) step.Step
		procs []string
	}{
		{func(c Env) step.Step { return &installStep{env: c} }, []string{"sandbox-router", "agent-sandbox-controller"}},
		{func(c Env) step.Step { return kwokStep{c} }, []string{"kwok"}},
		// Without an API server, drain only stops the kubelet.
		{func(c Env) step.Step { return drainStep{c} }, []string{"kubelet"}},
	}
	for _, tc := range cases {
		c, _ := fakeCluster(t)
		s := tc.step(c)
		t.Run(s.Name(), func(t *testing.T) {
			var recs []*proc.Record
			for _, name := range tc.procs {
				r, err := c.Proc.Start(name, "/bin/sleep", []string{"300"})
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, r)
			}
			if err := s.Down(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if !proc.WaitGone(r, 5*time.Second) {
					t.Errorf("%s still runs after Down", r.Name)
				}
			}
		})
	}
}

func TestCiliumsDownRemovesItsDatapathWithCiliumDbg(t *testing.T) {
	c, f := fakeCluster(t)
	c.Cfg.RepoRoot = "/src"
	f.SetFile("/usr/bin/clang-19", "") // hack/install-node-deps.sh's, which the agent compiles with
	f.SetFile("/usr/bin/llc-19", "")
	// What Up records before it starts the agent.
	if _, err := ciliumAgentRecorded(c); err != nil {
		t.Fatal(err)
	}
	f.AddLink("cilium_host", "veth")
	f.Mkdir(ciliumRunDir)
	f.SetFile("/cache/cilium/cilium-dbg", "")
	f.OnRun = func(f *hosttest.Fake, name string, args []string) (string, bool, error) {
		switch filepath.Base(name) {
		case "build-cilium.sh":
			return "/cache/cilium\n", true, nil
		case "cilium-dbg":
			_, err := f.Run("ip", "link", "delete", "cilium_host")
			return "", true, err
		}
		return "", false, nil
	}
	var agent *processStep
	for _, s := range Steps(c) {
		if s.Name() == "cilium-agent" {
			agent = s.(*processStep)
		}
	}
	if err := agent.Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(f.Calls, "cilium-dbg post-uninstall-cleanup --all-state --force") {
		t.Errorf("cilium-dbg's cleanup was not run: %q", f.Calls)
	}
	if state := f.State(); strings.Contains(state, "cilium_host") || strings.Contains(state, ciliumRunDir) {
		t.Errorf("Cilium's link or run dir is left:\n%s", state)
	}
	if !c.Store.Empty() {
		t.Error("Down removed Cilium's datapath but kept its record")
	}
}

func TestPreflightNamesTheComponentWhosePortIsTaken(t *testing.T) {
	c, _ := fakeCluster(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := sleeper("etcd", ready)
	busy.Addrs = []string{l.Addr().String()}
	p := &preflight{env: c, steps: []portsUser{&installStep{env: c},
		&processStep{env: c, process: Process{Name: "etcd", Build: func(Env) (proc.Component, error) { return busy, nil }}}}}
	err = p.Up(t.Context())
	if err == nil || !strings.Contains(err.Error(), "etcd: port "+l.Addr().String()+" is busy") {
		t.Fatalf("preflight = %v, want etcd's busy port named", err)
	}
}

func TestPKIStepKeepsItsCertificatesOnDown(t *testing.T) {
	c, _ := fakeCluster(t)
	s := pkiStep{c}
	if err := s.Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Down(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Cfg.Path("pki", "ca.crt")); err != nil {
		t.Errorf("Down removed the CA (kubeconfigs handed out would break): %v", err)
	}
}

func TestCiliumAgentNeedsClang19(t *testing.T) {
	c, f := fakeCluster(t)
	f.SetFile("/usr/bin/llc-19", "")
	_, err := ciliumAgent(c)
	if err == nil || !strings.Contains(err.Error(), "/usr/bin/clang-19 is missing: run hack/install-node-deps.sh") {
		t.Fatalf("ciliumAgent without clang-19: err = %v, want it to name clang-19 and the script that installs it", err)
	}
}
