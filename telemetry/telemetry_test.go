package telemetry_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

// collect returns the metrics of reader by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func histCount(data metricdata.Aggregation) uint64 {
	h, _ := data.(metricdata.Histogram[float64])
	var n uint64
	for _, p := range h.DataPoints {
		n += p.Count
	}
	return n
}

func sumOf(data metricdata.Aggregation) int64 {
	s, _ := data.(metricdata.Sum[int64])
	var n int64
	for _, p := range s.DataPoints {
		n += p.Value
	}
	return n
}

// Buffered measurements are all seen by a collection, whether fewer or more than a batch were made,
// and the waiters and holders gauges follow the events; a closed Telemetry reports its counts once
// more and then no longer.
func TestBufferedMeasurements(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	tel, err := telemetry.New(telemetry.Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ messages.EventType, queued bool) messages.Event {
		return messages.Event{Type: typ, Name: "n", Kind: messages.LockPlain, Queued: queued, Wait: time.Millisecond, Held: time.Millisecond}
	}
	total := 0
	for _, n := range []int{3, 1000} { // fewer than a batch, then several batches
		for range n {
			_, op := tel.StartAcquire(context.Background(), tel.Describe("n", messages.LockPlain, "o"))
			op.EndAcquire(telemetry.OutcomeAcquired, 1, 1, nil)
		}
		total += n
		m := collect(t, reader)
		if got := histCount(m["lockwarden.lock.acquire.duration"]); got != uint64(total) {
			t.Errorf("acquire durations after %d acquisitions = %d", total, got)
		}
		if got := sumOf(m["lockwarden.lock.acquisitions"]); got != int64(total) {
			t.Errorf("acquisitions after %d = %d", total, got)
		}
	}

	tel.Record(ev(messages.EventWaitStarted, false))
	tel.Record(ev(messages.EventWaitStarted, false))
	tel.Record(ev(messages.EventAcquired, true))
	m := collect(t, reader)
	if w, h := sumOf(m["lockwarden.lock.waiters"]), sumOf(m["lockwarden.lock.holders"]); w != 1 || h != 1 {
		t.Errorf("waiters, holders = %d, %d; want 1, 1", w, h)
	}
	if got := histCount(m["lockwarden.lock.wait.duration"]); got != 1 {
		t.Errorf("wait durations = %d, want 1", got)
	}
	tel.Record(ev(messages.EventWaitTimedOut, false))
	tel.Record(ev(messages.EventReleased, false))
	tel.Close()
	m = collect(t, reader)
	if w, h := sumOf(m["lockwarden.lock.waiters"]), sumOf(m["lockwarden.lock.holders"]); w != 0 || h != 0 {
		t.Errorf("after Close: waiters, holders = %d, %d; want 0, 0", w, h)
	}
	if got := histCount(m["lockwarden.lock.hold.duration"]); got != 1 {
		t.Errorf("hold durations = %d, want 1", got)
	}
	// The callback unregisters itself on its own goroutine: wait for the points to go.
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if _, ok := collect(t, reader)["lockwarden.lock.waiters"]; !ok {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("a closed Telemetry is still observed")
		}
	}
}
