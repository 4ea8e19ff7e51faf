package integration

import (
	"net/http"
	"strings"
	"sync"
)

// controllerWrites records every write the controller manager sends to the API server, so
// tests can hold the hot path to a write budget.
var controllerWrites = &writeLog{}

type write struct {
	method string
	path   string // e.g. /apis/agents.x-k8s.io/v1alpha1/namespaces/ns/sandboxes/x/status
}

type writeLog struct {
	mu     sync.Mutex
	writes []write
}

func (l *writeLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			l.mu.Lock()
			l.writes = append(l.writes, write{req.Method, req.URL.Path})
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// since returns the writes recorded after mark in namespace ns.
func (l *writeLog) since(mark int, ns string) []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []write
	for _, w := range l.writes[mark:] {
		if strings.Contains(w.path, "/namespaces/"+ns+"/") {
			out = append(out, w)
		}
	}
	return out
}

func (l *writeLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writes)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
