package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// conversionRequests is how many requests the conversion webhook has served in this process
// (controller-runtime's controller_runtime_webhook_requests_total for the /convert path).
func conversionRequests(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "webhook") == "/convert" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// claimFlow makes one warm claim the way a client does and returns once it has read the
// claim's Sandbox.
type claimFlow func(t *testing.T, wc client.WithWatch, ns string, i int)

// pythonSDKFlow is the upstream Python SDK's: create the v1beta1 claim body it sends, watch the
// claim (v1beta1, by field selector) until Ready, read the Sandbox in v1beta1.
func pythonSDKFlow(t *testing.T, wc client.WithWatch, ns string, i int) {
	body := sdkFixture(t, "testdata/python-sdk-sandboxclaim.json", time.Now().Add(time.Hour))
	body.SetNamespace(ns)
	body.SetName(fmt.Sprintf("py-%d", i))
	ctx, cancel := context.WithTimeout(context.Background(), testwrap.DefaultTimeout)
	defer cancel()
	if err := wc.Create(ctx, body); err != nil {
		t.Fatalf("creating the SDK's v1beta1 claim: %v", err)
	}
	w, err := wc.Watch(ctx, &extv1beta1.SandboxClaimList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", body.GetName())},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: body.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	get(t, ns, waitClaimBound(t, w), &agentsv1beta1.Sandbox{})
}

// v1alpha1Flow is a v1alpha1 client's (the contract's): create the claim naming the template and
// the pool, poll it until Ready, read the Sandbox in v1alpha1.
func v1alpha1Flow(t *testing.T, _ client.WithWatch, ns string, i int) {
	name := fmt.Sprintf("alpha-%d", i)
	mustCreateObj(t, testwrap.MakeClaim(ns, name).Template("python").WarmPool("python-pool").Obj())
	var sandbox string
	testwrap.Eventually(t, "the v1alpha1 claim is Ready", func() error {
		c := &extv1alpha1.SandboxClaim{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, extv1alpha1.ClaimConditionReady) || c.Status.SandboxStatus.Name == "" {
			return fmt.Errorf("claim status %+v", c.Status)
		}
		sandbox = c.Status.SandboxStatus.Name
		return nil
	})
	get(t, ns, sandbox, &agentsv1alpha1.Sandbox{})
}

// TestConversionCallsPerWarmClaim counts the conversion webhook's requests while N warm claims
// are made by each kind of client, the pool being filled beforehand (CONVERSION_COST_N, 10 by
// default). Whatever the clients, the API server converts every write of a served version that
// is not the storage one (about 9 per warm claim: the claim's, its Sandbox's and the pool's
// writes); a client speaking the storage version adds nothing to that, one speaking the other
// version pays for its own create, reads and watch events on top. v1beta1 being the storage
// version, the upstream Python SDK's flow must cost less than a v1alpha1 client's. The counter
// is the whole API server's, so it only runs with CONVERSION_COST_N set, alone (other tests'
// objects, e.g. namespaces being deleted, make calls of their own):
//
//	CONVERSION_COST_N=20 KUBEBUILDER_ASSETS=$(hack/build-k8s.sh --print-dir) \
//	  go test -count=1 -v -run TestConversionCallsPerWarmClaim ./test/integration/
func TestConversionCallsPerWarmClaim(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CONVERSION_COST_N"))
	if n <= 0 {
		t.Skip("set CONVERSION_COST_N to measure")
	}
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	flows := []struct {
		name string
		flow claimFlow
	}{
		{"v1beta1 (upstream Python SDK)", pythonSDKFlow},
		{"v1alpha1 (contract clients)", v1alpha1Flow},
	}
	perClaim := make([]float64, len(flows))
	for i, f := range flows {
		ns := newNamespace(t)
		startFakeKubelet(t, ns)
		mustCreateObj(t, testwrap.MakeTemplate(ns, "python").Obj(),
			testwrap.MakeWarmPool(ns, "python-pool").Template("python").Replicas(int32(n)).Obj())
		testwrap.Eventually(t, "pool ready", poolReady(t, ns, "python-pool", int32(n)))
		time.Sleep(time.Second) // the setup's own conversions settle
		before := conversionRequests(t)
		for c := 0; c < n; c++ {
			f.flow(t, wc, ns, c)
		}
		time.Sleep(2 * time.Second) // the refill's writes are counted too
		perClaim[i] = (conversionRequests(t) - before) / float64(n)
		t.Logf("%s: %.1f conversion webhook requests per warm claim (%d claims)", f.name, perClaim[i], n)
	}
	if perClaim[0] >= perClaim[1] {
		t.Errorf("a v1beta1 (storage version) client's warm claim cost %.1f conversion webhook requests, a v1alpha1 client's %.1f; "+
			"want the storage version's client to pay for none of its own requests", perClaim[0], perClaim[1])
	}
}
