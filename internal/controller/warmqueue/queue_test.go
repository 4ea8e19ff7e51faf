package warmqueue

import (
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cand(name, pool, template string) Candidate {
	return Candidate{Name: types.NamespacedName{Namespace: "ns", Name: name}, Pool: pool, Template: template}
}

func acceptAll(Candidate) bool { return true }

func TestQueuePopsOldestAcceptedCandidateOfTheTemplate(t *testing.T) {
	cases := []struct {
		name    string
		offers  []Candidate
		removed []string
		accept  func(Candidate) bool
		want    string
		wantOK  bool
	}{
		{"empty", nil, nil, acceptAll, "", false},
		{"fifo", []Candidate{cand("a", "p", "t"), cand("b", "p", "t")}, nil, acceptAll, "a", true},
		{"other template ignored", []Candidate{cand("a", "p", "other"), cand("b", "p", "t")}, nil, acceptAll, "b", true},
		{"removed skipped", []Candidate{cand("a", "p", "t"), cand("b", "p", "t")}, []string{"a"}, acceptAll, "b", true},
		{"filter by pool", []Candidate{cand("a", "p1", "t"), cand("b", "p2", "t")}, nil, func(c Candidate) bool { return c.Pool == "p2" }, "b", true},
		{"nothing accepted", []Candidate{cand("a", "p1", "t")}, nil, func(Candidate) bool { return false }, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue()
			for _, c := range tc.offers {
				q.Offer(c)
			}
			for _, n := range tc.removed {
				q.Remove(types.NamespacedName{Namespace: "ns", Name: n})
			}
			got, ok := q.Pop("ns", "t", tc.accept)
			if ok != tc.wantOK || got.Name.Name != tc.want {
				t.Errorf("Pop = %q,%v want %q,%v", got.Name.Name, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestQueueOfferTwiceKeepsOneEntry(t *testing.T) {
	q := NewQueue()
	q.Offer(cand("a", "p", "t"))
	q.Offer(cand("a", "p", "t"))
	if n := q.Len("ns", "t"); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
	q.Pop("ns", "t", acceptAll)
	if _, ok := q.Pop("ns", "t", acceptAll); ok {
		t.Errorf("second Pop returned the same sandbox again")
	}
}

func TestQueueNeverHandsOutASandboxTwiceUnderConcurrency(t *testing.T) {
	q := NewQueue()
	for i := 0; i < 200; i++ {
		q.Offer(cand(fmt.Sprint(i), "p", "t"))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, ok := q.Pop("ns", "t", acceptAll)
				if !ok {
					return
				}
				mu.Lock()
				seen[c.Name.Name]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Errorf("popped %d distinct sandboxes, want 200", len(seen))
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("sandbox %s handed out %d times", name, n)
		}
	}
}
