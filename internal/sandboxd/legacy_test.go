package sandboxd

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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
	e := newEnv(t, func(c *Config) { c.Token = "secret" }) // GET / stays public
	b := e.do("GET", "/", nil, http.StatusOK)
	if string(b) != `{"status":"ok","message":"Sandbox Runtime is active."}` {
		t.Fatalf("body %s", b)
	}
}

func TestLegacyExecute(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		command string
		want    map[string]any
	}{
		{"echo hi | tr a-z A-Z", map[string]any{"stdout": "HI\n", "stderr": "", "exit_code": 0.0}},
		{`sh -c 'echo wrapped; echo e >&2; exit 2'`, map[string]any{"stdout": "wrapped\n", "stderr": "e\n", "exit_code": 2.0}},
		{"pwd", map[string]any{"stdout": e.root + "\n", "stderr": "", "exit_code": 0.0}},
		{"echo '<&>'", map[string]any{"stdout": "<&>\n", "stderr": "", "exit_code": 0.0}},
		{"no-such-binary-xyz 2>/dev/null", map[string]any{"stdout": "", "stderr": "", "exit_code": 127.0}},
	}
	for _, tc := range tests {
		wantMap(t, e.do("POST", "/execute", map[string]string{"command": tc.command}, http.StatusOK), tc.want)
	}
	// No HTML escaping, like the python runtime.
	if b := e.do("POST", "/execute", map[string]string{"command": "printf '<&>'"}, http.StatusOK); string(b) != `{"stdout":"<&>","stderr":"","exit_code":0}` {
		t.Fatalf("raw body %s", b)
	}
	m := decodeMap(t, e.do("POST", "/execute", map[string]string{}, http.StatusUnprocessableEntity))
	if _, ok := m["detail"]; !ok {
		t.Fatalf("422 body %v", m)
	}
}

func TestLegacyExecuteTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ExecTimeout = 300 * time.Millisecond })
	m := decodeMap(t, e.do("POST", "/execute", map[string]string{"command": "echo started; sleep 300"}, http.StatusOK))
	if m["exit_code"] != 124.0 || m["stdout"] != "started\n" || !strings.Contains(m["stderr"].(string), "timed out after 300ms") || len(m) != 3 {
		t.Fatalf("body %v", m)
	}
}

func multipartBody(t *testing.T, field, filename, content string) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+field+`"; filename="`+filename+`"`)
	h.Set("Content-Type", "application/octet-stream")
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(pw, content)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, mw.FormDataContentType()
}

func TestLegacyFiles(t *testing.T) {
	e := newEnv(t)
	upload := func(filename, content string, status int) []byte {
		body, ct := multipartBody(t, "file", filename, content)
		return e.do("POST", "/upload", body, status, "Content-Type", ct)
	}
	wantMap(t, upload("dir/sub/f.txt", "legacy", http.StatusOK), map[string]any{"message": "File 'dir/sub/f.txt' uploaded successfully."})
	wantMap(t, upload("top.txt", "t", http.StatusOK), map[string]any{"message": "File 'top.txt' uploaded successfully."})
	if b, _ := os.ReadFile(filepath.Join(e.root, "dir/sub/f.txt")); string(b) != "legacy" {
		t.Fatalf("uploaded %q", b)
	}
	for _, bad := range []string{"../x", "dir/../../x", "/../../etc/x"} {
		wantMap(t, upload(bad, "x", http.StatusForbidden), map[string]any{"message": "Access denied"})
	}
	if err := os.Symlink("/etc", filepath.Join(e.root, "etc")); err != nil {
		t.Fatal(err)
	}
	wantMap(t, upload("etc/evil", "x", http.StatusForbidden), map[string]any{"message": "Access denied"})
	body, ct := multipartBody(t, "other", "x", "x")
	e.do("POST", "/upload", body, http.StatusUnprocessableEntity, "Content-Type", ct)

	// download: URL-encoded path, octet-stream.
	resp := e.request(t.Context(), "GET", "/download/dir%2Fsub%2Ff.txt", nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "legacy" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("download %d %q %q", resp.StatusCode, b, resp.Header.Get("Content-Type"))
	}
	wantMap(t, e.do("GET", "/download/nope.txt", nil, http.StatusNotFound), map[string]any{"message": "File not found"})
	wantMap(t, e.do("GET", "/download/dir", nil, http.StatusNotFound), map[string]any{"message": "File not found"})
	wantMap(t, e.do("GET", "/download/..%2F..%2Fetc%2Fpasswd", nil, http.StatusForbidden), map[string]any{"message": "Access denied"})

	// list
	var list []map[string]any
	if err := json.Unmarshal(e.do("GET", "/list/dir%2Fsub", nil, http.StatusOK), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || len(list[0]) != 4 || list[0]["name"] != "f.txt" || list[0]["size"] != 6.0 || list[0]["type"] != "file" {
		t.Fatalf("list %v", list)
	}
	if mt, ok := list[0]["mod_time"].(float64); !ok || mt < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Fatalf("mod_time %v", list[0]["mod_time"])
	}
	if err := json.Unmarshal(e.do("GET", "/list/dir", nil, http.StatusOK), &list); err != nil || len(list) != 1 || list[0]["type"] != "directory" {
		t.Fatalf("list dir %v %v", list, err)
	}
	if b := e.do("GET", "/list/", nil, http.StatusOK); !strings.HasPrefix(string(b), `[{"name":"dir","size":`) {
		t.Fatalf("list root %s", b)
	}
	wantMap(t, e.do("GET", "/list/top.txt", nil, http.StatusNotFound), map[string]any{"message": "Path is not a directory"})
	wantMap(t, e.do("GET", "/list/missing", nil, http.StatusNotFound), map[string]any{"message": "Path is not a directory"})
	wantMap(t, e.do("GET", "/list/etc", nil, http.StatusForbidden), map[string]any{"message": "Access denied"})

	// exists
	wantMap(t, e.do("GET", "/exists/dir%2Fsub%2Ff.txt", nil, http.StatusOK), map[string]any{"path": "dir/sub/f.txt", "exists": true})
	wantMap(t, e.do("GET", "/exists/dir", nil, http.StatusOK), map[string]any{"path": "dir", "exists": true})
	wantMap(t, e.do("GET", "/exists/nope", nil, http.StatusOK), map[string]any{"path": "nope", "exists": false})
}
