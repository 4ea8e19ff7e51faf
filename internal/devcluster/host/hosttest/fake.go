// Package hosttest is an in-memory host.Host: files and directories, mounts, iptables tables,
// links, routes, nft tables and network namespaces, changed by the same commands the local
// cluster runs (iptables, ip, nft, modprobe), so that tests can check that a step leaves the
// host exactly as it found it.
package hosttest

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
)

// Link is a network interface of the fake host.
type Link struct {
	Kind  string
	Up    bool
	Addrs []string
}

// Fake is an in-memory host. The zero value is unusable: use New.
type Fake struct {
	mu     sync.Mutex
	files  map[string]string
	dirs   map[string]bool
	mounts []host.Mount
	// tables: "iptables/filter" -> chain -> rules (the arguments after -A <chain>).
	tables  map[string]map[string][]string
	builtin map[string]bool // built-in chains (FORWARD...), listed with -P
	links   map[string]*Link
	routes  map[string]string // destination -> "dev X ..." line
	nft     map[string][]string
	bins    map[string]bool
	// Calls is every command run, one line each.
	Calls []string
	// FailOn makes a command fail when its line starts with a key; "mount <target>" makes
	// mounting there fail.
	FailOn map[string]error
	// OnRun lets a test add behaviour for a command the fake does not model (cilium-dbg): it
	// is called with the fake locked released, and its result is returned when handled.
	OnRun func(f *Fake, name string, args []string) (out string, handled bool, err error)
}

var _ host.Host = (*Fake)(nil)

// New is a host with an uplink (eth0 holding the default route), the iptables and ip6tables
// tables with their built-in chains, and /proc/sys and /sys/fs/cgroup hierarchies present.
func New() *Fake {
	f := &Fake{
		files: map[string]string{}, dirs: map[string]bool{"/": true},
		tables: map[string]map[string][]string{}, builtin: map[string]bool{},
		links:  map[string]*Link{"lo": {Kind: "loopback", Up: true}, "eth0": {Kind: "ether", Up: true, Addrs: []string{"172.16.0.2/24"}}},
		routes: map[string]string{"default": "default via 172.16.0.1 dev eth0"},
		nft:    map[string][]string{},
		bins:   map[string]bool{"iptables": true, "ip6tables": true, "ip": true, "nft": true, "modprobe": true},
		FailOn: map[string]error{},
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for t, chains := range map[string][]string{
			"filter": {"INPUT", "FORWARD", "OUTPUT"}, "nat": {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
			"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}, "raw": {"PREROUTING", "OUTPUT"},
		} {
			key := bin + "/" + t
			f.tables[key] = map[string][]string{}
			for _, c := range chains {
				f.tables[key][c] = nil
				f.builtin[key+"/"+c] = true
			}
		}
	}
	for _, d := range []string{"/proc/sys/net/ipv4/conf/all", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu", "/sys/fs/bpf", "/run", "/var/run", "/var/lib", "/tmp", "/var/log"} {
		f.mkdirAll(d)
	}
	f.mounts = []host.Mount{{Point: "/", FSType: "ext4"}, {Point: "/proc", FSType: "proc"}, {Point: "/sys/fs/cgroup/memory", FSType: "cgroup"}}
	return f
}

// SetFile puts a file (a sysctl: /proc/sys/...) on the fake host.
func (f *Fake) SetFile(path, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mkdirAll(filepath.Dir(path))
	f.files[path] = content
}

// Mkdir creates a directory and its parents on the fake host.
func (f *Fake) Mkdir(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mkdirAll(path)
}

// AddMount mounts a filesystem without going through Mount.
func (f *Fake) AddMount(point, fstype string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mounts = append(f.mounts, host.Mount{Point: point, FSType: fstype})
}

// AddLink adds a network interface.
func (f *Fake) AddLink(name, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links[name] = &Link{Kind: kind}
}

// AddChain adds a chain with rules to an iptables table ("iptables/filter").
func (f *Fake) AddChain(table, chain string, rules ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tables[table][chain] = append(f.tables[table][chain], rules...)
}

// AddNftTable adds an nft table ("ip raw") holding the given rule lines.
func (f *Fake) AddNftTable(table string, rules ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nft[table] = rules
}

// Without makes a command missing, as on a machine without it installed.
func (f *Fake) Without(bin string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.bins, bin)
}

// State renders everything the fake models, sorted, so that two states compare as strings
// and a difference reads in a failure message.
func (f *Fake) State() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for p, c := range f.files {
		lines = append(lines, fmt.Sprintf("file %s = %q", p, c))
	}
	for d := range f.dirs {
		lines = append(lines, "dir "+d)
	}
	for _, m := range f.mounts {
		lines = append(lines, "mount "+m.Point+" "+m.FSType)
	}
	for key, chains := range f.tables {
		for c, rules := range chains {
			lines = append(lines, "chain "+key+" "+c)
			for i, r := range rules {
				lines = append(lines, fmt.Sprintf("rule %s %s %d %s", key, c, i, r))
			}
		}
	}
	for n, l := range f.links {
		lines = append(lines, fmt.Sprintf("link %s %s up=%v %v", n, l.Kind, l.Up, l.Addrs))
	}
	for _, r := range f.routes {
		lines = append(lines, "route "+r)
	}
	for t, rules := range f.nft {
		lines = append(lines, fmt.Sprintf("nft %s %q", t, rules))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (f *Fake) Has(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bins[filepath.Base(name)] || strings.Contains(name, "/")
}

func (f *Fake) ReadFile(path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if path == "/proc/self/mountinfo" {
		var b strings.Builder
		for i, m := range f.mounts {
			fmt.Fprintf(&b, "%d 1 0:%d / %s rw - %s none rw\n", 20+i, i, strings.ReplaceAll(m.Point, " ", `\040`), m.FSType)
		}
		return []byte(b.String()), nil
	}
	c, ok := f.files[path]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return []byte(c), nil
}

func (f *Fake) WriteFile(path string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dirs[filepath.Dir(path)] {
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	if _, ok := f.files[path]; !ok && strings.HasPrefix(path, "/proc/sys/") {
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist} // no such sysctl
	}
	f.files[path] = string(data)
	return nil
}

func (f *Fake) Exists(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, file := f.files[path]
	return file || f.dirs[path]
}

func (f *Fake) ReadDir(path string) ([]host.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dirs[path] {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	var out []host.Entry
	for d := range f.dirs {
		if d != path && filepath.Dir(d) == path {
			out = append(out, host.Entry{Name: filepath.Base(d), Dir: true})
		}
	}
	for p := range f.files {
		if filepath.Dir(p) == path {
			out = append(out, host.Entry{Name: filepath.Base(p)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *Fake) MkdirAll(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mkdirAll(path)
	return nil
}

func (f *Fake) mkdirAll(path string) {
	for p := filepath.Clean(path); !f.dirs[p]; p = filepath.Dir(p) {
		f.dirs[p] = true
	}
}

func (f *Fake) RemoveAll(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mountedAtOrBelow(path) {
		return &fs.PathError{Op: "unlinkat", Path: path, Err: errors.New("device or resource busy")}
	}
	for p := range f.files {
		if p == path || strings.HasPrefix(p, path+"/") {
			delete(f.files, p)
		}
	}
	for d := range f.dirs {
		if d == path || strings.HasPrefix(d, path+"/") {
			delete(f.dirs, d)
		}
	}
	return nil
}

func (f *Fake) Remove(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[path]; ok {
		delete(f.files, path)
		return nil
	}
	if !f.dirs[path] {
		return &fs.PathError{Op: "remove", Path: path, Err: fs.ErrNotExist}
	}
	for d := range f.dirs {
		if strings.HasPrefix(d, path+"/") {
			return &fs.PathError{Op: "remove", Path: path, Err: errors.New("directory not empty")}
		}
	}
	for p := range f.files {
		if strings.HasPrefix(p, path+"/") {
			return &fs.PathError{Op: "remove", Path: path, Err: errors.New("directory not empty")}
		}
	}
	delete(f.dirs, path)
	return nil
}

func (f *Fake) mountedAtOrBelow(path string) bool {
	for _, m := range f.mounts {
		if m.Point == path || strings.HasPrefix(m.Point, path+"/") {
			return true
		}
	}
	return false
}

func (f *Fake) Mount(source, target, fstype string, flags uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.FailOn["mount "+target]; err != nil {
		return err
	}
	if !f.dirs[target] {
		return &fs.PathError{Op: "mount", Path: target, Err: fs.ErrNotExist}
	}
	if fstype == "" {
		if slices.ContainsFunc(f.mounts, func(m host.Mount) bool { return m.Point == target }) && source == "" {
			return nil // a propagation change of an existing mount
		}
		fstype = "bind"
	}
	f.mounts = append(f.mounts, host.Mount{Point: target, FSType: fstype})
	return nil
}

func (f *Fake) Unmount(target string, _ int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.mounts) - 1; i >= 0; i-- {
		if f.mounts[i].Point == target {
			f.mounts = slices.Delete(f.mounts, i, i+1)
			return nil
		}
	}
	return &fs.PathError{Op: "umount", Path: target, Err: errors.New("not mounted")}
}
