// Command demo brings the local cluster up and walks through the product: a warm claim, a
// command through the router, nested files, pause/resume keeping a file on the PVC, and a cold
// claim, with timings. `demo dev up|down|status` manages the cluster alone.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var dir string
	var compareRounds int
	root := &cobra.Command{
		Use:           "demo",
		Short:         "Bring up the local cluster and show agent-sandbox working, with timings",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		// `demo dev …` runs the dev command's own, which is the same.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { devcluster.QuietLibraryLogs(cmd.ErrOrStderr()) },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), spec.Config{Dir: dir, Out: cmd.ErrOrStderr()}, compareRounds)
		},
	}
	root.Flags().StringVar(&dir, "dir", spec.DefaultDir(), "State directory of the cluster.")
	root.Flags().IntVar(&compareRounds, "compare-rounds", 1, "Rounds of the runtime comparison (the template on the default runtime class, gVisor, against runc), alternated; 0 skips it.")
	root.AddCommand(devcluster.NewCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
