// Package otlptest is an OTLP trace receiver for tests: a collector's
// trace service over HTTP (http/protobuf, an httptest server) or gRPC, on
// loopback, that keeps the spans it is sent in a form tests compare
// easily.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	Name     string
	TraceID  string // hex
	SpanID   string // hex
	ParentID string // hex; empty for a root span
	Start    time.Time
	End      time.Time
	// Attrs are the span's attributes: string, int64, float64, bool or
	// []any values.
	Attrs  map[string]any
	Events []Event
	// Status is "ok", "error" or "" (unset); StatusMessage its text.
	Status        string
	StatusMessage string
	// Resource are the attributes of the span's resource.
	Resource map[string]any
}

// Event is a span event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Receiver keeps the spans sent to it.
type Receiver struct {
	// Endpoint is the receiver's base URL, http://127.0.0.1:PORT: the
	// value for OTEL_EXPORTER_OTLP_ENDPOINT, whatever the protocol.
	Endpoint string

	mu       sync.Mutex
	spans    []Span
	requests int
}

// NewHTTP starts an OTLP/HTTP receiver (POST /v1/traces, protobuf, gzip or
// not), stopped when the test ends.
func NewHTTP(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// NewGRPC starts an OTLP/gRPC receiver, stopped when the test ends.
func NewGRPC(t testing.TB) *Receiver {
	r := &Receiver{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcService{r: r})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	r.Endpoint = "http://" + lis.Addr().String()
	return r
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s grpcService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.r.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(req *coltracepb.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, span(s, res))
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.spans = append(r.spans, got...)
}

func span(s *tracepb.Span, res map[string]any) Span {
	sp := Span{
		Name:     s.GetName(),
		TraceID:  hex.EncodeToString(s.GetTraceId()),
		SpanID:   hex.EncodeToString(s.GetSpanId()),
		ParentID: hex.EncodeToString(s.GetParentSpanId()),
		Start:    time.Unix(0, int64(s.GetStartTimeUnixNano())),
		End:      time.Unix(0, int64(s.GetEndTimeUnixNano())),
		Attrs:    attrs(s.GetAttributes()),
		Resource: res,
	}
	switch s.GetStatus().GetCode() {
	case tracepb.Status_STATUS_CODE_OK:
		sp.Status = "ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		sp.Status = "error"
	}
	sp.StatusMessage = s.GetStatus().GetMessage()
	for _, e := range s.GetEvents() {
		sp.Events = append(sp.Events, Event{Name: e.GetName(), Time: time.Unix(0, int64(e.GetTimeUnixNano())), Attrs: attrs(e.GetAttributes())})
	}
	return sp
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Requests is the number of export requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Named returns the received spans named name.
func (r *Receiver) Named(name string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
