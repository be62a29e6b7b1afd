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
//     lockwarden.redis.duration_us): the attempts of an acquisition that did not get the lock at its
//     first attempt, and failed calls. A handoff (a release that gave the waiting caller the lock in
//     its own Redis call: a local waiter's, or a fair lock's grant notice) is one of the caller's
//     attempts: it counts in lockwarden.lock.attempts and is an event with lockwarden.redis.handoff.
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
//	lockwarden.lock.waiters            observable up-down counter: owners waiting now
//	lockwarden.lock.holders            observable up-down counter: holds held now
//
// The waiters and holders are counted in memory and observed when the metrics are collected, so that
// a lock call does not pay for an SDK measurement to keep them; call [Telemetry.Close] when done.
package telemetry

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lockwarden/lockwarden/messages"
)

// ScopeName is the instrumentation scope of lockwarden's tracer and meter.
const ScopeName = "github.com/lockwarden/lockwarden"

// Attribute keys of lockwarden's spans and metrics.
const (
	// AttrLockName is the lock name (a string), on spans and metrics only with [Config.LockNames];
	// a group's spans and metrics have none.
	AttrLockName = attribute.Key("lockwarden.lock.name")
	// AttrLockKind is the kind of lock (a string, a [messages.LockKind]: plain, fair, read, write,
	// read-write, semaphore, permit-semaphore, latch, multilock or redlock), on every span and metric.
	AttrLockKind = attribute.Key("lockwarden.lock.kind")
	// AttrLockOwner is the owner id of the hold (a string), on the spans of a handle that has one.
	AttrLockOwner = attribute.Key("lockwarden.lock.owner")
	// AttrOutcome is how an acquire call ended (a string, one of the Outcome constants), on its span
	// and on the acquire-duration and acquisitions metrics.
	AttrOutcome = attribute.Key("lockwarden.lock.outcome")
	// AttrToken is the fencing token of an acquisition (an int64), on the acquire span when the call
	// got the lock with a token (never 0: a read hold, which has none, goes without).
	AttrToken = attribute.Key("lockwarden.lock.token")
	// AttrAttempts is how many Redis attempts an acquire call, or a group member, took (an int, from
	// 1), on the acquire span when known and on each lockwarden.group.member span.
	AttrAttempts = attribute.Key("lockwarden.lock.attempts")
	// AttrHolds names an owner's hold count (an int). lockwarden sets it on no span or metric; it is
	// kept so that code that names it still compiles.
	AttrHolds = attribute.Key("lockwarden.lock.hold_count")
	// AttrMember is a group member's position in its group (an int, from 0), on each
	// lockwarden.group.member span.
	AttrMember = attribute.Key("lockwarden.group.member")
	// AttrMembers is the number of members of a group (an int), on the group's acquire span.
	AttrMembers = attribute.Key("lockwarden.group.members")
	// AttrRenewalResult is the result of a watchdog renewal (a string, "ok" or "failed"), on the
	// lockwarden.lock.renewals counter.
	AttrRenewalResult = attribute.Key("lockwarden.renewal.result")
	// AttrRenewed is how many holds a watchdog tick renewed (an int), on its lockwarden.renew span.
	AttrRenewed = attribute.Key("lockwarden.renewal.count")
	// AttrHandoff marks the lockwarden.redis.acquire event of an attempt that was a handoff: another
	// owner's release gave the lock to the waiter in the same Redis call (a local handoff, or a fair
	// lock's grant notice from any process).
	AttrHandoff = attribute.Key("lockwarden.redis.handoff")
)

// Outcomes of an acquire call (the values of lockwarden.lock.outcome).
const (
	// OutcomeAcquired: the call got the lock.
	OutcomeAcquired = "acquired"
	// OutcomeNotObtained: another owner held the lock for the whole wait (or a TryLock's one attempt).
	OutcomeNotObtained = "not_obtained"
	// OutcomeTimedOut: the caller's context was canceled or passed its deadline before the lock was
	// obtained.
	OutcomeTimedOut = "timed_out"
	// OutcomeError: the call failed with an error other than those above (invalid input, a Redis
	// error, a closed coordinator).
	OutcomeError = "error"
)

// Config configures New.
type Config struct {
	// TracerProvider makes the tracer of lockwarden's spans; nil means the global one
	// (otel.GetTracerProvider), whose tracers forward to an SDK installed after New.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter of lockwarden's metrics; nil means the global one
	// (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
	// LockNames adds the lock name to spans and metrics as lockwarden.lock.name. Names can have
	// unbounded cardinality, which metric backends handle badly, so it is off by default.
	LockNames bool
}

// Telemetry records lockwarden's spans and metrics. Its methods are safe for concurrent use. A nil
// *Telemetry records nothing.
type Telemetry struct {
	tracer trace.Tracer
	// quiet reports whether spans would go nowhere: the provider is a no-op one, or the global one
	// while no SDK has been installed (see tracing).
	quiet func() bool
	// metricsQuiet reports whether measurements would go nowhere, as quiet does for spans: the meter
	// provider is a no-op one, or the global one while no SDK is installed (its instruments drop what
	// they are given until then). Counters and histograms are then not fed; the waiters and holders
	// gauges are kept all the same, since they report a state that an SDK installed later observes.
	metricsQuiet func() bool
	lockNames    bool
	// sets holds the metric attribute sets of every kind and extra attribute, built once in New and
	// only read after, so that recording a measurement does not build and sort a set each time.
	sets [len(kinds)][len(extras)]metric.MeasurementOption

	acquireDuration metric.Float64Histogram
	waitDuration    metric.Float64Histogram
	holdDuration    metric.Float64Histogram
	acquisitions    metric.Int64Counter
	renewals        metric.Int64Counter
	lost            metric.Int64Counter
	waiters         metric.Int64ObservableUpDownCounter
	holders         metric.Int64ObservableUpDownCounter

	// pending holds the measurements of the synchronous instruments not yet given to the SDK.
	pendingMu sync.Mutex
	pending   []measurement

	// kindGauges counts the waiters and holders by kind when lock names are off; gauges counts them
	// by lock when they are on (and for kinds outside kinds). The callback observes them.
	kindGauges   [len(kinds)]kindGauge
	gaugeMu      sync.Mutex
	gauges       map[gaugeKey]*gaugeCounts
	registration metric.Registration
	closed       atomic.Bool
	unregister   sync.Once
}

// instrument names a synchronous instrument in a buffered measurement.
type instrument uint8

const (
	instAcquireDuration instrument = iota
	instWaitDuration
	instHoldDuration
	instAcquisitions
	instRenewals
	instLost
)

// measurement is a measurement waiting in Telemetry.pending.
type measurement struct {
	inst  instrument
	value float64
	set   metric.MeasurementOption
}

// flushAt is how many measurements wait before the call that adds the last one gives them to the SDK.
const flushAt = 256

type gaugeKey struct {
	name string
	kind messages.LockKind
}

type gaugeCounts struct{ waiters, holders int64 }

// kindGauge counts the waiters and holders of a kind; used is set once they changed, and from then
// on they are observed.
type kindGauge struct {
	waiters, holders atomic.Int64
	used             atomic.Bool
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
	t := &Telemetry{tracer: tp.Tracer(ScopeName), lockNames: cfg.LockNames, quiet: quietProvider(cfg.TracerProvider, tp),
		metricsQuiet: quietMeterProvider(cfg.MeterProvider, mp)}
	t.prepareSets()
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
	if t.waiters, err = meter.Int64ObservableUpDownCounter("lockwarden.lock.waiters", metric.WithUnit("{owner}"),
		metric.WithDescription("Owners waiting for a lock now.")); err != nil {
		return nil, err
	}
	if t.holders, err = meter.Int64ObservableUpDownCounter("lockwarden.lock.holders", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds held now.")); err != nil {
		return nil, err
	}
	t.gauges = make(map[gaugeKey]*gaugeCounts)
	if t.registration, err = meter.RegisterCallback(t.observe, t.waiters, t.holders); err != nil {
		return nil, err
	}
	return t, nil
}

// quietProvider returns the check of whether the spans of tp go nowhere: always, for a no-op provider;
// for the global provider (given is nil), as long as the application has not installed one, since the
// global provider's tracers forward to the one installed later.
func quietProvider(given, tp trace.TracerProvider) func() bool {
	return quietCheck(given == nil, tp, isNoop(tp), otel.GetTracerProvider)
}

// quietMeterProvider is quietProvider for a meter provider and its measurements.
func quietMeterProvider(given, mp metric.MeterProvider) func() bool {
	return quietCheck(given == nil, mp, isNoopMeter(mp), otel.GetMeterProvider)
}

// quietCheck returns the check of whether what the provider p records goes nowhere: always when it is a
// no-op one (noop); when it is the built-in global provider (defaulted: none was given), as long as
// current, the global provider now, is still p: its instruments go nowhere until the application
// installs an SDK, and then they forward to it. Otherwise never.
func quietCheck[P comparable](defaulted bool, p P, noop bool, current func() P) func() bool {
	switch {
	case noop:
		return func() bool { return true }
	case defaulted && reflect.TypeOf(p).Kind() == reflect.Pointer &&
		reflect.TypeOf(p).Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global":
		return func() bool { return current() == p }
	default:
		return func() bool { return false }
	}
}

func isNoopMeter(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return true
	}
	return false
}

func isNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return true
	}
	return false
}

// Tracing reports whether a span started now would be seen: a tracer provider other than a no-op one,
// or the global provider once an SDK is installed. Spans are started, and their attributes built, only
// then.
func (t *Telemetry) Tracing() bool { return t != nil && !t.quiet() }

// lockAttrs returns the attributes of a lock of kind on name (a group has no name).
func (t *Telemetry) lockAttrs(name string, kind messages.LockKind, extra ...attribute.KeyValue) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 3+len(extra))
	attrs = append(attrs, AttrLockKind.String(string(kind)))
	if t.lockNames && name != "" {
		attrs = append(attrs, AttrLockName.String(name))
	}
	return append(attrs, extra...)
}

// kinds are the lock kinds whose attribute sets are prepared; extras the extra attributes (none first).
var (
	kinds  = [...]messages.LockKind{messages.LockPlain, messages.LockFair, messages.LockRead, messages.LockWrite, messages.LockReadWrite, messages.LockMultiLock, messages.LockRedLock}
	extras = [...]attribute.KeyValue{{},
		AttrOutcome.String(OutcomeAcquired), AttrOutcome.String(OutcomeNotObtained),
		AttrOutcome.String(OutcomeTimedOut), AttrOutcome.String(OutcomeError),
		AttrRenewalResult.String("ok"), AttrRenewalResult.String("failed"),
	}
)

// kindIndex returns the index of kind in kinds, or -1.
func kindIndex(kind messages.LockKind) int {
	for i, k := range kinds {
		if k == kind {
			return i
		}
	}
	return -1
}

// extraIndex returns the index of extra in extras (0 for none), or -1.
func extraIndex(extra []attribute.KeyValue) int {
	if len(extra) == 0 {
		return 0
	}
	for i, kv := range extras[1:] {
		if kv == extra[0] {
			return i + 1
		}
	}
	return -1
}

// prepareSets builds the attribute sets of every kind with each extra attribute.
func (t *Telemetry) prepareSets() {
	for i, kind := range kinds {
		for j, extra := range extras {
			attrs := t.lockAttrs("", kind)
			if extra.Key != "" {
				attrs = append(attrs, extra)
			}
			t.sets[i][j] = metric.WithAttributeSet(attribute.NewSet(attrs...))
		}
	}
}

// measure returns the attributes of a measurement about a lock of kind on name, with at most one extra
// attribute.
func (t *Telemetry) measure(name string, kind messages.LockKind, extra ...attribute.KeyValue) metric.MeasurementOption {
	if t.metricsQuiet() {
		return nil // add drops the measurement: no set is built for it
	}
	if !t.lockNames {
		if i, j := kindIndex(kind), extraIndex(extra); i >= 0 && j >= 0 {
			return t.sets[i][j]
		}
	}
	return metric.WithAttributes(t.lockAttrs(name, kind, extra...)...)
}

// Op is an acquire or release in progress on the caller's side; End it once. The zero Op (from a nil
// *Telemetry) records nothing.
type Op struct {
	t       *Telemetry
	span    trace.Span
	name    string
	kind    messages.LockKind
	start   time.Time
	acquire bool
}

// Lock describes a lock handle to the telemetry: its name, kind and owner, and the span attributes
// they make, built once per handle rather than on every call when spans are seen at Describe, and
// built on each span's start when they were not then (an SDK installed later), so that a handle made
// while nobody traces costs no allocation for them. The zero Lock describes nothing.
type Lock struct {
	name  string
	kind  messages.LockKind
	owner string
	attrs trace.SpanStartOption
}

// Describe returns the description of a handle on the lock name of kind for owner ("" for none).
func (t *Telemetry) Describe(name string, kind messages.LockKind, owner string) Lock {
	l := Lock{name: name, kind: kind, owner: owner}
	if t != nil && !t.quiet() {
		l.attrs = t.spanAttrs(name, kind, owner)
	}
	return l
}

// spanAttrs returns the span attributes of a handle on the lock name of kind for owner.
func (t *Telemetry) spanAttrs(name string, kind messages.LockKind, owner string) trace.SpanStartOption {
	attrs := t.lockAttrs(name, kind)
	if owner != "" {
		attrs = append(attrs, AttrLockOwner.String(owner))
	}
	return trace.WithAttributes(attrs...)
}

// StartAcquire starts the span of an acquire call on the lock l, as a child of ctx's span, and returns
// the context carrying it.
func (t *Telemetry) StartAcquire(ctx context.Context, l Lock) (context.Context, Op) {
	return t.start(ctx, "lockwarden.acquire", l, true)
}

// StartRelease starts the span of a release call.
func (t *Telemetry) StartRelease(ctx context.Context, l Lock) (context.Context, Op) {
	return t.start(ctx, "lockwarden.release", l, false)
}

// StartGroupAcquire starts the span of a MultiLock or RedLock acquire (kind "multilock" or
// "redlock") over members locks.
func (t *Telemetry) StartGroupAcquire(ctx context.Context, kind messages.LockKind, members int) (context.Context, Op) {
	ctx, op := t.start(ctx, "lockwarden."+string(kind)+".acquire", t.Describe("", kind, ""), true)
	if op.span != nil {
		op.span.SetAttributes(AttrMembers.Int(members))
	}
	return ctx, op
}

func (t *Telemetry) start(ctx context.Context, span string, l Lock, acquire bool) (context.Context, Op) {
	if t == nil {
		return ctx, Op{}
	}
	op := Op{t: t, name: l.name, kind: l.kind, start: time.Now(), acquire: acquire}
	if t.quiet() {
		return ctx, op // nobody would see the span: build none
	}
	attrs := l.attrs
	if attrs == nil { // described while nobody traced
		attrs = t.spanAttrs(l.name, l.kind, l.owner)
	}
	ctx, op.span = t.tracer.Start(ctx, span, attrs) // SpanKindInternal, the default
	return ctx, op
}

// EndAcquire ends an acquire: outcome is one of the Outcome constants, token the fencing token when
// acquired, attempts how many Redis attempts it took (0 when unknown), err the error, if any. It
// records the acquire duration and the acquisition counter.
func (op Op) EndAcquire(outcome string, token int64, attempts int, err error) {
	if op.t == nil {
		return
	}
	elapsed := time.Since(op.start)
	if op.span != nil && op.span.IsRecording() {
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
	op.endSpan(err)
	set := op.t.measure(op.name, op.kind, AttrOutcome.String(outcome))
	op.t.add(instAcquireDuration, elapsed.Seconds(), set)
	op.t.add(instAcquisitions, 1, set)
}

// End ends a release (or any operation that records no metric of its own), with its error.
func (op Op) End(err error) {
	if op.t == nil {
		return
	}
	op.endSpan(err)
}

// Span returns the operation's span, nil when none was started (nobody would see it).
func (op Op) Span() trace.Span { return op.span }

func (op Op) endSpan(err error) {
	if op.span == nil {
		return
	}
	if err != nil {
		op.span.RecordError(err)
		op.span.SetStatus(codes.Error, err.Error())
	}
	op.span.End()
}

// StartChild starts a child span of the span context parent (which may be invalid: then the span is a
// root) for work done on the caller's behalf by an actor, such as a Redis call.
func (t *Telemetry) StartChild(parent trace.SpanContext, span, name string, kind messages.LockKind, attrs ...attribute.KeyValue) trace.Span {
	if t == nil || t.quiet() {
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

// Close gives the SDK the measurements still buffered. The waiters and holders are observed once
// more, at the next collection, so that it reports what this telemetry's coordinator left (nothing,
// when it closed cleanly); then the callback unregisters itself.
func (t *Telemetry) Close() {
	if t == nil {
		return
	}
	t.Flush()
	t.closed.Store(true)
}

// add buffers a measurement of a synchronous instrument. The measurements go to the SDK in batches:
// when metrics are collected (the callback of the observable instruments flushes them first, so a
// collection sees every measurement made before it), and every flushAt measurements. A batch runs
// through the SDK's code in a tight loop, which costs a fraction of a measurement made in the middle
// of a lock call.
func (t *Telemetry) add(inst instrument, value float64, set metric.MeasurementOption) {
	if set == nil { // measure found the metrics quiet: the measurement would go nowhere
		return
	}
	t.pendingMu.Lock()
	t.pending = append(t.pending, measurement{inst: inst, value: value, set: set})
	var full []measurement
	if len(t.pending) >= flushAt {
		full, t.pending = t.pending, nil
	}
	t.pendingMu.Unlock()
	t.apply(full)
}

// Flush gives the SDK the measurements buffered so far. Collecting metrics does it too; call it
// before reading instruments some other way.
func (t *Telemetry) Flush() {
	if t == nil {
		return
	}
	t.pendingMu.Lock()
	batch := t.pending
	t.pending = nil
	t.pendingMu.Unlock()
	t.apply(batch)
}

// apply records a batch of measurements.
func (t *Telemetry) apply(batch []measurement) {
	if len(batch) == 0 {
		return
	}
	ctx := context.Background()
	// One option slice for the whole batch: a variadic argument to an interface method escapes, and
	// would cost an allocation per measurement.
	rec, add := make([]metric.RecordOption, 1), make([]metric.AddOption, 1)
	for _, m := range batch {
		rec[0], add[0] = m.set, m.set
		switch m.inst {
		case instAcquireDuration:
			t.acquireDuration.Record(ctx, m.value, rec...)
		case instWaitDuration:
			t.waitDuration.Record(ctx, m.value, rec...)
		case instHoldDuration:
			t.holdDuration.Record(ctx, m.value, rec...)
		case instAcquisitions:
			t.acquisitions.Add(ctx, int64(m.value), add...)
		case instRenewals:
			t.renewals.Add(ctx, int64(m.value), add...)
		case instLost:
			t.lost.Add(ctx, int64(m.value), add...)
		}
	}
}

// observe reports the waiters and holders counted by Record. With lock names on, a lock whose counts
// are both zero is reported once more at zero and then forgotten, so that the map does not grow with
// every name ever used.
func (t *Telemetry) observe(_ context.Context, o metric.Observer) error {
	t.Flush()
	if t.closed.Load() {
		// The SDK holds its lock while it runs the callbacks, and Unregister takes it.
		t.unregister.Do(func() { go func() { _ = t.registration.Unregister() }() })
	}
	for i := range t.kindGauges {
		if g := &t.kindGauges[i]; g.used.Load() {
			o.ObserveInt64(t.waiters, g.waiters.Load(), t.sets[i][0])
			o.ObserveInt64(t.holders, g.holders.Load(), t.sets[i][0])
		}
	}
	t.gaugeMu.Lock()
	defer t.gaugeMu.Unlock()
	for k, c := range t.gauges {
		set := t.measure(k.name, k.kind)
		o.ObserveInt64(t.waiters, c.waiters, set)
		o.ObserveInt64(t.holders, c.holders, set)
		if t.lockNames && c.waiters == 0 && c.holders == 0 {
			delete(t.gauges, k)
		}
	}
	return nil
}

// adjust changes the waiters and holders of the lock name of kind.
func (t *Telemetry) adjust(name string, kind messages.LockKind, waiters, holders int64) {
	if i := kindIndex(kind); i >= 0 && !t.lockNames {
		g := &t.kindGauges[i]
		if !g.used.Load() {
			g.used.Store(true)
		}
		if waiters != 0 {
			g.waiters.Add(waiters)
		}
		if holders != 0 {
			g.holders.Add(holders)
		}
		return
	}
	k := gaugeKey{kind: kind}
	if t.lockNames {
		k.name = name
	}
	t.gaugeMu.Lock()
	c := t.gauges[k]
	if c == nil {
		c = &gaugeCounts{}
		t.gauges[k] = c
	}
	c.waiters += waiters
	c.holders += holders
	t.gaugeMu.Unlock()
}

// Record updates the metrics that follow from a lock event: wait and hold durations, renewals, lost
// holds, waiters and holders.
func (t *Telemetry) Record(ev messages.Event) {
	if t == nil {
		return
	}
	switch ev.Type {
	case messages.EventAcquired:
		t.adjust(ev.Name, ev.Kind, -queued(ev), 1)
		t.add(instWaitDuration, ev.Wait.Seconds(), t.measure(ev.Name, ev.Kind))
	case messages.EventReentered:
		if ev.Queued {
			t.adjust(ev.Name, ev.Kind, -1, 0)
		}
	case messages.EventReleased:
		if ev.HoldCount == 0 {
			t.adjust(ev.Name, ev.Kind, 0, -1)
			t.add(instHoldDuration, ev.Held.Seconds(), t.measure(ev.Name, ev.Kind))
		}
	case messages.EventLost:
		t.adjust(ev.Name, ev.Kind, 0, -1)
		set := t.measure(ev.Name, ev.Kind)
		t.add(instHoldDuration, ev.Held.Seconds(), set)
		t.add(instLost, 1, set)
	case messages.EventRenewed:
		t.add(instRenewals, 1, t.measure(ev.Name, ev.Kind, AttrRenewalResult.String("ok")))
	case messages.EventRenewalFailed:
		t.add(instRenewals, 1, t.measure(ev.Name, ev.Kind, AttrRenewalResult.String("failed")))
	case messages.EventWaitStarted:
		t.adjust(ev.Name, ev.Kind, 1, 0)
	case messages.EventWaitTimedOut:
		t.adjust(ev.Name, ev.Kind, -1, 0)
	}
}

// queued is 1 when the event's owner had waited in the queue.
func queued(ev messages.Event) int64 {
	if ev.Queued {
		return 1
	}
	return 0
}
