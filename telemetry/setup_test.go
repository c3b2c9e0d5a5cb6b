package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/telemetry"
	"github.com/ralph-dev/ralph/telemetry/otlptest"
)

func TestSetupDecisions(t *testing.T) {
	tests := []struct {
		name     string
		flag     bool
		env      map[string]string
		enabled  bool
		protocol string
		err      error
	}{
		{name: "nothing: off"},
		{name: "flag: http/protobuf to the default endpoint", flag: true, enabled: true, protocol: "http/protobuf"},
		{name: "endpoint variable alone", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, enabled: true, protocol: "http/protobuf"},
		{name: "traces endpoint variable alone", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, enabled: true, protocol: "http/protobuf"},
		{name: "grpc", flag: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true, protocol: "grpc"},
		{name: "the traces protocol wins", flag: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, enabled: true, protocol: "http/protobuf"},
		{name: "SDK disabled beats the flag", flag: true, env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "exporter none beats the flag", flag: true, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "http/json is not supported", flag: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: telemetry.ErrConfig},
		{name: "console exporter is not supported", flag: true, env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, err: telemetry.ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, err := telemetry.Setup(context.Background(), telemetry.Options{Enabled: tt.flag, Getenv: func(k string) string { return tt.env[k] }})
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			defer tel.Shutdown(context.Background())
			if tel.Enabled() != tt.enabled || tel.Protocol() != tt.protocol {
				t.Errorf("enabled %v protocol %q, want %v %q", tel.Enabled(), tel.Protocol(), tt.enabled, tt.protocol)
			}
			if tel.Observer() == nil {
				t.Error("no observer")
			}
		})
	}
}

// exportRun runs the scripted build with traces set up from the
// environment and shuts them down; it returns the warnings.
func exportRun(t *testing.T) string {
	t.Helper()
	var warnings bytes.Buffer
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{Version: "v1.2.3", Warnings: &warnings})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Enabled() {
		t.Fatal("traces are off")
	}
	s := newScriptedRun(t, tel.Observer())
	if _, err := loop.Run(context.Background(), s.cfg, s.store, s.runner(t)); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	return warnings.String()
}

// received summarises what a receiver got: each span's name, its parent's
// name and the run's resource.
func received(t *testing.T, r *otlptest.Receiver) (names []string, resource map[string]any) {
	t.Helper()
	spans := r.Spans()
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	for _, s := range spans {
		parent := ""
		if s.ParentID != "" {
			p, ok := byID[s.ParentID]
			if !ok {
				t.Errorf("span %s has parent %s, which was not received", s.Name, s.ParentID)
			}
			parent = p.Name + " > "
		}
		names = append(names, parent+s.Name)
		if s.Name == telemetry.SpanRun {
			resource = s.Resource
		}
	}
	return names, resource
}

var wantReceived = []string{
	"ralph.iteration > ralph.agent", "ralph.run > ralph.iteration",
	"ralph.iteration > ralph.agent", "ralph.iteration > ralph.gate", "ralph.iteration > ralph.verify", "ralph.run > ralph.iteration",
	"ralph.iteration > ralph.agent", "ralph.iteration > ralph.gate", "ralph.iteration > ralph.verify", "ralph.run > ralph.iteration",
	"ralph.iteration > ralph.agent", "ralph.iteration > ralph.gate", "ralph.iteration > ralph.verify", "ralph.run > ralph.iteration",
	"ralph.run",
}

func TestExportHTTP(t *testing.T) {
	r := otlptest.NewHTTP(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint)
	if w := exportRun(t); w != "" {
		t.Errorf("warnings: %s", w)
	}
	names, res := received(t, r)
	if diff := cmp.Diff(wantReceived, names); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	if res["service.name"] != "ralph" || res["service.version"] != "v1.2.3" {
		t.Errorf("resource %v, want service.name ralph, service.version v1.2.3", res)
	}
}

func TestExportGRPC(t *testing.T) {
	r := otlptest.NewGRPC(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_SERVICE_NAME", "ralph-ci")
	if w := exportRun(t); w != "" {
		t.Errorf("warnings: %s", w)
	}
	names, res := received(t, r)
	if diff := cmp.Diff(wantReceived, names); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	if res["service.name"] != "ralph-ci" {
		t.Errorf("resource %v, want service.name ralph-ci (OTEL_SERVICE_NAME)", res)
	}
}

// TestExportDeadEndpoint: a collector that is not there, or that never
// answers, costs one warning and a bounded wait at shutdown, never an error
// of the run.
func TestExportDeadEndpoint(t *testing.T) {
	refused := func(t *testing.T) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis.Close() // nothing listens there now
		return lis.Addr().String()
	}
	silent := func(t *testing.T) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lis.Close() })
		go func() { // accepts, reads nothing, answers nothing
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		return lis.Addr().String()
	}
	for name, endpoint := range map[string]func(*testing.T) string{"refused": refused, "silent": silent} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+endpoint(t))
			began := time.Now()
			w := exportRunTolerant(t)
			if took := time.Since(began); took > 4*telemetry.ShutdownTimeout {
				t.Errorf("the run with a dead collector took %v: the shutdown is not bounded", took)
			}
			if strings.Count(w, "warning") != 1 || !strings.Contains(w, "OpenTelemetry") {
				t.Errorf("warnings %q, want exactly one about OpenTelemetry", w)
			}
		})
	}
}

// exportRunTolerant is exportRun for a collector that fails: the shutdown's
// error is expected (and was warned about).
func exportRunTolerant(t *testing.T) string {
	t.Helper()
	var warnings bytes.Buffer
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{Warnings: &warnings})
	if err != nil {
		t.Fatal(err)
	}
	s := newScriptedRun(t, tel.Observer())
	rep, err := loop.Run(context.Background(), s.cfg, s.store, s.runner(t))
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("run: %v, %s", err, rep.Outcome)
	}
	tel.Shutdown(context.Background())
	return warnings.String()
}
