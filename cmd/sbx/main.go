// Command sbx creates agent sandboxes on Kubernetes and works in them: run
// commands, copy files, pause, resume, delete. It is a thin shell over the
// Go SDK (pkg/sdk); `sbx --help` lists the commands. Installed as kubectl-sbx
// it is the kubectl plugin `kubectl sbx`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	code := newApp(invokedName(os.Args[0]), streams).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
