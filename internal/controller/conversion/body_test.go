package conversion

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A caller that is not the API server (any pod, before the NetworkPolicy) cannot make the
// webhook hold a body larger than the bound: a declared one is refused before it is read, an
// undeclared one is cut off at the bound; a request within it reaches the handler whole.
func TestAConversionRequestBodyIsBounded(t *testing.T) {
	const limit = 1 << 10
	cases := []struct {
		name       string
		body       string
		chunked    bool // no Content-Length, as a streamed body
		wantStatus int
		wantRead   int // bytes the handler read
	}{
		{name: "within the bound", body: strings.Repeat("a", limit), wantStatus: http.StatusOK, wantRead: limit},
		{name: "a declared length past the bound is refused unread", body: strings.Repeat("a", limit+1), wantStatus: http.StatusRequestEntityTooLarge},
		{name: "an undeclared length is cut at the bound", body: strings.Repeat("a", 40*limit), chunked: true, wantStatus: http.StatusBadRequest, wantRead: limit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			read := -1
			h := boundedBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, err := io.Copy(io.Discard, r.Body)
				read = int(n)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
				}
			}), limit)
			req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(tc.body))
			if tc.chunked {
				req.ContentLength = -1
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			if tc.wantStatus == http.StatusRequestEntityTooLarge && read != -1 {
				t.Errorf("the handler read %d bytes of a refused request, want it never called", read)
			}
			if tc.wantStatus != http.StatusRequestEntityTooLarge && read != tc.wantRead {
				t.Errorf("the handler read %d bytes, want %d", read, tc.wantRead)
			}
		})
	}
}
