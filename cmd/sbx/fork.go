package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

func (a *app) forkCommand() *cobra.Command {
	var count int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "fork NAME [--count N]",
		Short: "Fork a running sandbox into new ones that start with its processes and memory",
		Long: `Fork makes N (--count) new Sandboxes (NAME-fork-xxxxx) from the running sandbox NAME and waits
until they are ready. Each is restored from a save of NAME's memory, made without stopping it,
on NAME's node (gVisor, with the node agent installed), so it starts with NAME's processes,
memory and files, under its own name, address and network policy; its volumes are new. A fork
that could not get the memory starts cold: sbx fork prints it with the reason (its
MemoryKept condition) and exits non-zero. Forking needs the right to run code in NAME.`,
		Example: `  sbx fork agent-7 --count 3`,
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			var opts []sdk.CreateOption
			if timeout > 0 {
				opts = append(opts, sdk.WithReadyTimeout(timeout))
			}
			forks, err := c.Fork(cmd.Context(), args[0], count, opts...)
			for _, f := range forks {
				fmt.Fprintf(a.streams.Out, "sandbox %s forked from %s\n", f.Name(), args[0])
			}
			if errors.Is(err, sdk.ErrForkedCold) {
				return fmt.Errorf("some forks started without the memory of %s: %w", args[0], err)
			}
			return err
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "How many forks to make (1 to 32)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "How long to wait for the forks to be ready (default: the SDK's)")
	return cmd
}
