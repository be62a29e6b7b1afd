package actors

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

func (a *lockActor) onRelease(m *Release) {
	k := holdKey{m.Owner, m.Kind}
	joinable := func() bool {
		h := a.holds[k]
		return h != nil && !h.ended() && a.batchable(m.Owner, m.Kind)
	}
	if a.batching() && !joinable() {
		a.flush()
	}
	h := a.holds[k]
	if h != nil && h.ended() {
		a.lose(k, "lease ran out")
		h = nil
	}
	if _, lost := a.lost[k]; lost && h == nil {
		// Free what may be left of the hold in Redis at once, but the holder already learnt from
		// Done that its hold ended: it does not hold the lock.
		a.clearLost(k)
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	}
	if h == nil && a.env.Held.otherFamily(a.name, m.Owner, m.Kind) {
		// Sent to Redis, it would release the other kind's hold (they share the hash).
		m.Ticket.deliver(Outcome{Reason: messages.ReasonKindMismatch, Err: redisops.ErrKindMismatch})
		return
	}
	lease := a.env.WatchdogTimeout
	var next *redisops.Handoff
	var nextCmd *Acquire
	if h != nil {
		lease = h.lease
		if h.count == 1 {
			nextCmd = a.proto.handoffCandidate(a, m.Owner)
		}
	}
	if nextCmd != nil {
		next = &redisops.Handoff{
			Owner: nextCmd.Owner, Lease: nextCmd.Lease, OnlyIfAlone: a.handoffs >= a.env.MaxHandoffs,
			WaitWindow: nextCmd.WaitWindow,
		}
	}
	requestID := a.env.NewRequestID()
	if h != nil && h.retryID != "" {
		// The owner's last release failed: send it again, so that if it took effect after all, the
		// latch answers what it did rather than a second release taking another hold away.
		requestID = h.retryID
		// No new handoff: a waiter would find the hold as its own lost reply if the failed release
		// handed off to it after all. But one that it granted early (retryEarly) is handed the lock
		// again: it holds it already.
		next, nextCmd = a.retryEarly(h)
	}
	held := int64(redisops.UnknownHoldCount)
	if h != nil && !h.shared {
		held = h.count // the holder's; Redis may count more (lost re-entry replies, failed inner releases: releaseStray)
	}
	token := int64(0)
	if h != nil {
		if h.retryID == "" {
			// A release sent again keeps the kind of check it was first sent with.
			h.releaseToken = 0
			if next == nil && !time.Now().Before(a.latchedUntil) {
				h.releaseToken = h.fencedToken()
			}
		}
		token = h.releaseToken
	}
	if joinable() {
		a.batchRelease(m, requestID, held, func(sent time.Time, rel redisops.Released, err error) {
			a.settleRelease(m, h, lease, nil, requestID, sent, rel, err)
		})
		return
	}
	if nextCmd != nil && a.early == nil && a.handsOffEarly(h, nextCmd, next) && a.grantEarly(nextCmd, h, next) {
		if nextCmd.Ticket.parked() {
			// As after a handoff's answer (settleRelease): let the next holder start on this
			// processor, before this goroutine goes on to send the release.
			runtime.Gosched()
		}
	}
	if a.callsAsync() {
		a.releaseAsync(m, h, requestID, lease, held, token, next, nextCmd)
		return
	}
	sent := time.Now()
	ctx, cancel := a.env.turnContext(time.Time{})
	rel, err := a.proto.releaseHeld(ctx, k, requestID, lease, held, token, next)
	cancel()
	releaseEvent(m.Span, sent, err)
	a.settleRelease(m, h, lease, nextCmd, requestID, sent, rel, err)
}

// settleRelease takes the answer to the release of m's hold h (nil when the actor knew of no hold),
// sent at sent with nextCmd as the handoff candidate, and answers m.
func (a *lockActor) settleRelease(m *Release, h *hold, lease time.Duration, nextCmd *Acquire, requestID string, sent time.Time, rel redisops.Released, err error) {
	k := holdKey{m.Owner, m.Kind}
	a.noteLatch(h, rel, err)
	if err == nil && rel.Remaining == 0 && nextCmd != nil && a.proto.lockKind() == messages.LockPlain && a.handoffs >= a.env.MaxHandoffs {
		// The release counted the lock's listeners (OnlyIfAlone or CountListeners).
		a.alone = rel.Listeners == 1
	}
	early := false
	if a.early != nil { // nextCmd, granted before the answer
		if early = a.settleEarly(k, h, rel, err); !early {
			nextCmd = nil // settleEarly has settled it: it is no longer this release's to grant
		}
	}
	switch {
	case errors.Is(err, redisops.ErrNotHeld):
		if h != nil {
			a.lose(k, "release found the hold gone")
			a.tryHead()
		}
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	case err != nil:
		if h == nil {
			m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
			return
		}
		// Whether the release took effect is unknown. As in Redisson, the Unlock counts as done for
		// the holder all the same. An inner hold's failure leaves the outer holds held and renewed;
		// if it never took effect, the last Unlock finds the hold left over and gives it back
		// (releaseStray). When it was the last hold, the hold is no longer renewed, whatever happens
		// next, so that the lock frees itself within its lease even if the caller never retries; an
		// Unlock called again then sends the same request.
		if h.count > 1 {
			h.count--
			m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: &UnlockError{Err: err}})
			return
		}
		h.watchdog = false
		h.retryID = requestID
		if errors.Is(err, redisops.ErrStaleRelease) {
			// A later release of this owner has run (a request sequenced after this one): this one
			// never will, and the next Unlock sends a new one.
			h.retryID = ""
		}
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: &UnlockError{Expires: h.expires, Err: err}})
		return
	}
	if h != nil {
		h.retryID = ""
		if rel.Remaining > 0 && h.count <= 1 && !h.shared {
			// Redis counts holds of this owner that the actor does not know of: re-entries whose
			// replies were lost although they took effect. They are given back now, or the last Unlock
			// would leave the lock held (and renewed) with nobody to release it.
			rel.Remaining = a.releaseStray(k, lease, rel.Remaining)
		}
	}
	// The caller is answered before the event goes out: events and metrics are not on its path.
	if rel.Remaining > 0 {
		if h != nil && !h.shared {
			// The holder's count, not Redis': an inner release that failed counted as done, and
			// Redis may still count its hold, which the last Unlock gives back (releaseStray above).
			// (An owner id shared across processes counts theirs too: Redis' count is the one.)
			rel.Remaining = min(h.count-1, rel.Remaining)
		}
		m.Ticket.deliver(Outcome{HoldCount: rel.Remaining})
		if h != nil {
			h.count = rel.Remaining
			switch {
			case k.kind == KindRead:
				// A read release renews none of the remaining holds: the hold is valid until the
				// longest of theirs (and with replica sync, a replica's cannot be longer).
				h.dropReads(rel.Remaining)
			case a.env.Ops.WaitsForReplicas(a.redisContext(), a.name):
				// The release's new expiry is not waited for: a replica promoted now may have an
				// older one, so the estimate may go down with it but not up. The master's may now
				// outlast the estimate: a hold that runs out then is given back (expireHolds).
				if !a.proto.releaseRaisesExpiry(k.kind) && validUntil(sent, lease).Before(h.expires) {
					h.extend(sent, lease)
				}
				h.unacked = true
			case !a.proto.releaseRaisesExpiry(k.kind) || sent.Add(lease).After(h.expires):
				h.extend(sent, lease)
			}
			a.emitHold(messages.EventReleased, k, h, rel.Remaining, releaseReason(m))
		}
		return
	}
	if h != nil {
		a.drop(k) // Done closes before Unlock returns
	}
	released := func() {
		if h != nil {
			a.emitHold(messages.EventReleased, k, h, 0, releaseReason(m))
		}
	}
	if rel.NotSynced != nil && nextCmd != nil {
		// The handoff was given back: the lock is free and its waiters were told. The waiter it was
		// for fails, as an attempt of its own would have.
		a.queue = slices.DeleteFunc(a.queue, func(w *Acquire) bool { return w == nextCmd })
		a.refuse(nextCmd, Outcome{Reason: messages.ReasonNotSynced, Err: rel.NotSynced})
	}
	if !rel.HandedOff || nextCmd == nil {
		// Who is woken now is the strategy's to say (strategy.freed). A reentrant lock's handoff
		// refused at the end of a run of local handoffs (sent with OnlyIfAlone: a.handoffs has not
		// moved since, as its actor takes no other message while a release is in flight) was refused
		// because other clients listen: they have their turn (see plainStrategy.notice).
		if nextCmd != nil && a.handoffs >= a.env.MaxHandoffs && !rel.HandedOff && rel.NotSynced == nil &&
			a.proto.lockKind() == messages.LockPlain {
			a.othersTurnSince = time.Now()
		}
		a.handoffs, a.alone = 0, false
		m.Ticket.deliver(Outcome{})
		released()
		if rel.HandedOff {
			// A retried release whose first try handed the lock to a local waiter (its latch says
			// so): that waiter's attempt finds the hold as its own lost reply.
			a.tryHead()
			return
		}
		a.proto.freed(a, m, rel)
		return
	}
	a.handoffs++
	a.queue = slices.DeleteFunc(a.queue, func(w *Acquire) bool { return w == nextCmd })
	released()
	if early {
		// The next holder has held the lock since the release was sent: the answer confirms it.
		a.confirmEarly(nextCmd, m.Owner, rel.Token, sent)
		m.Ticket.deliver(Outcome{})
		a.tryHead()
		return
	}
	late := lateGrant(sent, nextCmd.Lease)
	handoffAttempt(nextCmd, sent, !late)
	if late {
		// The handoff came back too late to count for the next owner: it gives it back and waits on.
		m.Ticket.deliver(Outcome{})
		nextCmd.queued = true
		a.queue = append([]*Acquire{nextCmd}, a.queue...)
		a.giveBackLate(holdKey{nextCmd.Owner, nextCmd.Kind}, nextCmd.Lease, 1)
		a.tryHead()
		return
	}
	a.emit(messages.Event{Type: messages.EventHandedOff, Owner: nextCmd.Owner, From: m.Owner, Kind: kindOf(nextCmd.Kind), Token: rel.Token, HoldCount: 1})
	// The next holder first: it is the one waiting.
	a.grant(nextCmd, 1, rel.Token, sent)
	m.Ticket.deliver(Outcome{})
	a.tryHead()
	if nextCmd.Ticket.parked() && nextCmd.Ticket.Delivered() {
		// The next holder's goroutine, parked on its answer, was just made ready on this processor.
		// Yield to it, so that it starts its hold now rather than once this goroutine (the releaser
		// going on to its next call, or a worker) parks, or another processor is woken to take it:
		// with 16 and 128 waiters on one name (BenchmarkContended) that takes the time from the
		// answer to the next holder running from 14-24 µs to 7-10 µs. The actor's turn, and the
		// messages for this name behind it, wait meanwhile; on a busy machine that may be a
		// scheduler's slice, while the lock is held by the next holder anyway.
		runtime.Gosched()
	}
}

// releaseStray releases the holds of k that Redis counts beyond the actor's (remaining of them), and
// returns how many are left. When a release fails, the count is unknown: the actor drops the hold all
// the same (Done closes, renewal stops), and what is left in Redis expires with its lease.
func (a *lockActor) releaseStray(k holdKey, lease time.Duration, remaining int64) int64 {
	ctx, cancel := a.env.turnContext(time.Time{})
	defer cancel()
	for remaining > 0 {
		rel, err := a.proto.release(ctx, k, a.env.NewRequestID(), lease, nil)
		if err != nil {
			if !errors.Is(err, redisops.ErrNotHeld) {
				a.log().Warn("releasing holds whose replies were lost failed; they expire with their lease", "owner", k.owner, "err", err)
			}
			return 0
		}
		remaining = rel.Remaining
	}
	return 0
}

// UnlockError is the error of a release that failed on a Redis error (a cut connection, a server
// restarting): whether it took effect is unknown. The Unlock counts as done for the holder, as in
// Redisson. For the last hold, the hold is no longer renewed, so the lock frees itself by Expires at
// the latest even if the release is never retried; a later Unlock of the same owner sends the same
// request again, and the release latch makes it safe to retry. For an inner hold (Expires is zero),
// the outer holds stay held and renewed, and the last Unlock gives back what the failed one may have
// left in Redis.
type UnlockError struct {
	// Expires is when the hold's lease runs out, unless a retried Unlock frees it earlier; zero for an
	// inner hold.
	Expires time.Time
	// Err is the Redis error.
	Err error
}

// Error says that the unlock failed, what became of the hold (an inner hold counts as released; the
// last one expires by Expires unless Unlock is retried), and the Redis error.
func (e *UnlockError) Error() string {
	if e.Expires.IsZero() {
		return fmt.Sprintf("lockwarden: unlock of an inner hold failed; it counts as released, and the outer holds stay held: %v", e.Err)
	}
	return fmt.Sprintf("lockwarden: unlock failed, the hold is no longer renewed and expires by %s unless Unlock is retried: %v",
		e.Expires.Format(time.RFC3339Nano), e.Err)
}

// Unwrap returns the Redis error, Err.
func (e *UnlockError) Unwrap() error { return e.Err }

func (a *lockActor) onForceUnlock(m *ForceUnlock) {
	ctx, cancel := a.env.turnContext(time.Time{})
	deleted, err := a.proto.forceUnlock(ctx, m.Kind)
	cancel()
	if err != nil {
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
		return
	}
	if deleted {
		a.emit(messages.Event{Type: messages.EventForceUnlocked, Kind: kindOf(m.Kind)})
	}
	// A read-write lock is only force-unlocked in the mode asked for; every other lock is gone.
	if deleted || !a.proto.forceUnlockKeepsHolds() {
		for k := range a.holds {
			a.lose(k, "force-unlocked")
		}
	}
	m.Ticket.deliver(Outcome{Deleted: deleted})
	a.tryHead()
}

// settleFailedRelease sends again, before k's owner locks again, the release of its last hold whose
// Unlock failed on a Redis error (it counted as done: see settleRelease), and settles the hold with
// the answer: dropped when the release took effect (now or the first time), lost when Redis no longer
// has the hold. The Lock then takes a hold of its own, never a re-entry of the hold whose release is
// unknown: that re-entry would leave the lock held after the Lock's own Unlock. The same request goes
// again, so a first try that took effect after all is answered from its latch, and a copy of it that
// reaches Redis late finds it answered and changes nothing (a new release would not keep it from
// taking away the new hold). It returns the Redis error when the release failed again: the hold stays
// as it is, and the Lock waits or fails as after a failed attempt of its own. Nothing to settle
// returns nil.
func (a *lockActor) settleFailedRelease(k holdKey) error {
	h := a.holds[k]
	if h == nil || h.retryID == "" || h.count != 1 || h.ended() {
		return nil
	}
	if a.unconfirmedBy == h {
		// Its release granted a waiter early: resolveUnconfirmed sends it again with that handoff.
		if a.resolveUnconfirmed() && a.holds[k] != h {
			return nil
		}
		return errFailedReleaseUnanswered
	}
	held := h.count
	if h.shared {
		held = redisops.UnknownHoldCount
	}
	ctx, cancel := a.env.turnContext(time.Time{})
	defer cancel()
	rel, err := a.proto.releaseHeld(ctx, k, h.retryID, h.lease, held, h.releaseToken, nil)
	a.noteLatch(h, rel, err)
	switch {
	case err == nil:
		a.dropResent(k, h, rel)
		a.handoffs, a.alone = 0, false
		if rel.HandedOff {
			// Its first try handed the lock to a local waiter, whose attempt finds the hold as its
			// own lost reply.
			a.tryHead()
		} else {
			a.proto.freed(a, &Release{Owner: k.owner, Kind: k.kind}, rel)
		}
		return nil
	case errors.Is(err, redisops.ErrNotHeld), errors.Is(err, redisops.ErrStaleRelease):
		a.lose(k, "the failed release sent again found the hold gone")
		return nil
	default:
		return err
	}
}

// dropResent ends the hold h of k, whose Unlock counted as done, once its release, sent again, took
// effect (rel): what Redis still counts of the owner's holds beyond it is given back, and the hold is
// announced as released.
func (a *lockActor) dropResent(k holdKey, h *hold, rel redisops.Released) {
	if rel.Remaining > 0 && !h.shared {
		// Redis counts holds of this owner that the actor does not know of (see settleRelease).
		a.releaseStray(k, h.lease, rel.Remaining)
	}
	a.emitHold(messages.EventReleased, k, h, 0, messages.ReleaseUnlocked)
	a.drop(k)
}

// settleFailedReleases runs settleFailedRelease for every hold of owner: on a read-write lock a read
// acquisition may enter through the owner's write hold, and a write acquisition is refused as an
// upgrade while the owner holds reads, so a failed release of the other side is settled first too.
// It returns the first Redis error.
func (a *lockActor) settleFailedReleases(owner string) error {
	for _, kind := range [...]Kind{KindPlain, KindFair, KindRead, KindWrite} {
		if err := a.settleFailedRelease(holdKey{owner, kind}); err != nil {
			return err
		}
	}
	return nil
}

// errFailedReleaseUnanswered is the error of a Lock whose owner's failed release, sent again before
// it, went unanswered again (see settleFailedRelease).
var errFailedReleaseUnanswered = errors.New("lockwarden: the owner's failed release went unanswered again")

// noteLatch takes note of an answer to the release of the hold h (or its failure): the release of a
// Mutex's hold (the owners whose releases may skip the latch, hold.fencedToken) that went through its
// owner's latch (rel.Latched), or that failed and may have when it ran, makes every release of the
// name go through the latch for as long as that latch may live (latchedUntil). The latches of other
// owners are not noted: their releases always go through them.
func (a *lockActor) noteLatch(h *hold, rel redisops.Released, err error) {
	if h != nil && h.grantsEarly && (rel.Latched || err != nil) {
		a.latchedUntil = time.Now().Add(redisops.DefaultLatchExpiry)
	}
}
