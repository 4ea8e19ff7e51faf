package sandboxwarmpool

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// expectationTTL bounds how long a write we made may stay unobserved before we stop counting
// it (a lost watch event must not freeze the pool).
const expectationTTL = time.Minute

// expectations remember the creates and deletes a pool issued until the cache shows them, so a
// reconcile that runs on a stale cache neither over-creates nor deletes twice.
type expectations struct {
	mu      sync.Mutex
	creates map[types.NamespacedName]map[string]time.Time    // pool -> member name -> when
	deletes map[types.NamespacedName]map[types.UID]time.Time // pool -> member UID -> when
}

func (e *expectations) created(pool types.NamespacedName, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.creates == nil {
		e.creates = map[types.NamespacedName]map[string]time.Time{}
	}
	if e.creates[pool] == nil {
		e.creates[pool] = map[string]time.Time{}
	}
	e.creates[pool][name] = time.Now()
}

func (e *expectations) deleted(pool types.NamespacedName, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deletes == nil {
		e.deletes = map[types.NamespacedName]map[types.UID]time.Time{}
	}
	if e.deletes[pool] == nil {
		e.deletes[pool] = map[types.UID]time.Time{}
	}
	e.deletes[pool][uid] = time.Now()
}

// observe settles expectations against the cached members and returns the UIDs whose delete
// was issued but is not visible yet.
func (e *expectations) observe(pool types.NamespacedName, members []agentsv1alpha1.Sandbox) map[types.UID]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	byName := make(map[string]bool, len(members))
	byUID := make(map[types.UID]bool, len(members))
	for i := range members {
		byName[members[i].Name] = true
		if members[i].DeletionTimestamp.IsZero() {
			byUID[members[i].UID] = true
		}
	}
	now := time.Now()
	for name, at := range e.creates[pool] {
		if byName[name] || now.Sub(at) > expectationTTL {
			delete(e.creates[pool], name)
		}
	}
	pending := map[types.UID]bool{}
	for uid, at := range e.deletes[pool] {
		if !byUID[uid] || now.Sub(at) > expectationTTL {
			delete(e.deletes[pool], uid)
			continue
		}
		pending[uid] = true
	}
	return pending
}

func (e *expectations) unseenCreates(pool types.NamespacedName) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.creates[pool])
}

func (e *expectations) pendingCreates(pool types.NamespacedName) bool {
	return e.unseenCreates(pool) > 0
}

func (e *expectations) forget(pool types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.creates, pool)
	delete(e.deletes, pool)
}
