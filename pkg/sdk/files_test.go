package sdk

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fileModes are the modes whose file API is tested: sandboxd's (direct and
// through the router) and ModeExec's shell scripts.
var fileModes = []Mode{ModeDirect, ModeRouter, ModeExec}

func TestFilesNested(t *testing.T) {
	for _, mode := range fileModes {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			f := newPlane(t, mode).sb.Files()
			if err := f.Write(ctx, "a/b/c/deep.txt", []byte("deep"), 0); err != nil {
				t.Fatal(err)
			}
			if err := f.Write(ctx, "a/top.sh", []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := f.Read(ctx, "a/b/c/deep.txt")
			if err != nil || string(got) != "deep" {
				t.Fatalf("Read = %q, %v", got, err)
			}
			st, err := f.Stat(ctx, "a/top.sh")
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode.Perm() != 0o755 || st.IsDir || st.Size != int64(len("#!/bin/sh\n")) {
				t.Errorf("Stat = %+v", st)
			}
			entries, err := f.List(ctx, "a", true)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, e := range entries {
				paths = append(paths, e.Path)
			}
			want := []string{"a/b", "a/b/c", "a/b/c/deep.txt", "a/top.sh"}
			if !slices.Equal(paths, want) {
				t.Errorf("List recursive = %v, want %v", paths, want)
			}
			top, err := f.List(ctx, "a", false)
			if err != nil || len(top) != 2 || !top[0].IsDir || top[0].Name != "b" {
				t.Errorf("List = %+v, %v", top, err)
			}

			for _, tc := range []struct {
				path string
				want bool
			}{{"a/b/c/deep.txt", true}, {"a/b", true}, {"a/nope", false}, {"nope/deeper", false}} {
				if ok, err := f.Exists(ctx, tc.path); err != nil || ok != tc.want {
					t.Errorf("Exists(%q) = %v, %v; want %v", tc.path, ok, err, tc.want)
				}
			}

			if mode != ModeExec {
				if _, err := f.Read(ctx, "a/b"); !isStatus(err, http.StatusBadRequest) {
					t.Errorf("Read of a directory = %v, want a 400 error (not its JSON listing)", err)
				}
			}
			if err := f.Remove(ctx, "a/b", false); !isStatus(err, http.StatusConflict) {
				t.Errorf("Remove non-empty dir = %v, want 409", err)
			}
			if err := f.Remove(ctx, "a/b", true); err != nil {
				t.Fatal(err)
			}
			if err := f.Remove(ctx, "a/b", true); !errors.Is(err, ErrNotFound) {
				t.Errorf("Remove missing = %v, want ErrNotFound", err)
			}
			if _, err := f.Read(ctx, "a/b/c/deep.txt"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Read removed = %v, want ErrNotFound", err)
			}
			if err := f.Mkdir(ctx, "x/y/z", 0); err != nil {
				t.Fatal(err)
			}
			if st, err := f.Stat(ctx, "x/y/z"); err != nil || !st.IsDir || st.Mode&fs.ModeDir == 0 {
				t.Errorf("Stat dir = %+v, %v", st, err)
			}
			if err := f.WriteStream(ctx, "x/y/z/stream.bin", strings.NewReader(strings.Repeat("z", 1<<20)), 0o600); err != nil {
				t.Fatal(err)
			}
			if st, err := f.Stat(ctx, "x/y/z/stream.bin"); err != nil || st.Size != 1<<20 || st.Mode.Perm() != 0o600 {
				t.Errorf("Stat streamed = %+v, %v", st, err)
			}
		})
	}
}

func isStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// TestFilesTraversalRefusedRemotely: sandboxd refuses paths that leave its
// root, whatever the mode that carries them.
func TestFilesTraversalRefusedRemotely(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			p := newPlane(t, mode)
			f := p.sb.Files()
			for _, bad := range []string{"../escape.txt", "a/../../escape.txt", "/../../etc/passwd"} {
				err := f.Write(ctx, bad, []byte("x"), 0)
				if !isStatus(err, http.StatusForbidden) {
					t.Errorf("Write(%q) = %v, want 403", bad, err)
				}
				if _, err := f.Read(ctx, bad); !isStatus(err, http.StatusForbidden) {
					t.Errorf("Read(%q) = %v, want 403", bad, err)
				}
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(p.d.Root), "escape.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a file escaped the root: %v", err)
			}
		})
	}
}

func TestUploadDownloadDirRoundTrip(t *testing.T) {
	for _, mode := range fileModes {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			f := newPlane(t, mode).sb.Files()
			src := t.TempDir()
			writeTree(t, src, map[string]string{
				"README.md":          "hello",
				"src/main.go":        "package main",
				"src/pkg/util/u.go":  "package util",
				"bin/run.sh":         "#!/bin/sh\necho run",
				"empty/.keep":        "",
				"with space/file #1": "odd name",
			})
			if err := os.Chmod(filepath.Join(src, "bin/run.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("src/main.go", filepath.Join(src, "main-link")); err != nil {
				t.Fatal(err)
			}
			if err := f.UploadDir(ctx, src, "proj"); err != nil {
				t.Fatal(err)
			}
			if got, err := f.Read(ctx, "proj/src/pkg/util/u.go"); err != nil || string(got) != "package util" {
				t.Fatalf("uploaded file = %q, %v", got, err)
			}
			dst := filepath.Join(t.TempDir(), "out")
			if err := f.DownloadDir(ctx, "proj", dst); err != nil {
				t.Fatal(err)
			}
			if a, b := readTree(t, src), readTree(t, dst); !equalTrees(a, b) {
				t.Errorf("round trip differs:\n src %v\n dst %v", a, b)
			}
			if fi, err := os.Stat(filepath.Join(dst, "bin/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("mode not kept: %v %v", fi.Mode(), err)
			}
			if link, err := os.Readlink(filepath.Join(dst, "main-link")); err != nil || link != "src/main.go" {
				t.Errorf("symlink = %q, %v", link, err)
			}
		})
	}
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree maps every regular file and symlink under dir to its content
// (or "-> target").
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			out[rel] = "-> " + l
			return err
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// tarOf builds a tar stream from entries.
func tarOf(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(h.Name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestExtractTarRefusesEscapes: the local side of DownloadDir never writes
// outside the destination.
func TestExtractTarRefusesEscapes(t *testing.T) {
	reg := func(name string) *tar.Header { return &tar.Header{Typeflag: tar.TypeReg, Name: name} }
	link := func(name, target string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target}
	}
	hard := func(name, target string) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target}
	}
	tests := []struct {
		name    string
		entries []*tar.Header
		unsafe  bool
	}{
		{"plain", []*tar.Header{reg("a/b.txt"), reg("./c.txt")}, false},
		{"dotdot", []*tar.Header{reg("../evil.txt")}, true},
		{"nested dotdot", []*tar.Header{reg("a/../../evil.txt")}, true},
		{"absolute", []*tar.Header{reg("/tmp/evil.txt")}, true},
		{"symlink out, absolute", []*tar.Header{link("l", "/etc")}, true},
		{"symlink out, relative", []*tar.Header{link("a/l", "../../outside")}, true},
		{"symlink inside", []*tar.Header{reg("a/t.txt"), link("a/l", "t.txt")}, false},
		{"hard link out", []*tar.Header{hard("h", "../outside.txt")}, true},
		{"write through a symlink dir made earlier", []*tar.Header{link("d", "."), reg("d/ok.txt")}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "dest")
			if err := os.Mkdir(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			err := ExtractTar(bytes.NewReader(tarOf(t, tc.entries...)), dest)
			if tc.unsafe != errors.Is(err, ErrUnsafePath) {
				t.Fatalf("err = %v, unsafe want %v", err, tc.unsafe)
			}
			if !tc.unsafe && err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Errorf("something was written next to the destination: %v", entries)
			}
		})
	}
}

// TestDownloadDirRefusesEscapingSymlink: a sandbox may hold a symlink to
// anywhere; downloading it must not plant that link locally.
func TestDownloadDirRefusesEscapingSymlink(t *testing.T) {
	p := newPlane(t, ModeDirect)
	if err := os.MkdirAll(filepath.Join(p.d.Root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(p.d.Root, "d", "passwd")); err != nil {
		t.Fatal(err)
	}
	err := p.sb.Files().DownloadDir(testCtx(t), "d", t.TempDir())
	if !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("err = %v, want ErrUnsafePath", err)
	}
}

func TestFilesWatch(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(string(mode), func(t *testing.T) {
			p := newPlane(t, mode)
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel() // ends the watch stream
			f := p.sb.Files()
			if err := f.Mkdir(ctx, "w", 0); err != nil {
				t.Fatal(err)
			}
			events, err := f.Watch(ctx, "w", true)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Write(ctx, "w/new.txt", []byte("x"), 0); err != nil {
				t.Fatal(err)
			}
			for ev := range events {
				if ev.Path == "w/new.txt" && (ev.Op == OpCreate || ev.Op == OpRename) {
					return
				}
			}
			t.Fatal("events closed before the change was reported")
		})
	}
}
