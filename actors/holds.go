package actors

import (
	"errors"
	"sync"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// holdKey names one local owner's hold of one kind: on a read-write lock an owner may hold both sides.
type holdKey struct {
	owner string
	kind  Kind
}

// hold is one local owner's hold on the lock.
type hold struct {
	// acquired is when the hold was first granted; announced is set once its caller got it (and an
	// acquired event went out), so that its end is reported only then.
	acquired  time.Time
	announced bool
	count     int64
	token     int64
	lease     time.Duration
	watchdog  bool
	// expires is a conservative estimate of when Redis drops the lock unless it is renewed: the time
	// the last acquire or renewal was sent, plus its lease, less the drift allowance (validUntil).
	expires time.Time
	done    chan struct{}
	// deadline closes done at expires even while the actor is blocked in a slow Redis call, so the
	// holder learns of the loss before Redis can drop the lock.
	deadline  holdTimer
	closeOnce sync.Once
	// retryID is the request id of the owner's last release that failed on a Redis error: the next
	// Unlock sends it again, so that the release latch answers it if the failed one took effect after
	// all. A hold with a failed release is no longer renewed.
	retryID string
	// releaseToken is the token that the owner's latest release was sent with (hold.fencedToken; 0
	// for a release through the unlock latch): a failed release is sent again as it was first sent.
	releaseToken int64
	// shared marks an owner id that other processes may use too: Redis may count their holds as well.
	shared bool
	// unacked is set while the latest renewal took effect on the master but the replicas did not
	// acknowledge it: the master's key outlasts expires, so a hold that runs out then is given back.
	unacked bool
	// reads is, for a read hold, the validity of each of the owner's read holds in Redis (each has a
	// timeout key of its own), oldest first: a read release leaves the remaining holds' keys as they
	// are, so the hold is valid until the longest of them (see dropReads).
	reads []time.Time
	// confirmed is when the latest call that Redis answered for the hold (its grant, a re-entry, a
	// renewal, an Extend, an inner release) was sent; for a hold granted early and confirmed, its
	// grant. Zero while a hold granted early waits for its confirmation.
	confirmed time.Time
	// grantsEarly is set for a hold that a Mutex's call took (Acquire.AcceptEarlyGrant): its token is
	// the one its script issued (or its early grant's), so its release may grant a local waiter early
	// with the token above it (handsOffEarly). A group member's hold is not: its group raises the
	// token counter past its token.
	grantsEarly bool
	// pending is set while the hold, granted from a local handoff, waits for Redis to confirm it (see
	// grantEarly); it is resolved when Redis has, or when the hold ends. The watchdog does not renew
	// such a hold (its field may not be in Redis yet).
	pending *Confirmation
}

// fencedToken returns the token with which a release of h that hands off to nobody is checked by the
// lock's token counter rather than by an unlock latch (redisops.Ops.ReleaseHeldFenced), or 0 for a
// release through the latch. The counter must have moved for the hold's latest acquisition alone, as
// its script issued its token: so for a hold that a Mutex's call took (grantsEarly), not a group
// member's (its group raises the counter past the token), and one that Redis has confirmed (a hold
// granted early waits for the release that hands it over).
func (h *hold) fencedToken() int64 {
	if !h.grantsEarly || h.shared || h.pending != nil || h.token <= 0 {
		return 0
	}
	return h.token
}

// newHold returns a hold valid until expires, whose deadline is a runtime timer of its own (for an
// actor outside a guardian; see lockActor.newHold).
func newHold(expires time.Time) *hold {
	h := &hold{acquired: time.Now(), expires: expires, done: make(chan struct{})}
	h.deadline.rt = time.AfterFunc(time.Until(expires), h.end)
	return h
}

// newHold returns a hold valid until expires, whose deadline the coordinator's timer service keeps.
func (a *lockActor) newHold(expires time.Time) *hold {
	if a.timers == nil {
		return newHold(expires)
	}
	h := &hold{acquired: time.Now(), expires: expires, done: make(chan struct{})}
	h.deadline.timers = a.timers
	h.deadline.w = wakeup{hold: h, index: -1, shard: a.clock.w.shard} // the actor's shard
	a.timers.set(&h.deadline.w, expires)
	return h
}

// extend moves the hold's deadline after a successful acquisition or renewal sent at sent.
func (h *hold) extend(sent time.Time, lease time.Duration) {
	h.expires, h.confirmed = validUntil(sent, lease), sent
	h.deadline.Reset(time.Until(h.expires))
}

// pushRead records a new read hold of the owner, valid until v.
func (h *hold) pushRead(v time.Time) { h.reads = append(h.reads, v) }

// setReads records that every read hold of the owner is valid until v: a renewal or an extension
// gave every timeout key the same lease.
func (h *hold) setReads(v time.Time) {
	for i := range h.reads {
		h.reads[i] = v
	}
}

// cutReads records that no read hold of the owner may be valid past v.
func (h *hold) cutReads(v time.Time) {
	for i := range h.reads {
		if v.Before(h.reads[i]) {
			h.reads[i] = v
		}
	}
}

// dropReads settles a read release that left n read holds: the latest holds are gone, and the hold's
// validity becomes the longest of the remaining holds' (rw_read_release.lua renews none of them),
// never more than it was.
func (h *hold) dropReads(n int64) {
	if int64(len(h.reads)) > n {
		h.reads = h.reads[:max(n, 0)]
	}
	var longest time.Time
	for _, v := range h.reads {
		if v.After(longest) {
			longest = v
		}
	}
	if !longest.IsZero() {
		h.cut(longest)
	}
}

// validUntil is the end of the validity of a lease that Redis granted for a call sent at sent: the
// lease counted from the send (Redis starts it later), less the clock drift allowance of the Redlock
// rule (DriftOf), so that a holder learns of the end of its hold before Redis can drop the key even
// when the clocks run at slightly different rates or the actor is scheduled late.
func validUntil(sent time.Time, lease time.Duration) time.Time {
	return sent.Add(lease - DriftOf(lease))
}

// lateGrant reports whether a grant for a call sent at sent with lease comes back with no validity
// left: Redis may already have dropped, or be about to drop, what it granted.
func lateGrant(sent time.Time, lease time.Duration) bool {
	return !time.Now().Before(validUntil(sent, lease))
}

// settle resolves the hold's pending confirmation (see grantEarly), if any: Redis has confirmed the
// hold, or the hold has ended.
func (h *hold) settle() {
	if h.pending != nil {
		h.pending.resolve()
		h.pending = nil
	}
}

// end closes done once.
func (h *hold) end() { h.closeOnce.Do(func() { close(h.done) }) }

// ended reports whether done is closed: released, lost, or past its deadline.
func (h *hold) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// cutAfterUndoneReentry keeps the hold of k honest after its re-entry with lease, sent at
// sent, was given back because replicas did not acknowledge it. The re-entry set the lock's expiry to
// its own lease (acquire.lua, fair_acquire.lua), and so did the release that gave it back; a replica
// may have either. So the hold's validity is cut to the re-entry's, when that is shorter, and a
// watchdog hold is renewed at once, so that the master (and, once they acknowledge, the replicas)
// get the watchdog's lease again; until a renewal counts, Done closes before the shorter expiry ends.
// A hold with a fixed lease keeps the cut validity: nothing renews it. A hold whose re-entries only
// ever raise the expiry (see strategy.reentryRaisesExpiry) keeps its own. A hold that the
// renewal finds gone leaves the head to be tried after the attempt (see deferHead).
func (a *lockActor) cutAfterUndoneReentry(k holdKey, sent time.Time, lease time.Duration) {
	a.cutValidity(k, sent, lease)
	if h := a.holds[k]; h != nil && h.watchdog && !a.proto.reentryRaisesExpiry(k.kind) && a.renewHold(k, h) {
		a.deferHead()
	}
}

// cutValidity cuts the validity of the hold of k to that of a re-entry with lease sent at sent, when
// that is shorter (see cutAfterUndoneReentry).
func (a *lockActor) cutValidity(k holdKey, sent time.Time, lease time.Duration) {
	h := a.holds[k]
	if h == nil || a.proto.reentryRaisesExpiry(k.kind) {
		return
	}
	h.cut(validUntil(sent, lease))
}

// cut shortens the hold's validity (and its read holds') to v, when v is sooner.
func (h *hold) cut(v time.Time) {
	if v.Before(h.expires) {
		h.expires = v
		h.deadline.Reset(time.Until(v))
	}
	h.cutReads(v)
}

// giveBackLate undoes one hold of k that a late answer granted (count is the owner's hold count after
// it). A first hold is released whole; a failure is only logged, since nothing renews it and it ends
// with its lease. A re-entry keeps the earlier holds: its release resets the expiry to their lease (the
// late re-entry may have cut it to its own), and when it fails the count in Redis is unknown, so the
// hold is lost rather than renewed with one hold too many.
func (a *lockActor) giveBackLate(k holdKey, lease time.Duration, count int64) {
	h := a.holds[k]
	if h != nil && count == 1 {
		a.lose(k, "lease ran out before a re-entry")
		h = nil
	}
	if h != nil {
		lease = h.lease
	}
	ctx, cancel := a.env.stopContext()
	defer cancel()
	_, err := a.proto.release(ctx, k, a.env.NewRequestID(), lease, nil)
	switch {
	case err == nil:
		if h != nil {
			h.count = count - 1
		}
	case h != nil:
		a.log().Warn("giving back a late re-entry failed; the hold is given up", "owner", k.owner, "err", err)
		a.lose(k, "giving back a late re-entry failed")
	case !errors.Is(err, redisops.ErrNotHeld):
		a.log().Warn("giving back a late grant failed; its lease will expire", "owner", k.owner, "err", err)
	}
}

// holdsGone checks in Redis whether the local holds still exist, after a notice said the lock was
// freed while we hold it: a force unlock, or a release through a shared owner id elsewhere. It loses
// the holds that are gone and reports whether none is left.
func (a *lockActor) holdsGone() bool {
	for k := range a.holds {
		ctx, cancel := a.inlineContext()
		n, err := a.proto.holdCount(ctx, k)
		cancel()
		if err == nil && n == 0 {
			a.lose(k, "freed by another client")
		}
	}
	return len(a.holds) == 0
}

// clearLost frees what may be left in Redis of the hold of k that was lost: the local estimate of its
// lease ran out a little before Redis drops it (the drift margin), or a renewal took effect although
// its answer was lost or came too late. The owner's next acquisition should not find that dead hold,
// which the acquire script takes for the owner's own lost reply and takes over (with a fresh fencing
// token: it answered the dead hold's token when this clearing failed). Each release checks the owner,
// so another owner's hold is never touched.
//
// An owner marked lostGivenBack had its holds given back already (see giveBackLost): nothing goes to
// Redis.
func (a *lockActor) clearLost(k holdKey) {
	n := a.lost[k]
	delete(a.lost, k)
	if n == lostGivenBack {
		return
	}
	ctx, cancel := a.env.turnContext(time.Time{})
	defer cancel()
	for n = max(n, 1); n > 0; n-- {
		rel, err := a.proto.release(ctx, k, a.env.NewRequestID(), a.env.WatchdogTimeout, nil)
		if err != nil {
			if !errors.Is(err, redisops.ErrNotHeld) {
				a.log().Warn("release of a lost hold failed; its lease will expire", "owner", k.owner, "err", err)
			}
			return
		}
		if rel.Remaining == 0 {
			return
		}
	}
}

// lostGivenBack marks in lockActor.lost an owner whose lost holds were given back already.
const lostGivenBack int64 = -1

// giveBackLost gives back at once what the lost hold of k may have left in Redis (see clearLost), and
// keeps k marked as lost, so that the owner's Unlock answers "not held" without a second release:
// that one would take away a hold of an owner id shared with another process.
func (a *lockActor) giveBackLost(k holdKey) {
	a.clearLost(k)
	if a.holds[k] == nil {
		a.lost[k] = lostGivenBack
	}
}

// drop ends a hold that was released.
func (a *lockActor) drop(k holdKey) {
	if h := a.holds[k]; h != nil {
		delete(a.holds, k)
		a.kindHolds[k.kind]--
		a.env.Held.remove(a.name, k.owner, k.kind)
		h.deadline.Stop()
		h.end()
		h.settle() // a hold granted early that ends before Redis confirmed it
		if u := a.unconfirmed; u != nil && (holdKey{u.Owner, u.Kind}) == k {
			// Its release may never reach Redis. No later holder gets its token all the same: the
			// token counter kept it unissued when the holder's token was issued (issueToken).
			a.unconfirmed, a.unconfirmedBy = nil, nil
		}
	}
}

// lose ends a hold that was lost, and says so.
func (a *lockActor) lose(k holdKey, why string) {
	if h, ok := a.holds[k]; ok {
		a.log().Warn("lock lost", "owner", k.owner, "reason", why)
		a.emitHold(messages.EventLost, k, h, 0, why)
		a.drop(k)
		a.lost[k] = h.count
	}
}

// armExpiry wakes the actor when the earliest local hold's lease runs out.
func (a *lockActor) armExpiry() {
	var first time.Time
	for _, h := range a.holds {
		if first.IsZero() || h.expires.Before(first) {
			first = h.expires
		}
	}
	if first.Equal(a.expiryAt) && (first.IsZero() || a.expiry.armed()) {
		return
	}
	a.expiryAt = first
	if first.IsZero() {
		a.expiry.stop()
		return
	}
	a.expiry.setAt(first)
}

func (a *lockActor) expireHolds() {
	now := time.Now()
	lost := false
	var giveBack []holdKey
	for k, h := range a.holds {
		if !now.Before(h.expires) || h.ended() {
			a.lose(k, "lease ran out")
			lost = true
			// Renewals that the replicas did not acknowledge extended the key on the master past
			// the validity the holder counted on: nobody owns it now, so it is given back rather
			// than left to keep contenders out until that lease ends (a shared owner id's holds
			// are left to its holder's Unlock, as in settleRenewal).
			if h.unacked && !h.shared {
				giveBack = append(giveBack, k)
			}
		}
	}
	for _, k := range giveBack {
		a.giveBackLost(k)
	}
	if lost {
		a.tryHead()
	}
}
