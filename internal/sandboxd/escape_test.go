package sandboxd_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// TestEscapesRefused drives every path-taking endpoint with paths that try
// to leave the root, through "..", absolute names and symlinks.
func TestEscapesRefused(t *testing.T) {
	e := sandboxdtest.New(t)
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"etc":        "/etc",              // symlink to a host directory
		"passwd":     "/etc/passwd",       // symlink to a host file
		"outdir":     outside,             // symlinked directory pointing out
		"outrel":     "../../../../../..", // relative climb
		"dangling":   outside + "/new",    // dangling link out: writing must not create it
		"secretlink": outside + "/secret",
	} {
		if err := os.Symlink(target, filepath.Join(e.Root, name)); err != nil {
			t.Fatal(err)
		}
	}
	const escape = "path escapes the sandbox root"
	paths := []string{
		"..", "../x", "a/../../x", "../" + filepath.Base(outside) + "/secret",
		"etc/passwd", "passwd", "outdir/secret", "outdir/new", "outrel/etc/passwd",
		"dangling", "secretlink",
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			for _, c := range []struct {
				method, prefix string
				body           any
			}{
				{"GET", "/v1/files/", nil},
				{"PUT", "/v1/files/", "pwned"},
				{"PUT", "/v1/files/", nil}, // tar upload target
				{"GET", "/v1/list/", nil},
				{"GET", "/v1/watch/", nil},
				{"POST", "/v1/mkdir/", nil},
			} {
				var hdr []string
				if c.method == "PUT" && c.body == nil {
					hdr = []string{"Content-Type", wire.ContentTypeTar}
				}
				sandboxdtest.WantAnyError(t, e.Do(c.method, c.prefix+p, c.body, http.StatusForbidden, hdr...), escape)
			}
			sandboxdtest.WantError(t, e.Do("POST", "/v1/exec", wire.ExecRequest{Argv: []string{"true"}, Cwd: p}, http.StatusForbidden), escape)
		})
	}
	// stat and delete act on the link itself, so links are fine there, but
	// anything through them is not.
	for _, p := range []string{"..", "a/../../x", "etc/passwd", "outdir/secret", "outrel/x"} {
		sandboxdtest.WantError(t, e.Do("GET", "/v1/stat/"+p, nil, http.StatusForbidden), escape)
		sandboxdtest.WantV1Error(t, e.Do("DELETE", "/v1/files/"+p, nil, http.StatusForbidden), "PERMISSION_DENIED", escape)
	}
	var info wire.FileInfo
	e.DoJSON("GET", "/v1/stat/passwd", nil, http.StatusOK, &info)
	if !info.IsSymlink || info.LinkTarget != "/etc/passwd" {
		t.Fatalf("stat of link %+v", info)
	}
	// Absolute paths are root-relative: /proc/self/environ is not the host's.
	sandboxdtest.WantV1Error(t, e.Do("GET", "/v1/files//proc/self/environ", nil, http.StatusNotFound), "NOT_FOUND", "not found")
	sandboxdtest.WantV1Error(t, e.Do("GET", "/v1/files/%2Fproc%2Fself%2Fenviron", nil, http.StatusNotFound), "NOT_FOUND", "not found")
	sandboxdtest.WantV1Error(t, e.Do("GET", "/v1/files/a%00b", nil, http.StatusBadRequest), "INVALID_ARGUMENT", "invalid path")

	// Nothing leaked out, nothing was created outside, the secret survives.
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Fatalf("outside dir now holds %d entries", len(ents))
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret" {
		t.Fatalf("secret changed: %q", b)
	}
	// Deleting the link removes only the link.
	e.Do("DELETE", "/v1/files/outdir", nil, http.StatusNoContent)
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatal(err)
	}
}
