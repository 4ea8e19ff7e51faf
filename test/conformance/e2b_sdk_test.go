package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/envd"
)

// e2bSDKVersion is the npm release of E2B's JS SDK the flow runs; it is
// installed once into the user's cache.
const e2bSDKVersion = "2.51.0"

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
	for _, tool := range []string{"npm", "node", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the E2B SDK flow needs node, npm and bash", tool)
		}
	}
	sdkDir := installE2BSDK(t)
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

// installE2BSDK installs the pinned SDK under ~/.cache/agent-sandbox/npm
// unless it is there already; without the registry the test is skipped.
func installE2BSDK(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory for the E2B SDK: %v", err)
	}
	dir := filepath.Join(cache, "agent-sandbox", "npm", "e2b-"+e2bSDKVersion)
	pkg := filepath.Join(dir, "node_modules", "e2b", "package.json")
	if b, err := os.ReadFile(pkg); err == nil && bytes.Contains(b, []byte(`"version": "`+e2bSDKVersion+`"`)) {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"e2b-sdk-cache","private":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--save-exact", "e2b@"+e2bSDKVersion)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm install e2b@%s failed (no registry?): %v\n%s", e2bSDKVersion, err, out)
	}
	return dir
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

type flowCheck struct {
	Check  string          `json:"check"`
	OK     bool            `json:"ok"`
	Detail json.RawMessage `json:"detail"`
}

// runFlow runs the SDK flow and fails on each failed check.
func runFlow(t *testing.T, sdkDir, url, mode, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	script, err := filepath.Abs("testdata/e2b/sdk_flow.cjs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "E2B_SDK_DIR="+sdkDir, "E2B_SANDBOX_URL="+url, "FLOW_MODE="+mode,
		"ENVD_VERSION="+envd.Version, "ENVD_TOKEN="+token, "E2B_DEBUG=", "E2B_API_KEY=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	checks := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c flowCheck
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			t.Logf("node: %s", sc.Text())
			continue
		}
		checks++
		if !c.OK {
			t.Errorf("%s: %s", c.Check, c.Detail)
		}
	}
	if err != nil {
		t.Errorf("node exited with %v\n%s", err, stderr.String())
	}
	if checks < 25 {
		t.Errorf("only %d checks ran, want the whole flow (%s)", checks, strings.TrimSpace(stderr.String()))
	}
}
