package tracing

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// HTTPMethod is m when it is a standard HTTP method, else "_OTHER", as the OpenTelemetry HTTP
// conventions say: span names and attributes take it, and a client must not mint those.
func HTTPMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// EndHTTPServerSpan records the response's status code on a server span and ends it; a 5xx
// marks the span an error (a 4xx is the client's, not the server's). A status of 0, nothing
// written, is the 200 net/http then sends.
func EndHTTPServerSpan(span trace.Span, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(attribute.Int("http.status_code", status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}
