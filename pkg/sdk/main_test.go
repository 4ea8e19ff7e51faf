package sdk

import (
	"os"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// env is the shared control plane of the claim lifecycle tests; nil when
// KUBEBUILDER_ASSETS is not set (those tests then skip; `make test` sets it).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, "sdk", &env)) }
