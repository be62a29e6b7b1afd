package actors

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

func (a *lockActor) armWatchdog() {
	// A release whose outcome is unknown, which granted a waiter early, is sent again on the tick
	// (renewAll), whatever the holds' leases.
	need := a.unconfirmed != nil
	for _, h := range a.holds {
		if h.watchdog {
			need = true
			break
		}
	}
	switch {
	case need && !a.watchdog.armed():
		if a.renewSoon {
			a.watchdog.setAt(time.Now().Add(renewRetryDelay(a.env.WatchdogTimeout)))
			break
		}
		a.watchdog.setAt(watchdogDue(time.Now(), a.env.WatchdogTimeout))
	case !need:
		a.watchdog.stop()
		a.renewSoon = false
	}
}

// watchdogGrid is the share of the watchdog timeout to which the watchdog's ticks are rounded up.
const watchdogGrid = 30

// watchdogDue is when the watchdog armed at now ticks: a third of the watchdog timeout later, rounded up
// to a grid of a thirtieth of it on the wall clock, so that the holds of every actor taken at about the
// same time are renewed on the same tick, and their renewals can share round trips. The tick comes at
// most watchdog/3 + watchdog/30 after the arm, well inside the validity of the lease (the watchdog
// timeout less the drift allowance) that the latest acquisition or renewal before the arm granted.
func watchdogDue(now time.Time, watchdog time.Duration) time.Time {
	due := now.Add(watchdog / 3)
	grid := int64(watchdog / watchdogGrid)
	if grid <= 0 {
		return due
	}
	ns := due.UnixNano()
	if r := ns % grid; r != 0 {
		due = due.Add(time.Duration(grid - r))
	}
	return due
}

// renewRetryDelay is how long the watchdog waits to try again after a renewal that did not count: a
// tenth of the watchdog timeout, so that a hold whose renewals fail for a while (a failover, replicas
// that lag) gets several more tries before its validity runs out.
func renewRetryDelay(watchdog time.Duration) time.Duration { return max(watchdog/10, time.Millisecond) }

// renewAll renews every watchdog hold. An error is not a loss: the next tick, soon, tries again, and the
// expiry timer declares the loss if the lease runs out first.
//
// The holds go to Redis together (redisops.Ops.RenewMany): with replica sync on, in one pipeline
// followed by one WAIT, so that replicas that lag cost a tick one sync timeout however many watchdog
// holds the actor has (the readers of a read-write lock in this coordinator). The round trip is
// bounded by the latest of their validities only when the client has ContextTimeoutEnabled; otherwise
// by the client's ReadTimeout (5 s by default in go-redis v9). A hold whose own validity ran out before
// the answer is lost (see settleRenewal). A hold whose Done closed, or whose validity ran out, is not renewed: a
// renewal sent with the others would extend on the master a hold that nobody holds any more; the
// expiry timer declares it lost.
//
// With the coordinator's Renewals (Env.Renewals), the holds go to it instead, and the actor does not
// wait for Redis: the answers come back as a renewalsDone message (see renewAsync).
func (a *lockActor) renewAll() {
	a.renewTicks++
	a.renewSoon = false
	if a.unconfirmed != nil && !a.resolveUnconfirmed() {
		a.renewSoon = true // try the release again at the next tick, soon
	}
	var ks []holdKey
	for k, h := range a.holds {
		// A hold granted early that Redis has not confirmed may have no field in Redis yet: it is
		// renewed once confirmed (resolveUnconfirmed), and ends with its validity otherwise.
		if h.watchdog && h.pending == nil {
			ks = append(ks, k)
		}
	}
	if a.env.Renewals != nil {
		a.renewAsync(ks, 0)
		return
	}
	lost := false
	renewed, failed := 0, 0
	var lastErr error
	for try := 0; ; try++ {
		now := time.Now()
		ks = slices.DeleteFunc(ks, func(k holdKey) bool {
			h := a.holds[k]
			return h == nil || h.ended() || !now.Before(h.expires)
		})
		if len(ks) == 0 {
			break
		}
		var again []holdKey
		for _, r := range a.renewMany(ks) {
			if try == 0 && !r.gone && errors.Is(r.err, redisops.ErrReplicasChanged) {
				// The master has fewer replicas than the WAIT asked for (a failover left the new
				// master without the old one's): ask again at once for what it has now.
				again = append(again, r.k)
				continue
			}
			if r.err != nil {
				failed++
				lastErr = r.err
				a.renewSoon = a.renewSoon || !r.gone
			} else {
				renewed++
			}
			lost = lost || r.gone
		}
		ks = again
	}
	a.traceRenewals(renewed, failed, lastErr)
	if lost {
		a.tryHead()
	}
}

// renewalsDone carries the answers to the renewals of the holds ks (holds, the hold of each when it was
// sent) that renewAsync handed to the coordinator's Renewals at sent, on its try-th try.
type renewalsDone struct {
	sent  time.Time
	try   int
	ks    []holdKey
	holds []*hold
	errs  []error
}

// renewAsync hands the renewals of the watchdog holds ks to the coordinator's Renewals, which sends
// them with the other actors' (in as few script calls and round trips as it can) and answers with a
// renewalsDone message, settled by settleRenewals. A hold whose Done closed, or whose validity ran
// out, is left out, as in renewAll. The round trip is bounded by the latest validity of the holds it
// carries; the answer of a hold whose own validity ran out before it is late (see settleRenewal).
func (a *lockActor) renewAsync(ks []holdKey, try int) {
	now := time.Now()
	m := renewalsDone{sent: now, try: try}
	var holds []redisops.Hold
	var deadline time.Time
	for _, k := range ks {
		h := a.holds[k]
		if h == nil || h.ended() || !now.Before(h.expires) {
			continue
		}
		m.ks, m.holds = append(m.ks, k), append(m.holds, h)
		holds = append(holds, redisops.Hold{Name: a.name, Owner: k.owner, Kind: a.proto.renewKind(k.kind), Lease: a.env.WatchdogTimeout})
		if h.expires.After(deadline) {
			deadline = h.expires
		}
	}
	if len(holds) == 0 {
		return
	}
	a.renewing++
	self, root := a.self, a.root
	a.env.Renewals.submit(&renewRequest{holds: holds, deadline: deadline, done: func(errs []error) {
		m.errs = errs
		root.Send(self, m)
	}})
}

// settleRenewals settles the answers of renewAsync's renewals as renewAll settles those it waits for.
// A hold released while its renewal was out is not touched; one lost meanwhile (its validity ran
// out) whose renewal took effect all the same is given back, as a late renewal is (see
// settleRenewal), since nobody owns what the renewal extended. Holds whose renewal met a master with
// fewer replicas than the WAIT asked for are sent again at once, once.
func (a *lockActor) settleRenewals(m renewalsDone) {
	var giveBack, again []holdKey
	renewed, failed := 0, 0
	lost, soon := false, a.renewSoon
	var lastErr error
	for i, k := range m.ks {
		h, err := m.holds[i], m.errs[i]
		if a.holds[k] != h {
			took := err == nil || errors.Is(err, redisops.ErrRenewalNotSynced)
			if n, ok := a.lost[k]; ok && a.holds[k] == nil && n != lostGivenBack && took && !h.shared {
				giveBack = append(giveBack, k)
			}
			continue
		}
		if m.try == 0 && errors.Is(err, redisops.ErrReplicasChanged) && !errors.Is(err, redisops.ErrNotHeld) {
			again = append(again, k)
			continue
		}
		gone, back, err := a.settleRenewal(k, h, m.sent, err)
		if back {
			giveBack = append(giveBack, k)
		}
		if err != nil {
			failed++
			lastErr = err
			a.renewSoon = a.renewSoon || !gone
		} else {
			renewed++
		}
		lost = lost || gone
	}
	for _, k := range giveBack {
		a.giveBackLost(k)
	}
	if len(again) > 0 {
		a.renewAsync(again, 1)
	}
	a.traceRenewals(renewed, failed, lastErr)
	if a.renewSoon && !soon {
		a.watchdog.stop() // armed again, sooner, after this message
	}
	if lost {
		a.tryHead()
	}
}

// renewal is the outcome of one hold's renewal in renewMany.
type renewal struct {
	k    holdKey
	gone bool
	err  error
}

// renewMany makes one renewal of each watchdog hold of ks in one round trip, and settles each as
// renewOnce does. Every hold's answer is settled before any give-back (see settleRenewal) goes to
// Redis, so that the give-backs' round trips do not make a later hold's timely answer look late.
func (a *lockActor) renewMany(ks []holdKey) []renewal {
	var deadline time.Time
	for _, k := range ks {
		if h := a.holds[k]; h != nil && h.expires.After(deadline) {
			deadline = h.expires
		}
	}
	sent := time.Now()
	ctx, cancel := a.env.turnContext(deadline)
	errs := a.proto.renewMany(ctx, ks, a.env.WatchdogTimeout)
	cancel()
	out := make([]renewal, len(ks))
	var giveBack []holdKey
	for i, k := range ks {
		out[i].k = k
		if h := a.holds[k]; h != nil {
			var back bool
			out[i].gone, back, out[i].err = a.settleRenewal(k, h, sent, errs[i])
			if back {
				giveBack = append(giveBack, k)
			}
		}
	}
	for _, k := range giveBack {
		a.giveBackLost(k)
	}
	return out
}

// renewHold renews the watchdog hold h of k at once, outside the watchdog's tick, and reports whether
// the hold was lost.
func (a *lockActor) renewHold(k holdKey, h *hold) bool {
	gone, err := a.renew(k, h)
	a.traceRenewals(btoi(err == nil), btoi(err != nil), err)
	if err != nil && !gone && !a.renewSoon {
		a.renewSoon = true
		a.watchdog.stop() // armed again, sooner, after this message
	}
	return gone
}

// renew renews the watchdog hold h of k. It reports whether the hold was found gone (and lost), and
// the error of a renewal that failed. A renewal counts only once it is answered in time and, with
// replica sync on, acknowledged by the replicas: until then the hold keeps the validity of its last
// renewal that counted, which a replica promoted meanwhile has too, so Done closes before that
// replica can drop the lock.
func (a *lockActor) renew(k holdKey, h *hold) (bool, error) {
	gone, err := a.renewOnce(k, h)
	if errors.Is(err, redisops.ErrReplicasChanged) {
		// The master has fewer replicas than the WAIT asked for (a failover left the new master
		// without the old one's): ask again at once for what it has now.
		gone, err = a.renewOnce(k, h)
	}
	return gone, err
}

// renewOnce makes one renewal of the watchdog hold h of k, as renew describes.
func (a *lockActor) renewOnce(k holdKey, h *hold) (bool, error) {
	sent := time.Now()
	// A renewal that answers after the hold's expiry is worthless: bound it by that expiry (go-redis
	// honours it when the client has ContextTimeoutEnabled).
	ctx, cancel := a.env.turnContext(h.expires)
	err := a.proto.renew(ctx, k, a.env.WatchdogTimeout)
	cancel()
	gone, back, err := a.settleRenewal(k, h, sent, err)
	if back {
		a.giveBackLost(k)
	}
	return gone, err
}

// settleRenewal takes the answer err to a renewal of the watchdog hold h of k sent at sent, and reports
// whether the hold was found gone (and lost), whether the caller must give the owner's holds back
// (giveBackLost) once every answer of the round trip is settled, and the error of a renewal that did
// not count.
func (a *lockActor) settleRenewal(k holdKey, h *hold, sent time.Time, err error) (gone, giveBack bool, _ error) {
	renewed := err == nil || errors.Is(err, redisops.ErrRenewalNotSynced)
	switch {
	case renewed && (h.ended() || lateGrant(sent, a.env.WatchdogTimeout)):
		// Done closed while the renewal was on its way (a WAIT for a lagging replica, a client without
		// ContextTimeoutEnabled), or the renewal came back with no validity left: the renewal set the
		// expiry to the watchdog's lease from some moment after sent, which can no longer be counted
		// on, and may have cut a longer one. The holder has been told, or must be, that the hold
		// ended, and it stays ended. The renewal did take effect on the master, acknowledged by the
		// replicas or not, and nobody would own what it renewed, so the owner's holds are given back
		// (with the owner check) rather than left to keep contenders out for a whole watchdog
		// timeout. An owner id shared with other processes is left alone: Redis counts their holds
		// together, and the holder's Unlock gives back this process' own (see clearLost).
		err = fmt.Errorf("%w (renewal answered after %v, the hold's validity ran out)", ErrGrantTooLate, time.Since(sent).Round(time.Millisecond))
		a.lose(k, "lease ran out")
		return true, !h.shared, err
	case err == nil:
		h.lease = a.env.WatchdogTimeout
		h.extend(sent, a.env.WatchdogTimeout)
		h.setReads(h.expires)
		h.unacked = false
		a.emitHold(messages.EventRenewed, k, h, h.count, "")
		return false, false, nil
	case errors.Is(err, redisops.ErrNotHeld):
		a.lose(k, "renewal found the hold gone")
		return true, false, err
	default:
		h.unacked = h.unacked || renewed
		a.log().Warn("renewal failed; retrying soon", "owner", k.owner, "err", err)
		a.emitHold(messages.EventRenewalFailed, k, h, h.count, err.Error())
		return false, false, err
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// renewSpanEvery is how often a watchdog tick gets a span: the first and every tenth, and every tick
// with a failure.
const renewSpanEvery = 10

// traceRenewals records the span of a watchdog tick, when it is sampled or something failed.
func (a *lockActor) traceRenewals(renewed, failed int, err error) {
	t := a.env.Telemetry
	if t == nil || renewed+failed == 0 || (failed == 0 && a.renewTicks%renewSpanEvery != 1) {
		return
	}
	span := t.StartChild(trace.SpanContext{}, "lockwarden.renew", a.name, a.proto.lockKind(),
		telemetry.AttrRenewed.Int(renewed), attribute.Int("lockwarden.renewal.failed", failed))
	telemetry.EndSpan(span, err)
}
