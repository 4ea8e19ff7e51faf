// Command sbx creates agent sandboxes on Kubernetes and works in them: run
// commands, copy files, pause, resume, delete. It is a thin shell over the
// Go SDK (pkg/sdk); `sbx --help` lists the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newApp(os.Stdin, os.Stdout, os.Stderr).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
