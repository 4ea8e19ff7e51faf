package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"help", []string{"--help"}, 0, "--auth-mode"},
		{"short help", []string{"-h"}, 0, "X-Sandbox-ID"},
		{"unknown flag", []string{"--bogus"}, 2, "flag provided but not defined"},
		{"bad auth mode", []string{"--auth-mode", "allow-all"}, 2, "--auth-mode must be"},
		{"bad log level", []string{"--log-level", "loud"}, 2, `invalid value "loud" for flag -log-level`},
		{"bad verbosity", []string{"-v", "loud"}, 2, `invalid value "loud" for flag -v`},
		{"bad log format", []string{"--logging-format", "xml"}, 2, `want json or text, not "xml"`},
		{"help lists the verbosity", []string{"--help"}, 0, "-v value"},
		{"help lists the port allowlist", []string{"--help"}, 0, "-allowed-ports ports"},
		{"an allowed port out of range", []string{"--allowed-ports", "8888,70000"}, 2, `"70000" is not a port`},
		{"help lists the proxy timeout", []string{"--help"}, 0, "-proxy-timeout duration"},
		{"a zero proxy timeout", []string{"--proxy-timeout", "0"}, 2, "--proxy-timeout must be positive"},
		{"a negative unclaimed wait", []string{"--unclaimed-wait", "-1s"}, 2, "--unclaimed-wait must not be negative"},
		{"authorization is on by default", []string{"--help"}, 0, `(default "tokenreview")`},
		{"no auth needs the insecure flag", []string{"--auth-mode", "none"}, 2, "it needs --insecure-no-auth"},
		{"no auth listens on loopback only", []string{"--auth-mode", "none", "--insecure-no-auth"}, 2, "loopback only"},
		{"anonymous callers are gone", []string{"--allow-anonymous"}, 2, "never authorizes system:anonymous"},
		{"check-network's help", []string{"check-network", "--help"}, 0, "forged source"},
		{"check-network with a bad flag", []string{"check-network", "--bogus"}, 2, "flag provided but not defined"},
		{"check-network without a verdict refuses", []string{"check-network", "--interface", "nonexistent0", "--timeout", "1s"}, 1, "Refusing: --identify-pods is safe only where"},
		{"no cluster", []string{"--kubeconfig", "/nonexistent/kubeconfig", "--listen", "127.0.0.1:0", "--probe-listen", ""}, 1, "kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := run(tt.args, &out); code != tt.wantCode {
				t.Fatalf("exit %d, want %d; output:\n%s", code, tt.wantCode, out.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("output lacks %q:\n%s", tt.wantOut, out.String())
			}
		})
	}
}
