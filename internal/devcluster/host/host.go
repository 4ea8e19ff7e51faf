// Package host is the machine as the local cluster changes it: sysctls, commands such as
// iptables, nft and ip, mounts and a few paths outside the state dir. Everything that reads or
// changes the host goes through Host, so that the steps that record and restore it can be tested
// against a fake (hosttest.Fake) by any user, without touching the machine.
package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Entry is one entry of a directory.
type Entry struct {
	Name string
	Dir  bool
}

// Host reads and changes the machine.
type Host interface {
	// Run runs a short command and returns its standard output; a failure's error carries the
	// command and its combined output.
	Run(name string, args ...string) (string, error)
	// Has reports whether a command is installed.
	Has(name string) bool
	ReadFile(path string) ([]byte, error)
	WriteFile(path string, data []byte) error
	// Exists reports whether path exists, without following a last symlink.
	Exists(path string) bool
	ReadDir(path string) ([]Entry, error)
	MkdirAll(path string) error
	RemoveAll(path string) error
	// Remove removes a file or an empty directory.
	Remove(path string) error
	Mount(source, target, fstype string, flags uintptr) error
	Unmount(target string, flags int) error
}

// Real is this machine.
type Real struct{}

var _ Host = Real{}

func (Real) Run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err,
			strings.TrimSpace(string(out)+stderr.String()))
	}
	return string(out), nil
}

func (Real) Has(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func (Real) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (Real) WriteFile(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

func (Real) Exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func (Real) ReadDir(path string) ([]Entry, error) {
	entries, err := os.ReadDir(path)
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		out = append(out, Entry{Name: e.Name(), Dir: e.IsDir()})
	}
	return out, err
}

func (Real) MkdirAll(path string) error { return os.MkdirAll(path, 0o755) }

func (Real) RemoveAll(path string) error { return os.RemoveAll(path) }

func (Real) Remove(path string) error { return os.Remove(path) }

func (Real) Mount(source, target, fstype string, flags uintptr) error {
	return syscall.Mount(source, target, fstype, flags, "")
}

func (Real) Unmount(target string, flags int) error { return syscall.Unmount(target, flags) }

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	Point  string
	FSType string
}

// Mounts lists the mount points of the host.
func Mounts(h Host) []Mount {
	data, err := h.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []Mount
	for _, l := range strings.Split(string(data), "\n") {
		pre, post, _ := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 {
			continue
		}
		m := Mount{Point: strings.ReplaceAll(f[4], `\040`, " ")}
		if len(g) > 0 {
			m.FSType = g[0]
		}
		out = append(out, m)
	}
	return out
}

// IsMountPoint reports whether path is a mount point, of type fstype unless that is empty.
func IsMountPoint(h Host, path, fstype string) bool {
	for _, m := range Mounts(h) {
		if m.Point == path && (fstype == "" || m.FSType == fstype) {
			return true
		}
	}
	return false
}

// MountsUnder lists mount points at or below dir, deepest first.
func MountsUnder(h Host, dir string) []string {
	var out []string
	for _, m := range Mounts(h) {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// UnmountAll unmounts everything at or below dir, detaching what a plain unmount refuses.
func UnmountAll(h Host, dir string) error {
	var errs []error
	// Repeat: a path can be mounted over more than once.
	for round := 0; round < 5; round++ {
		mps := MountsUnder(h, dir)
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := h.Unmount(mp, 0); err != nil {
				if err2 := h.Unmount(mp, syscall.MNT_DETACH); err2 != nil && round == 4 {
					errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err2))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// SysctlPath is the /proc/sys file of a sysctl named with slashes (net/ipv4/ip_forward).
func SysctlPath(name string) string { return filepath.Join("/proc/sys", name) }

// ReadSysctl reads a sysctl; false when this kernel has no such setting.
func ReadSysctl(h Host, name string) (string, bool) {
	b, err := h.ReadFile(SysctlPath(name))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// WriteSysctl sets a sysctl unless it already has that value.
func WriteSysctl(h Host, name, val string) error {
	if cur, ok := ReadSysctl(h, name); ok && cur == val {
		return nil
	}
	if err := h.WriteFile(SysctlPath(name), []byte(val+"\n")); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(name, "/", "."), val, err)
	}
	return nil
}

// RemoveTree removes a directory tree of directories only, deepest first: cgroupfs refuses to
// remove the control files, and removing a cgroup directory takes them along.
func RemoveTree(h Host, dir string) error {
	var dirs []string
	var walk func(string)
	walk = func(d string) {
		dirs = append(dirs, d)
		entries, _ := h.ReadDir(d)
		for _, e := range entries {
			if e.Dir {
				walk(filepath.Join(d, e.Name))
			}
		}
	}
	if !h.Exists(dir) {
		return nil
	}
	walk(dir)
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := h.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}
