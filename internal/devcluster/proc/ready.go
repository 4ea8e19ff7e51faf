package proc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Component is one process of the cluster and how to tell it is ready.
type Component struct {
	Name    string
	Exe     string
	Args    []string
	Env     []string
	Addrs   []string // listen addresses that must be free before a start
	Ready   func(context.Context) error
	Timeout time.Duration
}

// Ensure starts the component unless our recorded process of that name still runs, then waits
// for it to be ready. A stranger on one of its ports is reported instead of fought.
func (s *Supervisor) Ensure(ctx context.Context, comp Component) error {
	if r := s.Running(comp.Name); r != nil {
		s.Log.Info("already running", "component", comp.Name, "pid", r.PID)
		return s.WaitUntil(ctx, comp.Name, r, comp.Timeout, comp.Ready)
	}
	for _, a := range comp.Addrs {
		if err := PortFree(a); err != nil {
			return fmt.Errorf("%s: %w", comp.Name, err)
		}
	}
	fmt.Fprintf(s.Out, "==> starting %s\n", comp.Name)
	r, err := s.Start(comp.Name, comp.Exe, comp.Args, comp.Env...)
	if err != nil {
		return err
	}
	return s.WaitUntil(ctx, comp.Name, r, comp.Timeout, comp.Ready)
}

// PortFree reports an error naming the port when something already listens on addr.
func PortFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port %s is busy (%v): stop whatever listens there, or run `dev down` if it is an old cluster", addr, err)
	}
	return l.Close()
}

// WaitUntil polls check until it succeeds, the process dies, or the timeout passes, telling
// the user every few seconds what it is waiting for.
func (s *Supervisor) WaitUntil(ctx context.Context, what string, proc *Record, timeout time.Duration, check func(context.Context) error) error {
	start := time.Now()
	lastSaid := start
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			s.Log.Info("ready", "what", what, "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if proc != nil && !proc.Alive() {
			return fmt.Errorf("%s exited while starting (last error: %v); log tail:\n%s", proc.Name, last, Tail(s.LogFile(proc.Name), 25))
		}
		if time.Since(start) > timeout {
			msg := fmt.Sprintf("%s not ready after %s: %v", what, timeout, last)
			if proc != nil {
				msg += "\nlog tail of " + s.LogFile(proc.Name) + ":\n" + Tail(s.LogFile(proc.Name), 25)
			}
			return errors.New(msg)
		}
		if time.Since(lastSaid) > 5*time.Second {
			fmt.Fprintf(s.Out, "==> still waiting for %s (%s): %v\n", what, time.Since(start).Round(time.Second), last)
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Tail is the last n lines of a file.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// HTTPOK GETs url and wants a 200 whose body contains want.
func HTTPOK(ctx context.Context, tc *tls.Config, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
