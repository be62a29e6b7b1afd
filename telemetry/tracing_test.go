package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

// TestSpansOnlyWhenSeen: with a no-op tracer provider a call starts no span; with an SDK it does, and
// the span reaches the exporter.
func TestSpansOnlyWhenSeen(t *testing.T) {
	quiet, err := telemetry.New(telemetry.Config{TracerProvider: noop.NewTracerProvider(), MeterProvider: otel.GetMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	l := quiet.Describe(t.Name(), messages.LockPlain, "o")
	if _, op := quiet.StartAcquire(context.Background(), l); op.Span() != nil || quiet.Tracing() {
		t.Fatalf("no-op provider: span %v, Tracing %v; want none, false", op.Span(), quiet.Tracing())
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	loud, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: otel.GetMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	_, op := loud.StartAcquire(context.Background(), loud.Describe(t.Name(), messages.LockPlain, "o"))
	if op.Span() == nil || !op.Span().IsRecording() || !loud.Tracing() {
		t.Fatalf("SDK provider: span %v, Tracing %v; want a recording span, true", op.Span(), loud.Tracing())
	}
	op.EndAcquire(telemetry.OutcomeAcquired, 1, 1, nil)
	if n := len(exp.GetSpans()); n != 1 {
		t.Fatalf("%d spans exported, want 1", n)
	}
}

// TestGlobalProviderInstalledLater: on the global provider, no span is built until the application
// installs an SDK, and the spans go to that SDK from then on.
func TestGlobalProviderInstalledLater(t *testing.T) {
	tel, err := telemetry.New(telemetry.Config{MeterProvider: otel.GetMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	l := tel.Describe(t.Name(), messages.LockPlain, "o")
	if _, op := tel.StartAcquire(context.Background(), l); op.Span() != nil || tel.Tracing() {
		t.Fatalf("global provider with no SDK: span %v, Tracing %v; want none, false", op.Span(), tel.Tracing())
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	otel.SetTracerProvider(tp)
	_, op := tel.StartAcquire(context.Background(), l)
	if op.Span() == nil || !tel.Tracing() {
		t.Fatalf("after SetTracerProvider: span %v, Tracing %v; want a span, true", op.Span(), tel.Tracing())
	}
	op.End(nil)
	spans := exp.GetSpans()
	if n := len(spans); n != 1 {
		t.Fatalf("%d spans exported, want 1", n)
	}
	// The handle was described before the SDK came: its span still carries every attribute.
	attrs := attribute.NewSet(spans[0].Attributes...)
	if v, ok := attrs.Value(telemetry.AttrLockOwner); !ok || v.AsString() != "o" {
		t.Errorf("span of a handle described before the SDK: owner attribute %v (%v), want o", v.AsString(), ok)
	}
	if v, ok := attrs.Value(telemetry.AttrLockKind); !ok || v.AsString() != string(messages.LockPlain) {
		t.Errorf("span of a handle described before the SDK: kind attribute %v (%v), want %s", v.AsString(), ok, messages.LockPlain)
	}
}

// TestDescribeQuietAllocatesNothing: describing a handle while nobody traces allocates nothing (a
// handle per request, on a lock name of its own, is a common use).
func TestDescribeQuietAllocatesNothing(t *testing.T) {
	tel, err := telemetry.New(telemetry.Config{TracerProvider: noop.NewTracerProvider(), MeterProvider: otel.GetMeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	var l telemetry.Lock
	if n := testing.AllocsPerRun(100, func() { l = tel.Describe("orders:42", messages.LockPlain, "owner:1") }); n != 0 {
		t.Errorf("Describe with a no-op provider: %v allocations, want 0", n)
	}
	_ = l
}

// TestGlobalMeterProviderInstalledLater: on the global meter provider, measurements made before the
// application installs an SDK go nowhere (they are not even buffered), and those made after reach it.
// The measurements are told apart by their lock name: other tests' Telemetry on the global provider
// flush what they buffered into the same instruments once the SDK is there.
func TestGlobalMeterProviderInstalledLater(t *testing.T) {
	tel, err := telemetry.New(telemetry.Config{TracerProvider: noop.NewTracerProvider(), LockNames: true})
	if err != nil {
		t.Fatal(err)
	}
	acquire := func() {
		_, op := tel.StartAcquire(context.Background(), tel.Describe(t.Name(), messages.LockPlain, "o"))
		op.EndAcquire(telemetry.OutcomeAcquired, 1, 1, nil)
	}
	acquire()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	otel.SetMeterProvider(mp)
	acquire()
	acquire()
	sum, _ := collect(t, reader)["lockwarden.lock.acquisitions"].(metricdata.Sum[int64])
	var got int64
	for _, p := range sum.DataPoints {
		if v, ok := p.Attributes.Value(telemetry.AttrLockName); ok && v.AsString() == t.Name() {
			got += p.Value
		}
	}
	if got != 2 {
		t.Errorf("acquisitions seen by the SDK installed after the first = %d, want 2", got)
	}
}
