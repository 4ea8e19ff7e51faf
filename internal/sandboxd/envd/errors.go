package envd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
)

func invalidf(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func notFoundf(format string, args ...any) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf(format, args...))
}

func preconditionf(format string, args ...any) error {
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(format, args...))
}

// toConnect maps sandboxd's errors (path refusals, file system errors,
// request errors) onto the Connect codes envd uses for the same cases,
// through the HTTP status the rest of sandboxd gives them.
func toConnect(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	status, msg := respond.Status(err)
	code := connect.CodeInternal
	switch status {
	case http.StatusBadRequest:
		code = connect.CodeInvalidArgument
	case http.StatusForbidden:
		code = connect.CodePermissionDenied
	case http.StatusNotFound:
		code = connect.CodeNotFound
	case http.StatusConflict:
		code = connect.CodeFailedPrecondition
		if msg == "already exists" {
			code = connect.CodeAlreadyExists
		}
	case http.StatusServiceUnavailable:
		code = connect.CodeUnavailable
	}
	return connect.NewError(code, errors.New(msg))
}

// apiError is envd's JSON error body on its HTTP endpoints.
type apiError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	respond.JSON(w, status, apiError{Message: msg, Code: status})
}

// fail writes err in envd's error shape with the status sandboxd gives it.
func fail(w http.ResponseWriter, log *slog.Logger, err error) {
	status, msg := respond.Status(err)
	if status >= 500 {
		log.Error("envd request failed", "error", err)
	}
	writeError(w, status, msg)
}
