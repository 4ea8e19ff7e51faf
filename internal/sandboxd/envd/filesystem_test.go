package envd_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem"
)

// escapeLinks adds links out of the root (and one inside) and a secret
// outside it.
func (e *env) escapeLinks() {
	e.t.Helper()
	outside := filepath.Join(filepath.Dir(e.root), "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	for link, target := range map[string]string{"link-out": "../outside", "link-abs": outside, "link-in": "dir", "loop": "loop"} {
		if err := os.Symlink(target, filepath.Join(e.root, link)); err != nil {
			e.t.Fatal(err)
		}
	}
}

func TestStatAndListDir(t *testing.T) {
	e := newEnv(t)
	e.write("dir/a.txt", "aaa")
	e.write("dir/sub/b.txt", "b")
	e.write("dir/sub/deeper/c.txt", "c")
	e.escapeLinks()

	st, err := e.fs.Stat(t.Context(), connect.NewRequest(&pb.StatRequest{Path: "/dir/a.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	en := st.Msg.GetEntry()
	if en.GetName() != "a.txt" || en.GetPath() != "/dir/a.txt" || en.GetType() != pb.FileType_FILE_TYPE_FILE || en.GetSize() != 3 ||
		en.GetPermissions() != "-rw-r--r--" || en.GetMode() != 0o644 || en.GetOwner() == "" || en.GetModifiedTime().AsTime().Before(time.Now().Add(-time.Minute)) {
		t.Fatalf("stat %v, want a.txt, a 3-byte 0644 file with an owner and a fresh time", en)
	}
	st, err = e.fs.Stat(t.Context(), connect.NewRequest(&pb.StatRequest{Path: "link-in"}))
	if err != nil || st.Msg.GetEntry().GetType() != pb.FileType_FILE_TYPE_SYMLINK || st.Msg.GetEntry().GetSymlinkTarget() != "dir" {
		t.Fatalf("stat of a link %v (%v), want the link itself with its target", st.Msg.GetEntry(), err)
	}
	st, err = e.fs.Stat(t.Context(), connect.NewRequest(&pb.StatRequest{Path: "/"}))
	if err != nil || st.Msg.GetEntry().GetPath() != "/" || st.Msg.GetEntry().GetType() != pb.FileType_FILE_TYPE_DIRECTORY {
		t.Fatalf("stat of the root %v (%v), want the directory /", st.Msg.GetEntry(), err)
	}

	for _, tc := range []struct {
		depth uint32
		want  []string
	}{
		{0, []string{"/dir/a.txt", "/dir/sub"}},
		{1, []string{"/dir/a.txt", "/dir/sub"}},
		{2, []string{"/dir/a.txt", "/dir/sub", "/dir/sub/b.txt", "/dir/sub/deeper"}},
		{1 << 31, []string{"/dir/a.txt", "/dir/sub", "/dir/sub/b.txt", "/dir/sub/deeper", "/dir/sub/deeper/c.txt"}},
	} {
		ls, err := e.fs.ListDir(t.Context(), connect.NewRequest(&pb.ListDirRequest{Path: "dir", Depth: tc.depth}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, en := range ls.Msg.GetEntries() {
			got = append(got, en.GetPath())
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("list depth %d: %v, want %v", tc.depth, got, tc.want)
		}
	}
}

func TestFilesystemErrorsAndEscapes(t *testing.T) {
	e := newEnv(t)
	e.write("dir/a.txt", "a")
	e.write("file.txt", "f")
	e.escapeLinks()
	stat := func(p string) error {
		_, err := e.fs.Stat(t.Context(), connect.NewRequest(&pb.StatRequest{Path: p}))
		return err
	}
	list := func(p string) error {
		_, err := e.fs.ListDir(t.Context(), connect.NewRequest(&pb.ListDirRequest{Path: p}))
		return err
	}
	mkdir := func(p string) error {
		_, err := e.fs.MakeDir(t.Context(), connect.NewRequest(&pb.MakeDirRequest{Path: p}))
		return err
	}
	remove := func(p string) error {
		_, err := e.fs.Remove(t.Context(), connect.NewRequest(&pb.RemoveRequest{Path: p}))
		return err
	}
	move := func(from, to string) func(string) error {
		return func(string) error {
			_, err := e.fs.Move(t.Context(), connect.NewRequest(&pb.MoveRequest{Source: from, Destination: to}))
			return err
		}
	}
	watch := func(p string) error {
		_, err := e.fs.CreateWatcher(t.Context(), connect.NewRequest(&pb.CreateWatcherRequest{Path: p}))
		return err
	}
	tests := []struct {
		name string
		call func(string) error
		path string
		want connect.Code
	}{
		{"stat missing", stat, "/nope", connect.CodeNotFound},
		{"stat ../", stat, "../outside/secret.txt", connect.CodePermissionDenied},
		{"stat through a link out", stat, "link-out/secret.txt", connect.CodePermissionDenied},
		{"stat through an absolute link out", stat, "/link-abs/secret.txt", connect.CodePermissionDenied},
		{"stat with NUL", stat, "a\x00b", connect.CodeInvalidArgument},
		{"stat a link loop's inside", stat, "loop/x", connect.CodeInvalidArgument},
		{"list missing", list, "/nope", connect.CodeNotFound},
		{"list a file", list, "/file.txt", connect.CodeInvalidArgument},
		{"list a link out", list, "link-out", connect.CodePermissionDenied},
		{"list ../..", list, "/../..", connect.CodePermissionDenied},
		{"mkdir existing", mkdir, "/dir", connect.CodeAlreadyExists},
		{"mkdir over a file", mkdir, "/file.txt", connect.CodeInvalidArgument},
		{"mkdir below a file", mkdir, "/file.txt/sub", connect.CodeFailedPrecondition},
		{"mkdir through a link out", mkdir, "link-out/new", connect.CodePermissionDenied},
		{"remove missing", remove, "/nope", connect.CodeNotFound},
		{"remove the root", remove, "/", connect.CodePermissionDenied},
		{"remove through a link out", remove, "link-abs/secret.txt", connect.CodePermissionDenied},
		{"move missing", move("/nope", "/x"), "", connect.CodeNotFound},
		{"move out of the root", move("/file.txt", "../file.txt"), "", connect.CodePermissionDenied},
		{"move in from outside", move("link-out/secret.txt", "/stolen"), "", connect.CodePermissionDenied},
		{"move the root", move("/", "/elsewhere"), "", connect.CodePermissionDenied},
		{"watch missing", watch, "/nope", connect.CodeNotFound},
		{"watch a file", watch, "/file.txt", connect.CodeInvalidArgument},
		{"watch a link out", watch, "link-out", connect.CodePermissionDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.name, tc.call(tc.path), tc.want) })
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(e.root), "outside", "secret.txt")); err != nil || string(b) != "secret" {
		t.Fatalf("the secret outside the root changed: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(e.root, "stolen")); !os.IsNotExist(err) {
		t.Fatalf("a file was moved in from outside the root: %v", err)
	}
}

func TestMakeDirMoveRemove(t *testing.T) {
	e := newEnv(t)
	mk, err := e.fs.MakeDir(t.Context(), connect.NewRequest(&pb.MakeDirRequest{Path: "/a/b/c"}))
	if err != nil || mk.Msg.GetEntry().GetPath() != "/a/b/c" || mk.Msg.GetEntry().GetType() != pb.FileType_FILE_TYPE_DIRECTORY {
		t.Fatalf("mkdir %v (%v), want the directory /a/b/c", mk.Msg.GetEntry(), err)
	}
	e.write("a/b/c/f.txt", "x")
	mv, err := e.fs.Move(t.Context(), connect.NewRequest(&pb.MoveRequest{Source: "/a/b/c/f.txt", Destination: "/new/dir/g.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != "/new/dir/g.txt" {
		t.Fatalf("move %v (%v), want /new/dir/g.txt", mv.Msg.GetEntry(), err)
	}
	if b, err := os.ReadFile(filepath.Join(e.root, "new/dir/g.txt")); err != nil || string(b) != "x" {
		t.Fatalf("moved file %q %v", b, err)
	}
	if _, err := e.fs.Remove(t.Context(), connect.NewRequest(&pb.RemoveRequest{Path: "/a"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.root, "a")); !os.IsNotExist(err) {
		t.Fatalf("/a still exists after remove: %v", err)
	}
}
