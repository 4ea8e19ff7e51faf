// Package images builds container images locally, without a registry or a container engine:
// one uncompressed layer written by hand as a docker-archive tar (manifest.json, config, layer),
// the format `ctr images import` reads. Output is deterministic (sorted entries, fixed times,
// root ownership), so rebuilding an unchanged image yields the same digest and re-importing it
// is a no-op for containerd.
package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// File is one entry of an image's filesystem. Exactly one of Data, Src, Link applies; none of
// them makes a directory.
type File struct {
	Path string // absolute, slash-separated
	Mode fs.FileMode
	Data []byte // contents given inline
	Src  string // contents read from this host path
	Link string // symlink target
	// UID and GID own the entry; zero is root, as for every entry by default.
	UID, GID int
}

// Image is a single-layer image.
type Image struct {
	// Ref is the fully qualified name containerd stores, e.g. docker.io/agent-sandbox/runtime:dev.
	Ref        string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string // uid[:gid] the entrypoint runs as; empty is root
	Ports      []int
	Files      []File
}

// epoch is the modification time of every entry: a fixed value keeps digests reproducible.
var epoch = time.Unix(0, 0).UTC()

// WriteArchive writes img as a docker-archive tar to w and returns the image ID (the config's
// digest).
func (img *Image) WriteArchive(w io.Writer) (string, error) {
	layer, err := img.layer()
	if err != nil {
		return "", err
	}
	diffID := digest(layer)
	cfg, err := img.config(diffID)
	if err != nil {
		return "", err
	}
	cfgID := digest(cfg)
	layerPath := strings.TrimPrefix(diffID, "sha256:") + "/layer.tar"
	cfgPath := strings.TrimPrefix(cfgID, "sha256:") + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": cfgPath, "RepoTags": []string{img.Ref}, "Layers": []string{layerPath},
	}})
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{{layerPath, layer}, {cfgPath, cfg}, {"manifest.json", manifest}} {
		if dir := path.Dir(f.name); dir != "." {
			if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
				return "", err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", err
		}
	}
	return cfgID, tw.Close()
}

// WriteArchiveFile writes the archive to path (via a temporary file) and returns the image ID.
func (img *Image) WriteArchiveFile(p string) (string, error) {
	f, err := os.CreateTemp(path.Dir(p), ".image-*.tar")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	id, err := img.WriteArchive(f)
	if err == nil {
		err = f.Chmod(0o644) // CreateTemp makes it private; an image is not a secret
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return id, os.Rename(f.Name(), p)
}

func (img *Image) config(diffID string) ([]byte, error) {
	exposed := map[string]struct{}{}
	for _, p := range img.Ports {
		exposed[fmt.Sprintf("%d/tcp", p)] = struct{}{}
	}
	return json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, // our binaries are built for this machine
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint":   img.Entrypoint,
			"Cmd":          img.Cmd,
			"Env":          img.Env,
			"WorkingDir":   img.WorkingDir,
			"User":         img.User,
			"ExposedPorts": exposed,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]string{{"created": epoch.Format(time.RFC3339), "created_by": "agent-sandbox internal/images"}},
	})
}

// layer renders the files as one tar, parents first, each directory once.
func (img *Image) layer() ([]byte, error) {
	entries := map[string]File{}
	for _, f := range img.Files {
		p := path.Clean("/" + f.Path)
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = File{Path: d, Mode: fs.ModeDir | 0o755}
			}
		}
		f.Path = p
		entries[p] = f
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := writeEntry(tw, entries[n]); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeEntry(tw *tar.Writer, f File) error {
	h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), ModTime: epoch, Mode: int64(f.Mode.Perm()), Format: tar.FormatPAX,
		Uid: f.UID, Gid: f.GID}
	if f.Mode&fs.ModeSticky != 0 {
		h.Mode |= 0o1000
	}
	data := f.Data
	switch {
	case f.Link != "":
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
	case f.Mode.IsDir():
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	default:
		if f.Src != "" {
			b, err := os.ReadFile(f.Src)
			if err != nil {
				return err
			}
			data = b
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
