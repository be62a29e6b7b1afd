package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

// telSetup returns an in-memory span recorder and a manual metric reader, and the coordinator options
// that send lockwarden's spans and metrics to them.
func telSetup(t *testing.T) (*tracetest.SpanRecorder, *sdkmetric.ManualReader, trace.Tracer, []coordinator.Option) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	return rec, reader, tp.Tracer("test"), []coordinator.Option{coordinator.WithTracerProvider(tp), coordinator.WithMeterProvider(mp)}
}

// telSpans returns the ended spans named name.
func telSpans(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// telOne returns the one ended span named name that is a child of parent, failing otherwise.
func telOne(t *testing.T, rec *tracetest.SpanRecorder, name string, parent trace.SpanContext) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range telSpans(rec, name) {
		if s.Parent().SpanID() == parent.SpanID() && s.Parent().TraceID() == parent.TraceID() {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %q spans under parent %s, want 1 (all spans: %v)", len(found), name, parent.SpanID(), telNames(rec))
	}
	return found[0]
}

func telNames(rec *tracetest.SpanRecorder) []string {
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	return names
}

// telEvents returns the events named name of span s, with whether each Redis call succeeded.
func telEvents(s sdktrace.ReadOnlySpan, name string) []bool {
	var oks []bool
	for _, ev := range s.Events() {
		if ev.Name != name {
			continue
		}
		ok := false
		for _, kv := range ev.Attributes {
			if kv.Key == "lockwarden.redis.ok" {
				ok = kv.Value.AsBool()
			}
		}
		oks = append(oks, ok)
	}
	return oks
}

// telAttr returns the attribute key of span s.
func telAttr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestTelemetryLockTrace: a Lock and an Unlock under a caller's span make a span each, children of the
// caller's span. An acquisition that got the lock at its first attempt and a release that succeeded
// carry no Redis-call events: the spans tell it all (TestTelemetryContention shows the events).
func TestTelemetryLockTrace(t *testing.T) {
	t.Parallel()
	rec, _, tracer, opts := telSetup(t)
	_, _, c := setup(t, opts...)
	m := c.Mutex(t.Name())
	ctx, caller := tracer.Start(t.Context(), "caller")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	token := m.Token()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	caller.End()

	acq := telOne(t, rec, "lockwarden.acquire", caller.SpanContext())
	if v, _ := telAttr(acq, telemetry.AttrOutcome); v.AsString() != telemetry.OutcomeAcquired {
		t.Errorf("acquire outcome = %q, want acquired", v.AsString())
	}
	if v, _ := telAttr(acq, telemetry.AttrToken); v.AsInt64() != token {
		t.Errorf("acquire token = %d, want %d", v.AsInt64(), token)
	}
	if v, _ := telAttr(acq, telemetry.AttrLockKind); v.AsString() != "plain" {
		t.Errorf("acquire kind = %q, want plain", v.AsString())
	}
	if _, ok := telAttr(acq, telemetry.AttrLockName); ok {
		t.Error("the lock name is an attribute, but WithLockNameAttribute was not given")
	}
	if v, _ := telAttr(acq, telemetry.AttrAttempts); v.AsInt64() != 1 {
		t.Errorf("attempts attribute = %d, want 1", v.AsInt64())
	}
	if evs := acq.Events(); len(evs) != 0 {
		t.Errorf("events on the acquire span = %v, want none for a first attempt that got the lock", evs)
	}
	rel := telOne(t, rec, "lockwarden.release", caller.SpanContext())
	if evs := rel.Events(); len(evs) != 0 || rel.Status().Code == codes.Error {
		t.Errorf("release span: events %v, status %v; want none and no error", evs, rel.Status())
	}
}

// TestTelemetryContention: a waiter in another process's coordinator: its acquire span covers its wait
// and counts its attempts, and both of its Redis attempts (the one that found the lock taken, the one
// after the unlock notice) are events on it.
func TestTelemetryContention(t *testing.T) {
	t.Parallel()
	rec, _, tracer, opts := telSetup(t)
	opts = append(opts, coordinator.WithLockNameAttribute(true))
	srv, _, c := setup(t, opts...)
	_, other := semOther(t, srv, opts...)
	holder, waiter := c.Mutex(t.Name()), other.Mutex(t.Name())
	mustLock(t, holder)
	ctx, caller := tracer.Start(t.Context(), "waiter")
	errc := lockAsync(ctx, waiter)
	// The waiter's first attempt: it subscribes to the unlock channel once it has failed.
	faultWaitSubscribed(t, srv.Client(t), t.Name(), 1)
	const hold = 100 * time.Millisecond
	held := time.NewTimer(hold)
	<-held.C
	mustUnlock(t, holder)
	if err := semRecv(t, errc, 2*time.Second, "waiter's Lock"); err != nil {
		t.Fatal(err)
	}
	caller.End()
	acq := telOne(t, rec, "lockwarden.acquire", caller.SpanContext())
	if d := acq.EndTime().Sub(acq.StartTime()); d < hold {
		t.Errorf("waiter's acquire span lasted %v, want at least the %v hold", d, hold)
	}
	if v, _ := telAttr(acq, telemetry.AttrLockName); v.AsString() != t.Name() {
		t.Errorf("lock name attribute = %q, want %q", v.AsString(), t.Name())
	}
	oks := telEvents(acq, "lockwarden.redis.acquire")
	if len(oks) < 2 || oks[0] || !oks[len(oks)-1] {
		t.Errorf("the waiter's Redis attempts succeeded: %v, want a failure first and a success last", oks)
	}
	if v, _ := telAttr(acq, telemetry.AttrAttempts); v.AsInt64() != int64(len(oks)) {
		t.Errorf("attempts attribute = %d, want %d", v.AsInt64(), len(oks))
	}
}

// TestTelemetryMultiLockTrace: a MultiLock's span has a child span per member and attempt. The second
// member is held elsewhere at first: the member actor's failed Redis attempt is an event on its member
// span, which shows that the span crossed the supervisor, member and lock actors. The Unlock has a span.
func TestTelemetryMultiLockTrace(t *testing.T) {
	t.Parallel()
	rec, _, tracer, opts := telSetup(t)
	nodes := groupStart(t, 2, opts...)
	names := groupNames(t, 2)
	other := newCoordinator(t, nodes.clients[1]).Mutex(names[1]) // another process
	mustLock(t, other)
	group := nodes.coords[0].MultiLock(nodes.handles(names...))
	ctx, caller := tracer.Start(t.Context(), "transfer")
	errc := make(chan error, 1)
	go func() { errc <- group.Lock(ctx) }()
	faultWaitSubscribed(t, nodes.clients[1], names[1], 1)
	mustUnlock(t, other)
	if err := semRecv(t, errc, 5*time.Second, "the group's Lock"); err != nil {
		t.Fatal(err)
	}
	if err := group.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	caller.End()
	gs := telOne(t, rec, "lockwarden.multilock.acquire", caller.SpanContext())
	telOne(t, rec, "lockwarden.release", caller.SpanContext())
	if v, _ := telAttr(gs, telemetry.AttrMembers); v.AsInt64() != 2 {
		t.Errorf("members attribute = %d, want 2", v.AsInt64())
	}
	members, refused := 0, 0
	for _, s := range telSpans(rec, "lockwarden.group.member") {
		if s.Parent().SpanID() != gs.SpanContext().SpanID() {
			continue
		}
		members++
		for _, ok := range telEvents(s, "lockwarden.redis.acquire") {
			if !ok {
				refused++
			}
		}
	}
	if members < 2 {
		t.Errorf("member spans under the group span = %d, want at least 2", members)
	}
	if refused == 0 {
		t.Error("no member span has the refused Redis attempt of the member held elsewhere")
	}
}

// telSum returns the value of the int64 sum metric name for the data point whose attributes include
// want, or 0.
func telSum(t *testing.T, reader *sdkmetric.ManualReader, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is %T, want an int64 sum", name, m.Data)
			}
			for _, dp := range sum.DataPoints {
				if telHas(dp.Attributes, want) {
					total += dp.Value
				}
			}
		}
	}
	return total
}

// telCount returns the number of recordings of the histogram name.
func telCount(t *testing.T, reader *sdkmetric.ManualReader, name string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, dp := range h.DataPoints {
					n += dp.Count
				}
			}
		}
	}
	return n
}

func telHas(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// TestTelemetryMetrics: the lock metrics follow what happens: acquisitions by outcome, durations,
// holders and waiters now, renewals and lost holds.
func TestTelemetryMetrics(t *testing.T) {
	t.Parallel()
	_, reader, _, opts := telSetup(t)
	_, _, c := setup(t, append(opts, coordinator.WithWatchdogTimeout(300*time.Millisecond))...)
	a, b := c.Mutex(t.Name()), c.Mutex(t.Name())
	acquired := telemetry.AttrOutcome.String(telemetry.OutcomeAcquired)

	mustLock(t, a)
	// The lock actor updates the holders and waiters and the wait and hold durations just after it
	// answers the caller.
	groupEventually(t, 2*time.Second, "holders 1 while a holds", func() bool {
		return telSum(t, reader, "lockwarden.lock.holders") == 1
	})
	if ok, err := b.TryLock(t.Context()); ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if got := telSum(t, reader, "lockwarden.lock.acquisitions", telemetry.AttrOutcome.String(telemetry.OutcomeNotObtained)); got != 1 {
		t.Errorf("not_obtained acquisitions = %d, want 1", got)
	}
	errc := lockAsync(t.Context(), b)
	groupEventually(t, 2*time.Second, "one waiter", func() bool { return telSum(t, reader, "lockwarden.lock.waiters") == 1 })
	groupEventually(t, 2*time.Second, "a renewal", func() bool {
		return telSum(t, reader, "lockwarden.lock.renewals", telemetry.AttrRenewalResult.String("ok")) >= 1
	})
	mustUnlock(t, a)
	if err := semRecv(t, errc, 2*time.Second, "b's Lock"); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, b)
	groupEventually(t, 2*time.Second, "waiters and holders 0 and two holds recorded at the end", func() bool {
		return telSum(t, reader, "lockwarden.lock.waiters") == 0 && telSum(t, reader, "lockwarden.lock.holders") == 0 &&
			telCount(t, reader, "lockwarden.lock.hold.duration") == 2
	})
	if got := telSum(t, reader, "lockwarden.lock.acquisitions", acquired); got != 2 {
		t.Errorf("acquired acquisitions = %d, want 2", got)
	}
	if got := telCount(t, reader, "lockwarden.lock.acquire.duration"); got != 3 {
		t.Errorf("acquire duration recordings = %d, want 3 (2 acquired, 1 not obtained)", got)
	}
	if got := telCount(t, reader, "lockwarden.lock.hold.duration"); got != 2 {
		t.Errorf("hold duration recordings = %d, want 2", got)
	}
	if got := telCount(t, reader, "lockwarden.lock.wait.duration"); got != 2 {
		t.Errorf("wait duration recordings = %d, want 2", got)
	}

	// A fixed lease that runs out is a lost hold.
	if ok, err := a.TryLock(t.Context(), coordinator.Lease(50*time.Millisecond)); !ok || err != nil {
		t.Fatalf("TryLock(Lease) = %v, %v", ok, err)
	}
	waitFor(t, a.Done(), time.Second, "the lease running out")
	groupEventually(t, time.Second, "a lost hold", func() bool { return telSum(t, reader, "lockwarden.lock.lost") == 1 })
	if got := telSum(t, reader, "lockwarden.lock.holders"); got != 0 {
		t.Errorf("holders after the loss = %d, want 0", got)
	}
}

// TestTelemetryGaugesSettle: the waiters and holders gauges come back to 0 however the waits end:
// two calls of one handle queued behind a holder (the second one a re-entry), and a waiter still
// queued when the coordinator closes.
func TestTelemetryGaugesSettle(t *testing.T) {
	t.Parallel()
	_, reader, _, opts := telSetup(t)
	_, _, c := setup(t, opts...)
	holder, h := c.Mutex(t.Name()), c.Mutex(t.Name())
	mustLock(t, holder)
	first, second := lockAsync(t.Context(), h), lockAsync(t.Context(), h)
	groupEventually(t, 2*time.Second, "two waiters", func() bool { return telSum(t, reader, "lockwarden.lock.waiters") == 2 })
	mustUnlock(t, holder)
	for _, errc := range []<-chan error{first, second} {
		if err := semRecv(t, errc, 2*time.Second, "h's Lock"); err != nil {
			t.Fatal(err)
		}
	}
	mustUnlock(t, h)
	mustUnlock(t, h)
	groupEventually(t, 2*time.Second, "waiters and holders 0 after the re-entrant waiter", func() bool {
		return telSum(t, reader, "lockwarden.lock.waiters") == 0 && telSum(t, reader, "lockwarden.lock.holders") == 0
	})

	mustLock(t, holder)
	errc := lockAsync(t.Context(), c.Mutex(t.Name()))
	groupEventually(t, 2*time.Second, "a waiter", func() bool { return telSum(t, reader, "lockwarden.lock.waiters") == 1 })
	_ = c.Close()
	<-errc
	// Close returns once the lock actors have stopped, so the counts are final: the closed
	// coordinator's callback reports them once more.
	if w, hs := telSum(t, reader, "lockwarden.lock.waiters"), telSum(t, reader, "lockwarden.lock.holders"); w != 0 || hs != 0 {
		t.Errorf("after Close: waiters %d, holders %d; want 0, 0", w, hs)
	}
}

// TestTelemetryLocalHandoff: a waiter of the same coordinator that the holder's release hands the lock
// to counts the handoff as an attempt: its acquire span covers the wait, its attempts attribute counts
// the handoff, and the handoff is an event on it, as the attempts of a waiter woken by an unlock notice
// are (TestTelemetryContention).
func TestTelemetryLocalHandoff(t *testing.T) {
	t.Parallel()
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fair"}[fair], func(t *testing.T) {
			t.Parallel()
			rec, _, tracer, opts := telSetup(t)
			_, _, c := setup(t, opts...)
			mutex := c.Mutex
			if fair {
				mutex = c.FairMutex
			}
			name := t.Name()
			holder, waiter := mutex(name), mutex(name)
			sub := c.Subscribe(coordinator.ForLock(name), 16)
			defer sub.Close()
			mustLock(t, holder)
			ctx, caller := tracer.Start(t.Context(), "waiter")
			errc := lockAsync(ctx, waiter)
			for ev := evNext(t, sub); ev.Type != messages.EventWaitStarted; ev = evNext(t, sub) {
			}
			const hold = 100 * time.Millisecond
			held := time.NewTimer(hold)
			<-held.C
			mustUnlock(t, holder)
			if err := semRecv(t, errc, 2*time.Second, "waiter's Lock"); err != nil {
				t.Fatal(err)
			}
			caller.End()
			handedOff := false
			for !handedOff {
				ev := evNext(t, sub)
				handedOff = ev.Type == messages.EventHandedOff && ev.Owner == waiter.Owner()
				if ev.Type == messages.EventAcquired && ev.Owner == waiter.Owner() {
					t.Fatal("the waiter got the lock without a handoff")
				}
			}
			acq := telOne(t, rec, "lockwarden.acquire", caller.SpanContext())
			if d := acq.EndTime().Sub(acq.StartTime()); d < hold {
				t.Errorf("waiter's acquire span lasted %v, want at least the %v hold", d, hold)
			}
			oks := telEvents(acq, "lockwarden.redis.acquire")
			if len(oks) == 0 || !oks[len(oks)-1] {
				t.Fatalf("the waiter's attempts on its span: %v, want the handoff last, a success", oks)
			}
			last := acq.Events()[len(acq.Events())-1]
			if !slices.Contains(last.Attributes, telemetry.AttrHandoff.Bool(true)) {
				t.Errorf("the last event's attributes = %v, want %s=true", last.Attributes, telemetry.AttrHandoff)
			}
			if v, _ := telAttr(acq, telemetry.AttrAttempts); v.AsInt64() != int64(len(oks)) {
				t.Errorf("attempts attribute = %d, want %d (events %v)", v.AsInt64(), len(oks), oks)
			}
		})
	}
}
