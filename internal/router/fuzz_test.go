package router

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

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
