package images

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Standard-library parts a sandbox does not need: tests, GUI, the static library for
// embedding, pip bootstrap.
var pythonSkip = map[string]bool{
	"test": true, "tests": true, "idlelib": true, "tkinter": true, "turtledemo": true,
	"ensurepip": true, "config-3.11-x86_64-linux-gnu": true, "EXTERNALLY-MANAGED": true,
}

// ErrNoPython means the host has no python3 to copy into an image.
var ErrNoPython = errors.New("no python3 on this machine (apt-get install python3)")

// Python returns the files that put the host's Debian python3 into an image: the interpreter,
// its standard library (with compiled bytecode), and every shared library the interpreter and
// its extension modules load, found with ldd, at the paths the loader looks for them.
func Python() ([]File, error) {
	interp, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		return nil, ErrNoPython
	}
	version := filepath.Base(interp) // python3.11
	stdlib := filepath.Join("/usr/lib", version)
	files := []File{
		{Path: interp, Mode: 0o755, Src: interp},
		{Path: "/usr/bin/python3", Link: version},
		{Path: "/usr/bin/python", Link: version},
	}
	elves := []string{interp}
	err = filepath.WalkDir(stdlib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if pythonSkip[d.Name()] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		f, err := hostFile(p, d)
		if err != nil {
			return err
		}
		files = append(files, f)
		if strings.HasSuffix(p, ".so") && d.Type().IsRegular() {
			elves = append(elves, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	libs, err := sharedLibs(elves)
	if err != nil {
		return nil, err
	}
	for _, lib := range libs {
		target, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: lib, Mode: 0o755, Src: target})
	}
	return files, nil
}

// hostFile copies a regular file or symlink of the host as it is.
func hostFile(p string, d fs.DirEntry) (File, error) {
	if d.Type()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		return File{Path: p, Link: target}, err
	}
	info, err := d.Info()
	if err != nil {
		return File{}, err
	}
	return File{Path: p, Mode: info.Mode().Perm(), Src: p}, nil
}

var lddLine = regexp.MustCompile(`(?m)^\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$`)

// sharedLibs lists the absolute library paths ldd reports for the given ELF files, including
// the dynamic loader itself.
func sharedLibs(elves []string) ([]string, error) {
	seen := map[string]bool{}
	for _, e := range elves {
		out, err := exec.Command("ldd", e).Output()
		if err != nil {
			continue // not dynamic, or not an ELF
		}
		for _, m := range lddLine.FindAllStringSubmatch(string(out), -1) {
			seen[m[1]] = true
		}
	}
	if len(seen) == 0 {
		return nil, errors.New("ldd found no shared libraries for python3")
	}
	libs := make([]string, 0, len(seen))
	for l := range seen {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return libs, nil
}
