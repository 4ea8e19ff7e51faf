package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

func (a *app) cpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between this machine and a sandbox",
		Long: `Copy a file or a directory between this machine and a sandbox. One side is
NAME:PATH (PATH relative to the sandbox root, /workspace), the other a local path,
or "-" for stdin/stdout (single files).

A directory is copied as a tar stream: its contents land in the destination
directory, which is created if needed. A file copied onto an existing directory,
or onto a path ending in "/", keeps its name inside it. Local paths containing ":"
can be written as ./path.`,
		Example: `  sbx cp ./repo conv-42:repo          # contents of ./repo into /workspace/repo
  sbx cp conv-42:repo/out ./out        # and back
  sbx cp main.py conv-42:src/          # -> src/main.py
  sbx cp conv-42:report.txt -          # to stdout
  echo hi | sbx cp - conv-42:notes/hi.txt`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := parseCpArg(args[0]), parseCpArg(args[1])
			switch {
			case src.remote && dst.remote:
				return errors.New("cp: copying between two sandboxes is not supported; copy through a local directory")
			case !src.remote && !dst.remote:
				return errors.New("cp: one side must be NAME:PATH (a sandbox path)")
			}
			name := src.name
			if dst.remote {
				name = dst.name
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			sb, err := c.Get(cmd.Context(), name)
			if err != nil {
				return err
			}
			defer sb.Close()
			if dst.remote {
				return a.upload(cmd.Context(), sb.Files(), src.path, dst.path)
			}
			return a.download(cmd.Context(), sb.Files(), src.path, dst.path)
		},
	}
}

type cpArg struct {
	remote     bool
	name, path string
}

// parseCpArg splits NAME:PATH; anything with a "/" before the first ":"
// (or no ":") is local.
func parseCpArg(s string) cpArg {
	i := strings.IndexByte(s, ':')
	if i <= 0 || !isName(s[:i]) {
		return cpArg{path: s}
	}
	p := s[i+1:]
	if p == "" {
		p = "."
	}
	return cpArg{remote: true, name: s[:i], path: p}
}

// isName reports whether s can be a Kubernetes object name.
func isName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return s[0] != '-' && s[0] != '.'
}

func (a *app) upload(ctx context.Context, f *sdk.Files, local, remote string) error {
	if local == "-" {
		if strings.HasSuffix(remote, "/") {
			return fmt.Errorf("cp: %q is a directory; name the file to write stdin to", remote)
		}
		return f.WriteStream(ctx, remote, a.streams.In, 0)
	}
	fi, err := os.Stat(local)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if fi.IsDir() {
		return f.UploadDir(ctx, local, remote)
	}
	target := remote
	if strings.HasSuffix(remote, "/") || remote == "." {
		target = path.Join(remote, filepath.Base(local))
	} else if st, err := f.Stat(ctx, remote); err == nil && st.IsDir {
		target = path.Join(remote, filepath.Base(local))
	}
	return f.UploadFile(ctx, local, target)
}

func (a *app) download(ctx context.Context, f *sdk.Files, remote, local string) error {
	if local == "-" {
		rc, err := f.ReadStream(ctx, remote)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(a.streams.Out, rc)
		return err
	}
	st, err := f.Stat(ctx, remote)
	if err != nil {
		return err
	}
	if st.IsDir {
		return f.DownloadDir(ctx, remote, local)
	}
	target := local
	if fi, err := os.Stat(local); err == nil && fi.IsDir() || strings.HasSuffix(local, string(os.PathSeparator)) {
		if err := os.MkdirAll(local, 0o755); err != nil {
			return err
		}
		target = filepath.Join(local, path.Base(remote))
	}
	return f.DownloadFile(ctx, remote, target)
}
