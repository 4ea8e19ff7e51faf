package v1beta1

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNameHashIsStableAndLabelSafe(t *testing.T) {
	// FNV-1a 32-bit, as upstream labels pods: published test vectors, so our label values
	// match the ones upstream's controllers and clients compute.
	for in, want := range map[string]string{"": "811c9dc5", "a": "e40c292c", "foobar": "bf9cf968"} {
		if got := NameHash(in); got != want {
			t.Errorf("NameHash(%q) = %q, want %q", in, got, want)
		}
	}
}
