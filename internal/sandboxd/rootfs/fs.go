package rootfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ErrParentNotDir is returned when a file cannot be created because a
// component of its parent path is not a directory.
var ErrParentNotDir = errors.New("a parent of the path is not a directory")

// ReadError is a failure to read the content being written (the request
// body), as opposed to a failure of the file system; it is the client's fault.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "reading request body: " + e.Err.Error() }

// FS is the sandbox root: every file operation goes through its os.Root, and
// client paths reach it through Resolve.
type FS struct {
	*os.Root
	res Resolver
}

// Open creates dir if needed and opens it as the root. Its real path (with
// every symlink resolved) becomes the root the resolver compares against.
func Open(dir string) (*FS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create root: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	// The resolver compares real paths, so the root itself must be one.
	realDir, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	root, err := os.OpenRoot(realDir)
	if err != nil {
		return nil, fmt.Errorf("open root: %w", err)
	}
	return &FS{Root: root, res: NewResolver(realDir)}, nil
}

// Dir is the root directory's real path.
func (f *FS) Dir() string { return f.res.root }

// Resolver returns the resolver of client paths onto this root.
func (f *FS) Resolver() Resolver { return f.res }

// Resolve maps a client path onto the root; see Resolver.Resolve.
func (f *FS) Resolve(p string, followFinal bool) (string, error) {
	return f.res.Resolve(p, followFinal)
}

// RelOf turns an absolute path under the root into a root-relative one; a
// path elsewhere is returned as is.
func (f *FS) RelOf(abs string) string {
	rel, err := filepath.Rel(f.res.root, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return abs
	}
	return rel
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyBuffered streams src to dst through a pooled buffer, so large uploads
// never sit in memory whole.
func copyBuffered(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	return io.CopyBuffer(dst, src, *bp)
}

// WriteFileAtomic streams src into a temporary file next to rel and renames
// it into place, so readers see the old content or the new, never a part.
// Missing parent directories are created. Renaming also replaces a symlink
// at rel instead of writing through it. A failure to read src is a
// *ReadError.
func (f *FS) WriteFileAtomic(rel string, src io.Reader, mode fs.FileMode) error {
	dir := filepath.Dir(rel)
	if err := f.MkdirParents(dir); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".sandboxd-"+randomHex(6)+".tmp")
	file, err := f.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = file.Close() // already failing; the temporary file goes too
			_ = f.Remove(tmp)
		}
	}()
	if _, err := copyBuffered(file, src); err != nil {
		return &ReadError{Err: err}
	}
	if err := file.Chmod(mode); err != nil { // exact mode, regardless of umask
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	if err := f.Rename(tmp, rel); err != nil {
		return err
	}
	ok = true
	return nil
}

// MkdirParents is MkdirAll with ErrParentNotDir when a component is a file.
func (f *FS) MkdirParents(dir string) error {
	err := f.MkdirAll(dir, 0o755)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
		return ErrParentNotDir
	}
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
