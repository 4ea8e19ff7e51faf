package respond

import (
	"log/slog"
	"net/http"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// v1Codes maps HTTP statuses to the error codes of upstream sandboxd's
// filesystem API spec.
var v1Codes = map[int]string{
	http.StatusBadRequest:          "INVALID_ARGUMENT",
	http.StatusUnauthorized:        "UNAUTHENTICATED",
	http.StatusForbidden:           "PERMISSION_DENIED",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusConflict:            "CONFLICT",
	http.StatusServiceUnavailable:  "UNAVAILABLE",
	http.StatusInternalServerError: "INTERNAL",
}

func v1Code(status int) string {
	if c, ok := v1Codes[status]; ok {
		return c
	}
	return "INTERNAL"
}

// V1Error writes upstream's error shape, {"code","message"}.
func V1Error(w http.ResponseWriter, status int, msg string) {
	JSON(w, status, wire.APIError{Code: v1Code(status), Message: msg})
}

// V1Fail maps err like Fail does, in upstream's error shape.
func V1Fail(w http.ResponseWriter, log *slog.Logger, err error) {
	status, msg := Status(err)
	if status >= 500 {
		log.Error("request failed", "error", err)
	}
	V1Error(w, status, msg)
}
