package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

func TestAPIErrorIs(t *testing.T) {
	tests := []struct {
		status int
		msg    string
		is     []error
		isNot  []error
	}{
		{404, "not found", []error{ErrNotFound}, []error{ErrNotReady, ErrTimeout}},
		{503, "sandbox default/x is not ready (PodPending)", []error{ErrNotReady}, []error{ErrNotFound}},
		{502, "Could not connect to the backend sandbox: x", []error{ErrNotReady}, nil},
		{504, "Timed out", []error{ErrTimeout}, []error{ErrNotReady}},
		{409, "already exists", []error{ErrAlreadyExists}, []error{ErrNotFound}},
		{400, "invalid path", nil, []error{ErrNotFound, ErrNotReady, ErrTimeout, ErrAlreadyExists}},
	}
	for _, tc := range tests {
		var err error = &APIError{Status: tc.status, Message: tc.msg, Op: "GET /x"}
		wrapped := errors.Join(errors.New("context"), err)
		for _, target := range tc.is {
			if !errors.Is(wrapped, target) {
				t.Errorf("%d: not Is(%v)", tc.status, target)
			}
		}
		for _, target := range tc.isNot {
			if errors.Is(wrapped, target) {
				t.Errorf("%d: Is(%v)", tc.status, target)
			}
		}
		var ae *APIError
		if !errors.As(wrapped, &ae) || ae.Status != tc.status || !strings.Contains(ae.Error(), tc.msg) {
			t.Errorf("%d: As = %+v", tc.status, ae)
		}
	}
}

// TestRouterNotFound: the router's 404 for an unknown Sandbox is ErrNotFound.
func TestRouterNotFound(t *testing.T) {
	d := sdktest.NewSandboxd(t)
	r := sdktest.NewRouter(t, "default/known")
	c, err := New(Options{RESTConfig: offlineConfig, Mode: ModeRouter, RouterURL: r.URL, SandboxPort: d.Port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sb, _ := c.HandleFor(testwrap.MakeClaim("default", "c").Template("tmpl").ReadyWith("unknown", "127.0.0.1").Obj())
	sb.readyAt = time.Now().Add(-time.Hour) // long ready: the router is not lagging
	_, err = sb.Run(testCtx(t), Shell("true"))
	var ae *APIError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "unknown") {
		t.Fatalf("err = %v, want the router's 404", err)
	}
}

// TestRouterLag: a router that does not know a sandbox the SDK just saw
// become ready is retried until it does (its watch trails the SDK's),
// for plain requests and for the WebSocket exec.
func TestRouterLag(t *testing.T) {
	for _, ws := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "websocket"}[ws], func(t *testing.T) {
			d := sdktest.NewSandboxd(t)
			r := sdktest.NewRouter(t, "default/someone-else")
			c, err := New(Options{RESTConfig: offlineConfig, Mode: ModeRouter, RouterURL: r.URL, SandboxPort: d.Port})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			sb, _ := c.HandleFor(testwrap.MakeClaim("default", "c").Template("tmpl").ReadyWith("fresh", "127.0.0.1").Obj())
			done := make(chan error, 1)
			go func() {
				var opts []RunOption
				if ws {
					opts = append(opts, WithStdin(io.MultiReader(strings.NewReader("x"))))
				}
				_, err := sb.Run(testCtx(t), Shell("cat >/dev/null; true"), opts...)
				done <- err
			}()
			// The router catches up only after three "not found"s: every retry replays the request
			// (and its body) in full.
			quick := testwrap.Wait{Interval: 5 * time.Millisecond}
			quick.Eventually(t, "the router to answer three times that it does not know the sandbox", func() error {
				select {
				case err := <-done:
					t.Fatalf("Run ended (%v) before the router was asked, want it retrying the router's 404", err)
				default:
				}
				if n := r.Misses(); n < 3 {
					return fmt.Errorf("%d 404s from the router so far", n)
				}
				return nil
			})
			r.Add("default", "fresh")
			if err := <-done; err != nil {
				t.Fatalf("Run = %v, want success once the router caught up", err)
			}
		})
	}
}

// TestRouterHeaders checks what router mode sends: the Sandbox's name (not
// the claim's), the namespace, the port, the bearer token.
func TestRouterHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := newHeaderEcho(t, got)
	c, err := New(Options{RESTConfig: offlineConfig, Mode: ModeRouter, RouterURL: srv + "/prefix/", RouterToken: "s3cret", SandboxPort: 9999})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sb, _ := c.HandleFor(testwrap.MakeClaim("team-a", "my-claim").Template("tmpl").ReadyWith("pool-abc12", "10.0.0.1").Obj())
	ctx := testCtx(t)
	if _, err := sb.Run(ctx, Shell("true")); err != nil {
		t.Fatal(err)
	}
	var h http.Header
	select {
	case h = <-got:
	case <-ctx.Done():
		t.Fatal("the router never received the request")
	}
	for k, want := range map[string]string{
		"X-Sandbox-Id": "pool-abc12", "X-Sandbox-Namespace": "team-a", "X-Sandbox-Port": "9999",
		"Authorization": "Bearer s3cret", "X-Test-Path": "/prefix/v1/exec", "X-Test-Proto": "HTTP/2.0",
	} {
		if h.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, h.Get(k), want)
		}
	}
}

func TestSandboxdToken(t *testing.T) {
	d := sdktest.NewSandboxd(t, sdktest.SandboxdOptions{Token: "tok"})
	for _, tc := range []struct {
		token string
		ok    bool
	}{{"tok", true}, {"", false}, {"wrong", false}} {
		c, err := New(Options{RESTConfig: offlineConfig, Mode: ModeDirect, SandboxPort: d.Port, SandboxToken: tc.token})
		if err != nil {
			t.Fatal(err)
		}
		sb, _ := c.HandleFor(testwrap.MakeClaim("default", "c").Template("tmpl").ReadyWith("c", "127.0.0.1").Obj())
		_, err = sb.Run(testCtx(t), Shell("true"))
		if tc.ok != (err == nil) || (!tc.ok && !isStatus(err, http.StatusUnauthorized)) {
			t.Errorf("token %q: err = %v", tc.token, err)
		}
		c.Close()
	}
}

func TestNotReadyWithoutPodIP(t *testing.T) {
	// A paused claim: no IP. Refreshing needs the API, which is offline
	// here, so use a handle whose refresh finds the same state.
	if env == nil {
		testenv.Require(t)
	}
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	cl := testwrap.MakeClaim(c.Namespace(), "no-ip").Template("tmpl").Obj()
	if err := env.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Get(ctx, "no-ip")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Run(ctx, Shell("true")); !errors.Is(err, ErrNotReady) {
		t.Fatalf("err = %v, want ErrNotReady", err)
	}
}

func TestWaitErrorMessage(t *testing.T) {
	err := &WaitError{Kind: "SandboxClaim", Namespace: "ns", Name: "c", Reason: "TemplateNotFound",
		Message: `SandboxTemplate "py" not found`, Elapsed: 2e9, Err: ErrTimeout}
	want := `sandboxclaim ns/c not ready after 2s (last reason: TemplateNotFound: SandboxTemplate "py" not found): timed out`
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err.Error(), want)
	}
	if !errors.Is(err, ErrTimeout) || errors.Is(err, ErrNotFound) {
		t.Error("Is mismatch")
	}
	_ = context.Background
}
