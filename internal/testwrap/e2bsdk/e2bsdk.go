// Package e2bsdk installs E2B's JS SDK, pinned, into the user's cache and runs Node scripts
// that drive it, collecting the checks they print. The conformance test (against one sandboxd)
// and the end-to-end test (against the local cluster) run the unmodified SDK through it.
package e2bsdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Version is the npm release of E2B's JS SDK the tests run.
const Version = "2.51.0"

// Install installs the pinned SDK under ~/.cache/agent-sandbox/npm unless it is there already and
// returns its directory. Without node, npm or the registry the test is skipped, saying why.
func Install(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: E2B's SDK needs node and npm", tool)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory for E2B's SDK: %v", err)
	}
	dir := filepath.Join(cache, "agent-sandbox", "npm", "e2b-"+Version)
	pkg := filepath.Join(dir, "node_modules", "e2b", "package.json")
	if b, err := os.ReadFile(pkg); err == nil && bytes.Contains(b, []byte(`"version": "`+Version+`"`)) {
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
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--save-exact", "e2b@"+Version)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm install e2b@%s failed (no registry?): %v\n%s", Version, err, out)
	}
	return dir
}

// Result is what a script printed: its checks in order and its timings by name.
type Result struct {
	Checks  []Check
	Timings map[string]float64 // milliseconds
}

// Check is one line {"check": name, "ok": bool, "detail": ...} a script printed.
type Check struct {
	Check  string          `json:"check"`
	OK     bool            `json:"ok"`
	Detail json.RawMessage `json:"detail"`
}

type timing struct {
	Timing string  `json:"timing"`
	MS     float64 `json:"ms"`
}

// Run runs script with node, E2B_SDK_DIR set to sdkDir and env added, for at most limit; it
// fails the test on every failed check, on a crash, and when fewer than minChecks ran.
func Run(t testing.TB, sdkDir, script string, limit time.Duration, minChecks int, env ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", abs)
	cmd.Env = append(append(os.Environ(), "E2B_SDK_DIR="+sdkDir), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	res := Result{Timings: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c Check
		var tm timing
		switch {
		case json.Unmarshal(sc.Bytes(), &tm) == nil && tm.Timing != "":
			res.Timings[tm.Timing] = tm.MS
		case json.Unmarshal(sc.Bytes(), &c) == nil && c.Check != "":
			res.Checks = append(res.Checks, c)
			if !c.OK {
				t.Errorf("%s: %s", c.Check, c.Detail)
			}
		default:
			t.Logf("node: %s", sc.Text())
		}
	}
	if err != nil {
		t.Errorf("node exited with %v\n%s", err, stderr.String())
	}
	if len(res.Checks) < minChecks {
		t.Errorf("only %d checks ran, want the whole flow (%d): %s", len(res.Checks), minChecks, strings.TrimSpace(stderr.String()))
	}
	return res
}
