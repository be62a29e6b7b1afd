package actors

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

// acquireEvent records an acquire attempt for m, started at start, as an event on the caller's span,
// unless it is the first attempt and it got the lock: the span alone tells that story (with
// lockwarden.lock.attempts 1), and the event would cost about as much as the span's start.
func acquireEvent(m *Acquire, start time.Time, ok bool, err error) {
	if ok && err == nil && m.attempts == 1 {
		return
	}
	redisEvent(m.Span, "lockwarden.redis.acquire", start, ok, err)
}

// releaseEvent records a release that failed, started at start, as an event on the caller's span s.
func releaseEvent(s trace.Span, start time.Time, err error) {
	if err != nil {
		redisEvent(s, "lockwarden.redis.release", start, false, err)
	}
}

// handoffAttempt counts a handoff to the waiter m (another owner's release gave it the lock in the
// Redis call sent at start) as one of m's attempts, as an attempt of its own would have been, and
// records it on the caller's span; ok is false when it came too late to be used.
func handoffAttempt(m *Acquire, start time.Time, ok bool) {
	m.attempts++
	redisEvent(m.Span, "lockwarden.redis.acquire", start, ok, nil, telemetry.AttrHandoff.Bool(true))
}

// redisEvent records a Redis call made for a caller, started at start, as an event on the caller's
// span s, when it records. An event rather than a child span: it costs a fraction of one.
func redisEvent(s trace.Span, name string, start time.Time, ok bool, err error, extra ...attribute.KeyValue) {
	if s == nil || !s.IsRecording() {
		return
	}
	attrs := append([]attribute.KeyValue{
		attribute.Bool("lockwarden.redis.ok", ok),
		attribute.Int64("lockwarden.redis.duration_us", time.Since(start).Microseconds()),
	}, extra...)
	if err != nil {
		attrs = append(attrs, attribute.String("lockwarden.redis.error", err.Error()))
	}
	s.AddEvent(name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
}

// emit completes ev with the lock's name, the time and the coordinator, and publishes it.
func (a *lockActor) emit(ev messages.Event) {
	if a.env.Events == nil {
		return
	}
	ev.Name, ev.Time, ev.Coordinator = a.name, time.Now(), a.env.CoordinatorID
	a.env.Events.Publish(ev)
}

// emitHold publishes an event about the hold h of k, with the owner's hold count after it.
func (a *lockActor) emitHold(typ messages.EventType, k holdKey, h *hold, count int64, reason string) {
	if a.env.Events == nil || !h.announced {
		return
	}
	ev := messages.Event{Type: typ, Owner: k.owner, Kind: kindOf(k.kind), Token: h.token, HoldCount: count, Reason: reason}
	if count == 0 {
		ev.Held = time.Since(h.acquired)
	}
	a.emit(ev)
}

// emitWait publishes an event about the waiter m.
func (a *lockActor) emitWait(typ messages.EventType, m *Acquire, reason string) {
	if a.env.Events == nil {
		return
	}
	ev := messages.Event{Type: typ, Owner: m.Owner, Kind: kindOf(m.Kind), Reason: reason}
	if typ != messages.EventWaitStarted {
		ev.Wait = waitOf(m)
	}
	a.emit(ev)
}

// releaseReason is the Reason of the Released event of m.
func releaseReason(m *Release) string {
	if m.Reason == "" {
		return messages.ReleaseUnlocked
	}
	return m.Reason
}

// waitOf is how long the caller of m has waited so far.
func waitOf(m *Acquire) time.Duration {
	if m.Started.IsZero() {
		return 0
	}
	return time.Since(m.Started)
}

// kindOf names a kind in events.
func kindOf(k Kind) messages.LockKind { return k.LockKind() }

// emitRegisteredHandoff says that the release m handed the lock to a registered waiter, here or
// elsewhere, whose notice tells it.
func (a *lockActor) emitRegisteredHandoff(m *Release, rel redisops.Released) {
	a.emit(messages.Event{Type: messages.EventHandedOff, Owner: rel.Next, From: m.Owner, Kind: kindOf(m.Kind), Token: rel.Token, HoldCount: 1})
}
