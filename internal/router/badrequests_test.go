package router

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The bad-request corpus of the router: testdata/badrequests.yaml. Each case is sent byte for
// byte over a fresh TCP connection (so that duplicated, malformed and oversized headers reach
// the server as written) to a router in front of a stub cache:
//
//	default/sb, team-a/sb  -> 127.0.0.2, where a sandbox stand-in listens on {{port}}; they
//	                          declare {{port}}, {{canary}} and {{dead}}, and no other port
//	default/pending        -> not ready (PodPending), same ports
//	default/hostnet        -> uses host networking: never routed to
//	default/pool-member    -> an unclaimed warm pool member
//
// The router runs with the port rule on and the default allowlist (8888, 9090).
//
// A canary listens on 127.0.0.1:{{canary}}: every address trick a client can try is aimed at it,
// and no case may ever reach it. The router never takes an address from the client; the only
// place a request can go is the stand-in, and only when the case says it does.

// badRequest is one entry of the corpus.
type badRequest struct {
	Name string `json:"name"`
	// Server is "open" (no authentication, the default) or "token" (--auth-mode token with the
	// shared token s3cret).
	Server string `json:"server,omitempty"`
	Method string `json:"method,omitempty"` // default GET
	// Target is the request-target as sent (default /x): origin form, absolute form or, for
	// CONNECT, authority form. No normalisation happens on the way.
	Target string `json:"target,omitempty"`
	// Host is the Host header (default "router").
	Host string `json:"host,omitempty"`
	// Headers are raw "Name: value" lines, sent in order (duplicates stay duplicates). The
	// runner adds Content-Length for Body unless they frame the body themselves.
	Headers []string `json:"headers,omitempty"`
	Body    string   `json:"body,omitempty"`
	// BodyBytes, when set, sends that many bytes of 'a' as the body.
	BodyBytes int `json:"bodyBytes,omitempty"`
	// HeaderBytes, when set, adds an X-Padding header of that many bytes.
	HeaderBytes int `json:"headerBytes,omitempty"`

	// Status is the status code expected.
	Status int `json:"status"`
	// Detail is the router's exact {"detail": ...} answer, when the router answers itself.
	Detail string `json:"detail,omitempty"`
	// BodyContains must appear in the response body (answers of net/http itself).
	BodyContains string `json:"bodyContains,omitempty"`
	// Reached says the sandbox stand-in must have received the request; otherwise it must not.
	Reached bool `json:"reached,omitempty"`
	// Upstream, when Reached, is what the stand-in must have seen.
	Upstream *upstreamView `json:"upstream,omitempty"`
}

// upstreamView is what the sandbox stand-in reports about the request it received.
type upstreamView struct {
	Method     string `json:"method,omitempty"`
	RequestURI string `json:"requestURI,omitempty"`
	Host       string `json:"host,omitempty"`
	// Authorization is the Authorization header the sandbox got ("" when stripped).
	Authorization string `json:"authorization,omitempty"`
	BodyBytes     int    `json:"bodyBytes,omitempty"`
}

const badRequestToken = "s3cret"

// badRequestRig is the router under test, its stand-in and its canary.
type badRequestRig struct {
	routers  map[string]string    // server kind -> address
	port     string               // the stand-in's port on 127.0.0.2
	canary   string               // the canary's port on 127.0.0.1
	dead     string               // a closed port
	hits     atomic.Int64         // requests the stand-in received
	canaried atomic.Int64         // connections the canary accepted
	errLog   *testwrap.SyncBuffer // the routers' net/http error log: panics land here
}

func newBadRequestRig(t *testing.T) *badRequestRig {
	t.Helper()
	rig := &badRequestRig{routers: map[string]string{}, errLog: &testwrap.SyncBuffer{}}

	standIn := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.hits.Add(1)
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(upstreamView{Method: r.Method, RequestURI: r.RequestURI, Host: r.Host,
			Authorization: r.Header.Get("Authorization"), BodyBytes: int(n)})
	}))
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listening on 127.0.0.2: %v", err)
	}
	standIn.Listener = l
	standIn.Start()
	t.Cleanup(standIn.Close)
	rig.port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	canary, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = canary.Close() })
	go func() {
		for {
			c, err := canary.Accept()
			if err != nil {
				return
			}
			rig.canaried.Add(1)
			_ = c.Close()
		}
	}()
	rig.canary = strconv.Itoa(canary.Addr().(*net.TCPAddr).Port)
	rig.dead = closedPort(t)

	// The sandbox declares the stand-in's port, and the canary's and the dead port too, so that
	// the cases aimed at those are dialled (at the sandbox's IP) rather than refused up front.
	declared := []uint16{mustPort(t, rig.port), mustPort(t, rig.canary), mustPort(t, rig.dead)}
	slices.Sort(declared)
	sandbox := Target{Addr: netip.MustParseAddr("127.0.0.2"), UID: "uid-sb", Ports: declared}
	known := Target{UID: "uid-other", Ports: declared}
	res := &stubResolver{
		targets: map[string]Target{"default/sb": sandbox, "team-a/sb": sandbox,
			"default/pending": known, "default/hostnet": known, "default/pool-member": known},
		errs: map[string]error{
			"default/pending":     &ResolveError{Kind: ErrNotReady, Namespace: "default", Name: "pending", Reason: "PodPending"},
			"default/hostnet":     &ResolveError{Kind: ErrRefused, Namespace: "default", Name: "hostnet", Reason: reasonHostNetwork},
			"default/pool-member": &ResolveError{Kind: ErrUnclaimed, Namespace: "default", Name: "pool-member"},
		},
	}
	tokenAuth, err := access.NewStaticTokenAuthenticator(badRequestToken)
	if err != nil {
		t.Fatal(err)
	}
	for kind, g := range map[string]GuardOptions{"open": {}, "token": {Authenticator: tokenAuth}} {
		p := NewProxy(ProxyOptions{Resolver: res, DialRetries: 1, RetryBackoff: time.Millisecond,
			DeclaredPortsOnly: true, AllowedPorts: DefaultAllowedPorts})
		srv := httptest.NewUnstartedServer(NewHandler(HandlerOptions{Proxy: p, Guard: g}))
		srv.Config.Protocols = bothProtocols()
		srv.Config.ErrorLog = log.New(rig.errLog, "", 0)
		srv.Start()
		t.Cleanup(func() {
			srv.Close()
			p.Close()
		})
		rig.routers[kind] = srv.Listener.Addr().String()
	}
	return rig
}

func (rig *badRequestRig) expand(s string) string {
	return strings.NewReplacer("{{port}}", rig.port, "{{canary}}", rig.canary, "{{dead}}", rig.dead).Replace(s)
}

// raw renders the case as the bytes sent on the wire.
func (rig *badRequestRig) raw(c badRequest) []byte {
	var b bytes.Buffer
	method, target, host := c.Method, rig.expand(c.Target), rig.expand(c.Host)
	if method == "" {
		method = "GET"
	}
	if target == "" {
		target = "/x"
	}
	if host == "" {
		host = "router"
	}
	body := c.Body
	if c.BodyBytes > 0 {
		body = strings.Repeat("a", c.BodyBytes)
	}
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
	framed := false // the case frames the body itself
	for _, h := range c.Headers {
		b.WriteString(rig.expand(h) + "\r\n")
		name, _, _ := strings.Cut(strings.ToLower(h), ":")
		framed = framed || name == "content-length" || name == "transfer-encoding"
	}
	if c.HeaderBytes > 0 {
		b.WriteString("X-Padding: " + strings.Repeat("p", c.HeaderBytes) + "\r\n")
	}
	if body != "" && !framed {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString(body)
	return b.Bytes()
}

// send writes the request on a fresh connection and reads the answer.
func sendRaw(t *testing.T, addr string, req []byte) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	// The server may answer (431, 400) and close before it read everything; a failed write is
	// then expected, and the answer is what counts.
	go func() { _, _ = conn.Write(req) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no HTTP answer (did the server crash or drop the connection?): %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, body
}

func loadBadRequests(t *testing.T, path string) []badRequest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []badRequest
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	seen := map[string]bool{}
	for i, c := range cases {
		if c.Name == "" || seen[c.Name] || c.Status == 0 {
			t.Fatalf("%s case %d (%q): needs a unique name and a status", path, i, c.Name)
		}
		seen[c.Name] = true
	}
	return cases
}

func TestBadRequestsToTheRouter(t *testing.T) {
	cases := loadBadRequests(t, "testdata/badrequests.yaml")
	rig := newBadRequestRig(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			server := c.Server
			if server == "" {
				server = "open"
			}
			addr, ok := rig.routers[server]
			if !ok {
				t.Fatalf("unknown server %q", server)
			}
			hitsBefore := rig.hits.Load()
			resp, body := sendRaw(t, addr, rig.raw(c))
			if resp.StatusCode != c.Status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, c.Status, truncate(body))
			}
			if c.Detail != "" {
				var d struct{ Detail string }
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
				if err := json.Unmarshal(body, &d); err != nil || d.Detail != c.Detail {
					t.Errorf("detail %q (body %q), want %q", d.Detail, truncate(body), c.Detail)
				}
			}
			if !bytes.Contains(body, []byte(rig.expand(c.BodyContains))) {
				t.Errorf("body %q does not contain %q", truncate(body), c.BodyContains)
			}
			reached := rig.hits.Load() - hitsBefore
			switch {
			case c.Reached && reached != 1:
				t.Errorf("the sandbox received %d requests, want 1", reached)
			case !c.Reached && reached != 0:
				t.Errorf("the sandbox received %d requests, want none: the router must answer itself", reached)
			}
			if c.Reached && c.Upstream != nil {
				var got upstreamView
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("the stand-in's answer %q: %v", truncate(body), err)
				}
				want := *c.Upstream
				want.Host = rig.expand(want.Host)
				if got != want {
					t.Errorf("the sandbox saw %+v, want %+v", got, want)
				}
			}
			if n := rig.canaried.Load(); n != 0 {
				t.Errorf("the canary at 127.0.0.1:%s was reached %d times: the router dialled an address the client chose", rig.canary, n)
			}
		})
	}
	if t.Failed() {
		return
	}
	if s := rig.errLog.String(); strings.Contains(s, "panic") {
		t.Errorf("the router panicked:\n%s", s)
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
