// Command node-agent is the node agent of the memory-keeping pause (docs/snapshots.md): `serve`
// (the DaemonSet's container) saves pods' gVisor sandboxes for the controller and deletes their
// images; `runsc-wrapper` is the runsc that gVisor's shim runs on the node, which restores a
// pod's sandbox from the image its restore annotation names when that image is the pod's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/restorewrap"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "runsc-wrapper" {
		os.Exit(wrap(os.Args[2:], os.Stderr))
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	os.Exit(serve(args, os.Stderr))
}

// wrap: runsc-wrapper --runsc=<runsc> --images-dir=<dir> -- <runsc's arguments>.
func wrap(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("runsc-wrapper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runsc := fs.String("runsc", "", "the real runsc")
	images := fs.String("images-dir", "", "the node agent's images")
	if err := fs.Parse(args); err != nil || *runsc == "" || *images == "" {
		fmt.Fprintln(stderr, "runsc-wrapper: --runsc and --images-dir are required, then -- and runsc's arguments")
		return 2
	}
	return restorewrap.Run(restorewrap.Config{Runsc: *runsc, Images: imagestore.Store{Dir: *images}, Stderr: stderr}, fs.Args())
}

type serveOptions struct {
	listen, kubeconfig, node, allowed string
	imagesDir, tasksDir, shimRoot     string
	sweepEvery                        time.Duration
	port                              int
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o serveOptions
	fs.StringVar(&o.listen, "listen-address", "", "address to listen on (the node's, on the host network)")
	fs.IntVar(&o.port, "port", nodeagent.DefaultPort, "port to listen on")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster)")
	fs.StringVar(&o.node, "node-name", os.Getenv("NODE_NAME"), "this node's name")
	fs.StringVar(&o.allowed, "controller-user", "", "the one user allowed to call (the controller's ServiceAccount, system:serviceaccount:<ns>:<name>)")
	fs.StringVar(&o.imagesDir, "images-dir", "/var/lib/agent-sandbox/images", "where images are kept (the same path on the host)")
	fs.StringVar(&o.tasksDir, "containerd-tasks-dir", "/run/containerd/io.containerd.runtime.v2.task/k8s.io", "containerd's task bundles of the CRI namespace")
	fs.StringVar(&o.shimRoot, "shim-root", "/run/containerd/runsc", "the runsc root of the shim's config.toml, where it serves hibernate sockets")
	fs.DurationVar(&o.sweepEvery, "sweep-interval", 10*time.Second, "how often images of deleted Sandboxes and failed restores are cleaned up")
	logOpts := logging.NewOptions(logging.FormatJSON)
	logOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.allowed == "" || o.node == "" {
		fmt.Fprintln(stderr, "node-agent: --controller-user and --node-name (or NODE_NAME) are required")
		return 2
	}
	log := kubelog.Setup(logOpts, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("node-agent failed", "err", err)
		return 1
	}
	return 0
}
