package sdk

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// deadRouterAddr is a loopback address nothing listens on (yet).
func deadRouterAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// routerComesUpAt starts, after delay, a replica at addr that forwards to target: a router
// Service whose dead replica is replaced by a live one.
func routerComesUpAt(t *testing.T, addr, target string, delay time.Duration) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ts *httptest.Server
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(delay)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listening on %s: %v", addr, err)
			return
		}
		mu.Lock()
		ts = httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
		ts.Config.Protocols = new(http.Protocols) // h2c, as the router speaks it, and HTTP/1.1
		ts.Config.Protocols.SetHTTP1(true)
		ts.Config.Protocols.SetUnencryptedHTTP2(true)
		_ = ts.Listener.Close()
		ts.Listener = l
		ts.Start()
		mu.Unlock()
	}()
	t.Cleanup(func() {
		<-done
		mu.Lock()
		defer mu.Unlock()
		if ts != nil {
			ts.CloseClientConnections()
			ts.Close()
		}
	})
}

// A router replica that died refuses connections until its Service drops it. Nothing reached
// it, so the SDK dials again, for a few seconds, whatever the request: a command (POST) and an
// interactive one (WebSocket) both reach the replica that comes up; with none, the dial error
// is reported after the window.
func TestRouterModeRedialsARouterThatRefusesConnections(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stdin   bool // the WebSocket path
		upAfter time.Duration
		wantErr bool
	}{
		{name: "command, a replica answers within the window", upAfter: 400 * time.Millisecond},
		{name: "streaming command, a replica answers within the window", stdin: true, upAfter: 400 * time.Millisecond},
		{name: "command, no replica answers", upAfter: -1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := deadRouterAddr(t)
			var live string
			p := newPlane(t, ModeRouter, func(o *Options) { live, o.RouterURL = o.RouterURL, "http://"+addr })
			if tc.upAfter >= 0 {
				routerComesUpAt(t, addr, live, tc.upAfter)
			}
			var opts []RunOption
			if tc.stdin {
				opts = append(opts, WithStdin(&slowReader{r: strings.NewReader("hi\n")}))
			}
			res, err := p.sb.Run(testCtx(t), Shell("cat; echo done"), opts...)
			switch {
			case tc.wantErr && (err == nil || !errors.Is(err, syscall.ECONNREFUSED)):
				t.Fatalf("Run with no router: %v, want the refused connection reported", err)
			case !tc.wantErr && err != nil:
				t.Fatalf("Run: %v, want it to reach the replica that came up after %s", err, tc.upAfter)
			case !tc.wantErr && !strings.Contains(res.Stdout, "done"):
				t.Fatalf("stdout %q, want the command's output", res.Stdout)
			}
		})
	}
}

// slowReader is a stdin the SDK cannot read into memory at once, so it streams (WebSocket).
type slowReader struct{ r *strings.Reader }

func (s *slowReader) Read(b []byte) (int, error) { return s.r.Read(b) }

// A router that takes the request and dies before answering: the call may have run, so it is
// reported as ErrConnectionLost and not sent again.
func TestRouterModeReportsAConnectionCutAfterTheRequestWentOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted sync.WaitGroup
	accepted.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 4096)) // the request arrives
			_ = c.Close()                     // and the router dies
		}
	})
	t.Cleanup(func() { _ = l.Close(); accepted.Wait() })
	p := newPlane(t, ModeRouter, func(o *Options) { o.RouterURL = "http://" + l.Addr().String() })
	_, err = p.sb.Run(testCtx(t), Shell("echo once"))
	if !errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "POST /v1/exec") {
		t.Fatalf("Run through a router that dies mid-request: %v, want ErrConnectionLost naming the call", err)
	}
}
