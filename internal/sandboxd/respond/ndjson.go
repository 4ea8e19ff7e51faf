package respond

import (
	"net/http"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// NDJSONWriter writes one JSON line per value and flushes on request, so a
// stream reaches the client as it is produced.
type NDJSONWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// NDJSON starts a 200 NDJSON stream and flushes its headers.
func NDJSON(w http.ResponseWriter) *NDJSONWriter {
	w.Header().Set("Content-Type", wire.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	nw := &NDJSONWriter{w: w, rc: http.NewResponseController(w)}
	_ = nw.rc.Flush() // a failure shows on the first Write
	return nw
}

// Write writes v as one line, then flushes if flush is set.
func (nw *NDJSONWriter) Write(v any, flush bool) error {
	b := append(Marshal(v), '\n')
	if _, err := nw.w.Write(b); err != nil {
		return err
	}
	if flush {
		return nw.rc.Flush()
	}
	return nil
}

// Flush sends what was written so far.
func (nw *NDJSONWriter) Flush() error { return nw.rc.Flush() }
