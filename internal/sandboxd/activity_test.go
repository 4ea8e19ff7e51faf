package sandboxd

import (
	"testing"
	"time"
)

// The idle clock on a fake clock: it stops while requests are in flight or processes run, and
// counts from the last thing that happened.
func TestActivityCountsIdleTimeFromTheLastThingThatHappened(t *testing.T) {
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	a := newActivity(func() time.Time { return now })
	var endRequest func()
	steps := []struct {
		name       string
		do         func()
		running    int // background processes running at the report
		wantActive bool
		wantIdle   time.Duration
	}{
		{"10s after start, nothing happened", func() { now = now.Add(10 * time.Second) }, 0, false, 10 * time.Second},
		{"a request begins", func() { endRequest = a.begin() }, 0, true, 0},
		{"the request still in flight a minute later", func() { now = now.Add(time.Minute) }, 0, true, 0},
		{"the request ends, a background process runs on", func() { now = now.Add(time.Second); endRequest() }, 1, true, 0},
		{"the process exits; 5 minutes later", func() { now = now.Add(5 * time.Minute) }, 0, false, 5 * time.Minute},
		{"the router's touch restarts the clock", func() { a.touch(); now = now.Add(2 * time.Second) }, 0, false, 2 * time.Second},
	}
	for _, st := range steps {
		st.do()
		r := a.report(st.running)
		if r.Active != st.wantActive || time.Duration(r.IdleSeconds*float64(time.Second)) != st.wantIdle {
			t.Fatalf("%s: active=%v idle=%gs; want active=%v idle=%s", st.name, r.Active, r.IdleSeconds, st.wantActive, st.wantIdle)
		}
	}
}
