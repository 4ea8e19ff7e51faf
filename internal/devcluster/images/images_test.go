package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRelTo(t *testing.T) {
	for _, tc := range []struct{ dir, target, want string }{
		{"/bin", "/bin/busybox", "busybox"},
		{"/usr/bin", "/bin/busybox", "../../bin/busybox"},
		{"/sbin", "/bin/busybox", "../bin/busybox"},
		{"/", "/bin/busybox", "bin/busybox"},
	} {
		if got, _ := relTo(tc.dir, tc.target); got != tc.want {
			t.Errorf("relTo(%q, %q) = %q, want %q", tc.dir, tc.target, got, tc.want)
		}
	}
}

func TestArchiveIsDeterministicAndComplete(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Pause("docker.io/example/pause:dev", bin)
	img.Files = append(img.Files, File{Path: "/a/b/link", Link: "../../prog"})
	var a, b bytes.Buffer
	idA, err := img.WriteArchive(&a)
	if err != nil {
		t.Fatal(err)
	}
	idB, _ := img.WriteArchive(&b)
	if idA != idB || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two builds differ: %s vs %s", idA, idB)
	}
	repoTags, _, entries := readArchive(t, a.Bytes())
	got := names(entries)
	if len(repoTags) != 1 || repoTags[0] != "docker.io/example/pause:dev" {
		t.Fatalf("RepoTags %v, want the image's ref", repoTags)
	}
	want := []string{"a/", "a/b/", "a/b/link", "pause"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("layer entries %v, want %v", got, want)
	}
}

// readArchive returns the manifest's tags, the image config and the layer's entry names of a
// docker-archive with one image of one layer.
func readArchive(t *testing.T, archive []byte) (repoTags []string, config map[string]any, entries []*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	if err := json.Unmarshal(files[manifest[0].Config], &config); err != nil {
		t.Fatalf("image config %s: %v", manifest[0].Config, err)
	}
	lr := tar.NewReader(bytes.NewReader(files[manifest[0].Layers[0]]))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, h)
	}
	return manifest[0].RepoTags, config, entries
}

// names lists the entries' names in layer order.
func names(entries []*tar.Header) []string {
	out := make([]string, len(entries))
	for i, h := range entries {
		out[i] = h.Name
	}
	return out
}

func TestServerImageRunsTheBinaryAsNonRoot(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "router")
	if err := os.WriteFile(bin, []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Server("docker.io/agent-sandbox/router:dev", bin, 8080).WriteArchive(&buf); err != nil {
		t.Fatal(err)
	}
	_, config, entries := readArchive(t, buf.Bytes())
	cfg := config["config"].(map[string]any)
	if cfg["User"] != "65532:65532" {
		t.Errorf("User = %v, want the unprivileged 65532:65532", cfg["User"])
	}
	if ep, _ := json.Marshal(cfg["Entrypoint"]); string(ep) != `["/usr/local/bin/router"]` {
		t.Errorf("Entrypoint = %s, want the binary", ep)
	}
	want := []string{"etc/", "etc/group", "etc/passwd", "tmp/", "usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/router"}
	if got := names(entries); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("layer entries %v, want %v", got, want)
	}
}

func TestRuntimeImageRunsAsTheSandboxUser(t *testing.T) {
	dir := t.TempDir()
	busybox, sandboxd := filepath.Join(dir, "busybox"), filepath.Join(dir, "sandboxd")
	// A stand-in busybox that lists one applet, as `busybox --list-full` does.
	if err := os.WriteFile(busybox, []byte("#!/bin/sh\necho bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sandboxd, []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := Runtime("docker.io/agent-sandbox/runtime:dev", sandboxd, busybox)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := img.WriteArchive(&buf); err != nil {
		t.Fatal(err)
	}
	_, config, entries := readArchive(t, buf.Bytes())
	byName := map[string]*tar.Header{}
	for _, h := range entries {
		byName[h.Name] = h
	}
	cfg := config["config"].(map[string]any)
	if cfg["User"] != "1000:1000" {
		t.Errorf("User = %v, want the unprivileged sandbox user 1000:1000", cfg["User"])
	}
	if env, _ := json.Marshal(cfg["Env"]); !strings.Contains(string(env), `"HOME=/home/sandbox"`) {
		t.Errorf("Env = %s, want HOME=/home/sandbox", env)
	}
	cases := []struct {
		entry    string
		uid, gid int
		mode     int64
	}{
		{"workspace/", 1000, 1000, 0o755},
		{"home/sandbox/", 1000, 1000, 0o755},
		{"tmp/", 0, 0, 0o1777},
		{"usr/local/bin/sandboxd", 0, 0, 0o755},
		{"etc/passwd", 0, 0, 0o644},
	}
	for _, tc := range cases {
		h := byName[tc.entry]
		if h == nil {
			t.Errorf("no layer entry %s", tc.entry)
			continue
		}
		if h.Uid != tc.uid || h.Gid != tc.gid || h.Mode != tc.mode {
			t.Errorf("%s: owner %d:%d mode %o, want %d:%d %o", tc.entry, h.Uid, h.Gid, h.Mode, tc.uid, tc.gid, tc.mode)
		}
	}
}
