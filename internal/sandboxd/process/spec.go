package process

import (
	"context"
	"encoding/base64"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Spec is a validated ExecRequest.
type Spec struct {
	Argv      []string // Argv[0] as the client gave it
	Path      string   // resolved executable, "" when not found
	Env       []string
	Dir       string // absolute
	Cwd       string // root-relative, for display
	Timeout   time.Duration
	Stdin     []byte // nil: /dev/null (or an open pipe for interactive sessions)
	MaxOutput int64
	TTY       bool
	Cols      uint16
	Rows      uint16
	Req       *wire.ExecRequest
}

// BuildSpec validates req. defTimeout applies when the request has none. The command's
// environment is the daemon's, then the session's (SessionEnv of ctx), then the request's.
// Invalid requests are *respond.StatusError (400) or resolver errors.
func (r *Runner) BuildSpec(ctx context.Context, req *wire.ExecRequest, defTimeout time.Duration) (*Spec, error) {
	sp := &Spec{Req: req, TTY: req.TTY, Cols: req.Cols, Rows: req.Rows}
	var err error
	if sp.Argv, err = r.argv(req); err != nil {
		return nil, err
	}
	if sp.Env, err = mergeEnv(baseEnv(), SessionEnv(ctx)); err != nil {
		return nil, err
	}
	if sp.Env, err = mergeEnv(sp.Env, req.Env); err != nil {
		return nil, err
	}
	if sp.TTY && envValue(sp.Env, "TERM") == "" {
		sp.Env = append(sp.Env, "TERM=xterm-256color")
	}
	if err := r.setCwd(sp, req.Cwd); err != nil {
		return nil, err
	}
	switch {
	case req.TimeoutSeconds < 0:
		return nil, respond.BadRequest("timeoutSeconds must not be negative")
	case req.TimeoutSeconds > 0:
		sp.Timeout = secondsToTimeout(req.TimeoutSeconds)
	default:
		sp.Timeout = defTimeout
	}
	if sp.Stdin, err = stdin(req); err != nil {
		return nil, err
	}
	sp.MaxOutput = r.cfg.MaxOutput
	switch {
	case req.MaxOutputBytes < 0:
		return nil, respond.BadRequest("maxOutputBytes must not be negative")
	case req.MaxOutputBytes > 0 && req.MaxOutputBytes < sp.MaxOutput:
		sp.MaxOutput = req.MaxOutputBytes
	}
	if req.Command != "" && !r.cfg.AlwaysShell && sp.directCommand(req.Command) {
		return sp, nil
	}
	sp.Path = sp.LookPath(sp.Argv[0])
	return sp, nil
}

// secondsToTimeout turns a positive timeout in seconds into one the Runner applies: at least
// 1 ns, since 0 would mean no limit at all (not even the server's default), and at most the
// longest Duration, since a float beyond it converts to a negative one (also no limit).
func secondsToTimeout(s float64) time.Duration {
	ns := s * float64(time.Second)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Duration(ns), 1)
}

// argv is the request's argv, or its command run by the shell.
func (r *Runner) argv(req *wire.ExecRequest) ([]string, error) {
	var argv []string
	switch {
	case len(req.Argv) > 0 && req.Command != "":
		return nil, respond.BadRequest("set either argv or command, not both")
	case len(req.Argv) > 0:
		if req.Argv[0] == "" {
			return nil, respond.BadRequest("argv[0] is empty")
		}
		argv = append([]string(nil), req.Argv...)
	case req.Command != "":
		argv = []string{r.cfg.Shell, "-c", req.Command}
	default:
		return nil, respond.BadRequest("argv or command is required")
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, respond.BadRequest("arguments must not contain NUL bytes")
		}
	}
	return argv, nil
}

// setCwd resolves the working directory inside the root; it must exist.
func (r *Runner) setCwd(sp *Spec, cwd string) error {
	rel, err := r.root.Resolve(cwd, true)
	if err != nil {
		return err
	}
	sp.Dir = filepath.Join(r.root.Root(), rel)
	sp.Cwd = rootfs.Display(rel)
	fi, err := os.Stat(sp.Dir)
	if err != nil {
		return respond.BadRequest("cwd %q: %v", cwd, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return respond.BadRequest("cwd %q is not a directory", cwd)
	}
	return nil
}

func stdin(req *wire.ExecRequest) ([]byte, error) {
	switch {
	case req.Stdin != "" && req.StdinBase64 != "":
		return nil, respond.BadRequest("set either stdin or stdinBase64, not both")
	case req.Stdin != "":
		return []byte(req.Stdin), nil
	case req.StdinBase64 != "":
		b, err := base64.StdEncoding.DecodeString(req.StdinBase64)
		if err != nil {
			return nil, respond.BadRequest("stdinBase64: %v", err)
		}
		return b, nil
	}
	return nil, nil
}

// baseEnv is the daemon's environment minus its own secret.
func baseEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "SANDBOXD_TOKEN=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// mergeEnv overlays extra on base; later entries win, keys are sorted so
// the child sees a stable order.
func mergeEnv(base []string, extra map[string]string) ([]string, error) {
	if len(extra) == 0 {
		return base, nil
	}
	keys := make([]string, 0, len(extra))
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, respond.BadRequest("invalid environment variable %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(base)+len(keys))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out, nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// LookPath searches the spec's PATH (not the daemon's, which exec.Command
// would use) from its working directory, and returns "" when nothing
// executable is found. A name with a slash is returned as is.
func (sp *Spec) LookPath(file string) string {
	return lookPath(file, envValue(sp.Env, "PATH"), sp.Dir)
}

func lookPath(file, pathEnv, dir string) string {
	if strings.Contains(file, "/") {
		return file
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}
