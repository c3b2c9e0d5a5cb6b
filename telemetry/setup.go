package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace/noop"
)

// ShutdownTimeout bounds how long Shutdown waits for the last spans to be
// exported: a collector that is down never holds ralph's exit longer.
const ShutdownTimeout = 5 * time.Second

// ErrConfig is wrapped by Setup's errors about OTEL_* settings it cannot
// follow (a protocol or exporter it does not have).
var ErrConfig = errors.New("telemetry: unsupported OpenTelemetry setting")

// Options are what Setup needs besides the environment.
type Options struct {
	// Enabled is the --otel flag: export even when no OTLP endpoint
	// variable is set (to the default, http://localhost:4318).
	Enabled bool
	// Version is ralph's version, the resource's service.version.
	Version string
	// Workers is the build's number of workers (0 without --workers),
	// recorded on the run span.
	Workers int
	// Warnings receives the one warning about spans that could not be
	// exported; nil is os.Stderr.
	Warnings io.Writer
	// Getenv looks up the OTEL_* variables that decide whether traces are
	// on and which exporter sends them; nil is os.Getenv. (The exporters
	// read the rest of the OTEL_EXPORTER_OTLP_* variables from the process
	// environment themselves.)
	Getenv func(string) string
}

// Telemetry is the tracing of one ralph command: its Observer and the SDK
// behind it, if any.
type Telemetry struct {
	obs      *Observer
	tp       *sdktrace.TracerProvider // nil when traces are off
	protocol string
	warnings io.Writer
	warnOnce sync.Once
}

// Configured reports whether the environment asks for traces without the
// --otel flag (an OTLP endpoint variable is set), before the variables
// that turn them off are looked at.
func Configured(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Disabled reports whether the environment turns traces off:
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
func Disabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	return strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none")
}

// Setup reads opts and the standard OTEL_* variables and returns the
// command's Telemetry. Traces are on with opts.Enabled or an OTLP endpoint
// variable, unless OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
// Off, the Observer uses OpenTelemetry's no-op tracer: no SDK, no
// exporter, no goroutine. On, spans go through a batch span processor to
// an OTLP exporter: http/protobuf unless OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// or OTEL_EXPORTER_OTLP_PROTOCOL says grpc. The resource has service.name
// "ralph" (unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says
// otherwise) and service.version opts.Version.
//
// An error (wrapping ErrConfig) leaves traces off: the caller warns and
// runs without them. Export errors later are one warning on
// opts.Warnings, never an error of the run.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	t := &Telemetry{warnings: opts.Warnings}
	if t.warnings == nil {
		t.warnings = os.Stderr
	}
	off := func() *Telemetry {
		t.obs = NewObserver(noop.NewTracerProvider(), opts.Workers)
		return t
	}
	if !opts.Enabled && !Configured(getenv) || Disabled(getenv) {
		return off(), nil
	}
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" && !strings.EqualFold(e, "otlp") {
		return off(), fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%s (ralph exports traces with otlp only; none turns them off)", ErrConfig, e)
	}
	protocol := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if protocol == "" {
		protocol = "http/protobuf"
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return off(), fmt.Errorf("%w: OTLP protocol %q (use http/protobuf or grpc)", ErrConfig, protocol)
	}
	if err != nil {
		return off(), fmt.Errorf("telemetry: the OTLP %s exporter: %w", protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName("ralph"), semconv.ServiceVersion(opts.Version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		t.warn(fmt.Errorf("the resource from OTEL_RESOURCE_ATTRIBUTES: %w", err))
	}
	// Export errors reach the global error handler: one warning, then
	// silence (a collector that is down fails every batch).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(t.warn))
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.protocol = protocol
	t.obs = NewObserver(t.tp, opts.Workers)
	return t, nil
}

// warn writes the one warning about traces.
func (t *Telemetry) warn(err error) {
	t.warnOnce.Do(func() {
		fmt.Fprintf(t.warnings, "ralph: warning: OpenTelemetry traces: %v (the run goes on; traces may be incomplete)\n", err)
	})
}

// Enabled reports whether spans are exported.
func (t *Telemetry) Enabled() bool { return t.tp != nil }

// Protocol is the OTLP protocol spans are exported with ("http/protobuf"
// or "grpc"), empty when traces are off.
func (t *Telemetry) Protocol() string { return t.protocol }

// Observer is the loop.Observer that makes the spans.
func (t *Telemetry) Observer() *Observer { return t.obs }

// Shutdown ends the spans still open (Observer.End), exports what is left
// and stops the exporter, within ShutdownTimeout. ctx's values are kept
// but not its cancellation: a run interrupted with Ctrl-C still sends its
// last spans. Its error has been warned about already: callers may
// ignore it.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.obs.End()
	if t.tp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := t.tp.Shutdown(ctx)
	if err != nil {
		t.warn(err)
	}
	return err
}
