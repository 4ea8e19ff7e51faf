package router

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseRoute feeds arbitrary routing headers, each possibly sent twice, to ParseRoute. It
// must never panic, and whatever it accepts must be routable as is: a namespace and a name that
// are DNS-1123 labels, and a port in 1..65535 that is exactly what the client wrote in decimal.
// The seed corpus is testdata/fuzz/FuzzParseRoute; a longer run is documented in
// docs/security.md ("Bad input and fuzzing").
func FuzzParseRoute(f *testing.F) {
	f.Add("sb", "", "", uint8(0))
	f.Add("sb", "team-a", "8888", uint8(0))
	f.Add("SB", "kube-system.svc", "+80", uint8(0))
	f.Add("sb", "default", "65536", uint8(7))
	f.Fuzz(func(t *testing.T, id, ns, port string, dup uint8) {
		h := http.Header{}
		set := func(canon, v string, twice bool) { // an empty value means what an absent one does
			h[canon] = []string{v}
			if twice {
				h[canon] = append(h[canon], v)
			}
		}
		set(canonID, id, dup&1 != 0)
		set(canonNamespace, ns, dup&2 != 0)
		set(canonPort, port, dup&4 != 0)

		route, err := ParseRoute(h)
		if err != nil {
			switch err.Error() {
			case msgIDRequired, msgInvalidID, msgInvalidNamespace, msgInvalidPort:
			default:
				t.Fatalf("ParseRoute(%q) = error %q, not one of the documented 400 details", h, err)
			}
			return
		}
		for _, k := range []string{canonID, canonNamespace, canonPort} {
			if len(h[k]) > 1 {
				t.Fatalf("ParseRoute(%q) accepted %s sent twice", h, k)
			}
		}
		if errs := validation.IsDNS1123Label(route.Name); len(errs) != 0 {
			t.Fatalf("ParseRoute(%q) accepted name %q: %v", h, route.Name, errs)
		}
		if errs := validation.IsDNS1123Label(route.Namespace); len(errs) != 0 {
			t.Fatalf("ParseRoute(%q) accepted namespace %q: %v", h, route.Namespace, errs)
		}
		if route.Name != id {
			t.Fatalf("ParseRoute(%q) routes to name %q, not the one sent", h, route.Name)
		}
		if ns != "" && route.Namespace != ns {
			t.Fatalf("ParseRoute(%q) routes to namespace %q, not the one sent", h, route.Namespace)
		}
		if route.Port == 0 {
			t.Fatalf("ParseRoute(%q) accepted port 0", h)
		}
		if port != "" {
			n, err := strconv.Atoi(port)
			if err != nil || n != int(route.Port) || strings.TrimLeft(port, "0123456789") != "" {
				t.Fatalf("ParseRoute(%q) routes to port %d from %q", h, route.Port, port)
			}
		}
	})
}

// FuzzBearerToken feeds arbitrary Authorization headers (one or two) to the token parsing of
// the guard. It must never panic; a token it returns is non-empty, trimmed, comes from a single
// header whose scheme is "Bearer" in any case, and is exactly the rest of that header.
func FuzzBearerToken(f *testing.F) {
	f.Add("Bearer s3cret", "", false)
	f.Add("bearer   tok  ", "", false)
	f.Add("Basic czNjcmV0Og==", "", false)
	f.Add("Bearer a", "Bearer b", true)
	f.Fuzz(func(t *testing.T, v1, v2 string, two bool) {
		h := http.Header{"Authorization": {v1}}
		if two {
			h["Authorization"] = append(h["Authorization"], v2)
		}
		token, ok := bearerToken(h)
		if !ok {
			if token != "" {
				t.Fatalf("bearerToken(%q) = %q, false: a refusal returned a token", h["Authorization"], token)
			}
			return
		}
		if two {
			t.Fatalf("bearerToken(%q) accepted two Authorization headers", h["Authorization"])
		}
		if token == "" || token != strings.TrimSpace(token) {
			t.Fatalf("bearerToken(%q) = %q: empty or untrimmed", v1, token)
		}
		scheme, rest, _ := strings.Cut(v1, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(rest) != token {
			t.Fatalf("bearerToken(%q) = %q: not the rest of a Bearer header", v1, token)
		}
	})
}

// FuzzProxyRoutesOnlyToTheCache sends requests with arbitrary routing headers, Host, request
// target and X-Sandbox-Pod-IP through the proxy port's handler. Whatever they say, the router
// may only dial the address its cache holds for a Sandbox (a stand-in on 127.0.0.2), on a port
// the Sandbox declares (the stand-in's and the canary's) or the allowlist's: a canary on
// 127.0.0.1 must never be reached, and every answer is one the router documents. In the inputs,
// $PORT stands for the stand-in's port and $CANARY for the canary's.
func FuzzProxyRoutesOnlyToTheCache(f *testing.F) {
	var standInHits, canaryHits atomic.Int64
	standIn := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		standInHits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		f.Fatalf("listening on 127.0.0.2: %v", err)
	}
	standIn.Listener = l
	standIn.Start()
	f.Cleanup(standIn.Close)
	canary, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = canary.Close() })
	go func() {
		for {
			c, err := canary.Accept()
			if err != nil {
				return
			}
			canaryHits.Add(1)
			_ = c.Close()
		}
	}()
	standInPort, canaryPort := uint16(l.Addr().(*net.TCPAddr).Port), uint16(canary.Addr().(*net.TCPAddr).Port)
	declared := []uint16{standInPort, canaryPort}
	slices.Sort(declared)
	sandbox := Target{Addr: netip.MustParseAddr("127.0.0.2"), UID: "uid", Ports: declared}
	p := NewProxy(ProxyOptions{Resolver: &stubResolver{targets: map[string]Target{"default/sb": sandbox, "team-a/sb": sandbox}},
		DialTimeout: time.Second, DeclaredPortsOnly: true, AllowedPorts: DefaultAllowedPorts})
	f.Cleanup(p.Close)
	h := NewHandler(HandlerOptions{Proxy: p})
	ports := strings.NewReplacer("$PORT", strconv.Itoa(l.Addr().(*net.TCPAddr).Port),
		"$CANARY", strconv.Itoa(canary.Addr().(*net.TCPAddr).Port))

	f.Add("sb", "", "$PORT", "", "", "/x")
	f.Add("sb", "team-a", "$CANARY", "127.0.0.1", "127.0.0.1:$CANARY", "http://127.0.0.1:$CANARY/")
	f.Add("169.254.169.254", "default", "80", "169.254.169.254", "169.254.169.254", "/latest/meta-data/")
	f.Add("kubernetes", "default", "443", "", "kubernetes.default.svc", "/api")
	f.Add("sb", "default", "10250", "", "", "/pods")
	f.Fuzz(func(t *testing.T, id, ns, port, podIP, host, target string) {
		id, ns, port, podIP, host, target = ports.Replace(id), ports.Replace(ns), ports.Replace(port),
			ports.Replace(podIP), ports.Replace(host), ports.Replace(target)
		for _, v := range []string{id, ns, port, podIP, host} {
			if !httpguts.ValidHeaderFieldValue(v) {
				return // net/http refuses such a request before any handler sees it
			}
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		req := &http.Request{Method: http.MethodGet, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Host: host, RemoteAddr: "192.0.2.1:40000", Body: http.NoBody, Header: http.Header{
				canonID: {id}, canonNamespace: {ns}, canonPort: {port}, "X-Sandbox-Pod-Ip": {podIP},
			}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hitsBefore := standInHits.Load()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		if n := canaryHits.Load(); n != 0 {
			t.Fatalf("id %q ns %q port %q pod-ip %q host %q target %q reached the canary", id, ns, port, podIP, host, target)
		}
		switch rec.Code {
		case http.StatusOK:
			if standInHits.Load() != hitsBefore+1 {
				t.Fatalf("200 for id %q ns %q port %q without the sandbox answering", id, ns, port)
			}
			if id != "sb" || (ns != "" && ns != "default" && ns != "team-a") {
				t.Fatalf("id %q ns %q reached the sandbox default/sb", id, ns)
			}
			if r, err := ParseRoute(req.Header); err != nil || r.Port != standInPort {
				t.Fatalf("port %q reached the sandbox, want only its declared port %d to answer", port, standInPort)
			}
		case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusBadGateway:
			if standInHits.Load() != hitsBefore {
				t.Fatalf("status %d for id %q ns %q port %q, yet the sandbox was reached", rec.Code, id, ns, port)
			}
		default:
			t.Fatalf("id %q ns %q port %q host %q target %q: status %d %q, not a documented answer", id, ns, port, host, target, rec.Code, rec.Body.String())
		}
	})
}
