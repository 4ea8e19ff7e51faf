// Command devcluster runs the local development cluster: a single-node Kubernetes (etcd,
// kube-apiserver, controller manager, scheduler, containerd, kubelet) on this machine with
// agent-sandbox installed from the source tree, and builds the images (`devcluster
// up|down|status|images`, see docs/dev-cluster.md); `devcluster hostpath-provisioner` is the
// cluster's PV provisioner, which up starts. It needs root and the source tree, so it is a
// developer tool of its own, apart from the user's CLI (sbx, kubectl sbx).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := rootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// rootCommand is internal/devcluster's command (up, down, status, images,
// hostpath-provisioner) under this binary's name.
func rootCommand() *cobra.Command {
	root := devcluster.NewCommand()
	root.Use = "devcluster"
	root.SilenceUsage, root.SilenceErrors = true, true
	return root
}
