package actors

import (
	"context"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// The permits of a permit semaphore taken through a primitive actor: registered when granted, renewed
// by the watchdog (those taken without a lease), and ended (Done closed, an event published) when
// released, when their validity runs out, or when a renewal finds them gone.

// addPermit registers the permit id taken by m at sent: a watchdog permit when lease is 0.
func (a *primitiveActor) addPermit(m *Take, id string, sent time.Time, lease time.Duration) Permit {
	p := &permitHold{id: id, owner: m.Owner, done: make(chan struct{}), taken: sent}
	out := Permit{ID: id, Done: p.done}
	if lease == 0 {
		p.watchdog = true
		p.validUntil = validUntil(sent, a.env.WatchdogTimeout)
	} else {
		p.validUntil = validUntil(sent, lease)
		out.Expires = p.validUntil
	}
	a.permits[id] = p
	return out
}

// armPermitTimers keeps the watchdog ticking while watchdog permits are held, and the expiry timer at
// the earliest end of validity.
func (a *primitiveActor) armPermitTimers() {
	var first time.Time
	watchdog := false
	for _, p := range a.permits {
		watchdog = watchdog || p.watchdog
		if first.IsZero() || p.validUntil.Before(first) {
			first = p.validUntil
		}
	}
	if !watchdog {
		a.watchdog.stop()
	} else if !a.watchdog.armed() {
		d := a.env.WatchdogTimeout / 3
		if a.renewSoon {
			d = renewRetryDelay(a.env.WatchdogTimeout)
		}
		a.watchdog.arm(a.sched, a.self, d, func(g uint64) any { return primitiveWatchdogTick{g} })
	}
	if first.IsZero() {
		a.expiry.stop()
	} else {
		a.expiry.arm(a.sched, a.self, max(time.Until(first), 0), func(g uint64) any { return primitiveExpiryTick{g} })
	}
}

// renewPermits renews every watchdog permit in one call. A permit that Redis no longer has is lost; an
// error is not a loss: the next tick comes sooner, and the expiry timer ends the permits whose
// validity runs out first.
func (a *primitiveActor) renewPermits() {
	var ids []string
	for id, p := range a.permits {
		if p.watchdog {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	sent := time.Now()
	ctx, cancel := a.callContext()
	renewed, err := a.env.Ops.PermitsRenew(ctx, a.name, ids, sent.Add(a.env.WatchdogTimeout), sent)
	cancel()
	if err != nil {
		a.renewSoon = true
		a.log().Warn("renewal of permits failed; retrying", "permits", len(ids), "err", err)
		a.emit(messages.Event{Type: messages.EventRenewalFailed, HoldCount: int64(len(ids)), Reason: err.Error()})
		a.expirePermits(time.Now())
		return
	}
	a.renewSoon = false
	valid := validUntil(sent, a.env.WatchdogTimeout)
	for i, id := range ids {
		p := a.permits[id]
		if p == nil {
			continue
		}
		if i < len(renewed) && renewed[i] {
			p.validUntil = valid
			a.emit(messages.Event{Type: messages.EventRenewed, Owner: id, HoldCount: 1})
			continue
		}
		a.endPermit(p, messages.EventLost, "renewal found the permit gone")
	}
}

// expirePermits ends the permits whose validity has run out at now.
func (a *primitiveActor) expirePermits(now time.Time) {
	for _, p := range a.permits {
		if !now.Before(p.validUntil) {
			reason := "lease ran out"
			if p.watchdog {
				reason = "lease ran out before a renewal succeeded"
			}
			a.endPermit(p, messages.EventLost, reason)
		}
	}
}

// endPermit forgets p, closes its Done and publishes typ about it.
func (a *primitiveActor) endPermit(p *permitHold, typ messages.EventType, reason string) {
	delete(a.permits, p.id)
	close(p.done)
	a.emit(messages.Event{Type: typ, Owner: p.id, Reason: reason, Held: time.Since(p.taken)})
}

// releasePermit gives back the permit id of m.
func (a *primitiveActor) releasePermit(ctx context.Context, m *Operate) Outcome {
	rel, err := a.env.Ops.PermitsRelease(ctx, a.name, m.ID, time.Now())
	p := a.permits[m.ID]
	if err != nil {
		return redisOutcome(err)
	}
	// A release sent again after a connection error that finds the permit gone: the run that failed
	// removed it (see coordinator's PermitSemaphore.Release).
	resentDone := m.Resent && !rel.Removed
	if p != nil {
		typ, reason := messages.EventReleased, messages.ReleaseUnlocked
		if (!rel.Removed || rel.Expired) && !resentDone {
			typ, reason = messages.EventLost, "lease ran out"
		}
		a.endPermit(p, typ, reason)
	}
	if resentDone {
		return Outcome{}
	}
	if !rel.Removed || rel.Expired {
		// Unknown, released before, or expired (its count came back all the same).
		return Outcome{Reason: messages.ReasonNotHeld, Err: redisops.ErrNotHeld}
	}
	return Outcome{}
}
