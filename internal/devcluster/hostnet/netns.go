package hostnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host"
)

// NetnsDir is where containerd (and `ip netns`) bind-mount named network namespaces.
const NetnsDir = "/run/netns"

// netnsListDir is where the namespaces are listed (/var/run links to /run on this machine).
const netnsListDir = "/var/run/netns"

// Netns records the network namespaces there were and makes NetnsDir a shared mount point of
// its own before containerd puts pod namespaces there, as `ip netns add` does on first use.
// Otherwise the first `ip netns add` run while pods exist (the e2e network test's hosts, an
// operator's debugging) bind-mounts the directory over itself, hides the pods' namespace mounts
// under it, and containerd can never remove them again (unlink: device or resource busy). Down
// deletes the pods' namespaces (cni-*) that were not there and unmounts what Up mounted.
type Netns struct{ Env }

type netnsRecord struct {
	Before  []string `json:"before"`
	Mounted bool     `json:"mounted,omitempty"`
	// CreatedDir: NetnsDir did not exist (then Down removes it when empty).
	CreatedDir bool `json:"createdDir,omitempty"`
}

func (Netns) Name() string { return "netns" }

func (s Netns) Up(context.Context) error {
	rec, ok, err := load[netnsRecord](s.Env, s.Name())
	if err != nil {
		return err
	}
	if !ok {
		rec.Before = listNetns(s.Host)
		if err := s.Store.Save(s.Name(), rec); err != nil {
			return err
		}
	}
	if host.IsMountPoint(s.Host, NetnsDir, "") {
		return nil
	}
	rec.Mounted = true
	rec.CreatedDir = rec.CreatedDir || !s.Host.Exists(NetnsDir)
	if err := s.Store.Save(s.Name(), rec); err != nil {
		return err
	}
	if err := s.Host.MkdirAll(NetnsDir); err != nil {
		return err
	}
	if err := s.Host.Mount(NetnsDir, NetnsDir, "", syscall.MS_BIND|syscall.MS_REC); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", NetnsDir, err)
	}
	if err := s.Host.Mount("", NetnsDir, "", syscall.MS_SHARED|syscall.MS_REC); err != nil {
		return fmt.Errorf("making %s shared: %w", NetnsDir, err)
	}
	return nil
}

func (s Netns) Down(context.Context) error {
	rec, ok, err := load[netnsRecord](s.Env, s.Name())
	if !ok || err != nil {
		return err
	}
	var errs []error
	for _, n := range listNetns(s.Host) {
		if !slices.Contains(rec.Before, n) && strings.HasPrefix(n, "cni-") {
			if _, err := s.Host.Run("ip", "netns", "delete", n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if rec.Mounted && host.IsMountPoint(s.Host, NetnsDir, "") {
		// Detached, not plain: a namespace someone else mounted there keeps working.
		if err := s.Host.Unmount(NetnsDir, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", NetnsDir, err))
		}
	}
	if rec.CreatedDir && s.Host.Exists(NetnsDir) && !host.IsMountPoint(s.Host, NetnsDir, "") {
		// Fails, and so keeps it, if a netns of someone else appeared.
		errs = append(errs, s.Host.Remove(NetnsDir))
	}
	return finish(s.Env, s.Name(), errors.Join(errs...))
}

func listNetns(h host.Host) []string {
	entries, _ := h.ReadDir(netnsListDir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}
