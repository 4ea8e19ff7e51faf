package spec

import (
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWithDefaultsRefusesSocketPathsTooLong(t *testing.T) {
	_, err := (&Config{Dir: "/tmp/" + strings.Repeat("x", 100), Out: io.Discard}).WithDefaults()
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("got %v, want a too-long error", err)
	}
}
