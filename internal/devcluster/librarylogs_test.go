package devcluster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Any devcluster command routes controller-runtime's log before it runs: an API server warning
// (logged at info) is dropped and an error shows as one line, where an unset logger printed a
// goroutine stack 30 s into `up` (applying Cilium's CRDs draws a warning) and dropped errors.
func TestCommandsRouteLibraryLogsAndDropAPIServerWarnings(t *testing.T) {
	var stderr bytes.Buffer
	cmd := NewCommand()
	cmd.SetArgs([]string{"status", "--dir", shortTempDir(t)})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&stderr)
	_ = cmd.Execute() // status of a cluster that does not run: only its pre-run matters here

	ctrllog.Log.Info(`unrecognized format "idn-hostname"`)
	ctrllog.Log.Error(errors.New("connection refused"), "library error")

	got := stderr.String()
	if !strings.Contains(got, "library error") {
		t.Errorf("stderr after `status` and a controller-runtime error:\n%s\nwant the error logged (controller-runtime's logger set)", got)
	}
	if strings.Contains(got, "idn-hostname") {
		t.Errorf("stderr:\n%s\nwant no info-level API server warning", got)
	}
}
