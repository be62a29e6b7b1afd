package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	mnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// discardExporter is a span exporter that drops every span.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkTelemetry measures one uncontended acquire+release on one goroutine, on two coordinators
// of the same server: one with telemetry off (WithoutTelemetry), one with it on. The iterations
// alternate between the two, so that both see the same machine at the same time. It reports p50/off
// and mean/off: the "on" p50 and mean over the "off" ones (target for telemetry=sdk: at most 1.10).
//
//	telemetry=sdk       the OpenTelemetry SDK: every span sampled and exported (synchronously) to an
//	                    exporter that drops it; the metrics SDK with a manual reader
//	telemetry=tracing   the tracing SDK as above, metrics to the API's no-op meter provider
//	telemetry=metrics   the metrics SDK as above, spans to the API's no-op tracer provider
//	telemetry=noop      both no-op providers (what the global providers are until an SDK is installed)
func BenchmarkTelemetry(b *testing.B) {
	srv := redistest.Start(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discardExporter{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	for _, tc := range []struct {
		name string
		opts []coordinator.Option
	}{
		{"sdk", []coordinator.Option{coordinator.WithTracerProvider(tp), coordinator.WithMeterProvider(mp)}},
		{"tracing", []coordinator.Option{coordinator.WithTracerProvider(tp), coordinator.WithMeterProvider(mnoop.NewMeterProvider())}},
		{"metrics", []coordinator.Option{coordinator.WithTracerProvider(tnoop.NewTracerProvider()), coordinator.WithMeterProvider(mp)}},
		{"noop", []coordinator.Option{coordinator.WithTracerProvider(tnoop.NewTracerProvider()), coordinator.WithMeterProvider(mnoop.NewMeterProvider())}},
	} {
		b.Run("telemetry="+tc.name, func(b *testing.B) {
			checkLeaks(b)
			offClient, _ := newClient(b, srv)
			onClient, _ := newClient(b, srv)
			off := newCoordinator(b, offClient, coordinator.WithoutTelemetry()).Mutex("bench:telemetry:off")
			on := newCoordinator(b, onClient, tc.opts...).Mutex("bench:telemetry:on")
			runInterleaved(b, off, on)
		})
	}
}

// runInterleaved times acquire+release cycles of off and on in turns, and reports their ratios.
func runInterleaved(b *testing.B, off, on *coordinator.Mutex) {
	ctx := context.Background()
	cycle := func(m *coordinator.Mutex) time.Duration {
		t0 := time.Now()
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 200 { // warm both
		cycle(off)
		cycle(on)
	}
	n := ops(b, uncontendedFloor)
	offLat, onLat := make([]time.Duration, n), make([]time.Duration, n)
	b.ResetTimer()
	for i := range n {
		if i%2 == 0 {
			offLat[i], onLat[i] = cycle(off), cycle(on)
		} else {
			onLat[i], offLat[i] = cycle(on), cycle(off)
		}
	}
	b.StopTimer()
	var offSum, onSum time.Duration
	for i := range n {
		offSum, onSum = offSum+offLat[i], onSum+onLat[i]
	}
	slices.Sort(offLat)
	slices.Sort(onLat)
	b.ReportMetric(float64(offSum+onSum)/float64(2*n), "ns/op")
	b.ReportMetric(us(percentile(offLat, 0.5)), "off-p50-us")
	b.ReportMetric(us(percentile(onLat, 0.5)), "on-p50-us")
	b.ReportMetric(float64(percentile(onLat, 0.5))/float64(percentile(offLat, 0.5)), "p50/off")
	b.ReportMetric(float64(onSum)/float64(offSum), "mean/off")
}
