package files_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// TestV1DirectoryListing: GET /v1/files/<dir> answers upstream's
// DirectoryListing; symlinks are described by their target and left out
// when that escapes the root or is missing.
func TestV1DirectoryListing(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("d/b.txt", "bb")
	e.WriteFile("d/a.txt", "a")
	e.WriteFile("d/sub/x", "x")
	for link, target := range map[string]string{"d/in": "a.txt", "d/out": "/etc", "d/dangling": "nope"} {
		if err := os.Symlink(target, filepath.Join(e.Root, link)); err != nil {
			t.Fatal(err)
		}
	}
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	for _, p := range []string{"d/a.txt", "d/b.txt", "d/sub"} {
		if err := os.Chtimes(filepath.Join(e.Root, p), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(e.Root, "d/b.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := wire.DirectoryListing{Path: "/d", Entries: []wire.FileEntry{
		{Name: "a.txt", Size: 1, Type: "file", ModifiedAt: "2026-01-02T03:04:05Z", Mode: "0644"},
		{Name: "b.txt", Size: 2, Type: "file", ModifiedAt: "2026-01-02T03:04:05Z", Mode: "0600"},
		{Name: "in", Size: 1, Type: "file", ModifiedAt: "2026-01-02T03:04:05Z", Mode: "0644"},
		{Name: "sub", Size: 4096, Type: "directory", ModifiedAt: "2026-01-02T03:04:05Z", Mode: "0755"},
	}}
	tests := []struct {
		name, path string
		wantPath   string
	}{
		{"plain path", "/v1/files/d", "/d"},
		{"trailing slash", "/v1/files/d/", "/d/"},
		{"slash quoted as %2F (Go and Python clients)", "/v1/files/d%2F", "/d/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.Request(t.Context(), "GET", tc.path, nil)
			defer resp.Body.Close()
			var got wire.DirectoryListing
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q, want application/json", ct)
			}
			w := want
			w.Path = tc.wantPath
			// A directory's size depends on the file system.
			for i := range got.Entries {
				if got.Entries[i].Type == "directory" {
					got.Entries[i].Size = 4096
				}
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("listing\n got %+v\nwant %+v", got, w)
			}
		})
	}
	var root wire.DirectoryListing
	if err := json.Unmarshal(e.Do("GET", "/v1/files/", nil, http.StatusOK), &root); err != nil || root.Path != "/" || len(root.Entries) != 1 {
		t.Fatalf("root listing %+v %v, want path / with one entry", root, err)
	}
	// An empty directory lists [] (not null), as upstream.
	e.Do("POST", "/v1/mkdir/empty", nil, http.StatusCreated)
	if b := string(e.Do("GET", "/v1/files/empty", nil, http.StatusOK)); b != `{"path":"/empty","entries":[]}` {
		t.Fatalf("empty listing %s", b)
	}
}

func TestV1Head(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("dir/f.txt", "12345")
	tests := []struct {
		path       string
		wantStatus int
		wantType   string
	}{
		{"/v1/files/dir/f.txt", http.StatusOK, wire.ContentTypeOctet},
		{"/v1/files/dir%2Ff.txt", http.StatusOK, wire.ContentTypeOctet},
		{"/v1/files/dir", http.StatusOK, "application/json"},
		{"/v1/files/missing", http.StatusNotFound, "application/json"},
		{"/v1/files/..%2Fx", http.StatusForbidden, "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp := e.Request(t.Context(), "HEAD", tc.path, nil)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || resp.Header.Get("Content-Type") != tc.wantType {
				t.Fatalf("HEAD %s: %d %q, want %d %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.wantStatus, tc.wantType)
			}
		})
	}
}

func TestV1Put(t *testing.T) {
	e := sandboxdtest.New(t)
	tests := []struct {
		name        string
		path        string
		body        string
		contentType string
		file        string
		wantContent string
		wantMode    os.FileMode
	}{
		{"raw body, default mode", "/v1/files/raw.txt", "raw", wire.ContentTypeOctet, "raw.txt", "raw", 0o644},
		{"mode query", "/v1/files/run.sh?mode=0755", "#!/bin/sh", wire.ContentTypeOctet, "run.sh", "#!/bin/sh", 0o755},
		{"nested, quoted path", "/v1/files/a%2Fb%2Fc.txt", "c", wire.ContentTypeOctet, "a/b/c.txt", "c", 0o644},
		{"no content type", "/v1/files/none.bin", "n", "", "none.bin", "n", 0o644},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.contentType != "" {
				hdr = []string{"Content-Type", tc.contentType}
			}
			e.Do("PUT", tc.path, tc.body, http.StatusNoContent, hdr...)
			b, err := os.ReadFile(filepath.Join(e.Root, tc.file))
			fi, _ := os.Stat(filepath.Join(e.Root, tc.file))
			if err != nil || string(b) != tc.wantContent || fi.Mode().Perm() != tc.wantMode {
				t.Fatalf("file %q %v mode %v, want %q mode %v", b, err, fi.Mode().Perm(), tc.wantContent, tc.wantMode)
			}
		})
	}
	t.Run("multipart file part", func(t *testing.T) {
		body, ct := sandboxdtest.MultipartBody(t, "file", "ignored-name", "from multipart")
		e.Do("PUT", "/v1/files/up/m.txt", body, http.StatusNoContent, "Content-Type", ct)
		if b, _ := os.ReadFile(filepath.Join(e.Root, "up/m.txt")); string(b) != "from multipart" {
			t.Fatalf("content %q, want the file part", b)
		}
	})
	t.Run("multipart without file part", func(t *testing.T) {
		body, ct := sandboxdtest.MultipartBody(t, "other", "x", "x")
		sandboxdtest.WantV1Error(t, e.Do("PUT", "/v1/files/up/n.txt", body, http.StatusBadRequest, "Content-Type", ct), "INVALID_ARGUMENT", `multipart body has no "file" part`)
	})
	t.Run("escape", func(t *testing.T) {
		sandboxdtest.WantV1Error(t, e.Do("PUT", "/v1/files/..%2Fevil", "x", http.StatusForbidden), "PERMISSION_DENIED", "path escapes the sandbox root")
	})
}

func TestV1DeleteRoot(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("a/b", "x")
	e.WriteFile("c", "x")
	e.Do("DELETE", "/v1/files/?recursive=true", nil, http.StatusNoContent)
	ents, err := os.ReadDir(e.Root)
	if err != nil || len(ents) != 0 {
		t.Fatalf("root after recursive delete: %d entries, %v; want empty and present", len(ents), err)
	}
}
