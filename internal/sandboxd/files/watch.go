package files

import (
	"errors"
	"io/fs"
	"net/http"
	"path/filepath"

	"github.com/fsnotify/fsnotify"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Watch serves GET /v1/watch/{path}[?recursive=true]: an NDJSON stream
// of file system events until the client goes away. The response headers
// are flushed once the watch is in place, so a client may start changing
// files as soon as it has them.
func (h *Handler) Watch(w http.ResponseWriter, r *http.Request, arg string) {
	rel, err := h.fs.Resolve(arg, true)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	abs := filepath.Join(h.fs.Dir(), rel)
	fi, err := h.fs.Stat(rel)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	defer watcher.Close()

	recursive := queryBool(r, "recursive") && fi.IsDir()
	// A single file is watched through its directory (fsnotify loses a file
	// watch when an editor replaces the file) and events are filtered.
	only := ""
	if fi.IsDir() {
		err = AddWatches(watcher, abs, recursive)
	} else {
		only = abs
		err = watcher.Add(filepath.Dir(abs))
	}
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	nw := respond.NDJSON(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-watcher.Events:
			if !ok {
				return
			}
			if only != "" && ev.Name != only {
				continue
			}
			if recursive && ev.Has(fsnotify.Create) {
				// New directories join the watch; errors just mean it vanished.
				if fi, err := h.fs.Lstat(h.fs.RelOf(ev.Name)); err == nil && fi.IsDir() {
					_ = AddWatches(watcher, ev.Name, true)
				}
			}
			if err := h.writeEvents(nw, ev, len(watcher.Events) == 0); err != nil {
				return
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				if nw.Write(wire.WatchEvent{Op: wire.OpOverflow}, true) != nil {
					return
				}
				continue
			}
			h.log.Warn("watch error", "error", err)
		}
	}
}

// AddWatches watches dir and, when recursive, every directory below it.
// Symlinked directories are not followed.
func AddWatches(w *fsnotify.Watcher, dir string, recursive bool) error {
	if !recursive {
		return w.Add(dir)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil
		}
		if d.IsDir() {
			if err := w.Add(p); err != nil && p == dir {
				return err
			}
		}
		return nil
	})
}

var watchOps = []struct {
	op   fsnotify.Op
	name string
}{
	{fsnotify.Create, wire.OpCreate},
	{fsnotify.Write, wire.OpWrite},
	{fsnotify.Remove, wire.OpRemove},
	{fsnotify.Rename, wire.OpRename},
	{fsnotify.Chmod, wire.OpChmod},
}

// writeEvents writes one line per operation in ev.
func (h *Handler) writeEvents(nw *respond.NDJSONWriter, ev fsnotify.Event, flush bool) error {
	p := rootfs.Display(h.fs.RelOf(ev.Name))
	for _, o := range watchOps {
		if ev.Has(o.op) {
			if err := nw.Write(wire.WatchEvent{Op: o.name, Path: p}, flush); err != nil {
				return err
			}
		}
	}
	return nil
}
