// Package tracing sets up OpenTelemetry tracing for the agent-sandbox binaries from the
// standard OTEL_* environment, and carries a trace across the one hop HTTP headers cannot: from
// the client that creates a SandboxClaim to the controller, in the claim's annotation.
//
// Tracing is off unless an OTLP endpoint is configured: the binaries then get the no-op
// provider, start no goroutine, and their request paths skip every tracing step.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The standard variables Setup reads itself; the exporter, the sampler
// (OTEL_TRACES_SAMPLER[_ARG]), the batcher (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES) read the rest.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Propagator is the one wire format of trace context everywhere: W3C traceparent and
// tracestate, as upstream agent-sandbox propagates (no baggage: it would carry whatever a
// client puts in it into every span processor).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Disabled is the provider of a binary without an OTLP endpoint.
var Disabled trace.TracerProvider = noop.NewTracerProvider()

// Enabled reports whether tp may record spans: callers skip all tracing work (header parsing,
// context copies) when it does not.
func Enabled(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, isNoop := tp.(noop.TracerProvider)
	return !isNoop
}

// ShutdownTimeout bounds the flush of the spans still buffered at exit.
const ShutdownTimeout = 5 * time.Second

// Setup returns the tracer provider a binary hands to its servers and reconcilers, and the
// function that flushes it at exit (within ShutdownTimeout). service is the default
// service.name (OTEL_SERVICE_NAME overrides it). Without OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT,
// or with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, it returns Disabled. onError, if
// set, receives export errors, the flush's among them.
func Setup(ctx context.Context, service string, onError func(error)) (trace.TracerProvider, func(), error) {
	noShutdown := func() {}
	on, err := configured()
	if err != nil || !on {
		return Disabled, noShutdown, err
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return Disabled, noShutdown, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return Disabled, noShutdown, fmt.Errorf("tracing resource: %w", err)
	}
	// The sampler is the SDK's default: OTEL_TRACES_SAMPLER, else parentbased_always_on.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator)
	if onError == nil {
		onError = otel.Handle
	} else {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(onError))
	}
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			onError(fmt.Errorf("flushing traces: %w", err))
		}
	}
	return tp, shutdown, nil
}

// configured: tracing is asked for by the environment.
func configured() (bool, error) {
	if strings.EqualFold(os.Getenv(EnvSDKDisabled), "true") {
		return false, nil
	}
	switch exporter := os.Getenv(EnvTracesExporter); exporter {
	case "", "otlp":
	case "none":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: only otlp and none are supported", EnvTracesExporter, exporter)
	}
	return os.Getenv(EnvEndpoint) != "" || os.Getenv(EnvTracesEndpoint) != "", nil
}

// newExporter speaks the protocol OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL names: http/protobuf,
// the specification's default, or grpc (upstream agent-sandbox's exporter, port 4317).
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	protocol := os.Getenv(EnvTracesProtocol)
	if protocol == "" {
		protocol = os.Getenv(EnvProtocol)
	}
	switch protocol {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, errors.New(EnvProtocol + " must be http/protobuf or grpc, not " + protocol)
}

// Tracer is the tracer of one of our packages, or nil when tp records nothing.
func Tracer(tp trace.TracerProvider, pkg string) trace.Tracer {
	if !Enabled(tp) {
		return nil
	}
	return tp.Tracer("github.com/agent-sandbox/agent-sandbox/" + pkg)
}
