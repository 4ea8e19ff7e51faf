package envd_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/envd"
)

// do sends an HTTP request to the envd server and returns status and body.
func (e *env) do(method, target string, body io.Reader, hdr ...string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.ts.URL+target, body)
	if err != nil {
		e.t.Fatal(err)
	}
	copyHeader(req.Header, e.header)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b
}

type filePart struct{ name, content string }

func multipartBody(t *testing.T, parts ...filePart) (io.Reader, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		w, err := mw.CreateFormFile("file", p.name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, p.content)
	}
	_ = mw.Close()
	return &b, mw.FormDataContentType()
}

type entry struct{ Path, Name, Type string }

func TestFilesUploadDownloadRoundTrip(t *testing.T) {
	e := newEnv(t)
	// One file, multipart, the way the SDK writes a single path.
	body, ct := multipartBody(t, filePart{"/docs/a.txt", "alpha"})
	status, b := e.do("POST", "/files?path="+url.QueryEscape("/docs/a.txt"), body, "Content-Type", ct)
	var got []entry
	if status != 200 || json.Unmarshal(b, &got) != nil || len(got) != 1 || got[0] != (entry{"/docs/a.txt", "a.txt", "file"}) {
		t.Fatalf("upload: %d %s, want the entry of /docs/a.txt", status, b)
	}
	// Several files, each named by its part (full paths, not just bases).
	body, ct = multipartBody(t, filePart{"/m/one.txt", "1"}, filePart{"m/deep/two.txt", "22"})
	status, b = e.do("POST", "/files", body, "Content-Type", ct)
	got = nil
	if status != 200 || json.Unmarshal(b, &got) != nil || len(got) != 2 || got[1].Path != "/m/deep/two.txt" {
		t.Fatalf("multi upload: %d %s, want two entries", status, b)
	}
	// Raw bytes, and gzip-encoded raw bytes.
	status, b = e.do("POST", "/files?path=raw.bin", strings.NewReader("raw\x00bytes"), "Content-Type", "application/octet-stream")
	if status != 200 {
		t.Fatalf("raw upload: %d %s", status, b)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("zipped content"))
	_ = zw.Close()
	status, b = e.do("POST", "/files?path=z.txt", &gz, "Content-Type", "application/octet-stream", "Content-Encoding", "gzip")
	if status != 200 {
		t.Fatalf("gzip upload: %d %s", status, b)
	}
	for p, want := range map[string]string{"/docs/a.txt": "alpha", "/m/one.txt": "1", "/m/deep/two.txt": "22", "raw.bin": "raw\x00bytes", "/z.txt": "zipped content"} {
		status, b := e.do("GET", "/files?path="+url.QueryEscape(p)+"&username=user", nil)
		if status != 200 || string(b) != want {
			t.Errorf("download %s: %d %q, want %q", p, status, b, want)
		}
	}
	status, b = e.do("GET", "/files?path=/docs/a.txt", nil, "Range", "bytes=1-3")
	if status != http.StatusPartialContent || string(b) != "lph" {
		t.Errorf("range: %d %q, want 206 lph", status, b)
	}
	if fi, err := os.Stat(filepath.Join(e.root, "docs/a.txt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("uploaded file mode %v (%v), want 0644", fi.Mode(), err)
	}
}

func TestFilesBadRequests(t *testing.T) {
	e := newEnv(t, func(c *envd.Config) { c.MaxUploadBytes = 1 << 10 })
	e.write("dir/f.txt", "f")
	e.escapeLinks()
	mp, ct := multipartBody(t, filePart{"big.txt", strings.Repeat("x", 2<<10)})
	noFile, noFileCT := multipartBody(t)
	tests := []struct {
		name, method, target string
		body                 io.Reader
		hdr                  []string
		status               int
		msg                  string
	}{
		{"download without path", "GET", "/files", nil, nil, 400, "path"},
		{"download missing", "GET", "/files?path=/nope", nil, nil, 404, "not found"},
		{"download a directory", "GET", "/files?path=/dir", nil, nil, 400, "is a directory"},
		{"download ../", "GET", "/files?path=../outside/secret.txt", nil, nil, 403, "escapes"},
		{"download through a link out", "GET", "/files?path=link-out/secret.txt", nil, nil, 403, "escapes"},
		{"upload raw without path", "POST", "/files", strings.NewReader("x"), []string{"Content-Type", "application/octet-stream"}, 400, "path"},
		{"upload over a directory", "POST", "/files?path=/dir", strings.NewReader("x"), nil, 400, "is a directory"},
		{"upload to the root", "POST", "/files?path=/", strings.NewReader("x"), nil, 400, "directory"},
		{"upload through a link out", "POST", "/files?path=link-abs/secret.txt", strings.NewReader("x"), nil, 403, "escapes"},
		{"upload ../", "POST", "/files?path=../evil.txt", strings.NewReader("x"), nil, 403, "escapes"},
		{"upload too big (raw)", "POST", "/files?path=big.bin", strings.NewReader(strings.Repeat("x", 4<<10)), nil, 413, "larger"},
		{"upload too big (multipart)", "POST", "/files?path=big.txt", mp, []string{"Content-Type", ct}, 413, "larger"},
		{"multipart without a file part", "POST", "/files?path=a", noFile, []string{"Content-Type", noFileCT}, 400, "no \"file\" part"},
		{"multipart cut short", "POST", "/files?path=a", strings.NewReader("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc"), []string{"Content-Type", "multipart/form-data; boundary=b"}, 400, "upload"},
		{"bad gzip", "POST", "/files?path=g", strings.NewReader("not gzip"), []string{"Content-Encoding", "gzip"}, 400, "gzip"},
		{"unknown encoding", "POST", "/files?path=g", strings.NewReader("x"), []string{"Content-Encoding", "br"}, 415, "Content-Encoding"},
		{"metadata", "POST", "/files?path=m", strings.NewReader("x"), []string{"X-Metadata-Owner", "me"}, 400, "metadata"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, b := e.do(tc.method, tc.target, tc.body, tc.hdr...)
			var ae struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			}
			if status != tc.status || json.Unmarshal(b, &ae) != nil || ae.Code != tc.status || !strings.Contains(ae.Message, tc.msg) {
				t.Errorf("%d %s, want %d with a message about %q", status, b, tc.status, tc.msg)
			}
		})
	}
	outside := filepath.Join(filepath.Dir(e.root), "outside")
	entries, _ := os.ReadDir(outside)
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret" || len(entries) != 1 {
		t.Errorf("outside the root changed: %q, %d entries", b, len(entries))
	}
	for _, p := range []string{"big.bin", "big.txt", "a", "g", "m"} {
		if _, err := os.Lstat(filepath.Join(e.root, p)); !os.IsNotExist(err) {
			t.Errorf("a refused upload left %s behind (%v)", p, err)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(e.root, ".sandboxd-*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}
