package files_test

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// treeOf describes a directory on disk: path -> kind, mode and content.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link -> " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = "file " + fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTarRoundTrip(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("src/a.txt", "alpha")
	e.WriteFile("src/sub/deep/b.txt", strings.Repeat("b", 100000))
	if err := os.Chmod(filepath.Join(e.Root, "src/a.txt"), 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.Root, "src/empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/deep/b.txt", filepath.Join(e.Root, "src/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(e.Root, "src/hostlink")); err != nil {
		t.Fatal(err)
	}

	resp := e.Request(t.Context(), "GET", "/v1/files/src?format=tar", nil)
	archive, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != wire.ContentTypeTar {
		t.Fatalf("download: %d %q %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	// Entry names are relative to the directory; links are stored as links.
	var names []string
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Name == "hostlink" && (hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "/etc/passwd") {
			t.Fatalf("hostlink entry %+v", hdr)
		}
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != "a.txt empty/ hostlink link sub/ sub/deep/ sub/deep/b.txt" {
		t.Fatalf("entries %q", got)
	}

	b := e.Do("PUT", "/v1/files/copy/of/src", archive, http.StatusOK, "Content-Type", wire.ContentTypeTar)
	if !strings.Contains(string(b), `"path":"copy/of/src"`) || !strings.Contains(string(b), `"isDir":true`) {
		t.Fatalf("upload response %s", b)
	}
	// The same upload again, by query instead of content type.
	e.Do("PUT", "/v1/files/copy/of/src?format=tar", archive, http.StatusOK)
	src, dst := treeOf(t, filepath.Join(e.Root, "src")), treeOf(t, filepath.Join(e.Root, "copy/of/src"))
	if len(src) != 7 || len(src) != len(dst) {
		t.Fatalf("src %v\ndst %v", src, dst)
	}
	for k, v := range src {
		if dst[k] != v {
			t.Errorf("%s: copy %q, original %q", k, dst[k], v)
		}
	}
	// The root itself can be archived too.
	resp = e.Request(t.Context(), "GET", "/v1/files/?format=tar", nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("root tar %d", resp.StatusCode)
	}
}

type tarEntry struct {
	name, link string
	typ        byte
	body       string
}

func makeTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, en := range entries {
		hdr := &tar.Header{Name: en.name, Linkname: en.link, Typeflag: en.typ, Mode: 0o644, Size: int64(len(en.body))}
		if en.typ == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(en.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTarUploadRefusesEscapes(t *testing.T) {
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		entries []tarEntry
		msg     string
	}{
		{"dotdot", []tarEntry{{name: "../x", typ: tar.TypeReg, body: "x"}}, `tar entry "../x": path escapes the sandbox root`},
		{"dotdot deep", []tarEntry{{name: "a/../../../x", typ: tar.TypeReg, body: "x"}}, `tar entry "a/../../../x": path escapes the sandbox root`},
		{"symlink then write through it", []tarEntry{
			{name: "evil", link: outside, typ: tar.TypeSymlink},
			{name: "evil/pwned", typ: tar.TypeReg, body: "x"},
		}, `tar entry "evil/pwned": path escapes the sandbox root`},
		{"relative symlink then write through it", []tarEntry{
			{name: "up", link: "../../../../../../../..", typ: tar.TypeSymlink},
			{name: "up" + outside + "/pwned", typ: tar.TypeReg, body: "x"},
		}, `tar entry "up` + outside + `/pwned": path escapes the sandbox root`},
		{"symlink then directory through it", []tarEntry{
			{name: "evil", link: outside, typ: tar.TypeSymlink},
			{name: "evil/dir/", typ: tar.TypeDir},
		}, `tar entry "evil/dir/": path escapes the sandbox root`},
		{"hardlink out", []tarEntry{{name: "h", link: "../../x", typ: tar.TypeLink}}, `tar entry "../../x": path escapes the sandbox root`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := sandboxdtest.New(t)
			sandboxdtest.WantError(t, e.Do("PUT", "/v1/files/dest", makeTar(t, tc.entries...), http.StatusBadRequest, "Content-Type", wire.ContentTypeTar), tc.msg)
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("something was written outside: %v", ents)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(e.Root), "x")); err == nil {
				t.Fatal("x written next to the root")
			}
		})
	}
}

func TestTarUploadReplacesLinksInsteadOfWritingThrough(t *testing.T) {
	e := sandboxdtest.New(t)
	outside, _ := filepath.EvalSymlinks(t.TempDir())
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("safe"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link to an outside file followed by a regular file of the same name
	// must replace the link, not write to its target.
	archive := makeTar(t,
		tarEntry{name: "f", link: victim, typ: tar.TypeSymlink},
		tarEntry{name: "f", typ: tar.TypeReg, body: "new"},
		tarEntry{name: "/abs/name.txt", typ: tar.TypeReg, body: "abs"},
		tarEntry{name: "fifo", typ: tar.TypeFifo},
	)
	e.Do("PUT", "/v1/files/d", archive, http.StatusOK, "Content-Type", wire.ContentTypeTar)
	if b, _ := os.ReadFile(victim); string(b) != "safe" {
		t.Fatalf("victim %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(e.Root, "d/f")); string(b) != "new" {
		t.Fatalf("d/f %q", b)
	}
	// Leading "/" is dropped as tar(1) does; fifos are skipped.
	if b, _ := os.ReadFile(filepath.Join(e.Root, "d/abs/name.txt")); string(b) != "abs" {
		t.Fatalf("abs %q", b)
	}
	if _, err := os.Lstat(filepath.Join(e.Root, "d/fifo")); !os.IsNotExist(err) {
		t.Fatalf("fifo: %v", err)
	}
	sandboxdtest.WantError(t, e.Do("PUT", "/v1/files/d", "not a tar at all, just some text that is long enough"+strings.Repeat(".", 600), http.StatusBadRequest, "Content-Type", wire.ContentTypeTar), "reading tar: archive/tar: invalid tar header")
}
