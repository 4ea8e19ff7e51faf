package antispoof

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// runner runs nft with args and stdin; a fake stands in for it in unit tests.
type runner func(stdin string, args ...string) (string, error)

// nftPaths are tried when nft is not on PATH: containerd runs plugins with its own environment.
var nftPaths = []string{"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"}

// execNft runs the nft command (Debian's nftables, hack/install-node-deps.sh).
func execNft(path string) runner {
	return func(stdin string, args ...string) (string, error) {
		bin := path
		if bin == "" {
			bin = findNft()
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
		}
		return out.String(), nil
	}
}

func findNft() string {
	if p, err := exec.LookPath("nft"); err == nil {
		return p
	}
	for _, p := range nftPaths {
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	return "nft"
}

// listing is what the table holds: map elements (veth -> chain jumped to), chains, and each
// chain's rule comments in order ("" for a rule without one).
type listing struct {
	elems  map[string]string
	chains map[string]bool
	rules  map[string][]string
}

// list reads the table; a missing table is an empty listing.
func list(run runner) (listing, error) {
	l := listing{elems: map[string]string{}, chains: map[string]bool{}, rules: map[string][]string{}}
	tables, err := run("", "list", "tables", Family)
	if err != nil {
		return l, err
	}
	if !strings.Contains(tables+"\n", fmt.Sprintf("table %s %s\n", Family, Table)) {
		return l, nil
	}
	out, err := run("", "-j", "list", "table", Family, Table)
	if err != nil {
		return l, err
	}
	return l, parseListing(out, &l)
}

type nftMap struct {
	Name string            `json:"name"`
	Elem []json.RawMessage `json:"elem"`
}

type nftChain struct {
	Name string `json:"name"`
}

type nftRule struct {
	Chain   string `json:"chain"`
	Comment string `json:"comment"`
}

// parseListing reads `nft -j list table` output (libnftables' JSON schema 1).
func parseListing(out string, l *listing) error {
	var doc struct {
		Nftables []struct {
			Map   *nftMap   `json:"map"`
			Chain *nftChain `json:"chain"`
			Rule  *nftRule  `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return fmt.Errorf("reading nft's listing: %w", err)
	}
	for _, o := range doc.Nftables {
		switch {
		case o.Map != nil && o.Map.Name == portsMap:
			for _, raw := range o.Map.Elem {
				k, target, err := parseElem(raw)
				if err != nil {
					return err
				}
				l.elems[k] = target
			}
		case o.Chain != nil:
			l.chains[o.Chain.Name] = true
		case o.Rule != nil:
			l.rules[o.Rule.Chain] = append(l.rules[o.Rule.Chain], o.Rule.Comment)
		}
	}
	return nil
}

// parseElem reads one map element, ["veth", {"jump": {"target": "chain"}}].
func parseElem(raw json.RawMessage) (key, target string, err error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("unexpected map element %s", raw)
	}
	var v struct {
		Jump *struct {
			Target string `json:"target"`
		} `json:"jump"`
	}
	if json.Unmarshal(pair[0], &key) != nil || json.Unmarshal(pair[1], &v) != nil || v.Jump == nil {
		return "", "", fmt.Errorf("unexpected map element %s", raw)
	}
	return key, v.Jump.Target, nil
}

// install gives the port its rules under chain, replacing what was there.
func install(run runner, chain string, p Port) error {
	l, err := list(run)
	if err != nil {
		return err
	}
	_, err = run(addScript(l, chain, p), "-f", "-")
	return err
}

// remove takes chain and its map elements away; nothing to remove is no error.
func remove(run runner, chain string) error {
	l, err := list(run)
	if err != nil {
		return err
	}
	script := delScript(l, chain)
	if script == "" {
		return nil
	}
	_, err = run(script, "-f", "-")
	return err
}

// verify reports how the table differs from the port's rules under chain.
func verify(run runner, chain string, p Port) error {
	l, err := list(run)
	if err != nil {
		return err
	}
	var errs []error
	if got := l.elems[p.Veth]; got != chain {
		errs = append(errs, fmt.Errorf("veth %s leads to chain %q, want %q", p.Veth, got, chain))
	}
	want := portRules(p)
	got := l.rules[chain]
	switch {
	case !l.chains[chain]:
		errs = append(errs, fmt.Errorf("chain %s is missing", chain))
	case len(got) != len(want):
		errs = append(errs, fmt.Errorf("chain %s holds %d rules, want %d", chain, len(got), len(want)))
	case got[0] != p.fingerprint():
		errs = append(errs, fmt.Errorf("chain %s is for %q, want %q", chain, got[0], p.fingerprint()))
	}
	return errors.Join(errs...)
}
