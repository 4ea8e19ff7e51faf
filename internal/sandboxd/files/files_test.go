package files_test

import (
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

func TestFileWriteReadStat(t *testing.T) {
	e := sandboxdtest.New(t)
	var info wire.FileInfo
	if b := e.Do("PUT", "/v1/files/a/b/c.txt", "hello", http.StatusNoContent); len(b) != 0 {
		t.Fatalf("PUT answered %q, want an empty 204", b)
	}
	e.DoJSON("GET", "/v1/stat/a/b/c.txt", nil, http.StatusOK, &info)
	if info.Name != "c.txt" || info.Path != "a/b/c.txt" || info.Size != 5 || info.Mode != "0644" || info.IsDir || info.IsSymlink {
		t.Fatalf("info %+v", info)
	}
	if got := string(e.Do("GET", "/v1/files/a/b/c.txt", nil, http.StatusOK)); got != "hello" {
		t.Fatalf("content %q", got)
	}
	// Overwrite: mode kept unless given.
	e.Do("PUT", "/v1/files//a/b/c.txt?mode=0600", "bye", http.StatusNoContent)
	e.DoJSON("GET", "/v1/stat/a/b/c.txt", nil, http.StatusOK, &info)
	if info.Mode != "0600" || info.Size != 3 {
		t.Fatalf("info %+v", info)
	}
	e.Do("PUT", "/v1/files/a/b/c.txt", "again", http.StatusNoContent)
	fi, err := os.Stat(filepath.Join(e.Root, "a/b/c.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("on disk: %v %v, want mode 0600 kept", fi.Mode(), err)
	}

	e.DoJSON("GET", "/v1/stat/a", nil, http.StatusOK, &info)
	if !info.IsDir || info.Path != "a" || info.Mode != "0755" {
		t.Fatalf("stat dir %+v", info)
	}
	e.DoJSON("GET", "/v1/stat/", nil, http.StatusOK, &info)
	if !info.IsDir || info.Path != "." {
		t.Fatalf("stat root %+v", info)
	}
	sandboxdtest.WantError(t, e.Do("GET", "/v1/stat/missing", nil, http.StatusNotFound), "not found")
	sandboxdtest.WantV1Error(t, e.Do("GET", "/v1/files/missing", nil, http.StatusNotFound), "NOT_FOUND", "not found")
	sandboxdtest.WantV1Error(t, e.Do("PUT", "/v1/files/a", "x", http.StatusBadRequest), "INVALID_ARGUMENT", "target path is a directory")
	sandboxdtest.WantV1Error(t, e.Do("PUT", "/v1/files/a/b/c.txt/d", "x", http.StatusConflict), "CONFLICT", "a parent of the path is not a directory")
	sandboxdtest.WantV1Error(t, e.Do("PUT", "/v1/files/", "x", http.StatusBadRequest), "INVALID_ARGUMENT", "target path is a directory (the sandbox root)")
	sandboxdtest.WantV1Error(t, e.Do("PUT", "/v1/files/x?mode=999", "x", http.StatusBadRequest), "INVALID_ARGUMENT", "mode must be octal permission bits like 0644")

	// Raw JSON keys, as SDK authors will see them.
	var raw map[string]any
	e.DoJSON("GET", "/v1/stat/a/b/c.txt", nil, http.StatusOK, &raw)
	for _, k := range []string{"name", "path", "size", "mode", "modTime", "isDir", "isSymlink"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("stat lacks %q: %v", k, raw)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, raw["modTime"].(string)); err != nil {
		t.Fatal(err)
	}

	// HEAD and ranges come with http.ServeContent.
	resp := e.Request(context.Background(), "HEAD", "/v1/files/a/b/c.txt", nil)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 5 || resp.Header.Get("Content-Type") != wire.ContentTypeOctet {
		t.Fatalf("HEAD %d %d %q", resp.StatusCode, resp.ContentLength, resp.Header.Get("Content-Type"))
	}
	if got := string(e.Do("GET", "/v1/files/a/b/c.txt", nil, http.StatusPartialContent, "Range", "bytes=1-2")); got != "ga" {
		t.Fatalf("range %q", got)
	}
	// URL-encoded names.
	e.Do("PUT", "/v1/files/dir%20x/f%3F.txt", "q", http.StatusNoContent)
	if _, err := os.Stat(filepath.Join(e.Root, "dir x", "f?.txt")); err != nil {
		t.Fatal(err)
	}
}

func TestFileDeleteAndMkdir(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("d/f", "x")
	e.WriteFile("keep", "k")
	if err := os.Symlink("keep", filepath.Join(e.Root, "link")); err != nil {
		t.Fatal(err)
	}
	var info wire.FileInfo
	e.DoJSON("POST", "/v1/mkdir/m/n/o", nil, http.StatusCreated, &info)
	if !info.IsDir || info.Path != "m/n/o" {
		t.Fatalf("mkdir %+v", info)
	}
	e.DoJSON("POST", "/v1/mkdir/m/n/o", nil, http.StatusOK, &info)
	sandboxdtest.WantError(t, e.Do("POST", "/v1/mkdir/keep", nil, http.StatusConflict), "path exists and is not a directory")
	e.DoJSON("POST", "/v1/mkdir/perm?mode=0700", nil, http.StatusCreated, &info)
	if info.Mode != "0700" {
		t.Fatalf("mkdir mode %+v", info)
	}

	tests := []struct {
		path   string
		status int
		errMsg string
	}{
		{"/v1/files/d", http.StatusConflict, "directory not empty; add ?recursive=true"},
		{"/v1/files/missing", http.StatusNotFound, "not found"},
		{"/v1/files/", http.StatusConflict, "cannot delete the sandbox root; add ?recursive=true to empty it"},
		{"/v1/files/d/..", http.StatusConflict, "cannot delete the sandbox root; add ?recursive=true to empty it"},
		{"/v1/files/d?recursive=maybe", http.StatusBadRequest, `recursive "maybe" must be a boolean`},
		{"/v1/files/link", http.StatusNoContent, ""},
		{"/v1/files/d/f", http.StatusNoContent, ""},
		{"/v1/files/m?recursive=true", http.StatusNoContent, ""},
		{"/v1/files/d", http.StatusNoContent, ""},
	}
	for _, tc := range tests {
		b := e.Do("DELETE", tc.path, nil, tc.status)
		if tc.errMsg != "" {
			sandboxdtest.WantAnyError(t, b, tc.errMsg)
		}
	}
	// Deleting the link left its target alone.
	if b, err := os.ReadFile(filepath.Join(e.Root, "keep")); err != nil || string(b) != "k" {
		t.Fatalf("target: %q %v", b, err)
	}
	for _, p := range []string{"d", "m", "link"} {
		if _, err := os.Lstat(filepath.Join(e.Root, p)); !os.IsNotExist(err) {
			t.Fatalf("%s still there: %v", p, err)
		}
	}
}

func TestList(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("b.txt", "bb")
	e.WriteFile("a/x.txt", "x")
	e.WriteFile("a/sub/y.txt", "yy")
	if err := os.Symlink("a", filepath.Join(e.Root, "ln")); err != nil {
		t.Fatal(err)
	}
	paths := func(l wire.ListResponse) string {
		var ps []string
		for _, e := range l.Entries {
			ps = append(ps, e.Path)
		}
		return strings.Join(ps, " ")
	}
	tests := []struct{ url, want string }{
		{"/v1/list/", "a b.txt ln"},
		{"/v1/list", "a b.txt ln"},
		{"/v1/list/?recursive=true", "a a/sub a/sub/y.txt a/x.txt b.txt ln"},
		{"/v1/list/a", "a/sub a/x.txt"},
		{"/v1/list/a?recursive=true", "a/sub a/sub/y.txt a/x.txt"},
		{"/v1/list/ln", "a/sub a/x.txt"}, // a symlinked directory lists its target
	}
	for _, tc := range tests {
		var l wire.ListResponse
		e.DoJSON("GET", tc.url, nil, http.StatusOK, &l)
		if got := paths(l); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.url, got, tc.want)
		}
	}
	var l wire.ListResponse
	e.DoJSON("GET", "/v1/list/", nil, http.StatusOK, &l)
	if ln := l.Entries[2]; !ln.IsSymlink || ln.LinkTarget != "a" || ln.IsDir {
		t.Fatalf("link entry %+v", ln)
	}
	if b := l.Entries[1]; b.Size != 2 || b.Name != "b.txt" {
		t.Fatalf("file entry %+v", b)
	}
	sandboxdtest.WantError(t, e.Do("GET", "/v1/list/b.txt", nil, http.StatusBadRequest), "not a directory")
	sandboxdtest.WantError(t, e.Do("GET", "/v1/list/nope", nil, http.StatusNotFound), "not found")
	// An empty directory lists as [], not null.
	e.Do("POST", "/v1/mkdir/empty", nil, http.StatusCreated)
	if b := e.Do("GET", "/v1/list/empty", nil, http.StatusOK); string(b) != `{"entries":[]}` {
		t.Fatalf("empty list %s", b)
	}
}

// patternReader yields n pseudo-random bytes without holding them.
type patternReader struct {
	rng *rand.ChaCha8
	n   int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	_, _ = r.rng.Read(p) // ChaCha8.Read never fails
	r.n -= int64(len(p))
	return len(p), nil
}

func TestLargeFileStreamsBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("large transfer")
	}
	e := sandboxdtest.New(t)
	const size = 64 << 20
	seed := [32]byte{1, 2, 3}
	want := sha256.New()
	if _, err := io.Copy(want, &patternReader{rand.NewChaCha8(seed), size}); err != nil {
		t.Fatal(err)
	}

	// Neither direction may hold the file in memory: the whole test (client
	// and server share this process) must allocate far less than its size.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	e.Do("PUT", "/v1/files/big/blob.bin", &patternReader{rand.NewChaCha8(seed), size}, http.StatusNoContent)
	resp := e.Request(context.Background(), "GET", "/v1/files/big/blob.bin", nil)
	if resp.ContentLength != size {
		t.Fatalf("content length %d", resp.ContentLength)
	}
	got := sha256.New()
	if _, err := io.Copy(got, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("allocated %d MiB moving a %d MiB file", alloc>>20, size>>20)
	}
	if string(got.Sum(nil)) != string(want.Sum(nil)) {
		t.Fatal("sha256 mismatch")
	}
}

func TestAtomicWrite(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("dir/target", "old")
	pr, pw := io.Pipe()
	done := make(chan []byte)
	go func() {
		resp := e.Request(context.Background(), "PUT", "/v1/files/dir/target", pr)
		resp.Body.Close()
		done <- []byte(resp.Status)
	}()
	chunk := strings.Repeat("n", 256<<10)
	if _, err := pw.Write([]byte(chunk)); err != nil {
		t.Fatal(err)
	}
	// Once the server's temporary file exists in the same directory, the
	// write is under way; the target must still be the old file.
	var tmp string
	sandboxdtest.Eventually(t, "temporary file", func() bool {
		ents, _ := os.ReadDir(filepath.Join(e.Root, "dir"))
		for _, en := range ents {
			if strings.HasPrefix(en.Name(), ".sandboxd-") {
				tmp = en.Name()
				return true
			}
		}
		return false
	})
	if got := string(e.Do("GET", "/v1/files/dir/target", nil, http.StatusOK)); got != "old" {
		t.Fatalf("target changed mid-write: %d bytes", len(got))
	}
	if _, err := pw.Write([]byte(chunk)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if status := string(<-done); status != "204 No Content" {
		t.Fatalf("PUT answered %s, want 204 No Content", status)
	}
	if fi, err := os.Stat(filepath.Join(e.Root, "dir", "target")); err != nil || fi.Size() != 2*int64(len(chunk)) {
		t.Fatalf("target after the write: %v, %v; want %d bytes", fi, err, 2*len(chunk))
	}
	if _, err := os.Stat(filepath.Join(e.Root, "dir", tmp)); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
}

func TestAbortedUploadLeavesNothing(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("f", "old")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "PUT", e.TS.URL+"/v1/files/f", pr)
		if resp, err := e.TS.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	_, _ = pw.Write(make([]byte, 64<<10))
	sandboxdtest.Eventually(t, "temporary file", func() bool {
		m, _ := filepath.Glob(filepath.Join(e.Root, ".sandboxd-*"))
		return len(m) == 1
	})
	cancel()
	pw.CloseWithError(io.ErrUnexpectedEOF)
	<-done
	sandboxdtest.Eventually(t, "cleanup", func() bool {
		m, _ := filepath.Glob(filepath.Join(e.Root, ".sandboxd-*"))
		return len(m) == 0
	})
	if b, _ := os.ReadFile(filepath.Join(e.Root, "f")); string(b) != "old" {
		t.Fatalf("content %q", b)
	}
}
