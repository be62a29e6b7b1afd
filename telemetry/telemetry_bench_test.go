package telemetry_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkCycle measures the telemetry of one acquire+release without Redis: the two caller spans, the
// acquire metrics and the metrics of two events, as an uncontended Lock and Unlock record them.
func BenchmarkCycle(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Close()
	ctx := context.Background()
	lock := tel.Describe("name", messages.LockPlain, "owner:1")
	b.ReportAllocs()
	for b.Loop() {
		_, op := tel.StartAcquire(ctx, lock)
		tel.Record(messages.Event{Type: messages.EventAcquired, Name: "name", Kind: messages.LockPlain, Wait: time.Microsecond})
		op.EndAcquire(telemetry.OutcomeAcquired, 1, 1, nil)
		_, rop := tel.StartRelease(ctx, lock)
		tel.Record(messages.Event{Type: messages.EventReleased, Name: "name", Kind: messages.LockPlain, Held: time.Microsecond})
		rop.End(nil)
	}
}
