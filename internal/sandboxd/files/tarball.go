package files

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
)

// writeTar streams the directory rel as a tar archive whose entry names are
// relative to rel. Symlinks are stored as links and never followed, so the
// archive cannot leak anything outside the root.
func (h *Handler) writeTar(w http.ResponseWriter, r *http.Request, rel string) {
	w.Header().Set("Content-Type", "application/x-tar")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	tw := tar.NewWriter(w)
	err := fs.WalkDir(h.fs.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			h.log.Warn("tar: skipping unreadable entry", "path", p, "error", err)
			return nil
		}
		if p == rel {
			return nil
		}
		name := p
		if rel != "." {
			name = strings.TrimPrefix(p, rel+"/")
		}
		return h.addTarEntry(tw, p, name, d)
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		// The status line is gone; cut the stream so the client sees a
		// broken archive rather than a silently short one.
		h.log.Error("tar download failed", "path", rel, "error", err)
		panic(http.ErrAbortHandler)
	}
}

func (h *Handler) addTarEntry(tw *tar.Writer, p, name string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return nil // vanished meanwhile
	}
	link := ""
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		if link, err = h.fs.Readlink(p); err != nil {
			return nil
		}
	case info.IsDir(), info.Mode().IsRegular():
	default:
		return nil // sockets, fifos and devices do not travel
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	hdr.Name = filepath.ToSlash(name)
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := h.fs.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	// Copy exactly the size announced in the header, even if the file grows.
	_, err = io.CopyN(tw, f, hdr.Size)
	return err
}

// extractTar serves PUT /v1/files/{path} with a tar body: entries are
// extracted under path (created if needed). Entry names that climb out of
// path, or resolve outside the root through a symlink (including one made by
// an earlier entry of the same archive), are refused with 400; entries
// extracted before the bad one stay.
func (h *Handler) extractTar(w http.ResponseWriter, r *http.Request, arg string) {
	dest, err := h.fs.Resolve(arg, true)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	if err := h.fs.MkdirAll(dest, 0o755); err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	if err := h.untar(tar.NewReader(r.Body), dest); err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	info, err := h.statInfo(dest)
	if err != nil {
		respond.Fail(w, h.logOf(r), err)
		return
	}
	respond.JSON(w, http.StatusOK, info)
}

type dirMeta struct {
	rel   string
	mode  fs.FileMode
	mtime time.Time
}

func (h *Handler) untar(tr *tar.Reader, dest string) error {
	var dirs []dirMeta
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return respond.BadRequest("reading tar: %v", err)
		}
		target, err := h.tarTarget(dest, hdr.Name)
		if err != nil {
			return err
		}
		mode := hdr.FileInfo().Mode().Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := h.fs.MkdirAll(target, 0o755); err != nil {
				return err
			}
			if target != dest { // leave the destination's own mode alone
				dirs = append(dirs, dirMeta{target, mode, hdr.ModTime})
			}
		case tar.TypeReg: // tar.Reader turns the old TypeRegA into TypeReg (or TypeDir)
			if err := h.fs.WriteFileAtomic(target, tr, mode); err != nil {
				return err
			}
			_ = h.fs.Chtimes(target, hdr.ModTime, hdr.ModTime)
		case tar.TypeSymlink:
			// The link may point anywhere: every later use of it goes
			// through the resolver, which refuses to follow it out.
			if err := h.replaceWith(target, func() error { return h.fs.Symlink(hdr.Linkname, target) }); err != nil {
				return err
			}
		case tar.TypeLink:
			old, err := h.tarTarget(dest, hdr.Linkname)
			if err != nil {
				return err
			}
			if err := h.replaceWith(target, func() error { return h.fs.Link(old, target) }); err != nil {
				return err
			}
		default:
			// Devices, fifos and the like are not ours to create.
		}
	}
	// Directory modes and times last: a read-only directory must not stop
	// its own entries from being written, and writing bumps mtimes.
	for _, d := range slices.Backward(dirs) {
		_ = h.fs.Chmod(d.rel, d.mode)
		_ = h.fs.Chtimes(d.rel, d.mtime, d.mtime)
	}
	return nil
}

// tarTarget maps an entry name to a root-relative path under dest. A leading
// "/" is dropped, as tar(1) does.
func (h *Handler) tarTarget(dest, name string) (string, error) {
	clean, err := rootfs.CleanRel(strings.TrimLeft(name, "/"))
	if err != nil {
		return "", respond.Errorf(http.StatusBadRequest, "tar entry %q: %v", name, err)
	}
	if clean == "" {
		return dest, nil
	}
	target, err := h.fs.Resolve(path.Join(filepath.ToSlash(dest), clean), false)
	if err != nil {
		return "", respond.Errorf(http.StatusBadRequest, "tar entry %q: %v", name, err)
	}
	return target, nil
}

// replaceWith removes whatever non-directory sits at target, creates the
// parent, then runs create.
func (h *Handler) replaceWith(target string, create func() error) error {
	if err := h.fs.MkdirParents(filepath.Dir(target)); err != nil {
		return err
	}
	if fi, err := h.fs.Lstat(target); err == nil {
		if fi.IsDir() {
			return respond.Errorf(http.StatusConflict, "%s: is a directory", rootfs.Display(target))
		}
		if err := h.fs.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return create()
}
