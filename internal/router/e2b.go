package router

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"k8s.io/client-go/rest"

	"github.com/agent-sandbox/agent-sandbox/internal/e2b/controlplane"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// The E2B port (--e2b-listen) serves E2B's SDKs: their REST API (the control plane, a handler
// of its own) and, for requests that name a sandbox with E2B's headers, envd inside it. The
// SDK sends E2b-Sandbox-Id (the Sandbox's name), E2b-Sandbox-Port (49983 for envd) and
// X-Access-Token, the envdAccessToken the control plane gave it: a scoped router token for that
// one Sandbox. The gate turns those into the router's own routing headers and a bearer token and
// hands the request to the same guard and proxy as the main port, so E2B traffic meets exactly
// the rules every other request meets: the token must verify and open this Sandbox (401/403),
// the port must be sandboxd's or declared, a paused Sandbox wakes on request.
const (
	headerE2BSandboxID   = "E2b-Sandbox-Id"
	headerE2BSandboxPort = "E2b-Sandbox-Port"
	headerE2BAccessToken = "X-Access-Token"

	// E2BEnvdPort is the port of envd, which sandboxd serves (its --envd-listen default) and the
	// SDK addresses.
	E2BEnvdPort uint16 = 49983
	// e2bCodeInterpreterPort is where @e2b/code-interpreter expects its Jupyter server, which our
	// images do not run.
	e2bCodeInterpreterPort = "49999"
)

// E2BOptions assemble the E2B port's handler.
type E2BOptions struct {
	// Signer verifies X-Access-Token, to learn the Sandbox's namespace; the guard verifies it again.
	Signer *scopedtoken.Signer
	// ControlPlane serves every request that names no sandbox (E2B's REST API); nil answers 404.
	ControlPlane http.Handler
	// Routed is the guard and proxy stack that serves the translated envd requests.
	Routed http.Handler
	Clock  func() time.Time
}

// NewE2BHandler is the E2B port: envd traffic (E2b-Sandbox-Id) is translated and routed, the
// rest goes to the control plane.
func NewE2BHandler(o E2BOptions) http.Handler {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.ControlPlane == nil {
		o.ControlPlane = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeE2BError(w, http.StatusNotFound, "This router serves no E2B control plane.")
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header[headerE2BSandboxID]; !ok {
			o.ControlPlane.ServeHTTP(w, r)
			return
		}
		code, msg := translateE2B(r, o.Signer, o.Clock())
		if code != 0 {
			writeE2BError(w, code, msg)
			return
		}
		o.Routed.ServeHTTP(w, r)
	})
}

// translateE2B rewrites an envd request in place into the router's headers; a non-zero code
// refuses it with msg. Whatever the caller sent as X-Sandbox-* or Authorization is replaced:
// the SDK's "Authorization: Basic <user>" names a user for envd, which sandboxd ignores, and
// must not reach the guard as a credential.
func translateE2B(r *http.Request, signer *scopedtoken.Signer, now time.Time) (int, string) {
	id, ok := single(r.Header[headerE2BSandboxID])
	if !ok || id == "" {
		return http.StatusBadRequest, "E2b-Sandbox-Id must be sent once, naming the sandbox."
	}
	port := strconv.Itoa(int(E2BEnvdPort))
	if vs, sent := r.Header[headerE2BSandboxPort]; sent {
		p, ok := single(vs)
		if _, valid := parsePort(p); !ok || !valid {
			return http.StatusBadRequest, "E2b-Sandbox-Port must be sent once, a port number (1..65535)."
		}
		port = p
	}
	if port == e2bCodeInterpreterPort {
		return http.StatusNotImplemented, "E2B's code interpreter (a Jupyter server on port 49999) is not served: " +
			"run code with commands.run (for example python3 -c '...')."
	}
	token, ok := single(r.Header[headerE2BAccessToken])
	if !ok || token == "" {
		return http.StatusUnauthorized, "X-Access-Token is required: the envdAccessToken the control plane returned for this sandbox " +
			"(signed URLs without it are not served through the router)."
	}
	claims, err := signer.Verify(token, now)
	if err != nil {
		if errors.Is(err, scopedtoken.ErrExpired) {
			return http.StatusUnauthorized, "The access token has expired: connect to the sandbox again for a new one."
		}
		return http.StatusUnauthorized, "Invalid access token."
	}
	h := r.Header
	for _, k := range []string{canonID, canonNamespace, canonPort, headerE2BAccessToken} {
		h.Del(k)
	}
	h.Set(canonID, id)
	h.Set(canonNamespace, claims.Namespace)
	h.Set(canonPort, port)
	h.Set("Authorization", "Bearer "+token)
	return 0, ""
}

// writeE2BError answers in the shape E2B's SDKs read from both the control plane and envd.
func writeE2BError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg})
}

// withE2B adds the E2B port's server to servers when --e2b-listen asks for it; the returned
// func closes its proxy's connections.
func (o *Options) withE2B(servers []*http.Server, cfg *rest.Config, popts ProxyOptions, guard GuardOptions, m *Metrics,
	log *slog.Logger) ([]*http.Server, func(), error) {
	if o.E2BListen == "" {
		return servers, func() {}, nil
	}
	e2b, closeProxy, err := o.e2bServer(cfg, popts, guard, m, log)
	if err != nil {
		return nil, nil, err
	}
	return append(servers, e2b), closeProxy, nil
}

// e2bServer is the E2B port's server. Its proxy is the main port's with envd's port added to
// sandboxd's: routed to on every Sandbox, and given the claim's session env like sandboxd's others.
func (o *Options) e2bServer(cfg *rest.Config, popts ProxyOptions, guard GuardOptions, m *Metrics, log *slog.Logger) (*http.Server, func(), error) {
	signer, err := o.scopedSigner()
	if err != nil {
		return nil, nil, err
	}
	controlPlane, err := controlplane.New(controlplane.Options{Config: cfg, Signer: signer, Domain: o.E2BDomain, Log: log})
	if err != nil {
		return nil, nil, err
	}
	proxy := NewProxy(e2bProxyOptions(popts))
	routed := NewHandler(HandlerOptions{Proxy: proxy, Guard: guard, Metrics: m, Logger: log, AccessLog: o.AccessLog,
		TracerProvider: o.TracerProvider})
	h := NewE2BHandler(E2BOptions{Signer: signer, ControlPlane: controlPlane, Routed: routed})
	return o.proxyServer(o.E2BListen, h, log), proxy.Close, nil
}

// e2bProxyOptions are the main port's proxy options with envd's port added to sandboxd's.
func e2bProxyOptions(popts ProxyOptions) ProxyOptions {
	sandboxd := popts.SandboxdPorts
	if sandboxd == nil {
		sandboxd = DefaultAllowedPorts
	}
	popts.AllowedPorts = append(slices.Clone(popts.AllowedPorts), E2BEnvdPort)
	popts.SandboxdPorts = append(slices.Clone(sandboxd), E2BEnvdPort)
	return popts
}
