package sdk

import (
	"net/http"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

// claimVersions records the API version of every SandboxClaim request sent through a REST config.
type claimVersions struct {
	mu   sync.Mutex
	seen []string
}

var claimPath = regexp.MustCompile(`/apis/extensions\.agents\.x-k8s\.io/(v1[a-z0-9]*)/namespaces/[^/]+/sandboxclaims`)

func (v *claimVersions) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if m := claimPath.FindStringSubmatch(r.URL.Path); m != nil {
				v.mu.Lock()
				v.seen = append(v.seen, r.Method+" "+m[1])
				v.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

func (v *claimVersions) sent() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.seen)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClaimsTravelInTheStorageVersionWhereTheConversionKeepsNothingAside: a claim for a template's
// default pools is created, waited for and read as v1beta1 (no conversion webhook call on the way
// to Ready), and the SDK hands back exactly what a v1alpha1 read of it gives. A selection that
// v1beta1 can only carry in the conversion annotation ("none", or a template with a named pool)
// is still created as v1alpha1, where the API server's conversion writes that annotation.
func TestClaimsTravelInTheStorageVersionWhereTheConversionKeepsNothingAside(t *testing.T) {
	cases := []struct {
		name        string
		opts        []CreateOption
		wantCreate  string
		wantKeptSel bool
	}{
		{"the template's default pools", nil, "POST v1beta1", false},
		{"a named pool", []CreateOption{WithWarmPool("py-pool")}, "POST v1alpha1", true},
		{"no pool", []CreateOption{WithWarmPool("none")}, "POST v1alpha1", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			var versions claimVersions
			c := newClusterClient(t, ModeDirect, func(o *Options) { o.RESTConfig = versions.wrap(env.Config) })
			// The stand-in controller's own requests are not the SDK's: it gets a client of its own.
			ctl, err := client.NewWithWatch(env.Config, client.Options{Scheme: Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			sdktest.StartController(t, ctl, c.Namespace())
			sb, err := c.Create(ctx, "py", append([]CreateOption{WithName("claim")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			if _, err := c.Get(ctx, "claim"); err != nil {
				t.Fatal(err)
			}

			sent := versions.sent()
			if len(sent) == 0 || sent[0] != tc.wantCreate {
				t.Fatalf("the claim's requests were %v; want the create to be %q", sent, tc.wantCreate)
			}
			if i := slices.IndexFunc(sent[1:], func(s string) bool { return s != "GET v1beta1" }); i >= 0 {
				t.Errorf("the claim's requests were %v; want every read and watch after the create in v1beta1", sent)
			}

			key := client.ObjectKey{Namespace: c.Namespace(), Name: "claim"}
			stored := &extv1beta1.SandboxClaim{}
			if err := ctl.Get(ctx, key, stored); err != nil {
				t.Fatal(err)
			}
			_, kept := stored.Annotations[extv1alpha1.SandboxClaimConversionAnnotation]
			if kept != tc.wantKeptSel {
				t.Errorf("stored with the conversion annotation: %v, want %v", kept, tc.wantKeptSel)
			}
			served := &extv1alpha1.SandboxClaim{}
			if err := ctl.Get(ctx, key, served); err != nil {
				t.Fatal(err)
			}
			got := &extv1alpha1.SandboxClaim{}
			if err := c.KubeClient().Get(ctx, key, got); err != nil {
				t.Fatal(err)
			}
			ignore := cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields")
			if diff := cmp.Diff(served, got, ignore); diff != "" {
				t.Errorf("the SDK's claim differs from the API server's v1alpha1 answer (-server +sdk):\n%s", diff)
			}
		})
	}
}
