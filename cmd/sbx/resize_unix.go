//go:build !windows

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// watchResize reports the terminal's size on every SIGWINCH.
func watchResize(ctx context.Context, fd int) (<-chan sdk.TermSize, func()) {
	ch := make(chan sdk.TermSize, 1)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
				if w, h, err := term.GetSize(fd); err == nil {
					select {
					case ch <- sdk.TermSize{Cols: uint16(w), Rows: uint16(h)}:
					default:
					}
				}
			}
		}
	}()
	return ch, func() {
		signal.Stop(sig)
		cancel()
		<-done
	}
}
