// Package warmqueue holds the in-memory queue of ready, unclaimed warm Sandboxes per template
// that the claim controller hands out (fed by watch events, so handing one to a claim needs no
// List).
package warmqueue

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Candidate is a warm Sandbox that was ready and unclaimed when last seen.
type Candidate struct {
	Name     types.NamespacedName
	Pool     string // name of the owning SandboxWarmPool
	Template string // name of the SandboxTemplate it was built from
	// TemplateHash is the blueprint hash it was built with; the claim side compares it with
	// the template's current one to skip stale members of Recreate pools.
	TemplateHash string
}

type templateKey struct{ namespace, template string }

// Queue is a FIFO of candidates per (namespace, template). Pop removes what it returns, so two
// claims served by this process never get the same Sandbox; the adopting write is optimistic-
// locked to settle anything left (another controller replica, a stale cache).
type Queue struct {
	mu      sync.Mutex
	order   map[templateKey][]types.NamespacedName
	members map[types.NamespacedName]Candidate
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{order: map[templateKey][]types.NamespacedName{}, members: map[types.NamespacedName]Candidate{}}
}

// Offer adds or refreshes a candidate.
func (q *Queue) Offer(c Candidate) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.members[c.Name]; !ok {
		k := templateKey{c.Name.Namespace, c.Template}
		q.order[k] = append(q.order[k], c.Name)
	}
	q.members[c.Name] = c
}

// Remove forgets a Sandbox (claimed, deleted, or no longer ready).
func (q *Queue) Remove(name types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.members, name)
}

// Pop returns the oldest candidate of the template that accept takes, removing it; false when none.
func (q *Queue) Pop(namespace, template string, accept func(Candidate) bool) (Candidate, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := templateKey{namespace, template}
	names := q.order[k]
	kept := names[:0]
	var found Candidate
	ok := false
	for _, n := range names {
		c, live := q.members[n]
		if !live || c.Template != template {
			continue // lazily drop removed entries
		}
		if !ok && accept(c) {
			found, ok = c, true
			delete(q.members, n)
			continue
		}
		kept = append(kept, n)
	}
	if len(kept) == 0 {
		delete(q.order, k)
	} else {
		q.order[k] = kept
	}
	return found, ok
}

// Len is the number of candidates of a template.
func (q *Queue) Len(namespace, template string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, name := range q.order[templateKey{namespace, template}] {
		if c, ok := q.members[name]; ok && c.Template == template {
			n++
		}
	}
	return n
}
