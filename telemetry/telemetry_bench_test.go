package telemetry_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkCycle measures the telemetry of one acquire+release without Redis: two caller spans, two
// Redis-call spans, the acquire metrics and the metrics of two events.
func BenchmarkCycle(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		actx, op := tel.StartAcquire(ctx, "name", messages.LockPlain, "owner:1")
		s := tel.StartChild(spanContext(actx), "lockwarden.redis.acquire", "name", messages.LockPlain)
		telemetry.EndSpan(s, nil)
		tel.Record(messages.Event{Type: messages.EventAcquired, Name: "name", Kind: messages.LockPlain, Wait: time.Microsecond})
		op.EndAcquire(telemetry.OutcomeAcquired, 1, 1, nil)
		rctx, rop := tel.StartRelease(ctx, "name", messages.LockPlain, "owner:1")
		s = tel.StartChild(spanContext(rctx), "lockwarden.redis.release", "name", messages.LockPlain)
		telemetry.EndSpan(s, nil)
		tel.Record(messages.Event{Type: messages.EventReleased, Name: "name", Kind: messages.LockPlain, Held: time.Microsecond})
		rop.End(nil)
	}
}

func spanContext(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }
