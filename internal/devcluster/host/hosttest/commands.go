package hosttest

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Run models the commands the local cluster runs on the host: iptables (-S, -N, -F, -X, -A,
// -I, -D, -C), ip (link, addr, route, netns), nft (list, delete) and modprobe br_netfilter.
func (f *Fake) Run(name string, args ...string) (string, error) {
	line := strings.TrimSpace(filepath.Base(name) + " " + strings.Join(args, " "))
	f.mu.Lock()
	f.Calls = append(f.Calls, line)
	for prefix, err := range f.FailOn {
		if strings.HasPrefix(line, prefix) {
			f.mu.Unlock()
			return "", fmt.Errorf("%s: %w", line, err)
		}
	}
	hook := f.OnRun
	f.mu.Unlock()
	if hook != nil {
		if out, handled, err := hook(f, name, args); handled {
			return out, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	base := filepath.Base(name)
	var out string
	var err error
	switch {
	case strings.HasSuffix(base, "tables") || strings.HasSuffix(base, "tables-legacy"):
		out, err = f.iptables(base, args)
	case base == "ip":
		out, err = f.ip(args)
	case base == "nft":
		out, err = f.nftCmd(args)
	case base == "modprobe" && len(args) == 1 && args[0] == "br_netfilter":
		f.mkdirAll("/proc/sys/net/bridge")
		for _, s := range []string{"bridge-nf-call-iptables", "bridge-nf-call-ip6tables"} {
			if _, ok := f.files["/proc/sys/net/bridge/"+s]; !ok {
				f.files["/proc/sys/net/bridge/"+s] = "0\n"
			}
		}
	case base == "modprobe" && len(args) == 2 && args[0] == "-r" && args[1] == "br_netfilter":
		delete(f.files, "/proc/sys/net/bridge/bridge-nf-call-iptables")
		delete(f.files, "/proc/sys/net/bridge/bridge-nf-call-ip6tables")
		delete(f.dirs, "/proc/sys/net/bridge")
	default:
		err = fmt.Errorf("fake host: command not modelled")
	}
	if err != nil {
		return out, fmt.Errorf("%s: %w", line, err)
	}
	return out, nil
}

func (f *Fake) iptables(bin string, args []string) (string, error) {
	if !f.bins[bin] {
		return "", fmt.Errorf("not installed")
	}
	table := "filter"
	var rest []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-w":
		case "-t":
			i++
			table = args[i]
		default:
			rest = append(rest, args[i])
		}
	}
	key := bin + "/" + table
	chains := f.tables[key]
	if chains == nil || len(rest) == 0 {
		return "", fmt.Errorf("no table %s", key)
	}
	op, rest := rest[0], rest[1:]
	if op == "-S" {
		return f.listChains(key, rest)
	}
	if len(rest) == 0 {
		return "", fmt.Errorf("%s needs a chain", op)
	}
	chain, rule := rest[0], rest[1:]
	rules, exists := chains[chain]
	if op == "-N" {
		if exists {
			return "", fmt.Errorf("chain already exists")
		}
		chains[chain] = nil
		return "", nil
	}
	if !exists {
		return "", fmt.Errorf("no chain %s", chain)
	}
	switch op {
	case "-F":
		chains[chain] = nil
	case "-X":
		if f.builtin[key+"/"+chain] {
			return "", fmt.Errorf("cannot delete built-in chain")
		}
		if len(rules) > 0 || f.referenced(key, chain) {
			return "", fmt.Errorf("chain %s is not empty or still referenced", chain)
		}
		delete(chains, chain)
	case "-A":
		chains[chain] = append(rules, strings.Join(rule, "\x00"))
	case "-I":
		pos := 0
		if len(rule) > 0 && rule[0] == "1" {
			rule = rule[1:]
		}
		chains[chain] = slices.Insert(rules, pos, strings.Join(rule, "\x00"))
	case "-D", "-C":
		i := slices.Index(rules, strings.Join(rule, "\x00"))
		if i < 0 {
			return "", fmt.Errorf("bad rule (does a matching rule exist in that chain?)")
		}
		if op == "-D" {
			chains[chain] = slices.Delete(rules, i, i+1)
		}
	default:
		return "", fmt.Errorf("option %s not modelled", op)
	}
	return "", nil
}

// referenced reports whether a rule of the table jumps to chain.
func (f *Fake) referenced(key, chain string) bool {
	for _, rules := range f.tables[key] {
		for _, r := range rules {
			a := strings.Split(r, "\x00")
			for i := 0; i+1 < len(a); i++ {
				if (a[i] == "-j" || a[i] == "-g") && a[i+1] == chain {
					return true
				}
			}
		}
	}
	return false
}

// listChains prints a table (or one chain) as iptables -S does: policies, -N lines, -A lines,
// with arguments holding spaces quoted.
func (f *Fake) listChains(key string, only []string) (string, error) {
	chains := f.tables[key]
	var names []string
	for c := range chains {
		if len(only) == 0 || only[0] == c {
			names = append(names, c)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no chain/target/match by that name")
	}
	sort.Strings(names)
	var b strings.Builder
	for _, c := range names {
		if f.builtin[key+"/"+c] {
			fmt.Fprintf(&b, "-P %s ACCEPT\n", c)
		} else {
			fmt.Fprintf(&b, "-N %s\n", c)
		}
	}
	for _, c := range names {
		for _, r := range chains[c] {
			var parts []string
			for _, a := range strings.Split(r, "\x00") {
				if strings.ContainsAny(a, " \"") {
					a = `"` + strings.ReplaceAll(a, `"`, `\"`) + `"`
				}
				parts = append(parts, a)
			}
			fmt.Fprintf(&b, "-A %s %s\n", c, strings.Join(parts, " "))
		}
	}
	return b.String(), nil
}

func (f *Fake) ip(args []string) (string, error) {
	if len(args) > 0 && args[0] == "-o" {
		args = args[1:]
	}
	if len(args) < 2 {
		return "", fmt.Errorf("not modelled")
	}
	obj, op, rest := args[0], args[1], args[2:]
	switch obj {
	case "link":
		return f.ipLink(op, rest)
	case "addr":
		return f.ipAddr(op, rest)
	case "route":
		return f.ipRoute(op, rest)
	case "netns":
		if op == "delete" {
			p := "/var/run/netns/" + rest[0]
			if _, ok := f.files[p]; !ok {
				return "", fmt.Errorf("cannot remove namespace file %q: no such file or directory", p)
			}
			delete(f.files, p)
			return "", nil
		}
	}
	return "", fmt.Errorf("not modelled")
}

// ipLink models `ip link show|add|set|delete`.
func (f *Fake) ipLink(op string, rest []string) (string, error) {
	switch op {
	case "show":
		var names []string
		for n := range f.links {
			if len(rest) == 0 || rest[0] == n {
				names = append(names, n)
			}
		}
		if len(rest) > 0 && len(names) == 0 {
			return "", fmt.Errorf("device %q does not exist", rest[0])
		}
		sort.Strings(names)
		var b strings.Builder
		for i, n := range names {
			fmt.Fprintf(&b, "%d: %s: <BROADCAST,MULTICAST> mtu 1500 link/%s\n", i+1, n, f.links[n].Kind)
		}
		return b.String(), nil
	case "add":
		if len(rest) < 3 || rest[1] != "type" {
			return "", fmt.Errorf("not modelled")
		}
		if f.links[rest[0]] != nil {
			return "", fmt.Errorf("RTNETLINK answers: file exists")
		}
		f.links[rest[0]] = &Link{Kind: rest[2]}
	case "set":
		l := f.links[rest[0]]
		if l == nil {
			return "", fmt.Errorf("cannot find device %q", rest[0])
		}
		l.Up = slices.Contains(rest, "up")
	case "delete":
		if f.links[rest[0]] == nil {
			return "", fmt.Errorf("cannot find device %q", rest[0])
		}
		delete(f.links, rest[0])
		for dst, r := range f.routes {
			if strings.Contains(r, " dev "+rest[0]) {
				delete(f.routes, dst) // the kernel drops a link's routes with it
			}
		}
	default:
		return "", fmt.Errorf("not modelled")
	}
	return "", nil
}

// ipAddr models `ip addr show|add ... dev <link>` (the link is the last argument).
func (f *Fake) ipAddr(op string, rest []string) (string, error) {
	if len(rest) == 0 {
		return "", fmt.Errorf("not modelled")
	}
	dev := rest[len(rest)-1]
	l := f.links[dev]
	switch {
	case op == "show" && l == nil:
		return "", fmt.Errorf("device does not exist")
	case op == "show":
		var b strings.Builder
		for _, a := range l.Addrs {
			fmt.Fprintf(&b, "3: %s    inet %s scope global %s\n", dev, a, dev)
		}
		return b.String(), nil
	case op == "add" && l == nil:
		return "", fmt.Errorf("cannot find device")
	case op == "add":
		l.Addrs = append(l.Addrs, rest[0])
		return "", nil
	}
	return "", fmt.Errorf("not modelled")
}

// ipRoute models `ip route replace|show`.
func (f *Fake) ipRoute(op string, rest []string) (string, error) {
	switch op {
	case "replace":
		f.routes[rest[0]] = strings.Join(rest, " ")
		return "", nil
	case "show":
		if r, ok := f.routes[rest[len(rest)-1]]; ok {
			return r + "\n", nil
		}
		return "", nil
	}
	return "", fmt.Errorf("not modelled")
}

func (f *Fake) nftCmd(args []string) (string, error) {
	if !f.bins["nft"] {
		return "", fmt.Errorf("not installed")
	}
	switch {
	case len(args) == 2 && args[0] == "list" && args[1] == "tables":
		var names []string
		for t := range f.nft {
			names = append(names, t)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, t := range names {
			fmt.Fprintf(&b, "table %s\n", t)
		}
		return b.String(), nil
	case len(args) == 4 && args[0] == "list" && args[1] == "table":
		rules, ok := f.nft[args[2]+" "+args[3]]
		if !ok {
			return "", fmt.Errorf("no such file or directory")
		}
		var b strings.Builder
		fmt.Fprintf(&b, "table %s %s {\n\tchain PREROUTING {\n\t\ttype filter hook prerouting priority raw; policy accept;\n", args[2], args[3])
		for _, r := range rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n}\n")
		return b.String(), nil
	case len(args) == 4 && args[0] == "delete" && args[1] == "table":
		if _, ok := f.nft[args[2]+" "+args[3]]; !ok {
			return "", fmt.Errorf("no such file or directory")
		}
		delete(f.nft, args[2]+" "+args[3])
		return "", nil
	}
	return "", fmt.Errorf("not modelled")
}
