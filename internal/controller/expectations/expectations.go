// Package expectations remembers writes a controller made until its informer cache shows them.
//
// A reconcile can run on a cache that lags the controller's own writes by a few milliseconds.
// Without a memory it would act on the stale picture: create a pool member twice, delete one
// twice, hand a claim a second Sandbox, or write a status it has just written. Every such memory
// in this project is a Store, so the rules (per-owner keys, expiry, forgetting a deleted owner)
// are written and tested once.
package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// CacheLag is how long every controller's store trusts a write over the cache: an informer
// normally shows a controller's own write within milliseconds, and a write unseen this long was
// most likely lost with its watch event.
const CacheLag = 30 * time.Second

// Store holds, per owner object, expectations keyed by K with a value V each. An expectation
// older than the store's TTL is dropped as if observed: a lost watch event must not freeze the
// controller. It is safe for concurrent use.
type Store[K comparable, V any] struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	byOwner map[types.NamespacedName]map[K]entry[V]
}

type entry[V any] struct {
	value V
	at    time.Time
}

// New returns an empty store whose expectations expire after ttl on clk.
func New[K comparable, V any](clk clock.PassiveClock, ttl time.Duration) *Store[K, V] {
	return &Store[K, V]{clock: clk, ttl: ttl, byOwner: map[types.NamespacedName]map[K]entry[V]{}}
}

// Expect records a write of owner's, keyed by key, that the cache does not show yet; a second
// Expect of the same key replaces the first and restarts its expiry.
func (s *Store[K, V]) Expect(owner types.NamespacedName, key K, value V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.byOwner[owner]
	if m == nil {
		m = map[K]entry[V]{}
		s.byOwner[owner] = m
	}
	m[key] = entry[V]{value: value, at: s.clock.Now()}
}

// Get returns the unexpired expectation of owner under key.
func (s *Store[K, V]) Get(owner types.NamespacedName, key K) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byOwner[owner][key]
	if !ok || s.expired(e) {
		s.drop(owner, key)
		var zero V
		return zero, false
	}
	return e.value, true
}

// Observed drops one expectation: the cache shows the write.
func (s *Store[K, V]) Observed(owner types.NamespacedName, key K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(owner, key)
}

// Settle drops owner's expectations that seen reports as visible in the cache, and expired
// ones, and returns the keys still pending.
func (s *Store[K, V]) Settle(owner types.NamespacedName, seen func(K, V) bool) []K {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pending []K
	for k, e := range s.byOwner[owner] {
		if s.expired(e) || seen(k, e.value) {
			s.drop(owner, k)
			continue
		}
		pending = append(pending, k)
	}
	return pending
}

// Pending returns how many unexpired expectations owner has.
func (s *Store[K, V]) Pending(owner types.NamespacedName) int {
	return len(s.Settle(owner, func(K, V) bool { return false }))
}

// Forget drops every expectation of owner: the owner is gone.
func (s *Store[K, V]) Forget(owner types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byOwner, owner)
}

func (s *Store[K, V]) expired(e entry[V]) bool {
	return s.clock.Since(e.at) > s.ttl
}

// drop removes one key, and the owner's map with its last key, so the store's size follows
// the owners that have writes in flight rather than every owner ever seen.
func (s *Store[K, V]) drop(owner types.NamespacedName, key K) {
	m := s.byOwner[owner]
	delete(m, key)
	if len(m) == 0 {
		delete(s.byOwner, owner)
	}
}
