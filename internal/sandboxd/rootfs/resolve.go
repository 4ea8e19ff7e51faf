// Package rootfs confines sandboxd's file access to its root directory: it
// maps client paths onto the root, refusing any that would leave it, and
// writes files there atomically through an os.Root.
package rootfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Path errors returned by the resolver. Handlers map ErrEscape to 403 and
// ErrInvalidPath to 400.
var (
	ErrEscape      = errors.New("path escapes the sandbox root")
	ErrInvalidPath = errors.New("invalid path")
)

// maxSymlinks matches the Linux limit on symlinks followed in one lookup.
const maxSymlinks = 40

// Resolver maps client paths onto the sandbox root.
type Resolver struct {
	root string
}

// NewResolver returns a Resolver for root, which must be absolute, clean and
// free of symlinks (Open guarantees that).
func NewResolver(root string) Resolver { return Resolver{root: root} }

// Root is the root directory's real path.
func (r Resolver) Root() string { return r.root }

// CleanRel turns a client path into a slash-separated path relative to the
// root with no ".", ".." or empty components; "" names the root. A leading
// "/" means root-relative. ".." that would climb above the root is refused
// rather than clamped, so a client learns that its path was wrong.
func CleanRel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", ErrInvalidPath
	}
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(out) == 0 {
				return "", ErrEscape
			}
			out = out[:len(out)-1]
		default:
			out = append(out, c)
		}
	}
	return strings.Join(out, "/"), nil
}

// Resolve returns the location p names, relative to the root ("." for the
// root itself), with every symlink among the existing components replaced by
// its target, the way the kernel would follow it. When followFinal is false
// the last component is kept as is (stat, delete and list act on a link, not
// on what it points to). The result never contains a symlink except possibly
// that last component, so the kernel cannot reinterpret it; and it is refused
// with errEscape unless it lies inside the root. File operations still go
// through os.Root, which closes the window between this check and the use.
func (r Resolver) Resolve(p string, followFinal bool) (string, error) {
	rel, err := CleanRel(p)
	if err != nil {
		return "", err
	}
	if rel == "" {
		return ".", nil
	}
	comps := strings.Split(rel, "/")
	cur := r.root
	links := 0
	missing := false // once a component is missing, nothing below it exists
	for i := 0; i < len(comps); i++ {
		c := comps[i]
		switch c {
		case "", ".":
			continue
		case "..": // only symlink targets bring these back in
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		if missing || (i == len(comps)-1 && !followFinal) {
			cur = next
			continue
		}
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				missing = true
				cur = next
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		links++
		if links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		// Walk the target's components next, then the rest of the path.
		rest := comps[i+1:]
		comps = append(strings.Split(target, "/"), rest...)
		i = -1
	}
	if !within(r.root, cur) {
		return "", ErrEscape
	}
	out, err := filepath.Rel(r.root, cur)
	if err != nil {
		return "", ErrEscape
	}
	return out, nil
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// Display renders an os.Root-relative path the way the API reports it.
func Display(rel string) string {
	if rel == "" {
		return "."
	}
	return filepath.ToSlash(rel)
}

// IsRootEscape recognises os.Root's own refusal, which only happens when a
// path changed under us between Resolve and use.
func IsRootEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
