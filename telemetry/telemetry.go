// Package telemetry wires lockwarden to OpenTelemetry: the spans of lock operations and the lock
// metrics. It imports only the OpenTelemetry API; the application chooses the SDK and exporters and
// passes its providers to the coordinator (or sets the global ones, the default).
//
// # Spans
//
//   - "lockwarden.acquire" and "lockwarden.release", on the caller's side, children of the span in the
//     caller's context. The caller's span travels inside the actor messages, so the lock actor records
//     the Redis calls it makes for the caller on it, across every actor hop, as events
//     ("lockwarden.redis.acquire", "lockwarden.redis.release", with lockwarden.redis.ok and
//     lockwarden.redis.duration_us).
//   - "lockwarden.renew": one span per watchdog tick of a lock actor that renews something, for every
//     tenth tick and every tick with a failure, so that the watchdog does not flood the traces.
//   - "lockwarden.multilock.acquire" and "lockwarden.redlock.acquire", with a child span
//     "lockwarden.group.member" per member and attempt, made by the supervisor actor; the member's
//     Redis calls are events on it.
//
// # Metrics
//
// All in the meter "github.com/lockwarden/lockwarden", with the attribute lockwarden.lock.kind (plain,
// fair, read, write, multilock, redlock) and, when enabled, lockwarden.lock.name:
//
//	lockwarden.lock.acquire.duration   histogram, s: how long acquire calls took, by lockwarden.lock.outcome
//	lockwarden.lock.wait.duration      histogram, s: how long owners waited before they got the lock
//	lockwarden.lock.hold.duration      histogram, s: how long holds lasted (released or lost)
//	lockwarden.lock.acquisitions       counter: acquire calls by lockwarden.lock.outcome
//	lockwarden.lock.renewals           counter: watchdog renewals by lockwarden.renewal.result (ok, failed)
//	lockwarden.lock.lost               counter: holds lost
//	lockwarden.lock.waiters            up-down counter: owners waiting now
//	lockwarden.lock.holders            up-down counter: holds held now
package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
)

// ScopeName is the instrumentation scope of lockwarden's tracer and meter.
const ScopeName = "github.com/lockwarden/lockwarden"

// Attribute keys.
const (
	AttrLockName      = attribute.Key("lockwarden.lock.name")
	AttrLockKind      = attribute.Key("lockwarden.lock.kind")
	AttrLockOwner     = attribute.Key("lockwarden.lock.owner")
	AttrOutcome       = attribute.Key("lockwarden.lock.outcome")
	AttrToken         = attribute.Key("lockwarden.lock.token")
	AttrAttempts      = attribute.Key("lockwarden.lock.attempts")
	AttrHolds         = attribute.Key("lockwarden.lock.hold_count")
	AttrMember        = attribute.Key("lockwarden.group.member")
	AttrMembers       = attribute.Key("lockwarden.group.members")
	AttrRenewalResult = attribute.Key("lockwarden.renewal.result")
	AttrRenewed       = attribute.Key("lockwarden.renewal.count")
)

// Outcomes of an acquire call (the values of lockwarden.lock.outcome).
const (
	OutcomeAcquired    = "acquired"
	OutcomeNotObtained = "not_obtained"
	OutcomeTimedOut    = "timed_out"
	OutcomeError       = "error"
)

// Config configures New.
type Config struct {
	// TracerProvider and MeterProvider default to the global ones.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// LockNames adds the lock name to spans and metrics as lockwarden.lock.name. Names can have
	// unbounded cardinality, which metric backends handle badly, so it is off by default.
	LockNames bool
}

// Telemetry records lockwarden's spans and metrics. Its methods are safe for concurrent use. A nil
// *Telemetry records nothing.
type Telemetry struct {
	tracer    trace.Tracer
	lockNames bool
	// sets caches the metric attribute sets by kind and extra attribute when lock names are off, so
	// that recording a measurement does not build and sort a set each time.
	sets sync.Map

	acquireDuration metric.Float64Histogram
	waitDuration    metric.Float64Histogram
	holdDuration    metric.Float64Histogram
	acquisitions    metric.Int64Counter
	renewals        metric.Int64Counter
	lost            metric.Int64Counter
	waiters         metric.Int64UpDownCounter
	holders         metric.Int64UpDownCounter
}

// New returns the telemetry of one coordinator. It fails only if an instrument cannot be created.
func New(cfg Config) (*Telemetry, error) {
	tp, mp := cfg.TracerProvider, cfg.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	t := &Telemetry{tracer: tp.Tracer(ScopeName), lockNames: cfg.LockNames}
	var err error
	seconds := metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
	if t.acquireDuration, err = meter.Float64Histogram("lockwarden.lock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("How long lock acquire calls took."), seconds); err != nil {
		return nil, err
	}
	if t.waitDuration, err = meter.Float64Histogram("lockwarden.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long owners waited before they got the lock."), seconds); err != nil {
		return nil, err
	}
	if t.holdDuration, err = meter.Float64Histogram("lockwarden.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long holds lasted."), seconds); err != nil {
		return nil, err
	}
	if t.acquisitions, err = meter.Int64Counter("lockwarden.lock.acquisitions", metric.WithUnit("{call}"),
		metric.WithDescription("Lock acquire calls, by outcome.")); err != nil {
		return nil, err
	}
	if t.renewals, err = meter.Int64Counter("lockwarden.lock.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Watchdog renewals, by result.")); err != nil {
		return nil, err
	}
	if t.lost, err = meter.Int64Counter("lockwarden.lock.lost", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds lost: their lease ran out, a renewal found them gone, or they were force-unlocked.")); err != nil {
		return nil, err
	}
	if t.waiters, err = meter.Int64UpDownCounter("lockwarden.lock.waiters", metric.WithUnit("{owner}"),
		metric.WithDescription("Owners waiting for a lock now.")); err != nil {
		return nil, err
	}
	if t.holders, err = meter.Int64UpDownCounter("lockwarden.lock.holders", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds held now.")); err != nil {
		return nil, err
	}
	return t, nil
}

// lockAttrs returns the attributes of a lock of kind on name (a group has no name).
func (t *Telemetry) lockAttrs(name string, kind messages.LockKind, extra ...attribute.KeyValue) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 2+len(extra))
	attrs = append(attrs, AttrLockKind.String(string(kind)))
	if t.lockNames && name != "" {
		attrs = append(attrs, AttrLockName.String(name))
	}
	return append(attrs, extra...)
}

// setKey names a cached metric attribute set.
type setKey struct {
	kind  messages.LockKind
	extra attribute.KeyValue
}

// measure returns the attributes of a measurement about a lock of kind on name, with at most one extra
// attribute.
func (t *Telemetry) measure(name string, kind messages.LockKind, extra ...attribute.KeyValue) metric.MeasurementOption {
	if t.lockNames {
		return metric.WithAttributes(t.lockAttrs(name, kind, extra...)...)
	}
	k := setKey{kind: kind}
	if len(extra) > 0 {
		k.extra = extra[0]
	}
	if opt, ok := t.sets.Load(k); ok {
		return opt.(metric.MeasurementOption)
	}
	opt := metric.WithAttributeSet(attribute.NewSet(t.lockAttrs(name, kind, extra...)...))
	t.sets.Store(k, opt)
	return opt
}

// Op is an acquire or release in progress on the caller's side; End it once.
type Op struct {
	t       *Telemetry
	span    trace.Span
	name    string
	kind    messages.LockKind
	start   time.Time
	acquire bool
}

// StartAcquire starts the span of an acquire call on the lock name of kind by owner, as a child of
// ctx's span, and returns the context carrying it.
func (t *Telemetry) StartAcquire(ctx context.Context, name string, kind messages.LockKind, owner string) (context.Context, *Op) {
	return t.start(ctx, "lockwarden.acquire", name, kind, owner, true)
}

// StartRelease starts the span of a release call.
func (t *Telemetry) StartRelease(ctx context.Context, name string, kind messages.LockKind, owner string) (context.Context, *Op) {
	return t.start(ctx, "lockwarden.release", name, kind, owner, false)
}

// StartGroupAcquire starts the span of a MultiLock or RedLock acquire (kind "multilock" or
// "redlock") over members locks.
func (t *Telemetry) StartGroupAcquire(ctx context.Context, kind messages.LockKind, members int) (context.Context, *Op) {
	ctx, op := t.start(ctx, "lockwarden."+string(kind)+".acquire", "", kind, "", true)
	if op != nil {
		op.span.SetAttributes(AttrMembers.Int(members))
	}
	return ctx, op
}

func (t *Telemetry) start(ctx context.Context, span, name string, kind messages.LockKind, owner string, acquire bool) (context.Context, *Op) {
	if t == nil {
		return ctx, nil
	}
	attrs := t.lockAttrs(name, kind)
	if owner != "" {
		attrs = append(attrs, AttrLockOwner.String(owner))
	}
	ctx, s := t.tracer.Start(ctx, span, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx, &Op{t: t, span: s, name: name, kind: kind, start: time.Now(), acquire: acquire}
}

// EndAcquire ends an acquire: outcome is one of the Outcome constants, token the fencing token when
// acquired, attempts how many Redis attempts it took (0 when unknown), err the error, if any. It
// records the acquire duration and the acquisition counter.
func (op *Op) EndAcquire(outcome string, token int64, attempts int, err error) {
	if op == nil {
		return
	}
	elapsed := time.Since(op.start)
	if op.span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 3)
		attrs = append(attrs, AttrOutcome.String(outcome))
		if token != 0 {
			attrs = append(attrs, AttrToken.Int64(token))
		}
		if attempts > 0 {
			attrs = append(attrs, AttrAttempts.Int(attempts))
		}
		op.span.SetAttributes(attrs...)
	}
	op.setError(err)
	op.span.End()
	set := op.t.measure(op.name, op.kind, AttrOutcome.String(outcome))
	op.t.acquireDuration.Record(context.Background(), elapsed.Seconds(), set)
	op.t.acquisitions.Add(context.Background(), 1, set)
}

// End ends a release (or any operation that records no metric of its own), with its error.
func (op *Op) End(err error) {
	if op == nil {
		return
	}
	op.setError(err)
	op.span.End()
}

func (op *Op) setError(err error) {
	if err != nil {
		op.span.RecordError(err)
		op.span.SetStatus(codes.Error, err.Error())
	}
}

// StartChild starts a child span of the span context parent (which may be invalid: then the span is a
// root) for work done on the caller's behalf by an actor, such as a Redis call.
func (t *Telemetry) StartChild(parent trace.SpanContext, span, name string, kind messages.LockKind, attrs ...attribute.KeyValue) trace.Span {
	if t == nil {
		return nil
	}
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	}
	_, s := t.tracer.Start(ctx, span, trace.WithAttributes(t.lockAttrs(name, kind, attrs...)...))
	return s
}

// EndSpan ends a span started by StartChild, with its error; a nil span is ignored.
func EndSpan(s trace.Span, err error) {
	if s == nil {
		return
	}
	if err != nil {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// Record updates the metrics that follow from a lock event: wait and hold durations, renewals, lost
// holds, waiters and holders.
func (t *Telemetry) Record(ev messages.Event) {
	if t == nil {
		return
	}
	ctx := context.Background()
	set := t.measure(ev.Name, ev.Kind)
	switch ev.Type {
	case messages.EventAcquired:
		t.holders.Add(ctx, 1, set)
		t.waitDuration.Record(ctx, ev.Wait.Seconds(), set)
		if ev.Queued {
			t.waiters.Add(ctx, -1, set)
		}
	case messages.EventReentered:
		if ev.Queued {
			t.waiters.Add(ctx, -1, set)
		}
	case messages.EventReleased:
		if ev.HoldCount == 0 {
			t.holders.Add(ctx, -1, set)
			t.holdDuration.Record(ctx, ev.Held.Seconds(), set)
		}
	case messages.EventLost:
		t.holders.Add(ctx, -1, set)
		t.holdDuration.Record(ctx, ev.Held.Seconds(), set)
		t.lost.Add(ctx, 1, set)
	case messages.EventRenewed:
		t.renewals.Add(ctx, 1, t.measure(ev.Name, ev.Kind, AttrRenewalResult.String("ok")))
	case messages.EventRenewalFailed:
		t.renewals.Add(ctx, 1, t.measure(ev.Name, ev.Kind, AttrRenewalResult.String("failed")))
	case messages.EventWaitStarted:
		t.waiters.Add(ctx, 1, set)
	case messages.EventWaitTimedOut:
		t.waiters.Add(ctx, -1, set)
	}
}
