package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// maxBody bounds every request body: E2B's are small JSON objects.
const maxBody = 1 << 20

// apiError is an answer of ours: a status and a message for the SDK.
type apiError struct {
	code int
	msg  string
	// templateMissing: the claim's template was not found, which a create waits out briefly.
	templateMissing bool
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

func notFound(id string) error { return errorf(http.StatusNotFound, "sandbox %q not found", id) }

// writeJSON answers code with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err in E2B's shape: ours as they are, the API server's by its status
// (a Forbidden keeps its message: it names the right the key lacks), anything else as 500.
func writeError(w http.ResponseWriter, err error) {
	body := errorBody(err)
	writeJSON(w, body.Code, body)
}

// errorBody is err in E2B's error shape (an answer, or one fork's entry).
func errorBody(err error) *errorJSON {
	var ae *apiError
	var se apierrors.APIStatus
	switch {
	case errors.As(err, &ae):
		return &errorJSON{Code: ae.code, Message: ae.msg}
	case errors.As(err, &se) && se.Status().Code >= 400:
		return &errorJSON{Code: int(se.Status().Code), Message: se.Status().Message}
	}
	return &errorJSON{Code: http.StatusInternalServerError, Message: err.Error()}
}

// decode reads a JSON body into v: at most maxBody bytes, one object, no unknown fields. An
// empty body leaves v as it is (the SDK sends none for some calls).
func decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(http.StatusRequestEntityTooLarge, "request body over %d bytes", maxBody)
		}
		return errorf(http.StatusBadRequest, "malformed JSON body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "malformed JSON body: more than one JSON value")
	}
	return nil
}
