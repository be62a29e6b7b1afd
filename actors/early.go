package actors

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// Why early grants need a recently confirmed hold (Env.EarlyGrantWindow): the grant counts on the
// holder's field being in Redis. Redis loses it only by losing data (a restart without it, a failover
// to a replica that lacked it), and no restart or failover completes within a few milliseconds of the
// last call Redis answered. A hold confirmed longer ago may have been lost that way without its holder
// knowing yet, and a waiter granted from it would get a lock that no longer protects it: so such a
// handoff waits for Redis' answer. A run of short holds (the contention early grants serve) keeps
// every release within the window: each hold granted early counts as confirmed from its grant.

// earlyGrantMargin is the least validity the releasing hold must have left for its release to grant
// the next local waiter before Redis answers (see handsOffEarly): the answer normally takes well
// under a millisecond, and a hold granted early that Redis has not confirmed by the releasing hold's
// validity ends there.
const earlyGrantMargin = 50 * time.Millisecond

// handsOffEarly reports whether the release of the hold h, which hands a reentrant lock to the local
// waiter m with next, may grant m at once, before Redis answers the release (grantEarly).
//
// A local handoff runs in one script: the release deletes the holder's field and writes the next
// owner's. While h is valid (its lease in Redis outlasts h.expires), the lock is this process's and no
// other client can take it, so m may start its hold as soon as the holder has stopped, as it would if
// the holder had held on a moment longer; the script's answer then confirms it. That saves the next
// holder the release's round trip: most of a handoff's gap. Its fencing token is h's plus one, which
// the token counter kept unissued when h's token was issued (issueToken), and the release raises the
// counter past it.
// Only when:
//   - m's caller does not need Redis' answer with the grant (AcceptEarlyGrant: a Mutex's Lock,
//     TryLock or Do);
//   - the lock is a reentrant lock, m's owner id is its own (not shared), and tokens come from the
//     expiring counter, whose every issue keeps the token above its own unissued for this handoff
//     (issueToken in lib.lua): a release that never reached Redis leaves m's token unissued to
//     anyone else. A counter kept forever (Redisson's INCR) would issue it to the next holder;
//   - h is the holder's last hold, taken by a Mutex's call (grantsEarly: a group member's token is
//     raised past by its group), confirmed by a call sent within Env.EarlyGrantWindow, with a token,
//     no failed release to retry, and valid for earlyGrantMargin more;
//   - the script hands off unconditionally, and no replica acknowledgement is waited for (a handoff
//     the replicas did not acknowledge is given back). At the end of a run of handoffs
//     (next.OnlyIfAlone), the script hands off only if no other client listens on the lock's channel,
//     so that other processes' waiters get their turn: there the waiter is granted early only when the
//     latest count of listeners found none (a.alone), and the release then hands off all the same
//     and counts them again (Handoff.CountListeners). A client that started to listen since gets its
//     turn one release later.
func (a *lockActor) handsOffEarly(h *hold, m *Acquire, next *redisops.Handoff) bool {
	if !m.AcceptEarlyGrant || m.SharedOwner || m.Kind != KindPlain || a.proto.lockKind() != messages.LockPlain {
		return false
	}
	if h == nil || !h.grantsEarly || h.shared || h.count != 1 || h.token <= 0 || h.pending != nil || h.retryID != "" || h.ended() {
		return false
	}
	if a.env.EarlyGrantWindow <= 0 || h.confirmed.IsZero() || time.Since(h.confirmed) > a.env.EarlyGrantWindow {
		return false
	}
	if next.OnlyIfAlone && !a.alone {
		return false
	}
	if time.Until(h.expires) < earlyGrantMargin || a.holds[holdKey{m.Owner, m.Kind}] != nil {
		return false
	}
	return a.env.Ops.TokensFromClock() && !a.env.Ops.WaitsForReplicas(a.redisContext(), a.name)
}

// grantEarly grants m, the local waiter that the release of the hold from hands the lock to, before
// Redis answers that release (see handsOffEarly), with the token from.token+1, and sets next (the
// release's handoff) to hand it that token. m's hold is valid until from's validity or m's own lease
// from now, whichever comes first, until the answer confirms it (confirmEarly) or not (settleEarly).
// Its events (handed-off, acquired) go out once Redis has confirmed it, after the holder's released:
// a hold that Redis did not give it has none. It reports false, granting nothing and leaving next as
// it was, when m's caller has left.
func (a *lockActor) grantEarly(m *Acquire, from *hold, next *redisops.Handoff) bool {
	now := time.Now()
	expires := from.expires
	if v := validUntil(now, m.Lease); v.Before(expires) {
		expires = v
	}
	token := from.token + 1
	k := holdKey{m.Owner, m.Kind}
	h := a.newHold(expires)
	h.count, h.token, h.lease, h.watchdog, h.pending = 1, token, m.Lease, m.Watchdog, newConfirmation()
	h.grantsEarly = true
	a.holds[k] = h
	a.kindHolds[k.kind]++
	a.env.Held.add(a.name, k.owner, k.kind, now)
	delete(a.lost, k)
	handoffAttempt(m, now, true) // on the caller's span, which ends when it is answered
	if !a.answer(m, Outcome{HoldCount: 1, Token: token, Done: h.done, Attempts: m.attempts, Pending: h.pending}) {
		a.drop(k)
		return false
	}
	a.queue = slices.DeleteFunc(a.queue, func(w *Acquire) bool { return w == m })
	a.early = m
	next.Token = token
	if next.OnlyIfAlone {
		// Nobody else listened when last counted: hand off all the same, and count again.
		next.OnlyIfAlone, next.CountListeners = false, true
	}
	return true
}

// settleEarly takes the answer (rel, err) to the release of the hold from (of key k) that hands the
// lock to a.early, the waiter granted early, and reports whether the handoff took effect: the caller
// then confirms it (confirmEarly). When Redis answered that it did not (the releasing hold was gone,
// or was refused), the hold ends (revokeEarly). When the release failed on a Redis error, whether it
// took effect is unknown: the hold stays granted, unconfirmed (a.unconfirmed), and the release is sent
// again (resolveUnconfirmed): by the holder's retried Unlock, before the next command of either owner,
// or by the watchdog soon after; past the releasing hold's validity it ends.
func (a *lockActor) settleEarly(k holdKey, from *hold, rel redisops.Released, err error) bool {
	m := a.early
	a.early = nil
	switch {
	case err == nil && rel.HandedOff && rel.Remaining == 0 && rel.NotSynced == nil:
		return true
	case err != nil && !definiteRefusal(err):
		a.unconfirmed, a.unconfirmedBy, a.unconfirmedKey = m, from, k
		a.renewSoon = true
		a.watchdog.stop() // armed again after this turn, to tick soon (see armWatchdog)
	default:
		a.revokeEarly(m, "the release that handed the lock over found it no longer held")
	}
	return false
}

// definiteRefusal reports whether err says that a release did not take effect (as opposed to an error
// that leaves it unknown, such as a cut connection).
func definiteRefusal(err error) bool {
	return errors.Is(err, redisops.ErrNotHeld) || errors.Is(err, redisops.ErrStaleRelease) ||
		errors.Is(err, redisops.ErrKindMismatch) || errors.Is(err, redisops.ErrWrongType)
}

// confirmEarly takes the answer that confirms the hold granted early to m (the release of the holder
// fromOwner, sent at sent, handed the lock to it with token): the hold gets its validity from the
// grant (before any copy of the release was sent), and is announced (handed-off and acquired events).
// A hold that ended meanwhile (its validity ran out before the answer came) is given back, and so is
// one whose token is not the one it was given (the token counter was already above it): its Done
// closes first.
func (a *lockActor) confirmEarly(m *Acquire, fromOwner string, token int64, sent time.Time) {
	k := holdKey{m.Owner, m.Kind}
	h := a.holds[k]
	if h == nil || h.pending == nil || h.ended() || !time.Now().Before(h.expires) || h.token != token {
		a.giveBackLate(k, m.Lease, 1)
		return
	}
	// Its field got its lease when Redis ran the release, which may have been the first copy, sent
	// before this one (whose answer a retry then read from the latch): count it from the grant, which
	// came before either.
	if h.acquired.Before(sent) {
		sent = h.acquired
	}
	if v := validUntil(sent, m.Lease); v.After(h.expires) {
		h.extend(sent, m.Lease)
	}
	h.settle()
	h.announced = true
	a.emit(messages.Event{Type: messages.EventHandedOff, Owner: m.Owner, From: fromOwner, Kind: kindOf(m.Kind), Token: token, HoldCount: 1})
	a.emit(messages.Event{Type: messages.EventAcquired, Owner: m.Owner, Kind: kindOf(m.Kind), Token: token, HoldCount: 1, Wait: waitOf(m), Queued: m.queued})
}

// revokeEarly ends the hold granted early to m, which Redis did not give it: its Done closes. What Redis
// may keep of it is freed by its owner's next Unlock, as for any lost hold.
func (a *lockActor) revokeEarly(m *Acquire, why string) {
	k := holdKey{m.Owner, m.Kind}
	if h := a.holds[k]; h != nil && h.pending != nil {
		a.lose(k, why)
	}
}

// retryEarly returns the handoff that the retried release of the holder h (its previous one failed)
// sends again to the waiter granted early by that release, when its hold still waits for Redis'
// confirmation (a.unconfirmed), and makes it a.early again: the retry's answer settles it. It returns
// nil when there is no such waiter.
func (a *lockActor) retryEarly(h *hold) (*redisops.Handoff, *Acquire) {
	m, by := a.unconfirmed, a.unconfirmedBy
	if m == nil || by != h {
		return nil, nil
	}
	a.unconfirmed, a.unconfirmedBy = nil, nil
	hm := a.holds[holdKey{m.Owner, m.Kind}]
	if hm == nil || hm.pending == nil || hm.ended() {
		return nil, nil
	}
	if hm.retryID != "" {
		// The waiter has released since, and that release failed too: its hold counts as released,
		// and is not waited for any more.
		hm.settle()
		return nil, nil
	}
	a.early = m
	return &redisops.Handoff{Owner: m.Owner, Lease: m.Lease, Token: hm.token}, m
}

// touchesUnconfirmed reports whether msg is a command of the owner of the hold whose release granted
// a waiter early with an unknown outcome (other than its retried Unlock, which resends that release
// itself), or of that waiter: a.unconfirmed must be settled first (resolveUnconfirmed).
func (a *lockActor) touchesUnconfirmed(msg any) bool {
	m := a.unconfirmed
	if m == nil {
		return false
	}
	waiter := holdKey{m.Owner, m.Kind}
	switch c := msg.(type) {
	case *Acquire:
		k := holdKey{c.Owner, c.Kind}
		return k == waiter || k == a.unconfirmedKey
	case *Release:
		return holdKey{c.Owner, c.Kind} == waiter
	case *Extend:
		return holdKey{c.Owner, c.Kind} == waiter
	default:
		return false
	}
}

// resolveUnconfirmed sends again the release whose outcome was unknown, which granted a.unconfirmed
// early, as the holder's retried Unlock would (the same request: if the first took effect, Redis
// answers what it did), and settles the waiter's hold with its answer. Once the release has an answer,
// the holder's hold, which its Unlock counted as released, is dropped. It reports whether the waiter's
// hold is settled; false when Redis failed again (it stays unconfirmed).
func (a *lockActor) resolveUnconfirmed() bool {
	by, kA := a.unconfirmedBy, a.unconfirmedKey
	next, m := a.retryEarly(by)
	if m == nil {
		return true
	}
	// An answer after the waiter's validity is worth nothing: its hold has ended by then.
	wait := a.env.StopReleaseTimeout
	if hm := a.holds[holdKey{m.Owner, m.Kind}]; hm != nil {
		wait = min(wait, time.Until(hm.expires))
	}
	ctx, cancel := context.WithTimeout(a.redisContext(), wait)
	defer cancel()
	sent := time.Now()
	rel, err := a.proto.releaseHeld(ctx, kA, by.retryID, by.lease, by.count, by.releaseToken, next)
	a.noteLatch(by, rel, err)
	early := a.settleEarly(kA, by, rel, err)
	if a.unconfirmed != nil {
		return false
	}
	if a.holds[kA] == by {
		if err == nil {
			a.dropResent(kA, by, rel)
		} else {
			a.lose(kA, "the release sent again found the hold gone")
		}
	}
	if early {
		a.confirmEarly(m, kA.owner, rel.Token, sent)
	}
	a.tryHead()
	return true
}

// confirmedBy takes a call of the hold h of k that Redis answered (a re-entry, an Extend) while h was
// granted early and not confirmed yet: the hold is in Redis, so the release that granted it took
// effect, and is settled (the holder it came from, which counted it released, is dropped).
func (a *lockActor) confirmedBy(k holdKey, h *hold) {
	if h.pending == nil {
		return
	}
	h.settle()
	if u := a.unconfirmed; u != nil && (holdKey{u.Owner, u.Kind}) == k {
		by, kA := a.unconfirmedBy, a.unconfirmedKey
		a.unconfirmed, a.unconfirmedBy = nil, nil
		if a.holds[kA] == by {
			a.drop(kA)
		}
	}
}
