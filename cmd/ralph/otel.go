package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/telemetry"
)

// otelFlag is --otel, on build, plan and prompt.
func otelFlag() cli.Flag {
	return &cli.BoolFlag{Name: "otel", Usage: "export OpenTelemetry traces of the run over OTLP, to $OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318; " +
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc for gRPC); on without the flag when an OTEL_EXPORTER_OTLP_*ENDPOINT variable is set, off with OTEL_SDK_DISABLED=true"}
}

// startTraces sets up the run's traces (package telemetry) from --otel and
// the OTEL_* variables. It returns the observer to send the run's notes to
// (nil when traces are off: nothing to send) and the function that ends
// them, flushing for at most telemetry.ShutdownTimeout; call it before the
// command returns. Traces never change the exit code: a setting they
// cannot follow or a collector that does not answer is one warning.
func startTraces(c *cli.Context, cfg appConfig, workers int) (*telemetry.Observer, func()) {
	tel, err := telemetry.Setup(c.Context, telemetry.Options{
		Enabled:  c.Bool("otel"),
		Version:  buildVersion(),
		Workers:  workers,
		Warnings: cfg.stderr,
		Getenv:   cfg.getenv,
	})
	if err != nil {
		fmt.Fprintf(cfg.stderr, "ralph: warning: OpenTelemetry traces are off: %v\n", err)
	}
	if !tel.Enabled() {
		return nil, func() {}
	}
	return tel.Observer(), func() { tel.Shutdown(c.Context) }
}

// withTraces is obs and the traces' observer, if any.
func withTraces(obs loop.Observer, traces *telemetry.Observer) loop.Observer {
	if traces == nil {
		return obs
	}
	return loop.MultiObserver(obs, traces)
}
