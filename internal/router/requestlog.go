package router

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
)

// HeaderRequestID names one request across the router's and sandboxd's logs: the client's own
// id when it sends a usable one, else one the router makes and forwards.
const HeaderRequestID = "X-Request-Id"

// maxRequestIDLen bounds a client's id, which goes into every log line of its request.
const maxRequestIDLen = 128

// withRequestLogger puts a logger carrying the request's id and route (the X-Sandbox-* headers)
// into its context, so that every line about one request can be found together.
func withRequestLogger(base *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !usableRequestID(id) {
			id = newRequestID()
			r.Header.Set(HeaderRequestID, id)
		}
		log := base.With(slog.String("requestID", id),
			slog.String("sandbox", r.Header.Get(HeaderSandboxID)),
			slog.String("namespace", r.Header.Get(HeaderSandboxNamespace)),
			slog.String("port", r.Header.Get(HeaderSandboxPort)))
		next.ServeHTTP(w, r.WithContext(logging.IntoContext(r.Context(), log)))
	})
}

// usableRequestID: non-empty, bounded, printable ASCII without spaces.
func usableRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b)
}
