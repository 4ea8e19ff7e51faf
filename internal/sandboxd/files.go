package sandboxd

import (
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

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
func (s *Server) fileInfo(rel string, fi fs.FileInfo) wire.FileInfo {
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
		out.LinkTarget, _ = s.fs.Readlink(rel)
	}
	return out
}

func (s *Server) statInfo(rel string) (wire.FileInfo, error) {
	fi, err := s.fs.Lstat(rel)
	if err != nil {
		return wire.FileInfo{}, err
	}
	return s.fileInfo(rel, fi), nil
}

// handleMkdir serves POST /v1/mkdir/{path} (mkdir -p).
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request, arg string) {
	rel, err := s.fs.Resolve(arg, true)
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	mode, hasMode, err := parseMode(r.URL.Query().Get("mode"))
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	if !hasMode {
		mode = 0o755
	}
	status := http.StatusCreated
	if fi, err := s.fs.Stat(rel); err == nil {
		if !fi.IsDir() {
			respond.Error(w, http.StatusConflict, "path exists and is not a directory")
			return
		}
		status = http.StatusOK
	} else if err := s.fs.MkdirAll(rel, mode); err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	if hasMode && status == http.StatusCreated {
		_ = s.fs.Chmod(rel, mode) // MkdirAll is subject to the umask
	}
	info, err := s.statInfo(rel)
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	respond.JSON(w, status, info)
}

// handleStat serves GET /v1/stat/{path}; it describes a symlink itself.
func (s *Server) handleStat(w http.ResponseWriter, r *http.Request, arg string) {
	rel, err := s.fs.Resolve(arg, false)
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	info, err := s.statInfo(rel)
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	respond.JSON(w, http.StatusOK, info)
}

// handleList serves GET /v1/list/{path}[?recursive=true]. Symlinked
// directories below path are listed as links, not descended into.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request, arg string) {
	rel, fi, err := s.resolveStat(arg)
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	if !fi.IsDir() {
		respond.Error(w, http.StatusBadRequest, "not a directory")
		return
	}
	entries := []wire.FileInfo{}
	recursive := queryBool(r, "recursive")
	err = fs.WalkDir(s.fs.FS(), rel, func(p string, d fs.DirEntry, err error) error {
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
		entries = append(entries, s.fileInfo(p, info))
		if d.IsDir() && !recursive {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		respond.Fail(w, s.log, err)
		return
	}
	slices.SortFunc(entries, func(a, b wire.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	respond.JSON(w, http.StatusOK, wire.ListResponse{Entries: entries})
}

// resolveStat resolves a request path (following symlinks inside the root) and stats it.
func (s *Server) resolveStat(arg string) (string, fs.FileInfo, error) {
	rel, err := s.fs.Resolve(arg, true)
	if err != nil {
		return "", nil, err
	}
	fi, err := s.fs.Stat(rel)
	if err != nil {
		return "", nil, err
	}
	return rel, fi, nil
}
