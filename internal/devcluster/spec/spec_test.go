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

func TestWithDefaultsPicksTheSandboxRuntime(t *testing.T) {
	for _, tc := range []struct {
		name, configured, env  string
		wantRuntime, wantClass string
		wantErr                bool
	}{
		{name: "gVisor unless told otherwise", wantRuntime: SandboxRuntimeGVisor, wantClass: GVisorRuntimeClass},
		{name: "the environment picks runc", env: "runc", wantRuntime: SandboxRuntimeRunc, wantClass: ""},
		{name: "the environment picks gvisor", env: "gvisor", wantRuntime: SandboxRuntimeGVisor, wantClass: GVisorRuntimeClass},
		{name: "the config wins over the environment", configured: "runc", env: "gvisor", wantRuntime: SandboxRuntimeRunc, wantClass: ""},
		{name: "an unknown runtime is refused", configured: "kata", wantErr: true},
		{name: "an unknown runtime in the environment is refused", env: "runsc", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(SandboxRuntimeEnv, tc.env)
			c, err := (&Config{Dir: "/tmp/dev", Out: io.Discard, SandboxRuntime: tc.configured}).WithDefaults()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("runtime %q (env %q) accepted as %q, want an error", tc.configured, tc.env, c.SandboxRuntime)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.SandboxRuntime != tc.wantRuntime || c.SandboxRuntimeClass() != tc.wantClass {
				t.Errorf("runtime %q, RuntimeClass %q; want %q, %q", c.SandboxRuntime, c.SandboxRuntimeClass(), tc.wantRuntime, tc.wantClass)
			}
		})
	}
}
