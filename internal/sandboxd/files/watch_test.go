package files_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/sandboxdtest"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

type watchStream struct {
	t  *testing.T
	sc *bufio.Scanner
}

func watch(e *sandboxdtest.Env, t *testing.T, path string) *watchStream {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	resp := e.Request(ctx, "GET", path, nil)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != wire.ContentTypeNDJSON {
		t.Fatalf("watch: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &watchStream{t: t, sc: bufio.NewScanner(resp.Body)}
}

// waitFor reads events until want shows up and returns those before it.
func (w *watchStream) waitFor(want wire.WatchEvent) []wire.WatchEvent {
	w.t.Helper()
	var seen []wire.WatchEvent
	for w.sc.Scan() {
		var ev wire.WatchEvent
		if err := json.Unmarshal(w.sc.Bytes(), &ev); err != nil {
			w.t.Fatalf("bad event %q", w.sc.Bytes())
		}
		if ev == want {
			return seen
		}
		seen = append(seen, ev)
	}
	w.t.Fatalf("stream ended without %+v; saw %+v", want, seen)
	return nil
}

func TestWatchRecursive(t *testing.T) {
	e := sandboxdtest.New(t)
	w := watch(e, t, "/v1/watch/?recursive=true")
	p := func(rel string) string { return filepath.Join(e.Root, rel) }

	if err := os.WriteFile(p("a.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitFor(wire.WatchEvent{Op: wire.OpCreate, Path: "a.txt"})
	if err := os.WriteFile(p("a.txt"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitFor(wire.WatchEvent{Op: wire.OpWrite, Path: "a.txt"})
	if err := os.Chmod(p("a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.waitFor(wire.WatchEvent{Op: wire.OpChmod, Path: "a.txt"})

	// A directory created after the watch started is watched too, from the
	// moment its create event is delivered.
	if err := os.Mkdir(p("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.waitFor(wire.WatchEvent{Op: wire.OpCreate, Path: "sub"})
	if err := os.WriteFile(p("sub/b.txt"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitFor(wire.WatchEvent{Op: wire.OpCreate, Path: "sub/b.txt"})

	if err := os.Rename(p("sub/b.txt"), p("sub/c.txt")); err != nil {
		t.Fatal(err)
	}
	w.waitFor(wire.WatchEvent{Op: wire.OpRename, Path: "sub/b.txt"})
	w.waitFor(wire.WatchEvent{Op: wire.OpCreate, Path: "sub/c.txt"})
	if err := os.Remove(p("a.txt")); err != nil {
		t.Fatal(err)
	}
	w.waitFor(wire.WatchEvent{Op: wire.OpRemove, Path: "a.txt"})
}

func TestWatchNonRecursiveAndFile(t *testing.T) {
	e := sandboxdtest.New(t)
	e.WriteFile("d/keep", "")
	e.WriteFile("d/other", "")
	if err := os.Mkdir(filepath.Join(e.Root, "d/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := watch(e, t, "/v1/watch/d")
	file := watch(e, t, "/v1/watch/d/keep")
	// Not recursive: sub's contents are not reported; the file watch only
	// reports its file. The final writes are the markers we wait for.
	e.WriteFile("d/sub/ignored", "x")
	e.WriteFile("d/other", "x")
	e.WriteFile("d/keep", "x")
	for _, ev := range dir.waitFor(wire.WatchEvent{Op: wire.OpWrite, Path: "d/other"}) {
		if ev.Path == "d/sub/ignored" {
			t.Fatalf("non-recursive watch reported %+v", ev)
		}
	}
	for _, ev := range file.waitFor(wire.WatchEvent{Op: wire.OpWrite, Path: "d/keep"}) {
		if ev.Path != "d/keep" {
			t.Fatalf("file watch reported %+v", ev)
		}
	}

	sandboxdtest.WantError(t, e.Do("GET", "/v1/watch/missing", nil, http.StatusNotFound), "not found")
}
