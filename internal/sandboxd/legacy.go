package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

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

func (s *Server) handleLegacyRoot(w http.ResponseWriter, r *http.Request) {
	respond.JSON(w, http.StatusOK, wire.LegacyStatus{Status: "ok", Message: "Sandbox Runtime is active."})
}

// handleLegacyExecute serves POST /execute. Unlike the python runtime, the
// command goes through /bin/sh -c, so pipes and redirections work; clients
// that wrapped commands in `sh -c '...'` themselves are unaffected. Failures
// the python runtime reported as exit code 1 with "Failed to execute
// command: ..." on stderr (empty command, program not found, timeout) are
// answered the same way; see legacyexec.go and docs/sandboxd-api.md.
func (s *Server) handleLegacyExecute(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Command *string `json:"command"`
	}
	if err := respond.DecodeJSON(r, &req); err != nil {
		writeValidation(w, []string{"body"}, err.Error())
		return
	}
	if req.Command == nil {
		writeValidation(w, []string{"body", "command"}, "Field required")
		return
	}
	if strings.TrimSpace(*req.Command) == "" {
		writeLegacyFailure(w, "", "empty command")
		return
	}
	sp, err := s.runner.BuildSpec(&wire.ExecRequest{Command: *req.Command}, s.cfg.ExecTimeout)
	if err != nil {
		_, msg := respond.Status(err)
		writeLegacyFailure(w, "", msg)
		return
	}
	if name, ok := legacyMissingProgram(*req.Command, sp); ok {
		writeLegacyFailure(w, "", fmt.Sprintf("[Errno 2] No such file or directory: '%s'", name))
		return
	}
	out, res := s.runner.Collect(r.Context(), sp, "legacy")
	secs := strconv.FormatFloat(s.cfg.ExecTimeout.Seconds(), 'f', -1, 64)
	respond.JSON(w, http.StatusOK, s.legacyResult(out, res, *req.Command, secs))
}

// handleLegacyUpload serves POST /upload: multipart field "file", whose
// filename is the destination relative to the root. The part is streamed
// to disk, never buffered whole.
func (s *Server) handleLegacyUpload(w http.ResponseWriter, r *http.Request) {
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
		s.legacyStore(w, name, body)
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

func (s *Server) legacyStore(w http.ResponseWriter, name string, src io.Reader) {
	if name == "" {
		writeMessage(w, http.StatusInternalServerError, "File upload failed: missing filename")
		return
	}
	rel, err := s.fs.Resolve(name, true)
	if errors.Is(err, rootfs.ErrEscape) || errors.Is(err, rootfs.ErrInvalidPath) || rel == "." {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	if err == nil {
		mode := fs.FileMode(0o644)
		if fi, serr := s.fs.Stat(rel); serr == nil {
			mode = fi.Mode().Perm()
		}
		err = s.fs.WriteFileAtomic(rel, src, mode)
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

// legacyResolve resolves a legacy path argument; denied reports an escape,
// which the python runtime answered with 403 "Access denied".
func (s *Server) legacyResolve(arg string) (rel string, denied bool, err error) {
	rel, err = s.fs.Resolve(arg, true)
	denied = errors.Is(err, rootfs.ErrEscape) || errors.Is(err, rootfs.ErrInvalidPath)
	return rel, denied, err
}

func (s *Server) handleLegacyDownload(w http.ResponseWriter, r *http.Request, arg string) {
	rel, denied, err := s.legacyResolve(arg)
	if denied {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = s.fs.Stat(rel) // before Open, which blocks on a fifo
	}
	if err != nil || !fi.Mode().IsRegular() {
		writeMessage(w, http.StatusNotFound, "File not found")
		return
	}
	f, err := s.fs.Open(rel)
	if err != nil {
		writeMessage(w, http.StatusNotFound, "File not found")
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", wire.ContentTypeOctet)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(rel)}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

func (s *Server) handleLegacyList(w http.ResponseWriter, r *http.Request, arg string) {
	rel, denied, err := s.legacyResolve(arg)
	if denied {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	var fi fs.FileInfo
	if err == nil {
		fi, err = s.fs.Stat(rel)
	}
	if err != nil || !fi.IsDir() {
		writeMessage(w, http.StatusNotFound, "Path is not a directory")
		return
	}
	f, err := s.fs.Open(rel)
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
		fi, err := s.legacyStat(filepath.Join(rel, e.Name()))
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

// legacyStat follows a symlink like python's os.stat, but only while it
// stays inside the root; otherwise it describes the link itself.
func (s *Server) legacyStat(rel string) (fs.FileInfo, error) {
	if t, err := s.fs.Resolve(rel, true); err == nil {
		if fi, err := s.fs.Stat(t); err == nil {
			return fi, nil
		}
	}
	return s.fs.Lstat(rel)
}

func (s *Server) handleLegacyExists(w http.ResponseWriter, r *http.Request, arg string) {
	rel, denied, err := s.legacyResolve(arg)
	if denied {
		writeMessage(w, http.StatusForbidden, "Access denied")
		return
	}
	exists := false
	if err == nil {
		_, err = s.fs.Stat(rel)
		exists = err == nil
	}
	respond.JSON(w, http.StatusOK, wire.LegacyExists{Path: arg, Exists: exists})
}
