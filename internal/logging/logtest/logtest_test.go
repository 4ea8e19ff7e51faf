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
