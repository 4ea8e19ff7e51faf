// Package files serves sandboxd's file endpoints under its root: upstream
// sandboxd's /v1/files (read, atomic write, delete, directory listings, tar
// streams both ways) and our /v1/stat, /v1/list, /v1/mkdir and /v1/watch.
package files

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Handler serves the file endpoints; every path goes through its root.
type Handler struct {
	fs  *rootfs.FS
	log *slog.Logger
}

// New returns a Handler for the root fs.
func New(fs *rootfs.FS, log *slog.Logger) *Handler {
	return &Handler{fs: fs, log: log}
}

func queryBool(r *http.Request, key string) bool {
	b, _ := strconv.ParseBool(r.URL.Query().Get(key))
	return b
}

// parseMode reads ?mode=0644. Only permission bits are accepted.
func parseMode(s string) (fs.FileMode, bool, error) {
	if s == "" {
		return 0, false, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, false, respond.BadRequest("mode must be octal permission bits like 0644")
	}
	return fs.FileMode(m), true, nil
}

// fileInfo renders fi (an Lstat result for rel) for the API.
func (h *Handler) fileInfo(rel string, fi fs.FileInfo) wire.FileInfo {
	p := rootfs.Display(rel)
	out := wire.FileInfo{
		Name:      path.Base(p),
		Path:      p,
		Size:      fi.Size(),
		Mode:      fmt.Sprintf("%04o", fi.Mode().Perm()),
		ModTime:   fi.ModTime().UTC(),
		IsDir:     fi.IsDir(),
		IsSymlink: fi.Mode()&fs.ModeSymlink != 0,
	}
	if out.IsSymlink {
		out.LinkTarget, _ = h.fs.Readlink(rel)
	}
	return out
}

func (h *Handler) statInfo(rel string) (wire.FileInfo, error) {
	fi, err := h.fs.Lstat(rel)
	if err != nil {
		return wire.FileInfo{}, err
	}
	return h.fileInfo(rel, fi), nil
}

// Mkdir serves POST /v1/mkdir/{path} (mkdir -p).
func (h *Handler) Mkdir(w http.ResponseWriter, r *http.Request, arg string) {
	rel, err := h.fs.Resolve(arg, true)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	mode, hasMode, err := parseMode(r.URL.Query().Get("mode"))
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	if !hasMode {
		mode = 0o755
	}
	status := http.StatusCreated
	if fi, err := h.fs.Stat(rel); err == nil {
		if !fi.IsDir() {
			respond.Error(w, http.StatusConflict, "path exists and is not a directory")
			return
		}
		status = http.StatusOK
	} else if err := h.fs.MkdirAll(rel, mode); err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	if hasMode && status == http.StatusCreated {
		_ = h.fs.Chmod(rel, mode) // MkdirAll is subject to the umask
	}
	info, err := h.statInfo(rel)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	respond.JSON(w, status, info)
}

// Stat serves GET /v1/stat/{path}; it describes a symlink itself.
func (h *Handler) Stat(w http.ResponseWriter, r *http.Request, arg string) {
	rel, err := h.fs.Resolve(arg, false)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	info, err := h.statInfo(rel)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	respond.JSON(w, http.StatusOK, info)
}

// List serves GET /v1/list/{path}[?recursive=true]. Symlinked
// directories below path are listed as links, not descended into.
func (h *Handler) List(w http.ResponseWriter, r *http.Request, arg string) {
	rel, fi, err := h.resolveStat(arg)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	if !fi.IsDir() {
		respond.Error(w, http.StatusBadRequest, "not a directory")
		return
	}
	entries := []wire.FileInfo{}
	recursive := queryBool(r, "recursive")
	err = fs.WalkDir(h.fs.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			return nil // unreadable subdirectory: list what we can
		}
		if p == rel {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // vanished meanwhile
		}
		entries = append(entries, h.fileInfo(p, info))
		if d.IsDir() && !recursive {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	slices.SortFunc(entries, func(a, b wire.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	respond.JSON(w, http.StatusOK, wire.ListResponse{Entries: entries})
}

// resolveStat resolves a request path (following symlinks inside the root) and stats it.
func (h *Handler) resolveStat(arg string) (string, fs.FileInfo, error) {
	rel, err := h.fs.Resolve(arg, true)
	if err != nil {
		return "", nil, err
	}
	fi, err := h.fs.Stat(rel)
	if err != nil {
		return "", nil, err
	}
	return rel, fi, nil
}

// logOf is the request's logger (sandboxd's ServeHTTP puts one naming the request in its
// context), else the handler's.
func (h *Handler) logOf(r *http.Request) *slog.Logger {
	return logging.FromContext(r.Context(), h.log)
}
