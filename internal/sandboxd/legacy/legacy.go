// Package legacy serves the python runtime's API on sandboxd's port (the
// ":8888" API: GET /, POST /execute, POST /upload, GET /download, /list and
// /exists), answering as the python runtime did so that existing clients
// keep working.
package legacy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/process"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Handler serves the legacy API on the sandbox root.
type Handler struct {
	fs          *rootfs.FS
	runner      *process.Runner
	execTimeout time.Duration // of /execute, and named in its timeout message
}

// New returns a Handler for the root fs that runs commands through runner.
func New(fs *rootfs.FS, runner *process.Runner, execTimeout time.Duration) *Handler {
	return &Handler{fs: fs, runner: runner, execTimeout: execTimeout}
}

// The legacy API mirrors the python runtime's responses so existing clients
// keep working: {"message": ...} errors, snake_case fields.

func writeMessage(w http.ResponseWriter, status int, msg string) {
	respond.JSON(w, status, wire.LegacyMessage{Message: msg})
}

// writeValidation mimics FastAPI's 422 for a malformed request.
func writeValidation(w http.ResponseWriter, loc []string, msg string) {
	respond.JSON(w, http.StatusUnprocessableEntity, map[string]any{
		"detail": []map[string]any{{"type": "value_error", "loc": loc, "msg": msg}},
	})
}

func (h *Handler) Root(w http.ResponseWriter, r *http.Request) {
	respond.JSON(w, http.StatusOK, wire.LegacyStatus{Status: "ok", Message: "Sandbox Runtime is active."})
}

// Upload serves POST /upload: multipart field "file", whose
// filename is the destination relative to the root. The part is streamed
// to disk, never buffered whole.
func (h *Handler) Upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeValidation(w, []string{"body", "file"}, "Field required")
		return
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			writeValidation(w, []string{"body", "file"}, "Field required")
			return
		}
		if err != nil {
			writeParseError(w)
			return
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		// Part.FileName strips directories; the legacy protocol needs them.
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		name := params["filename"]
		body := &readErrors{r: part}
		h.store(w, name, body)
		part.Close()
		return
	}
}

// writeParseError answers a malformed multipart body as the python runtime (FastAPI) did: the
// client's fault, 400.
func writeParseError(w http.ResponseWriter) {
	respond.JSON(w, http.StatusBadRequest, map[string]string{"detail": "There was an error parsing the body"})
}

// readErrors remembers the first error reading the request's part, so a truncated or malformed
// body is told apart from a failing disk.
type readErrors struct {
	r   io.Reader
	err error
}

func (e *readErrors) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

func (h *Handler) store(w http.ResponseWriter, name string, src io.Reader) {
	if name == "" {
		writeMessage(w, http.StatusInternalServerError, "File upload failed: missing filename")
		return
	}
	rel, err := h.fs.Resolve(name, true)
	if errors.Is(err, rootfs.ErrEscape) || errors.Is(err, rootfs.ErrInvalidPath) || rel == "." {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	if err == nil {
		mode := fs.FileMode(0o644)
		if fi, serr := h.fs.Stat(rel); serr == nil {
			mode = fi.Mode().Perm()
		}
		err = h.fs.WriteFileAtomic(rel, src, mode)
	}
	if err != nil {
		if rootfs.IsRootEscape(err) {
			writeMessage(w, http.StatusForbidden, "Access denied")
			return
		}
		if re, ok := src.(*readErrors); ok && re.err != nil {
			writeParseError(w)
			return
		}
		writeMessage(w, http.StatusInternalServerError, "File upload failed: "+err.Error())
		return
	}
	writeMessage(w, http.StatusOK, fmt.Sprintf("File '%s' uploaded successfully.", name))
}

// resolve resolves a legacy path argument; denied reports an escape,
// which the python runtime answered with 403 "Access denied".
func (h *Handler) resolve(arg string) (rel string, denied bool, err error) {
	rel, err = h.fs.Resolve(arg, true)
	denied = errors.Is(err, rootfs.ErrEscape) || errors.Is(err, rootfs.ErrInvalidPath)
	return rel, denied, err
}

func (h *Handler) Download(w http.ResponseWriter, r *http.Request, arg string) {
	rel, denied, err := h.resolve(arg)
	if denied {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = h.fs.Stat(rel) // before Open, which blocks on a fifo
	}
	if err != nil || !fi.Mode().IsRegular() {
		writeMessage(w, http.StatusNotFound, "File not found")
		return
	}
	f, err := h.fs.Open(rel)
	if err != nil {
		writeMessage(w, http.StatusNotFound, "File not found")
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", wire.ContentTypeOctet)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(rel)}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

func (h *Handler) List(w http.ResponseWriter, r *http.Request, arg string) {
	rel, denied, err := h.resolve(arg)
	if denied {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = h.fs.Stat(rel)
	}
	if err != nil || !fi.IsDir() {
		writeMessage(w, http.StatusNotFound, "Path is not a directory")
		return
	}
	f, err := h.fs.Open(rel)
	if err != nil {
		writeMessage(w, http.StatusNotFound, "Path is not a directory")
		return
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		writeMessage(w, http.StatusNotFound, "Path is not a directory")
		return
	}
	out := make([]wire.LegacyListEntry, 0, len(ents))
	for _, e := range ents {
		fi, err := h.stat(filepath.Join(rel, e.Name()))
		if err != nil {
			continue
		}
		typ := "file"
		if fi.IsDir() {
			typ = "directory"
		}
		out = append(out, wire.LegacyListEntry{
			Name:    e.Name(),
			Size:    fi.Size(),
			Type:    typ,
			ModTime: float64(fi.ModTime().UnixNano()) / 1e9,
		})
	}
	slices.SortFunc(out, func(a, b wire.LegacyListEntry) int { return strings.Compare(a.Name, b.Name) })
	respond.JSON(w, http.StatusOK, out)
}

// stat follows a symlink like python's os.stat, but only while it
// stays inside the root; otherwise it describes the link itself.
func (h *Handler) stat(rel string) (fs.FileInfo, error) {
	if t, err := h.fs.Resolve(rel, true); err == nil {
		if fi, err := h.fs.Stat(t); err == nil {
			return fi, nil
		}
	}
	return h.fs.Lstat(rel)
}

func (h *Handler) Exists(w http.ResponseWriter, r *http.Request, arg string) {
	rel, denied, err := h.resolve(arg)
	if denied {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	exists := false
	if err == nil {
		_, err = h.fs.Stat(rel)
		exists = err == nil
	}
	respond.JSON(w, http.StatusOK, wire.LegacyExists{Path: arg, Exists: exists})
}
