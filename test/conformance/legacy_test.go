package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// multipartUpload builds the body of a legacy POST /upload as each client does: the Python SDK
// through requests/urllib3 (files={"file": (path, content)}: 32-hex boundary, a part Content-Type
// guessed from the name), the Go SDK through mime/multipart's CreateFormFile.
func multipartUpload(c client, filename, content string) (body []byte, contentType string) {
	boundary, partType := "9f2b6c0d4e8a4b1c8d7e6f5a4b3c2d1e", "text/plain"
	if c == goSDK {
		boundary, partType = "3c1f9a7e5b2d4c6e8f0a1b3c5d7e9f2a4b6c8d0e1f3a5b7c9d2e4f6a8b0c", "application/octet-stream"
	}
	b := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\nContent-Type: %s\r\n\r\n%s\r\n--%s--\r\n",
		boundary, filename, partType, content, boundary)
	return []byte(b), "multipart/form-data; boundary=" + boundary
}

// executeBody is {"command": ...} as each client serialises it: Python's json.dumps puts a
// space after the colon, Go's encoding/json does not.
func executeBody(c client, command string) []byte {
	b, _ := json.Marshal(command)
	if c == python {
		return []byte(`{"command": ` + string(b) + `}`)
	}
	return []byte(`{"command":` + string(b) + `}`)
}

// wantJSON compares a JSON body with want, ignoring the named keys wherever they occur (times).
func wantJSON(t *testing.T, body []byte, want string, ignore ...string) {
	t.Helper()
	var got, exp any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %.300q is not JSON: %v", body, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatalf("bad fixture %s: %v", want, err)
	}
	strip(got, ignore)
	strip(exp, ignore)
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("body %s\nwant %s (ignoring %v)", body, want, ignore)
	}
}

func strip(v any, keys []string) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range keys {
			delete(x, k)
		}
		for _, e := range x {
			strip(e, keys)
		}
	case []any:
		for _, e := range x {
			strip(e, keys)
		}
	}
}

// exchange is one request of an upstream client and upstream's answer to it.
type exchange struct {
	name        string
	client      client
	method      string
	path        string // as the client builds it, already quoted
	body        []byte
	contentType string
	wantStatus  int
	wantType    string // Content-Type prefix; "" not checked
	wantJSON    string // JSON answer; "" when wantBody applies
	wantBody    string
	ignore      []string // JSON keys whose values vary (times)
}

func (x exchange) run(t *testing.T, tg target) {
	t.Helper()
	resp := send(t, tg, x.client, x.method, x.path, x.body, x.contentType)
	body := readBody(t, resp)
	if resp.StatusCode != x.wantStatus {
		t.Fatalf("%s %s: status %d, want %d; body %.300q", x.method, x.path, resp.StatusCode, x.wantStatus, body)
	}
	if x.wantType != "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), x.wantType) {
		t.Fatalf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), x.wantType)
	}
	if x.wantJSON != "" {
		wantJSON(t, body, x.wantJSON, x.ignore...)
	} else if string(body) != x.wantBody {
		t.Fatalf("body %.300q, want %.300q", body, x.wantBody)
	}
}

// TestLegacyRuntime: the python runtime's API on :8888, as the SDKs' default (legacy-python)
// runtime uses it.
func TestLegacyRuntime(t *testing.T) {
	pyUp, pyUpType := multipartUpload(python, "dir/sub/f.txt", "from python")
	goUp, goUpType := multipartUpload(goSDK, "plain.txt", "from go")
	evil, evilType := multipartUpload(python, "../evil.txt", "x")
	steps := []exchange{
		{name: "readiness probe", client: python, method: "GET", path: "", wantStatus: 200, wantType: "application/json",
			wantJSON: `{"status":"ok","message":"Sandbox Runtime is active."}`},
		{name: "python run", client: python, method: "POST", path: "execute", body: executeBody(python, "echo hello"), contentType: "application/json",
			wantStatus: 200, wantType: "application/json", wantJSON: `{"stdout":"hello\n","stderr":"","exit_code":0}`},
		{name: "go run", client: goSDK, method: "POST", path: "execute", body: executeBody(goSDK, "echo out; echo err >&2; exit 3"), contentType: "application/json",
			wantStatus: 200, wantJSON: `{"stdout":"out\n","stderr":"err\n","exit_code":3}`},
		{name: "empty command", client: python, method: "POST", path: "execute", body: executeBody(python, ""), contentType: "application/json",
			wantStatus: 200, wantJSON: `{"stdout":"","stderr":"Failed to execute command: empty command","exit_code":1}`},
		{name: "command not found", client: goSDK, method: "POST", path: "execute", body: executeBody(goSDK, "nope-xyz --version"), contentType: "application/json",
			wantStatus: 200, wantJSON: `{"stdout":"","stderr":"Failed to execute command: [Errno 2] No such file or directory: 'nope-xyz'","exit_code":1}`},
		{name: "no command field", client: python, method: "POST", path: "execute", body: []byte(`{}`), contentType: "application/json",
			wantStatus: 422, wantJSON: `{"detail":[{"type":"value_error","loc":["body","command"],"msg":"Field required"}]}`},
		{name: "python upload with directories", client: python, method: "POST", path: "upload", body: pyUp, contentType: pyUpType,
			wantStatus: 200, wantJSON: `{"message":"File 'dir/sub/f.txt' uploaded successfully."}`},
		{name: "go upload of a plain name", client: goSDK, method: "POST", path: "upload", body: goUp, contentType: goUpType,
			wantStatus: 200, wantJSON: `{"message":"File 'plain.txt' uploaded successfully."}`},
		{name: "upload outside the root", client: python, method: "POST", path: "upload", body: evil, contentType: evilType,
			wantStatus: 403, wantJSON: `{"message":"Access denied"}`},
		{name: "download quoted path", client: python, method: "GET", path: "download/dir%2Fsub%2Ff.txt",
			wantStatus: 200, wantType: "application/octet-stream", wantBody: "from python"},
		{name: "go download", client: goSDK, method: "GET", path: "download/plain.txt",
			wantStatus: 200, wantType: "application/octet-stream", wantBody: "from go"},
		{name: "download missing", client: goSDK, method: "GET", path: "download/missing.txt",
			wantStatus: 404, wantJSON: `{"message":"File not found"}`},
		{name: "list", client: python, method: "GET", path: "list/dir%2Fsub",
			wantStatus: 200, wantJSON: `[{"name":"f.txt","size":11,"type":"file"}]`, ignore: []string{"mod_time"}},
		{name: "go list of the root, '.' quoted as %2E", client: goSDK, method: "GET", path: "list/%2E",
			wantStatus: 200, wantJSON: `[{"name":"dir","type":"directory"},{"name":"plain.txt","type":"file"}]`, ignore: []string{"mod_time", "size"}},
		{name: "list not a directory", client: goSDK, method: "GET", path: "list/plain.txt",
			wantStatus: 404, wantJSON: `{"message":"Path is not a directory"}`},
		{name: "exists", client: python, method: "GET", path: "exists/dir%2Fsub%2Ff.txt",
			wantStatus: 200, wantJSON: `{"path":"dir/sub/f.txt","exists":true}`},
		{name: "exists not", client: goSDK, method: "GET", path: "exists/nothing%20here",
			wantStatus: 200, wantJSON: `{"path":"nothing here","exists":false}`},
	}
	forEachTarget(t, func(t *testing.T, tg target, root string) {
		for _, x := range steps { // in order: later steps read what earlier ones wrote
			t.Run(x.name, func(t *testing.T) { x.run(t, tg) })
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(root), "evil.txt")); err == nil {
			t.Fatal("the refused upload was written outside the root")
		}
	})
}

// TestLegacyTimeout: a command running past the runtime's timeout is killed and answered with
// exit_code 1 and "Failed to execute command: ..." on stderr, as the python runtime does.
func TestLegacyTimeout(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target, _ string) {
		resp := send(t, tg, python, "POST", "execute", executeBody(python, "sleep 30"), "application/json")
		var res struct {
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(readBody(t, resp), &res); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		if res.ExitCode != 1 || !strings.HasPrefix(res.Stderr, "Failed to execute command: ") || !strings.Contains(res.Stderr, "timed out") {
			t.Fatalf("exit_code %d, stderr %q; want 1 and a Failed to execute command: ... timed out message", res.ExitCode, res.Stderr)
		}
	}, sdktest.SandboxdOptions{ExecTimeout: 300 * time.Millisecond})
}

// TestLegacyLargeOutput: upstream returns all of a command's output; so do we, here 17 MiB
// (more than the upstream Go SDK's 16 MB response limit, which is the client's own choice).
func TestLegacyLargeOutput(t *testing.T) {
	const n = 17 << 20
	forEachTarget(t, func(t *testing.T, tg target, _ string) {
		resp := send(t, tg, python, "POST", "execute", executeBody(python, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", n)), "application/json")
		var res struct {
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal(readBody(t, resp), &res); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		if len(res.Stdout) != n || strings.Trim(res.Stdout, "a") != "" || res.ExitCode != 0 || res.Stderr != "" {
			t.Fatalf("stdout %d bytes, exit_code %d, stderr %q; want all %d bytes, 0, empty", len(res.Stdout), res.ExitCode, res.Stderr, n)
		}
	})
}
