package coordinator

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

// WithTracerProvider sets the OpenTelemetry tracer provider of the coordinator's spans (see package
// telemetry for what they are). A nil provider means the default: the global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		o.telemetry.TracerProvider = tp
		return nil
	}
}

// WithMeterProvider sets the OpenTelemetry meter provider of the coordinator's metrics (see package
// telemetry for what they are). A nil provider means the default: the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error {
		o.telemetry.MeterProvider = mp
		return nil
	}
}

// WithLockNameAttribute adds the lock name to spans and metrics as the attribute lockwarden.lock.name.
// Names can have unbounded cardinality, which metric backends handle badly, so the default is off.
func WithLockNameAttribute(on bool) Option {
	return func(o *options) error {
		o.telemetry.LockNames = on
		return nil
	}
}

// WithoutTelemetry turns spans and metrics off. By default they go to the global OpenTelemetry
// providers, which record nothing until the application installs an SDK.
func WithoutTelemetry() Option {
	return func(o *options) error {
		o.noTelemetry = true
		return nil
	}
}

// eventSink passes each lock event to the metrics, on the lock actor's goroutine, and to the event
// hub, which hands it on from its own.
type eventSink struct {
	tel *telemetry.Telemetry
	hub *eventHub
}

func (s eventSink) Publish(ev messages.Event) {
	s.tel.Record(ev)
	s.hub.Publish(ev)
}

// acquireOutcome names the outcome of an acquire call for telemetry, from what acquire returns.
func acquireOutcome(ok bool, err error) string {
	switch {
	case ok:
		return telemetry.OutcomeAcquired
	case err == nil, errors.Is(err, ErrNotObtained) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return telemetry.OutcomeNotObtained
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return telemetry.OutcomeTimedOut
	default:
		return telemetry.OutcomeError
	}
}

// spanParent is the span context a command carries for the spans of the actors' work.
func spanParent(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }

var _ actors.EventSink = eventSink{}
