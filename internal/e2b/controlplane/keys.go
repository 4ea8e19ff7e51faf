package controlplane

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agent-sandbox/agent-sandbox/pkg/storageversion"
)

const (
	keyHeader = "X-API-KEY"
	keyPrefix = "e2b_"

	keyAllowTTL = time.Minute
	keyDenyTTL  = 5 * time.Second
	keyCache    = 1024

	serviceAccountPrefix = "system:serviceaccount:"
)

// caller is who a key names: its namespace and a client that acts with the key's own token.
type caller struct {
	namespace string
	user      string
	kube      client.WithWatch
}

// keyEntry is a cached answer for one key (by its SHA-256).
type keyEntry struct {
	caller *caller
	err    error
	until  time.Time
}

// keys turns API keys into callers, caching what the API server said.
type keys struct {
	base   *rest.Config // the API server, without credentials
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	clock  clock.PassiveClock

	mu    sync.Mutex
	cache *lru.Cache
}

func newKeys(base *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper, clk clock.PassiveClock) *keys {
	return &keys{base: rest.AnonymousClientConfig(base), scheme: scheme, mapper: mapper, clock: clk, cache: lru.New(keyCache)}
}

// callerOf authenticates the request's key: 401 without one, or with one the API server does not
// take for a ServiceAccount.
func (k *keys) callerOf(r *http.Request) (*caller, error) {
	raw := r.Header.Values(keyHeader)
	if len(raw) != 1 || strings.TrimSpace(raw[0]) == "" {
		return nil, errorf(http.StatusUnauthorized, "an API key is required (X-API-KEY: e2b_<ServiceAccount token>)")
	}
	token := strings.TrimPrefix(strings.TrimSpace(raw[0]), keyPrefix)
	sum := sha256.Sum256([]byte(token))
	now := k.clock.Now()
	k.mu.Lock()
	if v, ok := k.cache.Get(sum); ok && now.Before(v.(keyEntry).until) {
		k.mu.Unlock()
		e := v.(keyEntry)
		return e.caller, e.err
	}
	k.mu.Unlock()
	c, err := k.review(r.Context(), token)
	var ae *apiError
	if err != nil && (!errors.As(err, &ae) || ae.code != http.StatusUnauthorized) {
		return nil, err // the API server could not answer: nothing to remember
	}
	ttl := keyAllowTTL
	if err != nil {
		ttl = keyDenyTTL
	}
	k.mu.Lock()
	k.cache.Add(sum, keyEntry{caller: c, err: err, until: now.Add(ttl)})
	k.mu.Unlock()
	return c, err
}

// review asks the API server, with the token itself, who it is.
func (k *keys) review(ctx context.Context, token string) (*caller, error) {
	cfg := rest.CopyConfig(k.base)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	res, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if apierrors.IsUnauthorized(err) {
		return nil, errorf(http.StatusUnauthorized, "invalid API key")
	}
	if err != nil {
		return nil, errorf(http.StatusServiceUnavailable, "the API server could not check the key: %v", err)
	}
	user := res.Status.UserInfo.Username
	ns, _, ok := strings.Cut(strings.TrimPrefix(user, serviceAccountPrefix), ":")
	if !strings.HasPrefix(user, serviceAccountPrefix) || !ok || ns == "" {
		return nil, errorf(http.StatusUnauthorized, "API keys are ServiceAccount tokens; this token is user %q", user)
	}
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: k.scheme, Mapper: k.mapper})
	if err != nil {
		return nil, err
	}
	// The way to Ready goes without conversion webhook calls (docs/api-versions.md).
	return &caller{namespace: ns, user: user, kube: storageversion.Claims(kube)}, nil
}
