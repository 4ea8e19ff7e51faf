// Command sandbox-router is the one stable endpoint in front of every sandbox: it routes each
// request by its X-Sandbox-* headers to the sandbox pod's IP, taken from a watch cache.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
	"github.com/agent-sandbox/agent-sandbox/internal/router"
	"github.com/agent-sandbox/agent-sandbox/internal/tracing"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run returns the exit code: 0 on a clean stop or --help, 2 on bad flags, 1 on failure.
func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "check-network" {
		return checkNetwork(args[1:], os.Stdout, stderr)
	}
	// An own FlagSet: client libraries register flags (--kubeconfig) on flag.CommandLine.
	fs := flag.NewFlagSet("sandbox-router", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sandbox-router [flags]\n\n"+
			"Routes requests by X-Sandbox-ID / X-Sandbox-Namespace / X-Sandbox-Port to the sandbox's pod.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	opts := router.DefaultOptions()
	opts.OwnNamespace = router.PodNamespace()
	opts.BindFlags(fs)
	logOpts := logging.NewOptions(logging.FormatJSON)
	logOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(stderr, "sandbox-router:", err)
		return 2
	}
	log := kubelog.Setup(logOpts, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tp, flushTraces, err := tracing.Setup(ctx, "sandbox-router", func(err error) { log.Warn("tracing", "err", err) })
	if err != nil {
		fmt.Fprintln(stderr, "sandbox-router:", err)
		return 2
	}
	defer flushTraces()
	opts.TracerProvider = tp
	if err := router.Run(ctx, opts, log); err != nil {
		log.Error("sandbox-router failed", "err", err)
		return 1
	}
	return 0
}
