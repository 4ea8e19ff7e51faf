package legacy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// decodeMap decodes a JSON object so tests compare exact keys and values.
func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return m
}

func wantMap(t *testing.T, b []byte, want map[string]any) {
	t.Helper()
	if got := decodeMap(t, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

func TestLegacyRoot(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.Token = "secret" }) // GET / stays public
	b := e.Do("GET", "/", nil, http.StatusOK)
	if string(b) != `{"status":"ok","message":"Sandbox Runtime is active."}` {
		t.Fatalf("body %s", b)
	}
}

func TestLegacyExecute(t *testing.T) {
	e := sandboxdtest.New(t)
	tests := []struct {
		name    string
		command string
		want    map[string]any
	}{
		{"shell pipes work", "echo hi | tr a-z A-Z", map[string]any{"stdout": "HI\n", "stderr": "", "exit_code": 0.0}},
		{"exit code and stderr", `sh -c 'echo wrapped; echo e >&2; exit 2'`, map[string]any{"stdout": "wrapped\n", "stderr": "e\n", "exit_code": 2.0}},
		{"cwd is the root", "pwd", map[string]any{"stdout": e.Root + "\n", "stderr": "", "exit_code": 0.0}},
		{"no HTML escaping", "echo '<&>'", map[string]any{"stdout": "<&>\n", "stderr": "", "exit_code": 0.0}},
		{"empty command is exit 1", "", map[string]any{"stdout": "", "stderr": "Failed to execute command: empty command", "exit_code": 1.0}},
		{"blank command is exit 1", "  \t ", map[string]any{"stdout": "", "stderr": "Failed to execute command: empty command", "exit_code": 1.0}},
		{"program not found is exit 1", "no-such-binary-xyz 2>/dev/null", map[string]any{"stdout": "",
			"stderr": "Failed to execute command: [Errno 2] No such file or directory: 'no-such-binary-xyz'", "exit_code": 1.0}},
		{"missing path is exit 1", "./nope.sh arg", map[string]any{"stdout": "",
			"stderr": "Failed to execute command: [Errno 2] No such file or directory: './nope.sh'", "exit_code": 1.0}},
		{"builtin is not looked up", "exit 3", map[string]any{"stdout": "", "stderr": "", "exit_code": 3.0}},
		{"killed by a signal is -N", "kill -9 $$", map[string]any{"stdout": "", "stderr": "", "exit_code": -9.0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantMap(t, e.Do("POST", "/execute", map[string]string{"command": tc.command}, http.StatusOK), tc.want)
		})
	}
}

func TestLegacyExecuteRawBody(t *testing.T) {
	e := sandboxdtest.New(t)
	// No HTML escaping and no trailing newline, like the python runtime.
	if b := e.Do("POST", "/execute", map[string]string{"command": "printf '<&>'"}, http.StatusOK); string(b) != `{"stdout":"<&>","stderr":"","exit_code":0}` {
		t.Fatalf("raw body %s, want {\"stdout\":\"<&>\",\"stderr\":\"\",\"exit_code\":0}", b)
	}
	m := decodeMap(t, e.Do("POST", "/execute", map[string]string{}, http.StatusUnprocessableEntity))
	if _, ok := m["detail"]; !ok {
		t.Fatalf("422 body %v, want a FastAPI-style detail", m)
	}
}

func TestLegacyExecuteTimeout(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.ExecTimeout = 300 * time.Millisecond })
	m := decodeMap(t, e.Do("POST", "/execute", map[string]string{"command": "echo started; sleep 300"}, http.StatusOK))
	want := "Failed to execute command: Command \"echo started; sleep 300\" timed out after 0.3 seconds\n"
	if m["exit_code"] != 1.0 || m["stdout"] != "started\n" || m["stderr"] != want || len(m) != 3 {
		t.Fatalf("body %v, want exit_code 1, the output so far and stderr %q", m, want)
	}
}

// TestLegacyExecuteOutputCap: output up to the cap arrives whole; over it the
// answer says so (exit code 1 unless already failing, a stderr line), and is
// never cut silently.
func TestLegacyExecuteOutputCap(t *testing.T) {
	e := sandboxdtest.New(t, func(c *sandboxd.Config) { c.MaxOutput = 1000 })
	tests := []struct {
		name       string
		command    string
		wantExit   float64
		wantStdout int
		wantNote   string // substring of stderr; "" for none
	}{
		{"at the cap", "head -c 1000 /dev/zero", 0, 1000, ""},
		{"stdout over the cap", "head -c 1001 /dev/zero", 1, 1000, "OUTPUT TRUNCATED: stdout exceeded the output cap of 1000 bytes"},
		{"stderr over the cap", "head -c 5000 /dev/zero >&2", 1, 0, "OUTPUT TRUNCATED: stderr exceeded the output cap of 1000 bytes"},
		{"failing command keeps its code", "head -c 2000 /dev/zero; exit 7", 7, 1000, "OUTPUT TRUNCATED: stdout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := decodeMap(t, e.Do("POST", "/execute", map[string]string{"command": tc.command}, http.StatusOK))
			stderr := m["stderr"].(string)
			if m["exit_code"] != tc.wantExit || len(m["stdout"].(string)) != tc.wantStdout {
				t.Fatalf("exit_code %v, stdout %d bytes; want %v and %d bytes", m["exit_code"], len(m["stdout"].(string)), tc.wantExit, tc.wantStdout)
			}
			if tc.wantNote == "" && strings.Contains(stderr, "TRUNCATED") || tc.wantNote != "" && !strings.Contains(stderr, tc.wantNote) {
				t.Fatalf("stderr %.200q, want note %q", stderr, tc.wantNote)
			}
		})
	}
}

// TestLegacyExecuteLargeOutput: 17 MiB of stdout (more than the old 10 MiB
// cap and the upstream Go SDK's 16 MB) arrives whole with the default cap.
func TestLegacyExecuteLargeOutput(t *testing.T) {
	e := sandboxdtest.New(t)
	const n = 17 << 20
	var res wire.LegacyExecuteResponse
	e.DoJSON("POST", "/execute", map[string]string{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", n)}, http.StatusOK, &res)
	if len(res.Stdout) != n || res.ExitCode != 0 || res.Stderr != "" || strings.Trim(res.Stdout, "x") != "" {
		t.Fatalf("stdout %d bytes, exit_code %d, stderr %q; want %d bytes of x, 0, empty", len(res.Stdout), res.ExitCode, res.Stderr, n)
	}
}

func TestLegacyFiles(t *testing.T) {
	e := sandboxdtest.New(t)
	upload := func(filename, content string, status int) []byte {
		body, ct := sandboxdtest.MultipartBody(t, "file", filename, content)
		return e.Do("POST", "/upload", body, status, "Content-Type", ct)
	}
	wantMap(t, upload("dir/sub/f.txt", "legacy", http.StatusOK), map[string]any{"message": "File 'dir/sub/f.txt' uploaded successfully."})
	wantMap(t, upload("top.txt", "t", http.StatusOK), map[string]any{"message": "File 'top.txt' uploaded successfully."})
	if b, _ := os.ReadFile(filepath.Join(e.Root, "dir/sub/f.txt")); string(b) != "legacy" {
		t.Fatalf("uploaded %q", b)
	}
	for _, bad := range []string{"../x", "dir/../../x", "/../../etc/x"} {
		wantMap(t, upload(bad, "x", http.StatusForbidden), map[string]any{"message": "Access denied"})
	}
	if err := os.Symlink("/etc", filepath.Join(e.Root, "etc")); err != nil {
		t.Fatal(err)
	}
	wantMap(t, upload("etc/evil", "x", http.StatusForbidden), map[string]any{"message": "Access denied"})
	body, ct := sandboxdtest.MultipartBody(t, "other", "x", "x")
	e.Do("POST", "/upload", body, http.StatusUnprocessableEntity, "Content-Type", ct)

	// download: URL-encoded path, octet-stream.
	resp := e.Request(t.Context(), "GET", "/download/dir%2Fsub%2Ff.txt", nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "legacy" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("download %d %q %q", resp.StatusCode, b, resp.Header.Get("Content-Type"))
	}
	wantMap(t, e.Do("GET", "/download/nope.txt", nil, http.StatusNotFound), map[string]any{"message": "File not found"})
	wantMap(t, e.Do("GET", "/download/dir", nil, http.StatusNotFound), map[string]any{"message": "File not found"})
	wantMap(t, e.Do("GET", "/download/..%2F..%2Fetc%2Fpasswd", nil, http.StatusForbidden), map[string]any{"message": "Access denied"})

	// list
	var list []map[string]any
	if err := json.Unmarshal(e.Do("GET", "/list/dir%2Fsub", nil, http.StatusOK), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || len(list[0]) != 4 || list[0]["name"] != "f.txt" || list[0]["size"] != 6.0 || list[0]["type"] != "file" {
		t.Fatalf("list %v", list)
	}
	if mt, ok := list[0]["mod_time"].(float64); !ok || mt < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Fatalf("mod_time %v", list[0]["mod_time"])
	}
	if err := json.Unmarshal(e.Do("GET", "/list/dir", nil, http.StatusOK), &list); err != nil || len(list) != 1 || list[0]["type"] != "directory" {
		t.Fatalf("list dir %v %v", list, err)
	}
	if b := e.Do("GET", "/list/", nil, http.StatusOK); !strings.HasPrefix(string(b), `[{"name":"dir","size":`) {
		t.Fatalf("list root %s", b)
	}
	wantMap(t, e.Do("GET", "/list/top.txt", nil, http.StatusNotFound), map[string]any{"message": "Path is not a directory"})
	wantMap(t, e.Do("GET", "/list/missing", nil, http.StatusNotFound), map[string]any{"message": "Path is not a directory"})
	wantMap(t, e.Do("GET", "/list/etc", nil, http.StatusForbidden), map[string]any{"message": "Access denied"})

	// exists
	wantMap(t, e.Do("GET", "/exists/dir%2Fsub%2Ff.txt", nil, http.StatusOK), map[string]any{"path": "dir/sub/f.txt", "exists": true})
	wantMap(t, e.Do("GET", "/exists/dir", nil, http.StatusOK), map[string]any{"path": "dir", "exists": true})
	wantMap(t, e.Do("GET", "/exists/nope", nil, http.StatusOK), map[string]any{"path": "nope", "exists": false})
}
