package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

// The /v1/files, /v1/health and /v1/metadata endpoints speak upstream
// sandboxd's filesystem API (kubernetes-sigs/agent-sandbox
// packages/sandboxd/spec/filesystem/v1/filesystem.yaml), which both upstream
// SDKs use in their sandboxd runtime mode: a directory GET is a JSON
// listing, PUT answers 204, errors are {"code","message"}. Our own additions
// (tar streams with ?format=tar or Content-Type application/x-tar, Range
// reads) keep working on the same paths.

// v1Codes maps HTTP statuses to the error codes of upstream's spec.
var v1Codes = map[int]string{
	http.StatusBadRequest:          "INVALID_ARGUMENT",
	http.StatusUnauthorized:        "UNAUTHENTICATED",
	http.StatusForbidden:           "PERMISSION_DENIED",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusConflict:            "CONFLICT",
	http.StatusServiceUnavailable:  "UNAVAILABLE",
	http.StatusInternalServerError: "INTERNAL",
}

func v1Code(status int) string {
	if c, ok := v1Codes[status]; ok {
		return c
	}
	return "INTERNAL"
}

// writeV1Error writes upstream's error shape.
func writeV1Error(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.APIError{Code: v1Code(status), Message: msg})
}

// writeV1Err maps err like writeErr does, in upstream's error shape.
func (s *Server) writeV1Err(w http.ResponseWriter, err error) {
	status, msg := errorStatus(err)
	if status >= 500 {
		s.log.Error("request failed", "error", err)
	}
	writeV1Error(w, status, msg)
}

// handleGetFile serves GET/HEAD /v1/files/{path}: a file's bytes (with Range
// support); a directory as a JSON listing, or as a tar stream with
// ?format=tar.
func (s *Server) handleGetFile(w http.ResponseWriter, r *http.Request, arg string) {
	// Stat before Open: opening a fifo would block until a writer shows up.
	rel, fi, err := s.resolveStat(arg)
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	switch {
	case fi.IsDir() && r.URL.Query().Get("format") == "tar":
		s.writeTar(w, r, rel)
	case fi.IsDir():
		s.writeDirListing(w, arg, rel)
	case !fi.Mode().IsRegular():
		writeV1Error(w, http.StatusBadRequest, "not a regular file")
	default:
		f, err := s.root.Open(rel)
		if err != nil {
			s.writeV1Err(w, err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", wire.ContentTypeOctet)
		http.ServeContent(w, r, "", fi.ModTime(), f)
	}
}

// writeDirListing answers upstream's DirectoryListing: the entries of one
// directory sorted by name. A symlink is described by what it points to, and
// left out when that is outside the root or missing, as upstream does.
func (s *Server) writeDirListing(w http.ResponseWriter, arg, rel string) {
	f, err := s.root.Open(rel)
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	out := wire.DirectoryListing{Path: arg, Entries: make([]wire.FileEntry, 0, len(ents))}
	if !strings.HasPrefix(out.Path, "/") {
		out.Path = "/" + out.Path
	}
	for _, e := range ents {
		p := filepath.Join(rel, e.Name())
		fi, err := e.Info()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			var t string
			if t, err = s.res.resolve(p, true); err == nil {
				fi, err = s.root.Stat(t)
			}
		}
		if err != nil {
			continue // vanished, dangling, or pointing outside the root
		}
		typ := "file"
		if fi.IsDir() {
			typ = "directory"
		}
		out.Entries = append(out.Entries, wire.FileEntry{
			Name:       e.Name(),
			Size:       fi.Size(),
			Type:       typ,
			ModifiedAt: fi.ModTime().UTC().Format(time.RFC3339),
			Mode:       fmt.Sprintf("%04o", fi.Mode().Perm()),
		})
	}
	slices.SortFunc(out.Entries, func(a, b wire.FileEntry) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// handlePutFile serves PUT /v1/files/{path}: an atomic write of the raw body
// or of the multipart part "file", answered with 204; or, with Content-Type
// application/x-tar (or ?format=tar), extraction of the body under path.
func (s *Server) handlePutFile(w http.ResponseWriter, r *http.Request, arg string) {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) == wire.ContentTypeTar || r.URL.Query().Get("format") == "tar" {
		s.extractTar(w, r, arg)
		return
	}
	mode, hasMode, err := parseMode(r.URL.Query().Get("mode"))
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	rel, err := s.res.resolve(arg, true)
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	if rel == "." {
		writeV1Error(w, http.StatusBadRequest, "target path is a directory (the sandbox root)")
		return
	}
	switch fi, err := s.root.Stat(rel); {
	case err == nil && fi.IsDir():
		writeV1Error(w, http.StatusBadRequest, "target path is a directory")
		return
	case err == nil && !hasMode:
		mode = fi.Mode().Perm() // replacing a file keeps its permissions
	case !hasMode:
		mode = 0o644
	}
	body, err := fileBody(r)
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	defer body.Close()
	if err := s.writeFileAtomic(rel, body, mode); err != nil {
		s.writeV1Err(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fileBody is the content of a PUT: the raw body, or the part named "file"
// of a multipart/form-data body.
func fileBody(r *http.Request) (io.ReadCloser, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return r.Body, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, badRequest("invalid multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, badRequest(`multipart body has no "file" part`)
		}
		if err != nil {
			return nil, badRequest("invalid multipart body: %v", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
		part.Close()
	}
}

// handleDeleteFile serves DELETE /v1/files/{path}[?recursive=true]. A
// symlink is removed, not its target. A non-empty directory needs
// recursive (409 otherwise); the root itself is never removed, but
// recursive empties it, as upstream does.
func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request, arg string) {
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeV1Error(w, http.StatusBadRequest, fmt.Sprintf("recursive %q must be a boolean", v))
			return
		}
		recursive = b
	}
	rel, err := s.res.resolve(arg, false)
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	switch {
	case rel == "." && !recursive:
		writeV1Error(w, http.StatusConflict, "cannot delete the sandbox root; add ?recursive=true to empty it")
		return
	case rel == ".":
		err = s.emptyRoot()
	case fi.IsDir() && recursive:
		err = s.root.RemoveAll(rel)
	default:
		err = s.root.Remove(rel)
	}
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		writeV1Error(w, http.StatusConflict, "directory not empty; add ?recursive=true")
		return
	}
	if err != nil {
		s.writeV1Err(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// emptyRoot removes everything inside the root, keeping the root (often a
// volume mount) itself.
func (s *Server) emptyRoot() error {
	f, err := s.root.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := s.root.RemoveAll(n); err != nil {
			return err
		}
	}
	return nil
}

// handleV1Health serves GET /v1/health: 200 with the uptime, 503 once the
// server is draining.
func (s *Server) handleV1Health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	draining := s.draining || s.closed
	s.mu.Unlock()
	if draining {
		writeV1Error(w, http.StatusServiceUnavailable, "sandboxd is shutting down")
		return
	}
	writeJSON(w, http.StatusOK, wire.V1Health{Status: "ok", UptimeSeconds: int64(time.Since(s.startTime).Seconds())})
}

// sensitiveEnvMarkers keep credential-looking variables out of /v1/metadata
// even when they carry the prefix.
var sensitiveEnvMarkers = []string{
	"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED", "KEY",
	"AUTH", "BEARER", "PRIVATE", "CERT",
}

// handleV1Metadata serves GET /v1/metadata: the daemon's environment
// variables that start with the metadata prefix (SANDBOX_ by default), minus
// anything that looks like a credential.
func (s *Server) handleV1Metadata(w http.ResponseWriter, r *http.Request) {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, s.cfg.MetadataEnvPrefix) || isSensitiveEnvName(k) {
			continue
		}
		env[k] = v
	}
	writeJSON(w, http.StatusOK, wire.V1Metadata{Env: env})
}

func isSensitiveEnvName(name string) bool {
	up := strings.ToUpper(name)
	for _, m := range sensitiveEnvMarkers {
		if strings.Contains(up, m) {
			return true
		}
	}
	return false
}
