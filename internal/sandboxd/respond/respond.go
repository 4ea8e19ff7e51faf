// Package respond is how sandboxd's HTTP handlers read JSON requests and
// write answers: JSON bodies, NDJSON streams, and errors mapped to statuses
// in our shape ({"error"}) or upstream's ({"code","message"}).
package respond

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"syscall"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// Marshal encodes v like the python runtime did: compact, no HTML escaping,
// no trailing newline.
func Marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":"encoding response failed"}`)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// JSON writes v as the whole answer.
func JSON(w http.ResponseWriter, status int, v any) {
	b := Marshal(v)
	w.Header().Set("Content-Type", wire.ContentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client is gone; nothing left to tell it
}

// Error writes our error shape, {"error": msg}.
func Error(w http.ResponseWriter, status int, msg string) {
	JSON(w, status, wire.Error{Error: msg})
}

// StatusError carries an HTTP status with a client-facing message.
type StatusError struct {
	Status int
	Msg    string
}

func (e *StatusError) Error() string { return e.Msg }

// Errorf returns a *StatusError.
func Errorf(status int, format string, args ...any) error {
	return &StatusError{status, fmt.Sprintf(format, args...)}
}

// BadRequest returns a *StatusError with status 400.
func BadRequest(format string, args ...any) error {
	return Errorf(http.StatusBadRequest, format, args...)
}

// Fail maps err to a status (see Status) and writes it in our error shape,
// logging server-side failures.
func Fail(w http.ResponseWriter, log *slog.Logger, err error) {
	status, msg := Status(err)
	if status >= 500 {
		log.Error("request failed", "error", err)
	}
	Error(w, status, msg)
}

// Status maps an error to a status and message: *StatusError as given,
// resolver and file system errors to 403/400/404/409, anything else to 500.
func Status(err error) (int, string) {
	var se *StatusError
	var re *rootfs.ReadError
	switch {
	case errors.As(err, &se):
		return se.Status, se.Msg
	case errors.As(err, &re):
		return http.StatusBadRequest, re.Error()
	case errors.Is(err, rootfs.ErrParentNotDir):
		return http.StatusConflict, rootfs.ErrParentNotDir.Error()
	case errors.Is(err, rootfs.ErrEscape), rootfs.IsRootEscape(err):
		return http.StatusForbidden, rootfs.ErrEscape.Error()
	case errors.Is(err, rootfs.ErrInvalidPath):
		return http.StatusBadRequest, rootfs.ErrInvalidPath.Error()
	}
	return fsStatus(err)
}

func fsStatus(err error) (int, string) {
	switch {
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

// DecodeJSON reads a JSON request body of at most 16 MiB.
func DecodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<20))
	if err := dec.Decode(v); err != nil {
		return BadRequest("invalid JSON body: %v", err)
	}
	return nil
}
