package controlplane

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"
)

// Any create body is decoded and validated into a claim or a 4xx, never a panic.
func FuzzCreateBodies(f *testing.F) {
	for _, seed := range []string{`{"templateID":"py"}`, `{"templateID":"py","timeout":-1}`, `{"metadata":{"a":"b"},"envVars":{"":""}}`,
		`{"templateID":"py","autoResume":{"enabled":true},"network":null}`, `[]`, `null`, `{"timeout":1e99}`} {
		f.Add(seed)
	}
	s := &server{clock: clocktesting.NewFakeClock(now)}
	f.Fuzz(func(t *testing.T, body string) {
		var req newSandbox
		if err := decode(httptest.NewRequest(http.MethodPost, "/v2/sandboxes", strings.NewReader(body)), &req); err != nil {
			if c := codeOf(err); c != 400 && c != 413 {
				t.Fatalf("decode(%q) = %v (code %d), want a 400 or 413", body, err, c)
			}
			return
		}
		if _, err := s.claimFor(&req, "ns", 300); err != nil && codeOf(err) != 400 {
			t.Fatalf("claimFor(%q) = %v, want a claim or a 400", body, err)
		}
	})
}
