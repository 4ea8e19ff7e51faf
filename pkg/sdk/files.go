package sdk

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Files moves files in and out of a sandbox. With sandboxd, paths are
// relative to the sandbox root (/workspace); a leading "/" also means the
// root and paths cannot leave it. In ModeExec, paths are the container's
// (relative ones below Options.ExecRoot when set).
type Files struct{ s *Sandbox }

// Files returns the sandbox's file API.
func (s *Sandbox) Files() *Files { return &Files{s: s} }

// Read returns a file's content.
func (f *Files) Read(ctx context.Context, p string) ([]byte, error) {
	rc, err := f.ReadStream(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// ReadStream opens a file for reading; the caller closes it.
func (f *Files) ReadStream(ctx context.Context, p string) (io.ReadCloser, error) {
	return f.s.tr.readFile(ctx, p)
}

// Write replaces (atomically, with sandboxd) or creates a file, creating
// missing parent directories. perm 0 keeps an existing file's permissions
// and gives a new one 0644.
func (f *Files) Write(ctx context.Context, p string, data []byte, perm fs.FileMode) error {
	return f.s.tr.writeFile(ctx, p, bytes.NewReader(data), perm)
}

// WriteStream writes a file from r, streaming; see Write.
func (f *Files) WriteStream(ctx context.Context, p string, r io.Reader, perm fs.FileMode) error {
	return f.s.tr.writeFile(ctx, p, r, perm)
}

// Remove deletes a file, a symlink, or a directory: an empty one, or with
// recursive set any one. A missing path gives an error matching ErrNotFound.
func (f *Files) Remove(ctx context.Context, p string, recursive bool) error {
	return f.s.tr.remove(ctx, p, recursive)
}

// Mkdir creates a directory and its missing parents (mkdir -p); perm 0
// means 0755.
func (f *Files) Mkdir(ctx context.Context, p string, perm fs.FileMode) error {
	return f.s.tr.mkdir(ctx, p, perm)
}

// Stat describes a path (a symlink itself, not its target).
func (f *Files) Stat(ctx context.Context, p string) (*FileInfo, error) { return f.s.tr.stat(ctx, p) }

// Exists reports whether a path exists.
func (f *Files) Exists(ctx context.Context, p string) (bool, error) {
	_, err := f.Stat(ctx, p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// List returns the entries of a directory, or of its whole tree with
// recursive set, sorted by path. Symlinked directories are not descended.
func (f *Files) List(ctx context.Context, p string, recursive bool) ([]FileInfo, error) {
	return f.s.tr.list(ctx, p, recursive)
}

// Watch streams file system events under p (and below, with recursive)
// until ctx ends, when the channel is closed. Changes made after Watch
// returns are reported. Not available in ModeExec.
func (f *Files) Watch(ctx context.Context, p string, recursive bool) (<-chan Event, error) {
	return f.s.tr.watch(ctx, p, recursive)
}

// UploadFile copies a local file to remotePath.
func (f *Files) UploadFile(ctx context.Context, localPath, remotePath string) error {
	lf, err := os.Open(localPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	fi, err := lf.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory; use UploadDir", localPath)
	}
	return f.WriteStream(ctx, remotePath, lf, fi.Mode().Perm())
}

// DownloadFile copies remotePath to a local file, replacing it atomically.
func (f *Files) DownloadFile(ctx context.Context, remotePath, localPath string) error {
	rc, err := f.ReadStream(ctx, remotePath)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(localPath), "."+filepath.Base(localPath)+".sbx-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, rc); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), localPath)
}

// UploadDir copies the contents of localDir into remoteDir (created if
// needed) as one tar stream: files, directories and symlinks (stored as
// links, never followed), with their permissions and times.
func (f *Files) UploadDir(ctx context.Context, localDir, remoteDir string) error {
	fi, err := os.Stat(localDir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", localDir)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := writeTar(localDir, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	err = f.s.tr.putTar(ctx, remoteDir, pr)
	pr.CloseWithError(errors.New("upload ended")) // unblock the writer if the upload stopped early
	if werr := <-done; werr != nil && err == nil {
		err = werr
	}
	return err
}

// DownloadDir copies the contents of remoteDir into localDir (created if
// needed). Entries that would land outside localDir (absolute names, "..",
// symlinks pointing out, writes through symlinks) are refused with an error
// matching ErrUnsafePath; what was extracted before stays.
func (f *Files) DownloadDir(ctx context.Context, remoteDir, localDir string) error {
	rc, err := f.s.tr.getTar(ctx, remoteDir)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return err
	}
	return ExtractTar(rc, localDir)
}

// writeTar writes the tree under dir to w; names are relative to dir.
func writeTar(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.IsDir(), info.Mode().IsRegular():
		default:
			return nil // sockets, devices and fifos do not travel
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		lf, err := os.Open(p)
		if err != nil {
			return err
		}
		defer lf.Close()
		_, err = io.CopyN(tw, lf, hdr.Size)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// ExtractTar extracts a tar stream into dir, which must exist, refusing
// anything that would be written outside it: absolute or ".." entry names,
// symlinks whose target leaves dir, and writes through symlinks that do
// (dir is opened as an os.Root). The error matches ErrUnsafePath.
func ExtractTar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var dirs []tarDir
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading tar: %w", err)
		}
		name, err := safeEntryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if err := extractEntry(root, tr, name, hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeDir {
			dirs = append(dirs, tarDir{name, hdr})
		}
	}
	// Directories get their modes and times last, deepest first: extracting into them changed both.
	for _, d := range slices.Backward(dirs) {
		_ = root.Chmod(d.name, d.hdr.FileInfo().Mode().Perm()|0o700)
		_ = root.Chtimes(d.name, d.hdr.ModTime, d.hdr.ModTime)
	}
	return nil
}

// tarDir is a directory entry that was extracted, for its mode and times.
type tarDir struct {
	name string
	hdr  *tar.Header
}

// extractEntry creates the entry hdr at name (already made safe) inside root; the contents of a
// regular file are read from tr.
func extractEntry(root *os.Root, tr io.Reader, name string, hdr *tar.Header) error {
	switch hdr.Typeflag {
	case tar.TypeDir:
		return rootErr(root.MkdirAll(name, 0o755), hdr.Name)
	case tar.TypeReg:
		return extractFile(root, tr, name, hdr)
	case tar.TypeSymlink:
		return extractSymlink(root, name, hdr)
	case tar.TypeLink:
		return extractHardLink(root, name, hdr)
	default:
		return nil // devices, fifos: not ours to create
	}
}

func extractFile(root *os.Root, tr io.Reader, name string, hdr *tar.Header) error {
	if err := prepare(root, name, hdr.Name); err != nil {
		return err
	}
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return rootErr(err, hdr.Name)
	}
	_, err = io.Copy(out, tr)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	_ = root.Chmod(name, hdr.FileInfo().Mode().Perm())
	_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	return nil
}

func extractSymlink(root *os.Root, name string, hdr *tar.Header) error {
	target := hdr.Linkname
	if path.IsAbs(target) || escapes(path.Join(path.Dir(name), target)) {
		return fmt.Errorf("tar entry %q: symlink to %q leaves the destination: %w", hdr.Name, target, ErrUnsafePath)
	}
	if err := prepare(root, name, hdr.Name); err != nil {
		return err
	}
	return rootErr(root.Symlink(target, name), hdr.Name)
}

func extractHardLink(root *os.Root, name string, hdr *tar.Header) error {
	old, err := safeEntryName(hdr.Linkname)
	if err != nil {
		return err
	}
	if err := prepare(root, name, hdr.Name); err != nil {
		return err
	}
	return rootErr(root.Link(old, name), hdr.Name)
}

// safeEntryName cleans a tar entry name to a relative path inside the
// destination ("." for the destination itself).
func safeEntryName(name string) (string, error) {
	n := strings.ReplaceAll(name, "\\", "/")
	if path.IsAbs(n) || strings.Contains(n, "\x00") {
		return "", fmt.Errorf("tar entry %q: absolute path: %w", name, ErrUnsafePath)
	}
	c := path.Clean(n)
	if escapes(c) {
		return "", fmt.Errorf("tar entry %q: leaves the destination: %w", name, ErrUnsafePath)
	}
	return c, nil
}

func escapes(clean string) bool {
	return clean == ".." || strings.HasPrefix(clean, "../")
}

// prepare creates the parent of name and removes a non-directory already at
// name, so that a file never gets written through an existing symlink.
func prepare(root *os.Root, name, entry string) error {
	if dir := path.Dir(name); dir != "." {
		if err := rootErr(root.MkdirAll(dir, 0o755), entry); err != nil {
			return err
		}
	}
	if fi, err := root.Lstat(name); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("tar entry %q: a directory is in the way", entry)
		}
		if err := root.Remove(name); err != nil {
			return rootErr(err, entry)
		}
	}
	return nil
}

// rootErr marks os.Root's refusal to leave the directory as ErrUnsafePath.
func rootErr(err error, entry string) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("tar entry %q: %w: %v", entry, ErrUnsafePath, err)
	}
	return fmt.Errorf("tar entry %q: %w", entry, err)
}
