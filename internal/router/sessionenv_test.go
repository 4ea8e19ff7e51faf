package router

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// withSessionEnv gives the Sandbox the annotation a warm claim's adoption writes.
func withSessionEnv(sb *agentsv1beta1.Sandbox, raw string) *agentsv1beta1.Sandbox {
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[agentsv1beta1.SessionEnvAnnotation] = raw
	return sb
}

func TestSessionEnvAnnotationBecomesTheSandboxdHeader(t *testing.T) {
	tests := []struct {
		name       string
		annotation *string
		wantEnv    map[string]string // decoded from Target.SessionEnv; nil: no header
		wantReason string            // the refusal's reason, when the annotation is unusable
	}{
		{"no annotation", nil, nil, ""},
		{"a claim's env", ptr(`{"API_KEY":"k-1","TASK":"t 7"}`), map[string]string{"API_KEY": "k-1", "TASK": "t 7"}, ""},
		{"not JSON", ptr(`API_KEY=k-1`), nil, reasonBadSessionEnv},
		{"a bad name", ptr(`{"A=B":"x"}`), nil, reasonBadSessionEnv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := ready()
			if tc.annotation != nil {
				withSessionEnv(sb, *tc.annotation)
			}
			slim, _ := slimSandbox(sb) // what the informer stores
			c := NewSandboxCache(false)
			c.OnAdd(slim, true)
			got, err := c.Resolve("ns", "sb")
			if tc.wantReason != "" {
				var re *ResolveError
				if !errors.As(err, &re) || !errors.Is(err, ErrRefused) || !strings.HasPrefix(re.Reason, tc.wantReason) ||
					!strings.Contains(re.Error(), agentsv1beta1.SessionEnvAnnotation) {
					t.Fatalf("Resolve = %v; want ErrRefused, reason %s naming the annotation", err, tc.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if tc.wantEnv == nil {
				if got.SessionEnv != "" {
					t.Fatalf("SessionEnv = %q; want none without the annotation", got.SessionEnv)
				}
				return
			}
			env, err := wire.DecodeSessionEnv(got.SessionEnv)
			if err != nil || !maps.Equal(env, tc.wantEnv) {
				t.Fatalf("SessionEnv decodes to %v, %v; want %v", env, err, tc.wantEnv)
			}
		})
	}
}

func TestTheRouterSendsTheSessionEnvToSandboxdAlone(t *testing.T) {
	claimEnv, err := wire.EncodeSessionEnv(map[string]string{"API_KEY": "k-1"})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := wire.EncodeSessionEnv(map[string]string{"LD_PRELOAD": "/workspace/evil.so"})
	warm := Target{Addr: loopback.Addr, SessionEnv: claimEnv}
	tests := []struct {
		name     string
		target   Target
		sandboxd bool   // the stand-in listens on one of sandboxd's ports
		sent     string // the header as the client sends it; "" for none
		wantSeen []string
	}{
		{"a warm claim's sandbox gets its env", warm, true, "", []string{claimEnv}},
		{"the claim's env replaces a client's", warm, true, forged, []string{claimEnv}},
		{"a client's is dropped where there is none", loopback, true, forged, nil},
		{"another port of the pod (a sidecar) never sees it", warm, false, "", nil},
		{"nor a client's", warm, false, forged, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan []string, 1)
			_, port := newUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen <- r.Header.Values(wire.HeaderSessionEnv)
			}))
			sandboxd := []uint16{1} // the stand-in's port is not sandboxd's
			if tc.sandboxd {
				sandboxd = []uint16{mustPort(t, port)}
			}
			router := newRouter(t, routerOpts{sandboxd: sandboxd,
				resolver: &stubResolver{targets: map[string]Target{"default/sb": tc.target}}})
			req := routed(t, "GET", router.URL+"/v1/metadata", "sb", port, nil)
			if tc.sent != "" {
				req.Header.Set(wire.HeaderSessionEnv, tc.sent)
			}
			resp, err := h1Client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if got := <-seen; !slices.Equal(got, tc.wantSeen) {
				t.Fatalf("the pod saw %s %q; want %q", wire.HeaderSessionEnv, got, tc.wantSeen)
			}
		})
	}
}

func ptr(s string) *string { return &s }
