package sdk

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// env is the shared control plane of the claim lifecycle tests; nil when
// KUBEBUILDER_ASSETS is not set (those tests then skip; `make test` sets it).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		var err error
		if env, err = testenv.Start(testenv.Options{}); err != nil {
			fmt.Fprintln(os.Stderr, "sdk: starting control plane:", err)
			return 1
		}
	}
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "sdk: stopping control plane:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(testenv.GoleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "sdk: leaked goroutines:", err)
			code = 1
		}
	}
	return code
}
