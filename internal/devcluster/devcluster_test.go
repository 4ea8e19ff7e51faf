package devcluster

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRestartRefusesWhatItCannotRestart(t *testing.T) {
	cases := []struct {
		name, component, want string
	}{
		{"a component that is not restartable on its own", "cilium-agent", "cannot be restarted on its own"},
		{"a component that does not run", "kubelet", "kubelet is not running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Restart(context.Background(), spec.Config{Dir: shortTempDir(t), Out: io.Discard}, tc.component, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restart(%s) = %v, want an error saying %q", tc.component, err, tc.want)
			}
		})
	}
}

// shortTempDir is a temporary state dir short enough for containerd's socket path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dev")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
