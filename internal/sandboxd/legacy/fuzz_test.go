package legacy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
)

// The legacy API's request decoding under fuzzing: POST /execute (JSON), POST /upload
// (multipart) and GET /download|/list|/exists/{path}, served by the real handler through
// httptest. Whatever the request, sandboxd must not panic, must answer only with the statuses
// the legacy API documents (docs/sandboxd-api.md), and must never touch anything outside its
// root. Seed corpora: testdata/fuzz/FuzzLegacy*; a longer run is documented in docs/security.md.
//
// The fixture's links only point into a scratch "outside" directory (never /etc): a bug found
// by the fuzzer must not be able to damage the machine running it. Commands go to /bin/true
// instead of a shell, so that a fuzzed /execute body never runs anything.

const outsideSecret = "OUTSIDE-SECRET-7f3a"

type legacyFuzzRig struct {
	srv      *sandboxd.Server
	root     string
	base     string
	outside  map[string]string // the outside tree as it must stay
	entries  []string          // what base must hold: root and outside only
	outsideD string
}

func newLegacyFuzzRig(f *testing.F) *legacyFuzzRig {
	f.Helper()
	base, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "dir"), filepath.Join(outside, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for p, content := range map[string]string{
		filepath.Join(root, "file.txt"):      "hello",
		filepath.Join(outside, "secret.txt"): outsideSecret,
	} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"link-out": "../outside",
		"link-abs": outside,
		"dir/up":   "../..",
		"secret":   "../outside/secret.txt",
		"loop":     "loop",
		"link-in":  "dir",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	s, err := sandboxd.New(sandboxd.Config{Root: root, Shell: "/bin/true", ExecTimeout: 5 * time.Second, KillGrace: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	return &legacyFuzzRig{srv: s, root: root, base: base, outside: sandboxdtest.TreeState(f, outside), entries: []string{"outside", "root"}, outsideD: outside}
}

// serve runs one request through the whole server (routing, auth, recovery) in process.
func (rig *legacyFuzzRig) serve(t *testing.T, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	rig.srv.ServeHTTP(rec, req)
	return rec
}

// check asserts what must hold after any request: the status is one the legacy API documents
// for that endpoint, the answer never carries the outside secret, and nothing outside the root
// changed.
func (rig *legacyFuzzRig) check(t *testing.T, what string, rec *httptest.ResponseRecorder, allowed ...int) {
	t.Helper()
	ok := false
	for _, a := range allowed {
		ok = ok || rec.Code == a
	}
	if !ok {
		t.Fatalf("%s: status %d (body %q), want one of %v", what, rec.Code, sandboxdtest.Clip(rec.Body.Bytes()), allowed)
	}
	if rec.Code == http.StatusInternalServerError && !strings.HasPrefix(rec.Body.String(), `{"message":"File upload failed: `) {
		t.Fatalf("%s: 500 %q is not the documented upload failure", what, sandboxdtest.Clip(rec.Body.Bytes()))
	}
	if strings.Contains(rec.Body.String(), outsideSecret) {
		t.Fatalf("%s: the answer leaks a file from outside the root: %q", what, sandboxdtest.Clip(rec.Body.Bytes()))
	}
	ents, err := os.ReadDir(rig.base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, rig.entries) {
		t.Fatalf("%s: created beside the root: %v", what, names)
	}
	if got := sandboxdtest.TreeState(t, rig.outsideD); !reflect.DeepEqual(got, rig.outside) {
		t.Fatalf("%s: changed the tree outside the root:\nbefore %v\nafter  %v", what, rig.outside, got)
	}
}

// FuzzLegacyExecute decodes arbitrary bodies as POST /execute. Documented answers: 200 (the
// python runtime's result, failures included) and 422 (malformed body).
func FuzzLegacyExecute(f *testing.F) {
	f.Add([]byte(`{"command":"ls"}`), "application/json")
	f.Add([]byte(`{"command":`), "")
	f.Add([]byte(`{"command":null}`), "text/plain")
	rig := newLegacyFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, "/execute", bytes.NewReader(body))
		if contentType != "" {
			req.Header["Content-Type"] = []string{contentType}
		}
		rec := rig.serve(t, req)
		rig.check(t, fmt.Sprintf("POST /execute %q", body), rec, http.StatusOK, http.StatusUnprocessableEntity)
		if rec.Code == http.StatusOK {
			var res struct {
				Stdout   *string `json:"stdout"`
				Stderr   *string `json:"stderr"`
				ExitCode *int    `json:"exit_code"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res.Stdout == nil || res.Stderr == nil || res.ExitCode == nil {
				t.Fatalf("POST /execute %q: 200 without stdout, stderr and exit_code: %q", body, sandboxdtest.Clip(rec.Body.Bytes()))
			}
		}
	})
}

// FuzzLegacyUpload sends POST /upload with an arbitrary destination filename and content, either
// as a well-formed multipart body or as raw bytes under a multipart Content-Type. Documented
// answers: 200, 400 (a malformed or truncated multipart body), 403 (escape), 422 (no file field)
// and 500 "File upload failed: ...". A 200 must
// have written exactly the content inside the root.
func FuzzLegacyUpload(f *testing.F) {
	f.Add("dir/new.txt", []byte("x"), false)
	f.Add("../outside/secret.txt", []byte("pwned"), false)
	f.Add("link-out/secret.txt", []byte("pwned"), false)
	f.Add("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nx\r\n--b--\r\n", []byte(nil), true)
	rig := newLegacyFuzzRig(f)
	f.Fuzz(func(t *testing.T, filename string, content []byte, raw bool) {
		var body bytes.Buffer
		ct := "multipart/form-data; boundary=b"
		if raw {
			body.WriteString(filename)
			body.Write(content)
		} else {
			mw := multipart.NewWriter(&body)
			h := make(map[string][]string)
			h["Content-Disposition"] = []string{`form-data; name="file"; filename="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(filename) + `"`}
			h["Content-Type"] = []string{"application/octet-stream"}
			pw, err := mw.CreatePart(h)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = pw.Write(content)
			_ = mw.Close()
			ct = mw.FormDataContentType()
		}
		req := httptest.NewRequest(http.MethodPost, "/upload", &body)
		req.Header.Set("Content-Type", ct)
		rec := rig.serve(t, req)
		what := fmt.Sprintf("POST /upload filename %q raw %v", filename, raw)
		rig.check(t, what, rec, http.StatusOK, http.StatusBadRequest, http.StatusForbidden, http.StatusUnprocessableEntity, http.StatusInternalServerError)
		if rec.Code != http.StatusOK || raw || strings.ContainsAny(filename, "\r\n") {
			return // a line break rewrites the part header: the destination is not filename
		}
		rel, err := rootfs.NewResolver(rig.root).Resolve(filename, true)
		if err != nil {
			t.Fatalf("%s: accepted, but the path does not resolve inside the root: %v", what, err)
		}
		got, err := os.ReadFile(filepath.Join(rig.root, rel))
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: accepted, but %s holds %q (%v), want %q", what, rel, sandboxdtest.Clip(got), err, sandboxdtest.Clip(content))
		}
	})
}

// FuzzLegacyPaths sends GET /download, /list and /exists with an arbitrary (decoded) path.
// Documented answers: 200, 403 (escape) and 404; the path is also sent percent-encoded as a
// client would. A 200 download is a file of the root, never the outside secret.
func FuzzLegacyPaths(f *testing.F) {
	f.Add(uint8(0), "file.txt")
	f.Add(uint8(1), "../outside")
	f.Add(uint8(2), "link-abs/secret.txt")
	rig := newLegacyFuzzRig(f)
	ops := []string{"/download/", "/list/", "/exists/"}
	f.Fuzz(func(t *testing.T, op uint8, p string) {
		prefix := ops[int(op)%len(ops)]
		for _, u := range []*url.URL{
			{Path: prefix + p}, // what the server sees after decoding
			{Path: prefix + p, RawPath: prefix + url.PathEscape(p)}, // sent encoded
		} {
			req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Body: http.NoBody,
				Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "sandbox", RequestURI: u.RequestURI()}
			rec := rig.serve(t, req)
			rig.check(t, fmt.Sprintf("GET %s%q", prefix, p), rec, http.StatusOK, http.StatusForbidden, http.StatusNotFound)
			if prefix == "/download/" && rec.Code == http.StatusOK {
				rel, err := rootfs.NewResolver(rig.root).Resolve(p, true)
				want, rerr := os.ReadFile(filepath.Join(rig.root, rel))
				if err != nil || rerr != nil || !bytes.Equal(rec.Body.Bytes(), want) {
					t.Fatalf("GET /download/%q: 200 with %q, not the root's file %q (%v, %v)", p, sandboxdtest.Clip(rec.Body.Bytes()), rel, err, rerr)
				}
			}
		}
	})
}
