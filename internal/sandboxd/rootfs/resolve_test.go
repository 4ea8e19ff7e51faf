package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resolveFixture builds a root full of awkward symlinks plus a directory
// outside it, and returns the resolver and the outside directory.
func resolveFixture(t testing.TB) (Resolver, string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root + "/dir/sub", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(root+"/dir/file", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"in":           "dir",
		"in-abs":       root + "/dir",
		"up":           "..",
		"etc":          "/etc",
		"passwd":       "/etc/passwd",
		"out":          outside,
		"out-rel":      "../outside",
		"dir/deep-out": "../../outside",
		"dir/back":     "../dir/sub",
		"loop":         "loop",
		"chain1":       "chain2",
		"chain2":       "in",
		"dangling-out": outside + "/new",
		"dangling-in":  "dir/new",
		"via-out":      "../outside/../root/dir", // leaves and comes back: fine
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return NewResolver(root), outside
}

func TestResolve(t *testing.T) {
	r, _ := resolveFixture(t)
	tests := []struct {
		path        string
		followFinal bool
		want        string // "" when an error is expected
		err         error
	}{
		{"", true, ".", nil},
		{"/", true, ".", nil},
		{".", true, ".", nil},
		{"dir/file", true, "dir/file", nil},
		{"/dir//./file", true, "dir/file", nil},
		{"dir/../dir/file", true, "dir/file", nil},
		{"new/deeper/file", true, "new/deeper/file", nil},
		{"in/file", true, "dir/file", nil},
		{"in-abs/file", true, "dir/file", nil},
		{"chain1/sub", true, "dir/sub", nil},
		{"dir/back", true, "dir/sub", nil},
		{"via-out/file", true, "dir/file", nil},
		{"dangling-in", true, "dir/new", nil},
		{"dir/file/x", true, "dir/file/x", nil}, // ENOTDIR is the operation's business
		{"in", false, "in", nil},                // the link itself
		{"etc", false, "etc", nil},
		{"passwd", false, "passwd", nil},
		{"up", false, "up", nil},
		{"up/dir", true, "", ErrEscape},
		{"..", true, "", ErrEscape},
		{"../x", true, "", ErrEscape},
		{"../..//x", true, "", ErrEscape},
		{"a/../../b", true, "", ErrEscape},
		{"/../etc/passwd", true, "", ErrEscape},
		{"up", true, "", ErrEscape},
		{"etc", true, "", ErrEscape},
		{"etc/passwd", false, "", ErrEscape},
		{"passwd", true, "", ErrEscape},
		{"out/x", true, "", ErrEscape},
		{"out-rel", true, "", ErrEscape},
		{"dir/deep-out/x", false, "", ErrEscape},
		{"dangling-out", true, "", ErrEscape},
		{"a\x00b", true, "", ErrInvalidPath},
	}
	for _, tc := range tests {
		got, err := r.Resolve(tc.path, tc.followFinal)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("resolve(%q, %v) = %q, %v; want error %v", tc.path, tc.followFinal, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolve(%q, %v) = %q, %v; want %q", tc.path, tc.followFinal, got, err, tc.want)
		}
	}
	if _, err := r.Resolve("loop/x", true); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("loop: %v", err)
	}
}

// FuzzResolve checks the one property that matters: whatever the input,
// the result is inside the root (and, where it exists, really is inside
// once every symlink is followed), or an error.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"dir/file", "in/../etc", "up/up/x", "chain1/sub/../file"} {
		f.Add(s)
	}
	r, _ := resolveFixture(f)
	f.Fuzz(func(t *testing.T, p string) {
		for _, follow := range []bool{true, false} {
			rel, err := r.Resolve(p, follow)
			if err != nil {
				continue
			}
			if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("resolve(%q, %v) = %q: not root-relative", p, follow, rel)
			}
			full := filepath.Join(r.root, rel)
			if !within(r.root, full) {
				t.Fatalf("resolve(%q, %v) = %q: outside the root", p, follow, rel)
			}
			// What exists of it must really be inside, symlinks followed:
			// the parent always, the final component when followed.
			check := full
			if !follow && rel != "." {
				check = filepath.Dir(full)
			}
			for {
				if realPath, err := filepath.EvalSymlinks(check); err == nil {
					if !within(r.root, realPath) {
						t.Fatalf("resolve(%q, %v) = %q: really %q, outside the root", p, follow, rel, realPath)
					}
					break
				}
				if check == r.root {
					break
				}
				check = filepath.Dir(check)
			}
		}
	})
}
