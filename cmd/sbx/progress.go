package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// addProgressFlag adds --progress to a command that waits for a sandbox.
func addProgressFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, "progress", false, "show what the wait is waiting for on stderr (default: on a terminal, unless -o is given)")
}

// startProgress shows a wait's progress on stderr when --progress says so or, without it, when
// stderr is a terminal and no -o output is asked for. It returns the SDK option to pass to the
// wait (nil when nothing is shown) and the function that ends the display.
func (a *app) startProgress(cmd *cobra.Command, flag, outputGiven bool) (sdk.ProgressOption, func()) {
	show := !outputGiven && isTerminal(a.streams.ErrOut)
	if cmd.Flags().Changed("progress") {
		show = flag
	}
	if !show {
		return nil, func() {}
	}
	p := newProgressPrinter(a.streams.ErrOut, isTerminal(a.streams.ErrOut))
	return sdk.WithProgress(p.update), p.start(cmd.Context())
}

// progressPrinter shows what a wait is waiting for: a line per change of
// the Ready reason, and on a terminal a status line that keeps the elapsed
// time current.
type progressPrinter struct {
	w   io.Writer
	tty bool

	mu      sync.Mutex
	last    sdk.Progress
	began   time.Time
	shown   string
	started bool
}

func newProgressPrinter(w io.Writer, tty bool) *progressPrinter {
	return &progressPrinter{w: w, tty: tty, began: time.Now()}
}

// start ticks the status line on a terminal until the returned stop is
// called.
func (p *progressPrinter) start(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if !p.tty {
			<-done
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				p.mu.Lock()
				if p.started && !p.last.Ready {
					p.drawLocked()
				}
				p.mu.Unlock()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		p.mu.Lock()
		if p.tty && p.started {
			fmt.Fprint(p.w, "\r\033[K")
		}
		p.mu.Unlock()
	}
}

func (p *progressPrinter) update(pr sdk.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.started = pr, true
	if pr.Ready {
		return
	}
	line := describe(pr)
	if p.tty {
		p.drawLocked()
		return
	}
	if line != p.shown {
		fmt.Fprintf(p.w, "waiting for %s %s (%s): %s\n", strings.ToLower(pr.Kind), pr.Name, time.Since(p.began).Round(100*time.Millisecond), line)
		p.shown = line
	}
}

func (p *progressPrinter) drawLocked() {
	fmt.Fprintf(p.w, "\r\033[Kwaiting for %s %s (%s): %s", strings.ToLower(p.last.Kind), p.last.Name,
		time.Since(p.began).Round(time.Second), describe(p.last))
}

func describe(pr sdk.Progress) string {
	s := pr.Reason
	if s == "" {
		s = "Pending"
	}
	if pr.Message != "" {
		s += ": " + pr.Message
	}
	return s
}
