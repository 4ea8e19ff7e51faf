package main

import (
	"io"
	"os"
	"testing"

	"github.com/creack/pty"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// The wait's progress shows on a terminal or with --progress, and not with -o unless asked for.
func TestProgressShowsOnATerminalOrWhenAsked(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { _ = tty.Close(); _ = ptmx.Close() })
	go func() { _, _ = io.Copy(io.Discard, ptmx) }() // what the terminal shows is not the point

	tests := []struct {
		name        string
		stderr      *os.File // nil: not a terminal
		args        []string
		outputGiven bool // -o given
		want        bool
	}{
		{name: "terminal", stderr: tty, want: true},
		{name: "terminal with -o", stderr: tty, outputGiven: true, want: false},
		{name: "terminal with --progress=false", stderr: tty, args: []string{"--progress=false"}, want: false},
		{name: "not a terminal", want: false},
		{name: "not a terminal with --progress", args: []string{"--progress"}, want: true},
		{name: "-o with --progress", args: []string{"--progress"}, outputGiven: true, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			streams := genericiooptions.NewTestIOStreamsDiscard()
			if tc.stderr != nil {
				streams.ErrOut = tc.stderr
			}
			var flag bool
			cmd := &cobra.Command{Use: "create"}
			addProgressFlag(cmd.Flags(), &flag)
			must(t, cmd.ParseFlags(tc.args))
			cmd.SetContext(t.Context())
			progress, stop := newApp("sbx", streams).startProgress(cmd, flag, tc.outputGiven)
			stop()
			if got := progress != nil; got != tc.want {
				t.Errorf("progress shown: %v, want %v", got, tc.want)
			}
		})
	}
}
