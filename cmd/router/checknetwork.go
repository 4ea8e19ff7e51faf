package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/router/netcheck"
)

// checkNetwork is `sandbox-router check-network`: the router pod's init container when it
// names tokenless callers by their pod (--identify-pods). It exits 0 only when the network drops
// forged source addresses; otherwise the pod never starts, and this says why.
func checkNetwork(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox-router check-network", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o netcheck.Options
	fs.StringVar(&o.Interface, "interface", "eth0", "The pod's network interface.")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "How long to wait for the datagrams to come back through the gateway.")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sandbox-router check-network [flags]\n\n"+
			"Sends, from this pod's interface, one datagram with a forged source address and one with its own,\n"+
			"both to itself through the gateway (needs NET_RAW). Exits 0 when only its own comes back: the\n"+
			"network drops forged sources, so a caller's pod can be named by its address (--identify-pods).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	res, err := netcheck.Probe(context.Background(), o)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "sandbox-router check-network: %v\n"+
			"Refusing: --identify-pods is safe only where the network is known to drop forged source addresses (docs/security.md).\n", err)
		return 1
	case res.Verdict != netcheck.Blocked:
		fmt.Fprintf(stderr, "sandbox-router check-network: %s.\n"+
			"Refusing: with --identify-pods a pod posing as another would act with that pod's ServiceAccount. "+
			"Use a network that filters source addresses (docs/security.md lists them), or turn --identify-pods off so that every caller sends a token.\n", res)
		return 1
	}
	fmt.Fprintf(stdout, "sandbox-router check-network: %s.\n", res)
	return 0
}
