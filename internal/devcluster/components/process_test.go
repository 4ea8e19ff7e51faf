package components

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

// The hooks of a process row, and when its step runs them.
func TestAProcessStepRunsItsHooksAroundTheProcess(t *testing.T) {
	cases := []struct {
		name      string
		running   bool  // the process runs before Up
		beforeErr error // what Before returns
		want      []string
		wantErr   string
	}{
		{"a start", false, nil, []string{"before", "after", "cleanup"}, ""},
		{"a process that still runs is not prepared again", true, nil, []string{"after", "cleanup"}, ""},
		{"a failed preparation starts nothing", false, errors.New("no CRDs"), []string{"before", "cleanup"}, "no CRDs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := fakeCluster(t)
			if tc.running {
				startSleeper(t, c, "sleeper")
			}
			var ran []string
			s := &processStep{env: c, process: Process{Name: "sleeper",
				Build:   func(Env) (proc.Component, error) { return sleeper("sleeper", ready), nil },
				Before:  func(context.Context, Env) error { ran = append(ran, "before"); return tc.beforeErr },
				After:   func(context.Context, Env) error { ran = append(ran, "after"); return nil },
				Cleanup: func(Env) error { ran = append(ran, "cleanup"); return nil },
			}}
			err := s.Up(t.Context())
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Up = %v, want error %q", err, tc.wantErr)
			}
			if tc.wantErr != "" && c.Proc.Running("sleeper") != nil {
				t.Error("the process was started though its preparation failed")
			}
			if err := s.Down(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ran, tc.want) {
				t.Errorf("hooks ran %v, want %v", ran, tc.want)
			}
		})
	}
}

func TestAProcessStepsDownReportsItsCleanupsFailure(t *testing.T) {
	c, _ := fakeCluster(t)
	s := &processStep{env: c, process: Process{Name: "sleeper", Cleanup: func(Env) error { return errors.New("shim left") }}}
	if err := s.Down(t.Context()); err == nil || !strings.Contains(err.Error(), "shim left") {
		t.Errorf("Down = %v, want the cleanup's error (the record stays for another down)", err)
	}
}

// A process that runs holds its ports: preflight checks only the ports of what it will start.
func TestPreflightLeavesTheRunningProcessesPortsAlone(t *testing.T) {
	c, _ := fakeCluster(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	startSleeper(t, c, "etcd")
	busy := sleeper("etcd", ready)
	busy.Addrs = []string{l.Addr().String()}
	p := &preflight{env: c, steps: []portsUser{
		&processStep{env: c, process: Process{Name: "etcd", Build: func(Env) (proc.Component, error) { return busy, nil }}}}}
	if err := p.Up(t.Context()); err != nil {
		t.Errorf("preflight = %v, want no complaint about the port of the running etcd", err)
	}
}

func TestTheInstallStepStartsOurProcessesOnlyAsHostProcesses(t *testing.T) {
	for _, hostProcesses := range []bool{false, true} {
		c, _ := fakeCluster(t)
		c.Cfg.HostProcesses = hostProcesses
		s := &installStep{env: c}
		comps, err := s.components()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, comp := range comps {
			names = append(names, comp.Name)
		}
		want := []string(nil)
		if hostProcesses {
			want = []string{"agent-sandbox-controller", "sandbox-router"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("with host processes %v the install step starts %v, want %v", hostProcesses, names, want)
		}
		if hostProcesses && !slices.Contains(comps[1].Addrs, spec.Loopback(c.Cfg.Ports.Router)) {
			t.Errorf("the router's addresses %v lack its port %d, which preflight checks", comps[1].Addrs, c.Cfg.Ports.Router)
		}
	}
}

func TestStatusPrintsEveryComponentWithItsPid(t *testing.T) {
	c, _ := fakeCluster(t)
	var out bytes.Buffer
	PrintStatus(&out, []ComponentStatus{
		{Name: "etcd", PID: 42, Healthy: true, Detail: "ok"},
		{Name: "kubelet", Detail: "not running"},
	}, c)
	for _, want := range []string{
		"COMPONENT  PID  HEALTHY  DETAIL\n",
		"etcd       42   true     ok\n",
		"kubelet    -    false    not running\n",
		"state dir: " + c.Cfg.Dir + "\n",
		"export KUBECONFIG=" + c.Cfg.KubeconfigPath() + "\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// CoreDNS runs in pods: without the API server there is nothing to ask, and status says so.
func TestCoreDNSIsNotRunningWithoutTheAPIServer(t *testing.T) {
	c, _ := fakeCluster(t)
	if st := dnsStatus(t.Context(), c); st != (ComponentStatus{Name: "coredns", Detail: "not running"}) {
		t.Errorf("CoreDNS status %+v, want not running", st)
	}
}

func TestKwokStepWithoutKwokNodesStartsNothing(t *testing.T) {
	c, f := fakeCluster(t)
	if err := (kwokStep{c}).Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.Proc.Running("kwok") != nil || len(f.Calls) > 0 {
		t.Errorf("kwok's step without --kwok-nodes started kwok or ran %q", f.Calls)
	}
}
