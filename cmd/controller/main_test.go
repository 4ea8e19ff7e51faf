package main

import (
	"flag"
	"maps"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/pacer"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseLabels(t *testing.T) {
	cases := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{in: "app=sandbox-router", want: map[string]string{"app": "sandbox-router"}},
		{in: " app=r , tier=edge ", want: map[string]string{"app": "r", "tier": "edge"}},
		{in: "example.com/role=router", want: map[string]string{"example.com/role": "router"}},
		{in: "", wantErr: true},
		{in: "app", wantErr: true},
		{in: "app=", want: map[string]string{"app": ""}},
		{in: "-bad-=x", wantErr: true},
		{in: "app=not a value", wantErr: true},
	}
	for _, tc := range cases {
		got, err := parseLabels(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseLabels(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("parseLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestRefillFlags(t *testing.T) {
	cases := []struct {
		name                   string
		args                   []string
		wantQuiet, wantMaxHold time.Duration
	}{
		{name: "defaults", wantQuiet: pacer.DefaultQuiet, wantMaxHold: pacer.DefaultMaxHold},
		{name: "set", args: []string{"--refill-quiet=1s", "--refill-max-hold=30s"},
			wantQuiet: time.Second, wantMaxHold: 30 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts manager.Options
			fs := flag.NewFlagSet("controller", flag.ContinueOnError)
			bindFlags(fs, &opts)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if opts.RefillQuiet != tc.wantQuiet || opts.RefillMaxHold != tc.wantMaxHold {
				t.Errorf("RefillQuiet, RefillMaxHold = %v, %v; want %v, %v",
					opts.RefillQuiet, opts.RefillMaxHold, tc.wantQuiet, tc.wantMaxHold)
			}
		})
	}
}

// The router's pods are app=sandbox-router unless --router-pod-labels says otherwise: the one
// default the sandboxes' NetworkPolicy admits and the pod metadata rules refuse on a sandbox.
func TestRouterPodLabelsFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want map[string]string
	}{
		{name: "default", want: map[string]string{"app": "sandbox-router"}},
		{name: "set", args: []string{"--router-pod-labels=example.com/role=router"}, want: map[string]string{"example.com/role": "router"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts manager.Options
			fs := flag.NewFlagSet("controller", flag.ContinueOnError)
			fv := bindFlags(fs, &opts)
			// Outside a pod the webhook needs a namespace to apply.
			if err := fs.Parse(append([]string{"--webhook-namespace=agent-sandbox-system"}, tc.args...)); err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if err := fv.apply(&opts); err != nil {
				t.Fatalf("apply: %v", err)
			}
			if !maps.Equal(opts.Router.PodLabels, tc.want) {
				t.Errorf("router pod labels %v, want %v", opts.Router.PodLabels, tc.want)
			}
		})
	}
}

// The install's and older deployments' log flags keep working next to -v.
func TestLogFlags(t *testing.T) {
	cases := []struct {
		args          []string
		wantVerbosity int
		wantFormat    string
	}{
		{args: nil, wantVerbosity: 0, wantFormat: "json"},
		{args: []string{"-v=2", "--logging-format=text"}, wantVerbosity: 2, wantFormat: "text"},
		{args: []string{"--zap-log-level=info"}, wantVerbosity: 0, wantFormat: "json"},
		{args: []string{"--zap-log-level=3"}, wantVerbosity: 3, wantFormat: "json"},
		{args: []string{"--log-level=debug"}, wantVerbosity: 4, wantFormat: "json"},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("controller", flag.ContinueOnError)
		fv := bindFlags(fs, &manager.Options{})
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if v, f := fv.logging.Verbosity(), fv.logging.Format(); v != tc.wantVerbosity || f != tc.wantFormat {
			t.Errorf("%v: verbosity %d, format %s; want %d, %s", tc.args, v, f, tc.wantVerbosity, tc.wantFormat)
		}
	}
}
