package files

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
	"syscall"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// The /v1/files endpoints (and sandboxd's /v1/health and /v1/metadata) speak upstream
// sandboxd's filesystem API (kubernetes-sigs/agent-sandbox
// packages/sandboxd/spec/filesystem/v1/filesystem.yaml), which both upstream
// SDKs use in their sandboxd runtime mode: a directory GET is a JSON
// listing, PUT answers 204, errors are {"code","message"}. Our own additions
// (tar streams with ?format=tar or Content-Type application/x-tar, Range
// reads) keep working on the same paths.

// GetFile serves GET/HEAD /v1/files/{path}: a file's bytes (with Range
// support); a directory as a JSON listing, or as a tar stream with
// ?format=tar.
func (h *Handler) GetFile(w http.ResponseWriter, r *http.Request, arg string) {
	// Stat before Open: opening a fifo would block until a writer shows up.
	rel, fi, err := h.resolveStat(arg)
	if err != nil {
		respond.V1Fail(w, h.logOf(r), err)
		return
	}
	switch {
	case fi.IsDir() && r.URL.Query().Get("format") == "tar":
		h.writeTar(w, r, rel)
	case fi.IsDir():
		h.writeDirListing(w, arg, rel)
	case !fi.Mode().IsRegular():
		respond.V1Error(w, http.StatusBadRequest, "not a regular file")
	default:
		f, err := h.fs.Open(rel)
		if err != nil {
			respond.V1Fail(w, h.logOf(r), err)
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
func (h *Handler) writeDirListing(w http.ResponseWriter, arg, rel string) {
	f, err := h.fs.Open(rel)
	if err != nil {
		respond.V1Fail(w, h.log, err)
		return
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		respond.V1Fail(w, h.log, err)
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
			if t, err = h.fs.Resolve(p, true); err == nil {
				fi, err = h.fs.Stat(t)
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
	respond.JSON(w, http.StatusOK, out)
}

// PutFile serves PUT /v1/files/{path}: an atomic write of the raw body
// or of the multipart part "file", answered with 204; or, with Content-Type
// application/x-tar (or ?format=tar), extraction of the body under path.
func (h *Handler) PutFile(w http.ResponseWriter, r *http.Request, arg string) {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) == wire.ContentTypeTar || r.URL.Query().Get("format") == "tar" {
		h.extractTar(w, r, arg)
		return
	}
	mode, hasMode, err := parseMode(r.URL.Query().Get("mode"))
	if err != nil {
		respond.V1Fail(w, h.logOf(r), err)
		return
	}
	rel, err := h.fs.Resolve(arg, true)
	if err != nil {
		respond.V1Fail(w, h.logOf(r), err)
		return
	}
	if rel == "." {
		respond.V1Error(w, http.StatusBadRequest, "target path is a directory (the sandbox root)")
		return
	}
	switch fi, err := h.fs.Stat(rel); {
	case err == nil && fi.IsDir():
		respond.V1Error(w, http.StatusBadRequest, "target path is a directory")
		return
	case err == nil && !hasMode:
		mode = fi.Mode().Perm() // replacing a file keeps its permissions
	case !hasMode:
		mode = 0o644
	}
	body, err := fileBody(r)
	if err != nil {
		respond.V1Fail(w, h.logOf(r), err)
		return
	}
	defer body.Close()
	if err := h.fs.WriteFileAtomic(rel, body, mode); err != nil {
		respond.V1Fail(w, h.logOf(r), err)
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
		return nil, respond.BadRequest("invalid multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, respond.BadRequest(`multipart body has no "file" part`)
		}
		if err != nil {
			return nil, respond.BadRequest("invalid multipart body: %v", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
		part.Close()
	}
}

// DeleteFile serves DELETE /v1/files/{path}[?recursive=true]. A
// symlink is removed, not its target. A non-empty directory needs
// recursive (409 otherwise); the root itself is never removed, but
// recursive empties it, as upstream does.
func (h *Handler) DeleteFile(w http.ResponseWriter, r *http.Request, arg string) {
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			respond.V1Error(w, http.StatusBadRequest, fmt.Sprintf("recursive %q must be a boolean", v))
			return
		}
		recursive = b
	}
	rel, err := h.fs.Resolve(arg, false)
	if err != nil {
		respond.V1Fail(w, h.logOf(r), err)
		return
	}
	fi, err := h.fs.Lstat(rel)
	if err != nil {
		respond.V1Fail(w, h.logOf(r), err)
		return
	}
	switch {
	case rel == "." && !recursive:
		respond.V1Error(w, http.StatusConflict, "cannot delete the sandbox root; add ?recursive=true to empty it")
		return
	case rel == ".":
		err = h.emptyRoot()
	case fi.IsDir() && recursive:
		err = h.fs.RemoveAll(rel)
	default:
		err = h.fs.Remove(rel)
	}
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		respond.V1Error(w, http.StatusConflict, "directory not empty; add ?recursive=true")
		return
	}
	if err != nil {
		respond.V1Fail(w, h.logOf(r), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// emptyRoot removes everything inside the root, keeping the root (often a
// volume mount) itself.
func (h *Handler) emptyRoot() error {
	f, err := h.fs.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := h.fs.RemoveAll(n); err != nil {
			return err
		}
	}
	return nil
}
