package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/router/access"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
)

// GuardOptions say how the proxy port checks callers. A nil Authenticator lets every request
// through (--auth-mode none).
type GuardOptions struct {
	Authenticator access.Authenticator
	// Authorizer decides per sandbox; nil allows every authenticated caller everywhere.
	Authorizer access.Authorizer
	// Pods, when set, names a request without a token by the pod its connection comes from
	// (--identify-pods); a source that names no pod is refused (401). Nobody is ever authorized
	// as system:anonymous: a binding for it would open a sandbox to every network peer.
	Pods access.PodIdentifier
	// HeldRights: the Authorizer accepts the rights of access.HeldRightsReviewer, so a 403 names them all.
	HeldRights bool
}

// guard authenticates (401/503), lets the proxy answer malformed routing headers (400), then
// authorizes the caller for the routed Sandbox (403).
func guard(o GuardOptions, m *Metrics, log *slog.Logger, next http.Handler) http.Handler {
	if o.Authenticator == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := authenticate(w, r, o, m, log)
		if !ok {
			return
		}
		route, err := ParseRoute(r.Header)
		if err != nil || o.Authorizer == nil {
			m.authzDecision(r.Header, decisionAllow)
			next.ServeHTTP(w, r)
			return
		}
		allowed, err := o.Authorizer.Authorize(r.Context(), id, route.Namespace, route.Name)
		switch {
		case err != nil:
			m.unavailable("authorization")
			logging.FromContext(r.Context(), log).Error("authorization unavailable", "err", err)
			writeDetail(w, http.StatusServiceUnavailable, "Authorization is temporarily unavailable.")
		case allowed:
			m.authzDecision(r.Header, decisionAllow)
			if id.Scope != nil {
				// The proxy checks the token's UID against the Sandbox it resolves, in the same
				// lookup that gives the address.
				r = r.WithContext(context.WithValue(r.Context(), scopeKey{}, id.Scope))
			}
			next.ServeHTTP(w, r)
		default:
			m.authzDecision(r.Header, decisionDeny)
			writeDetail(w, http.StatusForbidden, forbiddenMessage(id, route, o.HeldRights))
		}
	})
}

func forbiddenMessage(id *access.Identity, route Route, heldRights bool) string {
	if id.Scope != nil {
		return fmt.Sprintf("This token opens sandbox %s/%s only, not %s/%s.", id.Scope.Namespace, id.Scope.Name, route.Namespace, route.Name)
	}
	if heldRights {
		from := ""
		if id.Pod != "" {
			from = fmt.Sprintf(" (pod %s)", id.Pod)
		}
		return fmt.Sprintf("User %q%s may not reach sandbox %s/%s: it holds none of %s.",
			id.User.Username, from, route.Namespace, route.Name, access.HeldRightsText(route.Namespace, route.Name))
	}
	return fmt.Sprintf("User %q may not reach sandbox %s/%s: it needs %s on %s/%s in API group %s.",
		id.User.Username, route.Namespace, route.Name, access.ProxyVerb, access.ProxyResource, access.ProxySubresource, access.ProxyGroup)
}

// staleScopeMessage answers a scoped token whose Sandbox UID is not the one the name has now:
// the Sandbox it was minted for is gone and the name was reused.
func staleScopeMessage(route Route) string {
	return fmt.Sprintf("This token opens an earlier sandbox named %s/%s, not the one that has the name now.", route.Namespace, route.Name)
}

type scopeKey struct{}

// scopeFrom returns the scoped token's claims the request was let in with, or nil.
func scopeFrom(ctx context.Context) *scopedtoken.Claims {
	c, _ := ctx.Value(scopeKey{}).(*scopedtoken.Claims)
	return c
}

// authenticate answers 401/503 itself and reports false when the request must stop here.
func authenticate(w http.ResponseWriter, r *http.Request, o GuardOptions, m *Metrics, log *slog.Logger) (*access.Identity, bool) {
	deny := func(msg, challenge string) (*access.Identity, bool) {
		m.authzDecision(r.Header, decisionDeny)
		w.Header().Set("WWW-Authenticate", challenge)
		writeDetail(w, http.StatusUnauthorized, msg)
		return nil, false
	}
	if len(r.Header["Authorization"]) == 0 && o.Pods != nil {
		id, err := podOf(r, o.Pods)
		if err == nil {
			return id, true
		}
		if ex := (*access.ExcludedPodError)(nil); errors.As(err, &ex) {
			return deny("No bearer token, and the connection comes from a pod of namespace "+ex.Namespace+
				", whose pods are never named by their address: they must send a bearer token.", `Bearer realm="sandbox-router"`)
		}
		return deny("No bearer token, and the connection comes from no pod the router can name "+
			"(the node, a host-network pod, or outside the cluster): send a bearer token.", `Bearer realm="sandbox-router"`)
	}
	token, ok := bearerToken(r.Header)
	if !ok {
		return deny("Missing or malformed bearer token.", `Bearer realm="sandbox-router"`)
	}
	id, err := o.Authenticator.Authenticate(r.Context(), token)
	switch {
	case err == nil:
		return id, true
	case errors.Is(err, access.ErrUnauthenticated):
		return deny("Invalid bearer token.", `Bearer realm="sandbox-router", error="invalid_token"`)
	default:
		// The error never contains the token: authenticators below do not put it there.
		m.unavailable("authentication")
		logging.FromContext(r.Context(), log).Error("authentication unavailable", "err", err)
		writeDetail(w, http.StatusServiceUnavailable, "Authentication is temporarily unavailable.")
		return nil, false
	}
}

// podOf names the pod the connection comes from. Only the connection's own source address
// counts: X-Forwarded-For and the like are written by the caller.
func podOf(r *http.Request, pods access.PodIdentifier) (*access.Identity, error) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return nil, access.ErrNoPod
	}
	return pods.Identify(ap.Addr())
}

// bearerToken returns the token of a single "Authorization: Bearer <token>" header.
func bearerToken(h http.Header) (string, bool) {
	vs := h["Authorization"]
	if len(vs) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
