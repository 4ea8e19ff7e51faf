package integration

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// watchLog records which resources a client opened watches on.
type watchLog struct {
	mu        sync.Mutex
	resources map[string]bool
}

func (l *watchLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
			l.mu.Lock()
			l.resources[path.Base(req.URL.Path)] = true
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (l *watchLog) missing(want []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(want), func(r string) bool { return l.resources[r] })
}

// A replica waiting for the lease already watches every kind the reconcilers read, so that
// when it is elected (the leader was killed) it serves claims from a synced cache at once
// instead of first listing every pod and service.
func TestAStandbyReplicaWatchesEveryKindBeforeItLeads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := newNamespace(t)
	const leaseName = "standby-test"
	// Someone else holds the lease for an hour: this replica stays a standby throughout.
	create(t, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("the-current-leader"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	})

	watches := &watchLog{resources: map[string]bool{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(watches.wrap)
	mgr, err := manager.New(cfg, manager.Options{SkipNameValidation: true, LeaderElection: true,
		LeaderElectionID: leaseName, LeaderElectionNS: ns})
	if err != nil {
		t.Fatalf("building a standby manager: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("standby manager: %v", err)
		}
	}()

	want := []string{"sandboxes", "sandboxclaims", "sandboxwarmpools", "sandboxtemplates", "pods", "services",
		"persistentvolumeclaims", "networkpolicies"}
	testwrap.Eventually(t, "the standby watches every kind the reconcilers read", func() error {
		if missing := watches.missing(want); len(missing) > 0 {
			return fmt.Errorf("no watch yet on %v", missing)
		}
		return nil
	})
	select {
	case <-mgr.Elected():
		t.Fatal("the standby was elected although another replica holds the lease")
	default:
	}
}
