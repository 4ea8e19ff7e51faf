package sandboxwarmpool

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/expectations"
)

// memberWrites remember the creates and deletes a pool issued until the cache shows them, so a
// reconcile that runs on a stale cache neither over-creates nor deletes twice. A write unseen for
// expectations.CacheLag stops counting: a lost watch event must not freeze the pool.
type memberWrites struct {
	creates *expectations.Store[string, struct{}]    // member names
	deletes *expectations.Store[types.UID, struct{}] // member UIDs
}

func newMemberWrites(clk clock.PassiveClock) *memberWrites {
	return &memberWrites{
		creates: expectations.New[string, struct{}](clk, expectations.CacheLag),
		deletes: expectations.New[types.UID, struct{}](clk, expectations.CacheLag),
	}
}

func (w *memberWrites) created(pool types.NamespacedName, name string) {
	w.creates.Expect(pool, name, struct{}{})
}

func (w *memberWrites) deleted(pool types.NamespacedName, uid types.UID) {
	w.deletes.Expect(pool, uid, struct{}{})
}

// observe settles expectations against the cached members and returns the UIDs whose delete
// was issued but is not visible yet.
func (w *memberWrites) observe(pool types.NamespacedName, members []agentsv1beta1.Sandbox) map[types.UID]bool {
	byName := make(map[string]bool, len(members))
	byUID := make(map[types.UID]bool, len(members))
	for i := range members {
		byName[members[i].Name] = true
		if members[i].DeletionTimestamp.IsZero() {
			byUID[members[i].UID] = true
		}
	}
	w.creates.Settle(pool, func(name string, _ struct{}) bool { return byName[name] })
	pending := map[types.UID]bool{}
	for _, uid := range w.deletes.Settle(pool, func(uid types.UID, _ struct{}) bool { return !byUID[uid] }) {
		pending[uid] = true
	}
	return pending
}

func (w *memberWrites) unseenCreates(pool types.NamespacedName) int {
	return w.creates.Pending(pool)
}

func (w *memberWrites) pendingCreates(pool types.NamespacedName) bool {
	return w.unseenCreates(pool) > 0
}

func (w *memberWrites) forget(pool types.NamespacedName) {
	w.creates.Forget(pool)
	w.deletes.Forget(pool)
}
