package router

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// Routing headers. The canonical (textproto) spellings are used for direct map access so that
// parsing a request does not allocate.
const (
	HeaderSandboxID        = "X-Sandbox-ID"
	HeaderSandboxNamespace = "X-Sandbox-Namespace"
	HeaderSandboxPort      = "X-Sandbox-Port"
	// HeaderSandboxTimeout is the per-request timeout in seconds that upstream's clients send
	// (their Python router honours it; see ParseTimeout).
	HeaderSandboxTimeout = "X-Sandbox-Timeout"
	// HeaderWakeTimeout bounds, in seconds, how long a request to a paused Sandbox that wakes on
	// request waits for it to be ready (the router's --wake-timeout otherwise).
	HeaderWakeTimeout = "X-Sandbox-Wake-Timeout"

	canonID        = "X-Sandbox-Id"
	canonNamespace = "X-Sandbox-Namespace"
	canonPort      = "X-Sandbox-Port"
	canonTimeout   = "X-Sandbox-Timeout"
	canonWake      = "X-Sandbox-Wake-Timeout"
)

// Defaults applied when a routing header is absent or empty.
const (
	DefaultNamespace = "default"
	DefaultPort      = 8888
)

// Messages of the 400 answers; clients match on them, so they are part of the contract.
const (
	msgIDRequired       = "X-Sandbox-ID header is required."
	msgInvalidID        = "Invalid sandbox ID format."
	msgInvalidNamespace = "Invalid namespace format."
	msgInvalidPort      = "Invalid port format."
	msgInvalidTimeout   = "Invalid X-Sandbox-Timeout: want a positive number of seconds, such as 60 or 2.5."
	msgInvalidWake      = "Invalid X-Sandbox-Wake-Timeout: want a positive number of seconds, such as 30 or 2.5."
)

// Route is where a request asks to go: a Sandbox (namespace/name) and a port on its pod.
type Route struct {
	Namespace string
	Name      string
	Port      uint16
}

// routeError is a malformed routing header; its message is the 400 detail.
type routeError string

func (e routeError) Error() string { return string(e) }

// ParseRoute reads and validates the routing headers. A header sent more than once is rejected:
// two hops could otherwise disagree on which value wins.
func ParseRoute(h http.Header) (Route, error) {
	id, ok := single(h[canonID])
	if !ok {
		return Route{}, routeError(msgInvalidID)
	}
	if id == "" {
		return Route{}, routeError(msgIDRequired)
	}
	if !isDNS1123Label(id) {
		return Route{}, routeError(msgInvalidID)
	}

	ns, ok := single(h[canonNamespace])
	if !ok {
		return Route{}, routeError(msgInvalidNamespace)
	}
	if ns == "" {
		ns = DefaultNamespace
	} else if !isDNS1123Label(ns) {
		return Route{}, routeError(msgInvalidNamespace)
	}

	portStr, ok := single(h[canonPort])
	if !ok {
		return Route{}, routeError(msgInvalidPort)
	}
	port := uint16(DefaultPort)
	if portStr != "" {
		p, ok := parsePort(portStr)
		if !ok {
			return Route{}, routeError(msgInvalidPort)
		}
		port = p
	}
	return Route{Namespace: ns, Name: id, Port: port}, nil
}

// ParseTimeout reads X-Sandbox-Timeout: a positive, finite number of seconds (upstream's
// clients send "60" or "59.998"), capped at limit as upstream's Python router caps it at its
// proxy timeout. It returns 0 when the header is absent. Unlike upstream, which logs a bad value
// and falls back to its proxy timeout, a bad value is refused: the client learns its mistake.
func ParseTimeout(h http.Header, limit time.Duration) (time.Duration, error) {
	return parseSeconds(h[canonTimeout], limit, msgInvalidTimeout)
}

// ParseWakeTimeout reads X-Sandbox-Wake-Timeout like X-Sandbox-Timeout: 0 when absent.
func ParseWakeTimeout(h http.Header, limit time.Duration) (time.Duration, error) {
	return parseSeconds(h[canonWake], limit, msgInvalidWake)
}

// parseSeconds reads a header of positive seconds, capped at limit (when limit > 0).
func parseSeconds(vs []string, limit time.Duration, invalid string) (time.Duration, error) {
	v, ok := single(vs)
	if !ok {
		return 0, routeError(invalid)
	}
	if v == "" {
		return 0, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs <= 0 {
		return 0, routeError(invalid)
	}
	if limit > 0 && secs >= limit.Seconds() {
		return limit, nil
	}
	return max(time.Duration(secs*float64(time.Second)), time.Millisecond), nil
}

// hasSandboxID reports whether the request carries a routing header at all; requests without
// one may be the router's own health check.
func hasSandboxID(h http.Header) bool { return len(h[canonID]) > 0 }

func single(vs []string) (string, bool) {
	switch len(vs) {
	case 0:
		return "", true
	case 1:
		return vs[0], true
	default:
		return "", false
	}
}

// isDNS1123Label checks RFC 1123 label syntax (what Kubernetes uses for namespaces and pod
// hostnames) without a regexp, since it runs on every request.
func isDNS1123Label(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if alnum {
			continue
		}
		if c != '-' || i == 0 || i == len(s)-1 {
			return false
		}
	}
	return true
}

// parsePort accepts only ASCII digits (no sign, no spaces) in 1..65535; strconv.Atoi would
// also take "+80".
func parsePort(s string) (uint16, bool) {
	if len(s) == 0 || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}
