package coordinator

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/goleak"
)

// failingMeterProvider hands out meters whose histograms cannot be made.
type failingMeterProvider struct{ noop.MeterProvider }

func (failingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

type failingMeter struct{ noop.Meter }

var errNoInstrument = errors.New("no instrument")

func (failingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errNoInstrument
}

// TestNewFailureLeavesNothingRunning: a New that fails after the options were read (here, the
// telemetry's instruments cannot be made) returns the error and leaves no goroutine behind: no event
// hub, no journal writer, no actor system.
func TestNewFailureLeavesNothingRunning(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	ignore := goleak.IgnoreCurrent() // the client's own goroutines
	c, err := New(client, WithMeterProvider(failingMeterProvider{}), WithEventJournal("lockwarden:test:journal", 10))
	if !errors.Is(err, errNoInstrument) || c != nil {
		t.Fatalf("New with a meter that fails = %v, %v; want nil and the meter's error", c, err)
	}
	goleak.VerifyNone(t, ignore)
}
