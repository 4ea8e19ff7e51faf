package sdk

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// testCtx is a context for one test, bounded so that a hang fails instead
// of stalling the run.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// plane is a data plane without a cluster: a real sandboxd (and router)
// and a handle on a claim whose pod is 127.0.0.1.
type plane struct {
	d  *sdktest.Sandboxd
	c  *Client
	sb *Sandbox
}

// offlineConfig points the Kubernetes side nowhere: data-plane tests must
// not need it.
var offlineConfig = &rest.Config{Host: "http://127.0.0.1:1"}

func newPlane(t *testing.T, mode Mode, mods ...func(*Options)) *plane {
	t.Helper()
	d := sdktest.NewSandboxd(t)
	o := Options{RESTConfig: offlineConfig, Mode: mode, SandboxPort: d.Port}
	switch mode {
	case ModeRouter:
		o.RouterURL = sdktest.NewRouter(t, "default/sb-1").URL
	case ModeExec:
		o.ExecRoot = d.Root
	}
	for _, m := range mods {
		m(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sb, err := c.HandleFor(testwrap.MakeClaim("default", "claim-1").Template("tmpl").ReadyWith("sb-1", "127.0.0.1").Obj())
	if err != nil {
		t.Fatal(err)
	}
	if mode == ModeExec {
		sb.tr = newKubeExecTransport(c, sb, localRunner{dir: "/"})
	}
	t.Cleanup(func() { _ = sb.Close() })
	return &plane{d: d, c: c, sb: sb}
}

// httpModes are the modes tested against the real sandboxd.
var httpModes = []Mode{ModeDirect, ModeRouter}

// localRunner runs ModeExec's commands as local processes, so that the
// shell scripts of the exec transport are tested for real.
type localRunner struct{ dir string }

func (l localRunner) exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer, tty *TTY) (int, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = l.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// signalWriter collects writes and closes seen once the output contains
// want, so a test can act on output that arrived before the command ended.
type signalWriter struct {
	want   string
	buf    []byte
	seen   chan struct{}
	closed bool
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, seen: make(chan struct{})}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if !w.closed && bytes.Contains(w.buf, []byte(w.want)) {
		w.closed = true
		close(w.seen)
	}
	return len(p), nil
}
