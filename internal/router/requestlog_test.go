package router

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
)

// Every line about a request carries its id and route; the id is the client's when usable, else
// the router's own, and goes on to the sandbox either way.
func TestRequestLoggerNamesTheRequest(t *testing.T) {
	generated := regexp.MustCompile(`^[0-9a-f]{24}$`)
	tests := []struct {
		name     string
		clientID string
		wantID   *regexp.Regexp
	}{
		{"the client's id is kept", "req-42", regexp.MustCompile(`^req-42$`)},
		{"no id: the router makes one", "", generated},
		{"an id with a space is replaced", "two words", generated},
		{"an over-long id is replaced", strings.Repeat("x", maxRequestIDLen+1), generated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var forwarded string
			h := withRequestLogger(slog.New(slog.NewJSONHandler(&buf, nil)), http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				forwarded = r.Header.Get(HeaderRequestID)
				logging.FromContext(r.Context(), nil).Info("handled")
			}))
			req := httptest.NewRequest("GET", "/x", nil)
			req.Header.Set(HeaderSandboxID, "sb-1")
			req.Header.Set(HeaderSandboxNamespace, "team-a")
			if tt.clientID != "" {
				req.Header.Set(HeaderRequestID, tt.clientID)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)

			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("log %q: %v", buf.String(), err)
			}
			id, _ := line["requestID"].(string)
			if !tt.wantID.MatchString(id) || line["sandbox"] != "sb-1" || line["namespace"] != "team-a" {
				t.Fatalf("line %v, want requestID matching %s, sandbox sb-1, namespace team-a", line, tt.wantID)
			}
			if forwarded != id {
				t.Errorf("the sandbox gets %s %q, want the logged id %q", HeaderRequestID, forwarded, id)
			}
		})
	}
}
