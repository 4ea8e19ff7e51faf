package sandboxd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/wire"
)

// Small endpoints, and how every handler writes answers and maps errors.

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.Health{Status: "ok"})
}

// capabilities lets clients feature-detect instead of parsing versions.
var capabilities = []string{
	"exec", "exec.stream", "exec.ws", "pty", "processes",
	"files", "files.tar", "watch", "legacy", "h2c", "metrics", "grpc",
}

func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.Metadata{
		Version:      s.cfg.Version,
		Hostname:     s.hostname,
		Root:         s.cfg.Root,
		PID:          os.Getpid(),
		StartTime:    s.startTime,
		Capabilities: capabilities,
	})
}

// marshal encodes v like the python runtime did: compact, no HTML escaping,
// no trailing newline.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":"encoding response failed"}`)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := marshal(v)
	w.Header().Set("Content-Type", wire.ContentTypeJSON)
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.Error{Error: msg})
}

// apiError carries an HTTP status with a client-facing message.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeErr maps an error to a status: apiError as given, resolver and file
// system errors to 403/400/404/409, anything else to 500.
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	status, msg := errorStatus(err)
	if status >= 500 {
		s.log.Error("request failed", "error", err)
	}
	writeError(w, status, msg)
}

func errorStatus(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.msg
	case errors.Is(err, errEscape), isRootEscape(err):
		return http.StatusForbidden, errEscape.Error()
	case errors.Is(err, errInvalidPath):
		return http.StatusBadRequest, errInvalidPath.Error()
	case errors.Is(err, os.ErrNotExist):
		return http.StatusNotFound, "not found"
	case errors.Is(err, os.ErrPermission):
		return http.StatusForbidden, "permission denied"
	case errors.Is(err, os.ErrExist):
		return http.StatusConflict, "already exists"
	case errors.Is(err, syscall.ENOTDIR):
		return http.StatusConflict, "a parent of the path is not a directory"
	case errors.Is(err, syscall.EISDIR):
		return http.StatusConflict, "path is a directory"
	case errors.Is(err, syscall.ELOOP):
		return http.StatusBadRequest, "too many levels of symbolic links"
	}
	return http.StatusInternalServerError, err.Error()
}

// isRootEscape recognises os.Root's own refusal, which only happens when a
// path changed under us between resolve and use.
func isRootEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// decodeJSON reads a JSON request body of at most 16 MiB.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<20))
	if err := dec.Decode(v); err != nil {
		return badRequest("invalid JSON body: %v", err)
	}
	return nil
}
