package logtest_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/agent-sandbox/agent-sandbox/internal/logging/logtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRecorderKeepsLinesUpToItsVerbosity(t *testing.T) {
	log, rec := logtest.New(2)
	log.V(2).Info("decided", "sandbox", klog.KRef("ns", "a"), "count", 3)
	log.V(3).Info("too detailed")
	log.Error(errors.New("boom"), "failed")
	want := []logtest.Line{
		{V: 2, Msg: "decided", Values: map[string]any{"sandbox": logtest.Ref("ns", "a"), "count": float64(3)}},
		{V: -1, Msg: "failed", Values: map[string]any{"error": "boom"}},
	}
	if d := cmp.Diff(want, rec.Lines()); d != "" {
		t.Fatalf("lines (-want +got):\n%s", d)
	}
}

func TestCheck(t *testing.T) {
	log, rec := logtest.New(2)
	log.V(2).Info("decided", "sandbox", klog.KRef("ns", "a"), "count", 3)
	log.V(1).Info("noted")
	tests := []struct {
		name   string
		v      int
		msg    string
		want   map[string]any
		wantOK bool
	}{
		{"the line, its verbosity and all its values", 2, "decided", map[string]any{"sandbox": logtest.Ref("ns", "a"), "count": float64(3)}, true},
		{"some of its values", 2, "decided", map[string]any{"count": float64(3)}, true},
		{"no values asked for", 1, "noted", nil, true},
		{"a line never logged", 2, "undecided", nil, false},
		{"another verbosity", 1, "decided", nil, false},
		{"another value", 2, "decided", map[string]any{"count": float64(4)}, false},
		{"a key the line lacks", 2, "decided", map[string]any{"pool": "p"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rec.Check(tt.v, tt.msg, tt.want)
			if (err == nil) != tt.wantOK {
				t.Errorf("Check(%d, %q, %v) = %v, want ok %v", tt.v, tt.msg, tt.want, err, tt.wantOK)
			}
		})
	}
}
