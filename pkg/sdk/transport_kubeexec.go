package sdk

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// execRunner runs one argv in the sandbox's container and returns its exit
// code; ModeExec uses the Kubernetes exec API, tests a local process.
type execRunner interface {
	exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer, tty *TTY) (int, error)
}

// kubeExecRunner runs through pods/exec (WebSocket, falling back to SPDY),
// as kubectl exec does.
type kubeExecRunner struct {
	c *Client
	s *Sandbox

	mu        sync.Mutex
	cachedFor string // the pod the container name was found for
	cached    string
}

func (k *kubeExecRunner) container(ctx context.Context, pod string) (string, error) {
	if k.c.opts.Container != "" {
		return k.c.opts.Container, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cachedFor == pod {
		return k.cached, nil
	}
	p, err := k.c.core.CoreV1().Pods(k.s.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", kubeErr(err, "reading pod %s/%s", k.s.ns, pod)
	}
	name := p.Annotations["kubectl.kubernetes.io/default-container"]
	if name == "" && len(p.Spec.Containers) > 0 {
		name = p.Spec.Containers[0].Name
	}
	if name == "" {
		return "", fmt.Errorf("pod %s/%s has no containers", k.s.ns, pod)
	}
	k.cachedFor, k.cached = pod, name
	return name, nil
}

func (k *kubeExecRunner) exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer, tty *TTY) (int, error) {
	if _, err := k.s.ensureIPs(ctx); err != nil { // a running pod
		return 0, err
	}
	pod := k.s.sandboxObjectName()
	container, err := k.container(ctx, pod)
	if err != nil {
		return 0, err
	}
	req := k.c.core.CoreV1().RESTClient().Post().Resource("pods").Namespace(k.s.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   argv,
			Stdin:     stdin != nil,
			Stdout:    stdout != nil,
			Stderr:    stderr != nil && tty == nil,
			TTY:       tty != nil,
		}, scheme.ParameterCodec)
	spdyExec, err := remotecommand.NewSPDYExecutor(k.c.cfg, http.MethodPost, req.URL())
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(k.c.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	ex, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	so := remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Tty: tty != nil}
	if tty == nil {
		so.Stderr = stderr
	} else {
		so.TerminalSizeQueue = newSizeQueue(ctx, tty)
	}
	err = ex.StreamWithContext(ctx, so)
	var ee utilexec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		return ee.ExitStatus(), nil
	case ctx.Err() != nil:
		return 0, ctx.Err()
	}
	return 0, fmt.Errorf("exec in pod %s/%s: %w", k.s.ns, pod, err)
}

// sizeQueue feeds TTY sizes to remotecommand: the initial one, then changes.
type sizeQueue struct {
	ctx   context.Context
	first *remotecommand.TerminalSize
	ch    <-chan TermSize
}

func newSizeQueue(ctx context.Context, t *TTY) *sizeQueue {
	q := &sizeQueue{ctx: ctx, ch: t.Resize}
	if t.Cols > 0 && t.Rows > 0 {
		q.first = &remotecommand.TerminalSize{Width: t.Cols, Height: t.Rows}
	}
	return q
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if q.first != nil {
		f := q.first
		q.first = nil
		return f
	}
	if q.ch == nil {
		<-q.ctx.Done()
		return nil
	}
	select {
	case <-q.ctx.Done():
		return nil
	case sz, ok := <-q.ch:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: sz.Cols, Height: sz.Rows}
	}
}

// kubeExecTransport is the ModeExec transport: it implements the sandbox
// operations with shell commands run through an execRunner (pods/exec, or a
// local process in tests): what a plain image (a shell, cat, tar, find, stat)
// can do without sandboxd.
type kubeExecTransport struct {
	c      *Client
	s      *Sandbox
	runner execRunner
	root   string
}

func newKubeExecTransport(c *Client, s *Sandbox, r execRunner) *kubeExecTransport {
	return &kubeExecTransport{c: c, s: s, runner: r, root: c.opts.ExecRoot}
}

func (t *kubeExecTransport) reset() {}

// abs maps a path the way ModeExec documents: relative paths below ExecRoot
// when it is set, else as given.
func (t *kubeExecTransport) abs(p string) string {
	if p == "" {
		p = "."
	}
	if t.root != "" && !path.IsAbs(p) {
		return path.Join(t.root, p)
	}
	return p
}

// commandArgv wraps cmd with the env and cwd of rc: `sh -c 'cd "$1" ...'`
// and `env K=V ...` prefixes.
func (t *kubeExecTransport) commandArgv(cmd Command, rc *runConfig) ([]string, error) {
	var argv []string
	switch {
	case cmd.argv != nil:
		if len(cmd.argv) == 0 || cmd.argv[0] == "" {
			return nil, errors.New("empty command")
		}
		argv = cmd.argv
	case cmd.shell != "":
		argv = []string{"/bin/sh", "-c", cmd.shell}
	default:
		return nil, errors.New("empty command")
	}
	if len(rc.env) > 0 {
		pre := []string{"env"}
		for _, k := range sortedKeys(rc.env) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("invalid environment variable %q", k)
			}
			pre = append(pre, k+"="+rc.env[k])
		}
		argv = append(pre, argv...)
	}
	dir := rc.cwd
	if dir != "" || t.root != "" {
		dir = t.abs(dir)
		argv = append([]string{"/bin/sh", "-c", `cd -- "$1" || exit 1; shift; exec "$@"`, "sbx", dir}, argv...)
	}
	return argv, nil
}

func (t *kubeExecTransport) run(ctx context.Context, cmd Command, rc *runConfig) (*Result, error) {
	start := time.Now()
	argv, err := t.commandArgv(cmd, rc)
	if err != nil {
		return nil, err
	}
	rctx := ctx
	if rc.timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, rc.timeout)
		defer cancel()
	}
	sink := &outputSink{stdout: rc.stdout, stderr: rc.stderr, max: rc.maxOutput}
	code, err := t.runner.exec(rctx, argv, rc.stdin, sink.writer(0), sink.writer(1), rc.tty)
	timedOut := false
	if err != nil {
		if ctx.Err() == nil && rctx.Err() != nil {
			timedOut, code = true, 124 // like timeout(1); the remote process may outlive the stream
		} else {
			return nil, err
		}
	}
	if sink.writeErr != nil {
		return nil, fmt.Errorf("writing command output: %w", sink.writeErr)
	}
	res := sink.result(code, timedOut)
	res.Duration = time.Since(start)
	return res, nil
}

// Exit codes of the helper scripts, mapped to API-like errors.
const (
	exitNotFound = 44
	exitIsDir    = 45
	exitNotEmpty = 46
	exitNotDir   = 47
)

// sh runs a helper script with args as $1..; stdout goes to out.
func (t *kubeExecTransport) sh(ctx context.Context, op, script string, args []string, stdin io.Reader, out io.Writer) error {
	var stderr bytes.Buffer
	argv := append([]string{"/bin/sh", "-c", script, "sbx"}, args...)
	if out == nil {
		out = io.Discard
	}
	code, err := t.runner.exec(ctx, argv, stdin, out, &stderr, nil)
	if err != nil {
		return err
	}
	return scriptErr(op, code, stderr.String())
}

func scriptErr(op string, code int, stderr string) error {
	msg := strings.TrimSpace(stderr)
	switch code {
	case 0:
		return nil
	case exitNotFound:
		return &APIError{Status: http.StatusNotFound, Message: "not found", Op: op}
	case exitIsDir:
		return &APIError{Status: http.StatusConflict, Message: "path is a directory", Op: op}
	case exitNotEmpty:
		return &APIError{Status: http.StatusConflict, Message: "directory not empty; remove it recursively", Op: op}
	case exitNotDir:
		return &APIError{Status: http.StatusBadRequest, Message: "not a directory", Op: op}
	}
	if msg == "" {
		msg = "exit code " + strconv.Itoa(code)
	}
	return &APIError{Status: http.StatusInternalServerError, Message: msg, Op: op}
}

// streamOut runs a helper whose stdout is the result, as a stream; the
// script's failure surfaces as the reader's error at the end.
func (t *kubeExecTransport) streamOut(ctx context.Context, op, script string, args []string) (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		pw.CloseWithError(t.sh(ctx, op, script, args, nil, pw))
	}()
	return &cancelReader{PipeReader: pr, cancel: cancel}, nil
}

type cancelReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *cancelReader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}

const existsCheck = `[ -e "$1" ] || [ -L "$1" ] || exit 44; `

func (t *kubeExecTransport) readFile(ctx context.Context, p string) (io.ReadCloser, error) {
	return t.streamOut(ctx, "exec cat "+p, existsCheck+`[ -d "$1" ] && exit 45; exec cat -- "$1"`, []string{t.abs(p)})
}

func (t *kubeExecTransport) writeFile(ctx context.Context, p string, r io.Reader, perm fs.FileMode) error {
	script := `[ -d "$1" ] && exit 45; d=$(dirname -- "$1") && mkdir -p -- "$d" && cat > "$1"`
	args := []string{t.abs(p)}
	if perm != 0 {
		script += ` && chmod "$2" "$1"`
		args = append(args, fmt.Sprintf("%04o", perm.Perm()))
	}
	if r == nil {
		r = strings.NewReader("")
	}
	return t.sh(ctx, "exec write "+p, script, args, r, nil)
}

func (t *kubeExecTransport) remove(ctx context.Context, p string, recursive bool) error {
	script := existsCheck + `if [ -d "$1" ] && [ ! -L "$1" ]; then rmdir -- "$1" 2>/dev/null || exit 46; else rm -f -- "$1"; fi`
	if recursive {
		script = existsCheck + `rm -rf -- "$1"`
	}
	return t.sh(ctx, "exec rm "+p, script, []string{t.abs(p)}, nil, nil)
}

func (t *kubeExecTransport) mkdir(ctx context.Context, p string, perm fs.FileMode) error {
	script := `[ -e "$1" ] && [ ! -d "$1" ] && exit 45; mkdir -p -- "$1"`
	args := []string{t.abs(p)}
	if perm != 0 {
		script += ` && chmod "$2" "$1"`
		args = append(args, fmt.Sprintf("%04o", perm.Perm()))
	}
	return t.sh(ctx, "exec mkdir "+p, script, args, nil, nil)
}

// statFormat is one line per entry: size, octal mode, mtime, type, name.
const statFormat = `%s	%a	%Y	%F	%n`

func (t *kubeExecTransport) stat(ctx context.Context, p string) (*FileInfo, error) {
	var out bytes.Buffer
	script := existsCheck + `stat -c '` + statFormat + `' -- "$1" && { [ -L "$1" ] && readlink -- "$1" || true; }`
	if err := t.sh(ctx, "exec stat "+p, script, []string{t.abs(p)}, nil, &out); err != nil {
		return nil, err
	}
	lines := strings.SplitN(strings.TrimRight(out.String(), "\n"), "\n", 2)
	fi, err := parseStatLine(lines[0])
	if err != nil {
		return nil, err
	}
	fi.Path = path.Clean(p)
	fi.Name = path.Base(fi.Path)
	if fi.IsSymlink && len(lines) > 1 {
		fi.LinkTarget = lines[1]
	}
	return &fi, nil
}

func parseStatLine(line string) (FileInfo, error) {
	f := strings.SplitN(line, "\t", 5)
	if len(f) != 5 {
		return FileInfo{}, fmt.Errorf("exec stat: unexpected output %q", line)
	}
	size, _ := strconv.ParseInt(f[0], 10, 64)
	perm, _ := strconv.ParseUint(f[1], 8, 32)
	mtime, _ := strconv.ParseInt(f[2], 10, 64)
	fi := FileInfo{Size: size, Mode: fs.FileMode(perm).Perm(), ModTime: time.Unix(mtime, 0).UTC(), Name: path.Base(f[4]), Path: f[4]}
	switch f[3] {
	case "directory":
		fi.IsDir, fi.Mode = true, fi.Mode|fs.ModeDir
	case "symbolic link":
		fi.IsSymlink, fi.Mode = true, fi.Mode|fs.ModeSymlink
	}
	return fi, nil
}

func (t *kubeExecTransport) list(ctx context.Context, p string, recursive bool) ([]FileInfo, error) {
	depth := ` -maxdepth 1`
	if recursive {
		depth = ``
	}
	dir := t.abs(p)
	script := `[ -e "$1" ] || exit 44; [ -d "$1" ] || exit 47; find "$1" -mindepth 1` + depth + ` -exec stat -c '` + statFormat + `' -- {} +`
	var out bytes.Buffer
	if err := t.sh(ctx, "exec list "+p, script, []string{dir}, nil, &out); err != nil {
		return nil, err
	}
	var entries []FileInfo
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for sc.Scan() {
		fi, err := parseStatLine(sc.Text())
		if err != nil {
			return nil, err
		}
		fi.Path = path.Join(p, strings.TrimPrefix(fi.Path, prefix))
		entries = append(entries, fi)
	}
	sortFileInfos(entries)
	return entries, nil
}

func (t *kubeExecTransport) getTar(ctx context.Context, dir string) (io.ReadCloser, error) {
	return t.streamOut(ctx, "exec tar -c "+dir, `[ -e "$1" ] || exit 44; [ -d "$1" ] || exit 47; exec tar -C "$1" -cf - .`, []string{t.abs(dir)})
}

func (t *kubeExecTransport) putTar(ctx context.Context, dir string, r io.Reader) error {
	return t.sh(ctx, "exec tar -x "+dir, `mkdir -p -- "$1" && exec tar -C "$1" -xf -`, []string{t.abs(dir)}, r, nil)
}

func (t *kubeExecTransport) watch(context.Context, string, bool) (<-chan Event, error) {
	return nil, fmt.Errorf("file watches: %w (ModeExec has no sandboxd)", ErrUnsupported)
}

// ---- background processes: started detached; known by PID only ----

func (t *kubeExecTransport) start(ctx context.Context, cmd Command, rc *runConfig) (*Process, error) {
	if rc.stdin != nil {
		return nil, fmt.Errorf("start with stdin: %w", ErrUnsupported)
	}
	inner := cmd
	if cmd.argv != nil {
		inner = Shell("exec " + shellJoin(cmd.argv))
	}
	if inner.shell == "" {
		return nil, errors.New("empty command")
	}
	script := inner.shell
	if rc.timeout > 0 {
		script = fmt.Sprintf("timeout %d sh -c %s", int(rc.timeout.Seconds()+0.5), shellQuote(script))
	}
	// Detached with the shell alone, as nohup would (SIGHUP ignored across exec, no terminal, output
	// dropped): images built on busybox-static have no nohup, and a missing one would lose the job
	// silently behind the PID that echo $! still prints.
	wrapped := Shell(`(trap '' HUP; exec /bin/sh -c "$SBX_SCRIPT") </dev/null >/dev/null 2>&1 & echo $!`)
	rc2 := *rc
	rc2.env = mergeMap(mergeMap(nil, rc.env), map[string]string{"SBX_SCRIPT": script})
	rc2.timeout, rc2.stdout, rc2.stderr, rc2.tty = 0, nil, nil, nil
	res, err := t.run(ctx, wrapped, &rc2)
	if err != nil {
		return nil, err
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if res.ExitCode != 0 || perr != nil {
		return nil, scriptErr("exec start", max(res.ExitCode, 1), res.Stderr)
	}
	return &Process{ID: strconv.Itoa(pid), PID: pid, Argv: cmd.argv, Command: cmd.shell, Cwd: rc.cwd, StartedAt: time.Now(), Running: true}, nil
}

func (t *kubeExecTransport) signal(ctx context.Context, id, sig string) (*Process, error) {
	if _, err := strconv.Atoi(id); err != nil {
		return nil, fmt.Errorf("process %q: %w", id, ErrNotFound)
	}
	sig = strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if err := t.sh(ctx, "exec kill "+id, `kill -0 "$2" 2>/dev/null || exit 44; kill -s "$1" "$2"`, []string{sig, id}, nil, nil); err != nil {
		return nil, err
	}
	pid, _ := strconv.Atoi(id)
	return &Process{ID: id, PID: pid, Running: true}, nil
}

func (t *kubeExecTransport) kill(ctx context.Context, id string) (*Process, error) {
	p, err := t.signal(ctx, id, "KILL")
	if p != nil {
		p.Running = false
	}
	return p, err
}

func (t *kubeExecTransport) processes(context.Context) ([]Process, error) {
	return nil, fmt.Errorf("listing processes: %w", ErrUnsupported)
}

func (t *kubeExecTransport) process(context.Context, string) (*Process, error) {
	return nil, fmt.Errorf("process status: %w", ErrUnsupported)
}

func (t *kubeExecTransport) logs(context.Context, string) (*ProcessLogs, error) {
	return nil, fmt.Errorf("process logs: %w", ErrUnsupported)
}

func (t *kubeExecTransport) followLogs(context.Context, string, io.Writer, io.Writer) (int, error) {
	return 0, fmt.Errorf("process logs: %w", ErrUnsupported)
}
