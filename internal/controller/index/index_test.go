package index

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a client.FieldIndexer that keeps the extractors Register declares, by object type
// and field, so they can be run on objects without a cache.
type recorder struct {
	extractors map[string]client.IndexerFunc
	fail       error
}

func key(obj client.Object, field string) string { return fmt.Sprintf("%T %s", obj, field) }

func (r *recorder) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	if r.fail != nil {
		return r.fail
	}
	if r.extractors == nil {
		r.extractors = map[string]client.IndexerFunc{}
	}
	r.extractors[key(obj, field)] = fn
	return nil
}

func TestIndexedValues(t *testing.T) {
	r := &recorder{}
	if err := Register(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	pool := testwrap.MakeWarmPool("ns", "pool").UID("pool-uid").Hub()
	claim := testwrap.MakeClaim("ns", "claim").UID("claim-uid").Hub()
	poolGVK := extv1beta1.GroupVersion.WithKind("SandboxWarmPool")
	claimGVK := extv1beta1.GroupVersion.WithKind("SandboxClaim")
	cases := []struct {
		name  string
		obj   client.Object
		field string
		want  []string
	}{
		{"a pool member by its pool's UID", testwrap.MakeSandbox("ns", "m").ControlledBy(pool, poolGVK).Hub(),
			SandboxControllerUID, []string{"pool-uid"}},
		{"a claimed Sandbox by its claim's UID", testwrap.MakeSandbox("ns", "c").ControlledBy(claim, claimGVK).Hub(),
			SandboxControllerUID, []string{"claim-uid"}},
		{"a Sandbox nobody controls is not indexed", testwrap.MakeSandbox("ns", "raw").Hub(),
			SandboxControllerUID, nil},
		{"a controller of another kind carrying a claim's UID is not indexed",
			testwrap.MakeSandbox("ns", "forged").ControlledBy(claim, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}).Hub(),
			SandboxControllerUID, nil},
		{"a SandboxClaim kind of another group is not indexed",
			testwrap.MakeSandbox("ns", "forged").ControlledBy(claim, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "SandboxClaim"}).Hub(),
			SandboxControllerUID, nil},
		{"a claim by its template", testwrap.MakeClaim("ns", "c").Template("python").Hub(),
			ClaimTemplate, []string{"python"}},
		{"a v1beta1 claim (no template) under the empty name", testwrap.MakeClaim("ns", "c").WarmPool("pool").Hub(),
			ClaimTemplate, []string{""}},
		{"a claim naming a pool by that pool", testwrap.MakeClaim("ns", "c").Template("python").WarmPool("fast").Hub(),
			ClaimWarmPool, []string{"fast"}},
		{"a claim with warmpool none is not indexed", testwrap.MakeClaim("ns", "c").Template("python").WarmPool("none").Hub(),
			ClaimWarmPool, nil},
		{"a claim with warmpool default is not indexed", testwrap.MakeClaim("ns", "c").Template("python").WarmPool("default").Hub(),
			ClaimWarmPool, nil},
		{"a claim without warmpool (the default) is not indexed", testwrap.MakeClaim("ns", "c").Template("python").Hub(),
			ClaimWarmPool, nil},
		{"a pool by its template", testwrap.MakeWarmPool("ns", "p").Template("python").Hub(),
			PoolTemplate, []string{"python"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fn := r.extractors[key(tc.obj, tc.field)]
			if fn == nil {
				t.Fatalf("no index %q on %T", tc.field, tc.obj)
			}
			if d := cmp.Diff(tc.want, fn(tc.obj)); d != "" {
				t.Errorf("indexed values (-want +got):\n%s", d)
			}
		})
	}
}

func TestRegisterReportsAFailedIndex(t *testing.T) {
	boom := errors.New("indexer already started")
	if err := Register(context.Background(), &recorder{fail: boom}); !errors.Is(err, boom) {
		t.Errorf("Register = %v, want %v", err, boom)
	}
}
