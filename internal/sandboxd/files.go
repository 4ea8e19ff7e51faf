package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyBuffered streams src to dst through a pooled buffer, so large uploads
// and downloads never sit in memory whole.
func copyBuffered(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	return io.CopyBuffer(dst, src, *bp)
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
		return 0, false, badRequest("mode must be octal permission bits like 0644")
	}
	return fs.FileMode(m), true, nil
}

// fileInfo renders fi (an Lstat result for rel) for the API.
func (s *Server) fileInfo(rel string, fi fs.FileInfo) wire.FileInfo {
	p := displayPath(rel)
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
		out.LinkTarget, _ = s.root.Readlink(rel)
	}
	return out
}

func (s *Server) statInfo(rel string) (wire.FileInfo, error) {
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return wire.FileInfo{}, err
	}
	return s.fileInfo(rel, fi), nil
}

// writeFileAtomic streams src into a temporary file next to rel and renames
// it into place, so readers see the old content or the new, never a part.
// Missing parent directories are created. Renaming also replaces a symlink
// at rel instead of writing through it.
func (s *Server) writeFileAtomic(rel string, src io.Reader, mode fs.FileMode) error {
	dir := filepath.Dir(rel)
	if err := s.mkdirParents(dir); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".sandboxd-"+randomHex(6)+".tmp")
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			_ = s.root.Remove(tmp)
		}
	}()
	if _, err := copyBuffered(f, src); err != nil {
		return &apiError{http.StatusBadRequest, "reading request body: " + err.Error()}
	}
	if err := f.Chmod(mode); err != nil { // exact mode, regardless of umask
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := s.root.Rename(tmp, rel); err != nil {
		return err
	}
	ok = true
	return nil
}

// mkdirParents is MkdirAll with a clear error when a component is a file.
func (s *Server) mkdirParents(dir string) error {
	err := s.root.MkdirAll(dir, 0o755)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
		return &apiError{http.StatusConflict, "a parent of the path is not a directory"}
	}
	return err
}

// handleMkdir serves POST /v1/mkdir/{path} (mkdir -p).
func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request, arg string) {
	rel, err := s.res.resolve(arg, true)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	mode, hasMode, err := parseMode(r.URL.Query().Get("mode"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if !hasMode {
		mode = 0o755
	}
	status := http.StatusCreated
	if fi, err := s.root.Stat(rel); err == nil {
		if !fi.IsDir() {
			writeError(w, http.StatusConflict, "path exists and is not a directory")
			return
		}
		status = http.StatusOK
	} else if err := s.root.MkdirAll(rel, mode); err != nil {
		s.writeErr(w, err)
		return
	}
	if hasMode && status == http.StatusCreated {
		_ = s.root.Chmod(rel, mode) // MkdirAll is subject to the umask
	}
	info, err := s.statInfo(rel)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, status, info)
}

// handleStat serves GET /v1/stat/{path}; it describes a symlink itself.
func (s *Server) handleStat(w http.ResponseWriter, r *http.Request, arg string) {
	rel, err := s.res.resolve(arg, false)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	info, err := s.statInfo(rel)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// handleList serves GET /v1/list/{path}[?recursive=true]. Symlinked
// directories below path are listed as links, not descended into.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request, arg string) {
	rel, fi, err := s.resolveStat(arg)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if !fi.IsDir() {
		writeError(w, http.StatusBadRequest, "not a directory")
		return
	}
	entries := []wire.FileInfo{}
	recursive := queryBool(r, "recursive")
	err = fs.WalkDir(s.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
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
		s.writeErr(w, err)
		return
	}
	slices.SortFunc(entries, func(a, b wire.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	writeJSON(w, http.StatusOK, wire.ListResponse{Entries: entries})
}

// resolveStat resolves a request path (following symlinks inside the root) and stats it.
func (s *Server) resolveStat(arg string) (string, fs.FileInfo, error) {
	rel, err := s.res.resolve(arg, true)
	if err != nil {
		return "", nil, err
	}
	fi, err := s.root.Stat(rel)
	if err != nil {
		return "", nil, err
	}
	return rel, fi, nil
}
