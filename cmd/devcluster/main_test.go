package main

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// devcluster has the subcommands and flags `sbx dev` had, under its own name.
func TestCommandsAndFlags(t *testing.T) {
	root := rootCommand()
	if got := root.Name(); got != "devcluster" {
		t.Errorf("root command is %q, want devcluster", got)
	}
	if root.PersistentFlags().Lookup("dir") == nil {
		t.Errorf("no --dir on devcluster")
	}
	tests := []struct {
		command string
		flags   []string
	}{
		{"up", []string{"kwok-nodes", "source", "host-processes"}},
		{"down", []string{"purge"}},
		{"status", nil},
		{"images", []string{"out", "source"}},
		{"hostpath-provisioner", []string{"kubeconfig", "root", "health-addr", "v"}},
	}
	for _, tc := range tests {
		cmd, _, err := root.Find([]string{tc.command})
		if err != nil || cmd.Name() != tc.command {
			t.Errorf("devcluster %s: not a command (%v)", tc.command, err)
			continue
		}
		for _, f := range tc.flags {
			if cmd.Flags().Lookup(f) == nil {
				t.Errorf("devcluster %s has no --%s", tc.command, f)
			}
		}
	}
}
