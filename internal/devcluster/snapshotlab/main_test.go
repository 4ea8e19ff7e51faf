package snapshotlab

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/restorewrap"
)

// TestMain is also the node agent's runsc wrapper when the lab's shim runs this binary as runsc
// (agent_test.go): then LAB_RUNSC and LAB_AGENT_IMAGES say where runsc and the images are.
func TestMain(m *testing.M) {
	if runsc := os.Getenv("LAB_RUNSC"); runsc != "" {
		os.Exit(restorewrap.Run(restorewrap.Config{Runsc: runsc, Images: imagestore.Store{Dir: os.Getenv("LAB_AGENT_IMAGES")}}, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}
