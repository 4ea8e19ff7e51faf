package conformance

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/envd"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/e2bsdk"
)

// TestE2BSDKAgainstSandboxd runs E2B's unmodified JS SDK (testdata/e2b/sdk_flow.cjs)
// against a sandboxd binary: commands with streamed output, exit codes,
// background processes, kill, stdin, re-attaching, a terminal, files,
// watches and signed URLs. Once in the SDK's debug mode (envd version
// 99.99.99, no token) and once as the control plane would hand the
// sandbox out (our envd version and an access token).
func TestE2BSDKAgainstSandboxd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the E2B SDK flow builds sandboxd and runs node")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found: the E2B SDK flow runs commands with it")
	}
	sdkDir := e2bsdk.Install(t)
	bin := filepath.Join(t.TempDir(), "sandboxd")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/sandboxd").CombinedOutput(); err != nil {
		t.Fatalf("go build sandboxd: %v\n%s", err, out)
	}
	for _, mode := range []struct{ name, token string }{{"debug", ""}, {"token", "e2b-access-token"}} {
		t.Run(mode.name, func(t *testing.T) {
			url := startSandboxd(t, bin, mode.token)
			runFlow(t, sdkDir, url, mode.name, mode.token)
		})
	}
}

// startSandboxd runs the binary on free ports with a fresh root and
// returns its envd URL; cleanup stops it by its pid.
func startSandboxd(t *testing.T, bin, token string) string {
	t.Helper()
	ports := freePorts(t, 2)
	envdAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--grpc-listen", "off",
		"--envd-listen", envdAddr, "--root", t.TempDir(), "--shutdown-timeout", "2s")
	cmd.Env = append(os.Environ(), "SANDBOXD_TOKEN="+token)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait() // a signalled exit is the expected outcome
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("sandboxd log:\n%s", logs.String())
		}
	})
	url := "http://" + envdAddr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxd's envd port never became healthy (%v)\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n { // all open at once, so that the ports differ
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// runFlow runs the SDK flow and fails on each failed check.
func runFlow(t *testing.T, sdkDir, url, mode, token string) {
	t.Helper()
	e2bsdk.Run(t, sdkDir, "testdata/e2b/sdk_flow.cjs", 3*time.Minute, 25, "E2B_SANDBOX_URL="+url, "FLOW_MODE="+mode,
		"ENVD_VERSION="+envd.Version, "ENVD_TOKEN="+token, "E2B_DEBUG=", "E2B_API_KEY=")
}
