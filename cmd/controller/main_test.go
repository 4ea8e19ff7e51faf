package main

import (
	"flag"
	"maps"
	"testing"

	"go.uber.org/goleak"

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
