package testwrap

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder stands in for the test a wait fails: Fatalf records the message and ends the
// goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls wait with a recorder in its own goroutine (Fatalf ends it) and returns the failure
// message, "" when the wait passed.
func run(t *testing.T, wait func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(r)
	}()
	<-done
	return r.failed
}

var fast = Wait{Timeout: 200 * time.Millisecond, Interval: 5 * time.Millisecond}

func TestEventually(t *testing.T) {
	cases := []struct {
		name     string
		check    func(calls int) error // calls counts from 1
		wantFail []string              // substrings of the failure; nil: the wait passes
		wantMin  int                   // at least this many checks
	}{
		{"passes at once without waiting", func(int) error { return nil }, nil, 1},
		{"passes once the check does", func(n int) error {
			if n < 3 {
				return fmt.Errorf("seen %d", n)
			}
			return nil
		}, nil, 3},
		{"fails naming what was expected and the last error", func(n int) error { return fmt.Errorf("replicas %d, want 3", n) },
			[]string{"timed out after 200ms waiting for the pool to fill", "last check: replicas"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			msg := run(t, func(tb testing.TB) {
				fast.Eventually(tb, "the pool to fill", func() error { calls++; return tc.check(calls) })
			})
			if tc.wantFail == nil && msg != "" {
				t.Fatalf("failed: %s", msg)
			}
			for _, want := range tc.wantFail {
				if !strings.Contains(msg, want) {
					t.Errorf("failure %q, want it to contain %q", msg, want)
				}
			}
			if calls < tc.wantMin {
				t.Errorf("%d checks, want at least %d", calls, tc.wantMin)
			}
		})
	}
}

func TestEventuallyContextEndsTheCheckWithTheWait(t *testing.T) {
	var sawDeadline bool
	msg := run(t, func(tb testing.TB) {
		fast.EventuallyContext(tb, "a server answer", func(ctx context.Context) error {
			_, sawDeadline = ctx.Deadline()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ctx.Err()
			}
			return errors.New("server says 503")
		})
	})
	if !sawDeadline {
		t.Error("the check's context has no deadline")
	}
	if !strings.Contains(msg, "last check: server says 503") {
		t.Errorf("failure %q, want the last answer before the deadline, not the deadline itself", msg)
	}
}

func TestWaitDefaults(t *testing.T) {
	timeout, interval := Wait{}.timing()
	if timeout != DefaultTimeout || interval != DefaultInterval {
		t.Errorf("zero Wait = %s/%s, want %s/%s", timeout, interval, DefaultTimeout, DefaultInterval)
	}
	timeout, interval = Wait{Timeout: time.Minute}.timing()
	if timeout != time.Minute || interval != DefaultInterval {
		t.Errorf("Wait{Timeout: 1m} = %s/%s, want 1m/%s", timeout, interval, DefaultInterval)
	}
}

func TestConsistently(t *testing.T) {
	cases := []struct {
		name     string
		check    func(calls int) error
		wantFail string // "" when it holds
	}{
		{"holds throughout", func(int) error { return nil }, ""},
		{"fails at the first error", func(n int) error {
			if n == 3 {
				return errors.New("member replaced")
			}
			return nil
		}, "the members stay stopped holding within 50ms: member replaced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			msg := run(t, func(tb testing.TB) {
				Wait{Timeout: 50 * time.Millisecond, Interval: 5 * time.Millisecond}.Consistently(tb, "the members stay",
					func() error { calls++; return tc.check(calls) })
			})
			if msg != tc.wantFail {
				t.Errorf("failure %q, want %q", msg, tc.wantFail)
			}
			if calls < 2 {
				t.Errorf("%d checks, want the check repeated over the period", calls)
			}
		})
	}
}
