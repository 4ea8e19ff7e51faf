package testwrap

import (
	"context"
	"testing"
	"time"
)

// The timing of Eventually and Consistently when a Wait does not say otherwise: long enough for
// a controller on a busy 2-core machine, short enough that a broken one fails the test instead of
// hanging it.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultInterval = 50 * time.Millisecond
)

// Wait is how long a wait lasts and how often it checks; zero fields take the defaults.
type Wait struct {
	Timeout  time.Duration
	Interval time.Duration
}

func (w Wait) timing() (time.Duration, time.Duration) {
	timeout, interval := w.Timeout, w.Interval
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return timeout, interval
}

// Eventually checks at once and then every DefaultInterval until check returns nil. If it has
// not after DefaultTimeout, the test fails with what was expected and the last error check
// returned, which should say what it saw instead.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	Wait{}.Eventually(t, what, check)
}

// EventuallyContext is Eventually for a check that talks to a server: its context ends with
// the wait.
func EventuallyContext(t testing.TB, what string, check func(ctx context.Context) error) {
	t.Helper()
	Wait{}.EventuallyContext(t, what, check)
}

// Consistently checks every DefaultInterval for d that check keeps returning nil, and fails the
// test with the first error.
func Consistently(t testing.TB, what string, d time.Duration, check func() error) {
	t.Helper()
	Wait{Timeout: d}.Consistently(t, what, check)
}

// Eventually is the package's Eventually with w's timing.
func (w Wait) Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	w.EventuallyContext(t, what, func(context.Context) error { return check() })
}

// EventuallyContext is the package's EventuallyContext with w's timing.
func (w Wait) EventuallyContext(t testing.TB, what string, check func(ctx context.Context) error) {
	t.Helper()
	timeout, interval := w.timing()
	// Not t.Context(): that one is already done in a t.Cleanup, where waits are useful too.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		// A check cut short by the deadline says less than the one before it.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s; last check: %v", timeout, what, last)
			return
		case <-tick.C:
		}
	}
}

// Consistently is the package's Consistently, for w.Timeout, checking every w.Interval.
func (w Wait) Consistently(t testing.TB, what string, check func() error) {
	t.Helper()
	d, interval := w.timing()
	for end := time.Now().Add(d); ; time.Sleep(interval) {
		if err := check(); err != nil {
			t.Fatalf("%s stopped holding within %s: %v", what, d, err)
			return
		}
		if !time.Now().Before(end) {
			return
		}
	}
}
