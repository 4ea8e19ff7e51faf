package sdk

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Sentinel errors. Match them with errors.Is; the errors the SDK returns wrap
// them with the object and operation concerned.
var (
	// ErrNotFound: the SandboxClaim, Sandbox, file or process does not exist
	// (a Kubernetes 404, a sandboxd or router 404, or a claim deleted while
	// waiting for it).
	ErrNotFound = errors.New("not found")
	// ErrTimeout: the sandbox did not become ready within the ready timeout,
	// or the router or sandboxd gave up waiting (504).
	ErrTimeout = errors.New("timed out")
	// ErrNotReady: the sandbox has no pod to talk to (not yet ready, paused,
	// expired, or the router answered 503), or it reached a final not-ready
	// state while the SDK was waiting.
	ErrNotReady = errors.New("sandbox not ready")
	// ErrAlreadyExists: Create was given a name that is already taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrTemplateMismatch: GetOrCreate found a claim of that name that
	// references another SandboxTemplate.
	ErrTemplateMismatch = errors.New("claim references a different template")
	// ErrUnsupported: the operation is not available in the client's
	// connection mode (for example file watches in ModeExec).
	ErrUnsupported = errors.New("not supported in this connection mode")
	// ErrUnsafePath: a path would escape the directory it must stay in (a
	// tar entry or symlink during DownloadDir).
	ErrUnsafePath = errors.New("unsafe path")
	// ErrConnectionLost: the connection broke after the request went out and
	// before its answer came, or a command's stream before its exit status
	// (a router or sandbox pod died, the network failed). Idempotent reads
	// (GETs without a body: file reads, stat, list, process and log reads,
	// the start of a watch or log follow) are first sent twice more on new
	// connections; for them this error means all three attempts broke. Any
	// other call may have taken effect, so it is not sent again.
	ErrConnectionLost = errors.New("connection lost before the answer; the call may have taken effect")
)

// APIError is a non-2xx answer of sandboxd or the router. It matches
// ErrNotFound (404), ErrNotReady (502, 503) and ErrTimeout (504) with
// errors.Is.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the server's explanation: sandboxd's {"error": ...} or
	// {"code": ..., "message": ...}, or the router's {"detail": ...}, else
	// the start of the body.
	Message string
	// Op is the request, such as "GET /v1/files/a.txt".
	Op string

	fromRouter bool // the router answered ({"detail"}), not sandboxd
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Op == "" {
		return fmt.Sprintf("sandbox API: %d: %s", e.Status, msg)
	}
	return fmt.Sprintf("sandbox API %s: %d: %s", e.Op, e.Status, msg)
}

// Is lets errors.Is(err, ErrNotFound) and friends match by status code.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrNotReady:
		return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusBadGateway
	case ErrTimeout:
		return e.Status == http.StatusGatewayTimeout
	case ErrAlreadyExists:
		return e.Status == http.StatusConflict && strings.Contains(e.Message, "exists")
	}
	return false
}

// WaitError says why waiting for a sandbox ended without it being ready. It
// wraps ErrTimeout (the ready timeout passed), ErrNotFound (the object was
// deleted), ErrNotReady (a final state such as an expired claim), or the
// context's error.
type WaitError struct {
	// Kind is "SandboxClaim" or "Sandbox".
	Kind      string
	Namespace string
	Name      string
	// Reason and Message are the last observed Ready condition's (or the
	// SDK's own description when there was none, such as "WaitingForPodIP").
	Reason  string
	Message string
	// Elapsed is how long the SDK waited.
	Elapsed time.Duration
	Err     error
}

func (e *WaitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s not ready after %s", strings.ToLower(e.Kind), e.Namespace, e.Name, e.Elapsed.Round(time.Millisecond))
	if e.Reason != "" || e.Message != "" {
		b.WriteString(" (last reason: ")
		b.WriteString(e.Reason)
		if e.Message != "" {
			if e.Reason != "" {
				b.WriteString(": ")
			}
			b.WriteString(e.Message)
		}
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *WaitError) Unwrap() error { return e.Err }

// ExitError is returned by Result.Err when a command failed.
type ExitError struct {
	ExitCode int
	TimedOut bool
	// Stderr is the end of the command's standard error, for the message.
	Stderr string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("command exited with code %d", e.ExitCode)
	if e.TimedOut {
		msg = "command timed out"
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		const tail = 512
		if len(s) > tail {
			s = "…" + s[len(s)-tail:]
		}
		msg += ": " + s
	}
	return msg
}

// kubeErr wraps a Kubernetes API error so that ErrNotFound and
// ErrAlreadyExists match while the original stays reachable.
func kubeErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", what, ErrNotFound, err)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s: %w: %w", what, ErrAlreadyExists, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
