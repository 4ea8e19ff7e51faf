package router

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// Pass-through tests: what must survive the router unchanged — streaming in both directions,
// h2c with trailers (gRPC), and WebSocket upgrades.

// The client sees each chunk as soon as the sandbox flushes it: the upstream does not send the
// second chunk until the client has received the first.
func TestProxyStreamsResponse(t *testing.T) {
	release := make(chan struct{})
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "second\n")
	}))
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}})
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"http1", h1Client(t)}, {"h2c", h2cClient(t)}} {
		t.Run(c.name, func(t *testing.T) {
			release = make(chan struct{})
			resp, err := c.client.Do(routed(t, "GET", router.URL+"/stream", "sb", port, nil).WithContext(testCtx(t)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
				t.Fatalf("first chunk: %q, %v", line, err)
			}
			close(release)
			if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
				t.Fatalf("rest: %q, %v", rest, err)
			}
		})
	}
}

// The request body streams to the sandbox while the client is still writing, and (full duplex)
// the sandbox's answer to the first part reaches the client before the body ends.
func TestProxyStreamsRequestBodyFullDuplex(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = io.WriteString(w, "ack "+line)
			_ = rc.Flush()
		}
	}))
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}})
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"http1", h1Client(t)}, {"h2c", h2cClient(t)}} {
		t.Run(c.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			ctx := testCtx(t)
			// On failure the transport waits for the body writer; unblock it.
			stop := context.AfterFunc(ctx, func() { _ = pw.CloseWithError(ctx.Err()) })
			defer stop()
			req := routed(t, "POST", router.URL+"/stdin", "sb", port, pr).WithContext(ctx)
			// Write the first line before Do returns: Do waits for the response headers.
			go func() { _, _ = io.WriteString(pw, "one\n") }()
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || line != "ack one\n" {
				t.Fatalf("first ack: %q, %v", line, err)
			}
			if _, err := io.WriteString(pw, "two\n"); err != nil {
				t.Fatal(err)
			}
			if line, err := br.ReadString('\n'); err != nil || line != "ack two\n" {
				t.Fatalf("second ack: %q, %v", line, err)
			}
			_ = pw.Close()
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("rest: %q, %v", rest, err)
			}
		})
	}
}

// A gRPC-shaped exchange over h2c: length-prefixed messages, content-type application/grpc, and
// grpc-status in trailers, both declared in advance and not (as grpc-go servers send them).
func TestProxyGRPCTrailers(t *testing.T) {
	frame := func(msg string) []byte {
		b := make([]byte, 5+len(msg))
		binary.BigEndian.PutUint32(b[1:5], uint32(len(msg)))
		copy(b[5:], msg)
		return b
	}
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/grpc" || r.Header.Get("Te") != "trailers" {
			http.Error(w, "not grpc: "+r.Proto+" "+r.Header.Get("Content-Type")+" te="+r.Header.Get("Te"), 400)
			return
		}
		in, _ := io.ReadAll(r.Body)
		declared := r.URL.Path == "/pkg.Svc/Declared"
		if declared {
			w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(200)
		_, _ = w.Write(frame("echo:" + string(in[5:])))
		prefix := ""
		if !declared {
			prefix = http.TrailerPrefix
		}
		w.Header().Set(prefix+"Grpc-Status", "7")
		w.Header().Set(prefix+"Grpc-Message", "denied")
	}))
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}})
	client := h2cClient(t)
	for _, path := range []string{"/pkg.Svc/Declared", "/pkg.Svc/Undeclared"} {
		t.Run(path, func(t *testing.T) {
			req := routed(t, "POST", router.URL+path, "sb", port, strings.NewReader(string(frame("hi"))))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
				t.Fatalf("status %d proto %s body %q", resp.StatusCode, resp.Proto, body)
			}
			if body[5:] != "echo:hi" {
				t.Fatalf("body = %q", body)
			}
			if got := resp.Trailer.Get("Grpc-Status"); got != "7" {
				t.Fatalf("grpc-status trailer = %q (trailers %v)", got, resp.Trailer)
			}
			if got := resp.Trailer.Get("Grpc-Message"); got != "denied" {
				t.Fatalf("grpc-message trailer = %q", got)
			}
		})
	}
}

func TestProxyWebSocket(t *testing.T) {
	_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), msg...)); err != nil {
				return
			}
		}
	}))
	m := NewMetrics(nil)
	router := newRouter(t, routerOpts{resolver: &stubResolver{targets: map[string]Target{"default/sb": loopback}}, metrics: m})
	ctx := testCtx(t)
	h := http.Header{}
	h.Set(HeaderSandboxID, "sb")
	h.Set(HeaderSandboxPort, port)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(router.URL, "http")+"/ws", &websocket.DialOptions{
		HTTPHeader: h, HTTPClient: h1Client(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, msg := range []string{"hello", "world"} {
		if err := conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := conn.Read(ctx)
		if err != nil || string(got) != "echo:"+msg {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
}
