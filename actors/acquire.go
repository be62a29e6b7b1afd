package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

func (a *lockActor) onAcquire(m *Acquire) {
	m.Ticket.watch(&a.inflight)
	if a.batching() && !a.batchable(m.Owner, m.Kind) {
		a.flush()
	}
	if m.Ticket.Abandoned() {
		return
	}
	if !a.reserve(m) {
		a.refuse(m, Outcome{Reason: messages.ReasonKindMismatch, Err: redisops.ErrKindMismatch})
		return
	}
	if err := a.beforeAttempt(m); err != nil {
		a.afterFirstAttempt(m, false, false, 0, err)
		return
	}
	k := holdKey{m.Owner, m.Kind}
	if _, lost := a.lost[k]; lost && a.holds[k] == nil && !m.SharedOwner {
		a.clearLost(k)
	}
	if a.proto.refusesUpgrade(a, m) {
		a.refuse(m, Outcome{Reason: messages.ReasonUpgrade})
		return
	}
	reentry := a.isReentry(m)
	// A waiter that queues in Redis (a fair lock's) takes its place there on arrival, even behind
	// local waiters, so that the order across processes is the order of arrival.
	queuesInRedis := a.proto.queuesInRedis() && m.Wait
	switch {
	case reentry || (len(a.queue) == 0 && a.compatible(m)) || queuesInRedis:
		if a.batchable(m.Owner, m.Kind) {
			a.batchAcquire(m, func(ok bool, ttl time.Duration, err error) { a.afterFirstAttempt(m, reentry, ok, ttl, err) })
			return
		}
		if a.callsAsync() {
			a.attemptAsync(m, reentry)
			return
		}
		ok, ttl, err := a.attempt(m)
		a.afterFirstAttempt(m, reentry, ok, ttl, err)
	case !m.Wait:
		// Another local owner holds the lock, or local waiters are ahead: the answer is known
		// without asking Redis.
		a.answer(m, Outcome{Reason: messages.ReasonNotObtained})
	default:
		a.queue = append(a.queue, m)
		m.queued = true
		a.emitWait(messages.EventWaitStarted, m, "")
	}
}

// afterFirstAttempt answers or queues m after the attempt it made on arrival.
func (a *lockActor) afterFirstAttempt(m *Acquire, reentry, ok bool, ttl time.Duration, err error) {
	if ok {
		if a.proto.queuesInRedis() && len(a.queue) > 0 {
			// A waiter that queues in Redis tries on arrival even behind local waiters; when it got the
			// lock (a handoff to its owner that an earlier call of the owner waits for), that call
			// re-enters now.
			a.tryHead()
		}
		return
	}
	// A key of another type, or the owner's hold of another kind in Redis, will not change by
	// waiting: the caller is told at once.
	if err != nil && (!m.Wait || isUpgrade(err) || errors.Is(err, redisops.ErrWrongType) || errors.Is(err, redisops.ErrKindMismatch)) {
		reason := messages.ReasonRedis
		switch {
		case isUpgrade(err):
			reason = messages.ReasonUpgrade
		case errors.Is(err, redisops.ErrKindMismatch):
			reason = messages.ReasonKindMismatch
		}
		a.answer(m, Outcome{Reason: reason, Err: err})
		return
	}
	if !m.Wait {
		a.answer(m, Outcome{Reason: messages.ReasonNotObtained})
		return
	}
	if reentry {
		// A re-entry that failed on a Redis error goes first: it must not wait behind waiters
		// that wait for this very owner.
		a.queue = append([]*Acquire{m}, a.queue...)
	} else {
		a.queue = append(a.queue, m)
	}
	m.queued = true
	a.emitWait(messages.EventWaitStarted, m, "")
	if a.retry.armed() && len(a.queue) > 1 {
		return
	}
	if err != nil {
		a.armRetry(a.nextBackOff())
	} else {
		a.armRetry(ttl)
	}
}

// isReentry reports whether m's owner already holds the lock in a way that lets m in at once: a hold
// of the same kind, or one of the kind the strategy lets it enter through (a writer taking read holds).
func (a *lockActor) isReentry(m *Acquire) bool {
	if _, ok := a.holds[holdKey{m.Owner, m.Kind}]; ok {
		return true
	}
	if through, ok := a.proto.enteredThrough(m.Kind); ok {
		_, held := a.holds[holdKey{m.Owner, through}]
		return held
	}
	return false
}

// compatible reports whether m could be granted next to the local holds of other owners, as the
// strategy shares them (readers with readers). Holds of m's own owner never stand in its way
// (re-entry, or a writer taking read holds).
func (a *lockActor) compatible(m *Acquire) bool {
	for kind, n := range a.kindHolds {
		if n == 0 || a.proto.shares(m.Kind, Kind(kind)) {
			continue
		}
		if _, own := a.holds[holdKey{m.Owner, Kind(kind)}]; !own || n > 1 {
			return false // another owner holds this kind
		}
	}
	return true
}

// attempt runs the acquire script for m and grants the lock on success. It reports whether m is
// settled (granted, or answered with ReasonNotSynced), the holder's remaining lease when the lock is
// taken, and any Redis error.
func (a *lockActor) attempt(m *Acquire) (bool, time.Duration, error) {
	if err := a.beforeAttempt(m); err != nil {
		return false, 0, err
	}
	held := a.beginAttempt(m)
	sent := time.Now()
	if len(a.running) == 0 { // else the oldest running batch is the oldest unanswered call
		a.inflight.Store(sent.UnixNano())
	}
	res, err := acquireCall(a.redisContext(), a.proto, m, held, a.env.boundCalls())
	if len(a.running) == 0 {
		a.inflight.Store(0)
	}
	acquireEvent(m, sent, res.OK, err)
	return a.settleAttempt(m, sent, res, err)
}

// beforeAttempt readies the owner's state for an attempt of m, on arrival (onAcquire) and from the
// queue: a hold whose lease ran out is given up (it would read as a re-entry while Redis may still
// keep its field for the drift allowance), and a failed release of the owner's last hold is sent
// again (settleFailedReleases). It returns the Redis error of a release that failed again, noted on m.
func (a *lockActor) beforeAttempt(m *Acquire) error {
	k := holdKey{m.Owner, m.Kind}
	if h := a.holds[k]; h != nil && h.ended() {
		a.lose(k, "lease ran out")
	}
	err := a.settleFailedReleases(m.Owner)
	if err != nil {
		m.Ticket.noteError(err)
	}
	return err
}

// callsAsync reports whether the actor's next call may go to Redis without the actor waiting for it
// (startCall): when the strategy allows it and no call is in flight.
func (a *lockActor) callsAsync() bool { return a.proto.async() && !a.batching() }

// beginAttempt counts an attempt of m, and returns the hold count the attempt checks retries against.
func (a *lockActor) beginAttempt(m *Acquire) int64 {
	m.attempts++
	a.proto.beginAttempt(a, m)
	return a.knownHeld(m)
}

// acquireCall runs the acquire script for m. An answer that comes after the lease is worthless (see
// lateGrant): with bound (a client that honours context deadlines: ContextTimeoutEnabled) the call is
// bounded by it. A client that does not would only wait for a deadline while it takes a connection
// from its pool, and the deadline costs four allocations; a late answer is given back all the same.
// It is not bounded by the stop release timeout (see Env.turnDeadline): a grant cut off before its
// lease would stay in Redis, held by nobody, until the lease ends, where one cut off at the lease
// ends with it. So the coordinator's Close waits for an attempt on an actor's turn, up to its lease.
func acquireCall(ctx context.Context, p protocol, m *Acquire, held int64, bound bool) (redisops.Acquired, error) {
	if !bound {
		return p.acquire(ctx, m, held, m.Wait)
	}
	ctx, cancel := context.WithTimeout(ctx, m.Lease)
	defer cancel()
	return p.acquire(ctx, m, held, m.Wait)
}

// knownHeld is the hold count of m's owner and kind that the acquire scripts check retries against:
// the local count, or redisops.UnknownHoldCount for an owner id shared with other processes.
func (a *lockActor) knownHeld(m *Acquire) int64 {
	if m.SharedOwner {
		return redisops.UnknownHoldCount
	}
	if h := a.holds[holdKey{m.Owner, m.Kind}]; h != nil {
		return h.count
	}
	return 0
}

// settleAttempt takes the answer to an acquire attempt for m sent at sent, as attempt reports it.
func (a *lockActor) settleAttempt(m *Acquire, sent time.Time, res redisops.Acquired, err error) (bool, time.Duration, error) {
	k := holdKey{m.Owner, m.Kind}
	if isNotSynced(err) {
		if errors.Is(err, redisops.ErrReplicasChanged) && m.resyncs < maxResyncs {
			// The master has fewer replicas than the WAIT asked for (a failover): the hold was
			// given back, and one more attempt waits for the replicas the master has now. A
			// master whose replicas are still settling may drop one again meanwhile; every retry
			// follows a count lower than the last one asked for, and their number is bounded.
			// A re-entry's write set the lock's expiry to its lease from about sent, and a lagging
			// replica may have only it: the hold's validity is cut to it now, since a retry that is
			// undone too only cuts to its own, later, send.
			a.cutValidity(k, sent, m.Lease)
			if h := a.holds[k]; h != nil && !time.Now().Before(h.expires) {
				// The re-entry's lease, shorter than its WAIT, used up the hold's validity: the
				// hold is lost (its Done has closed), and a retry would re-enter it. The call
				// fails instead; the owner's field lapses with that lease, or the owner's next
				// acquisition clears it.
				a.lose(k, "lease ran out")
				a.refuse(m, Outcome{Reason: messages.ReasonNotSynced, Err: err})
				return true, 0, nil
			}
			m.resyncs++
			return a.attempt(m)
		}
		// Redis gave the hold and took it back because replicas did not acknowledge it. The call
		// fails, waiting or not: trying again would most likely meet the same replicas.
		a.refuse(m, Outcome{Reason: messages.ReasonNotSynced, Err: err})
		a.cutAfterUndoneReentry(k, sent, m.Lease)
		return true, 0, nil
	}
	if err != nil {
		if !isUpgrade(err) {
			a.log().Warn("acquire failed", "owner", m.Owner, "err", err)
			a.noteRedisError(m, err)
		}
		return false, 0, err
	}
	a.resetBackOff()
	a.noteRedisError(m, nil)
	if !res.OK {
		// A fair grant notice whose token is above the watermark was sent after this call ran, so
		// after it was sent: its hold's lease started no earlier than sent (see onFairGrant).
		m.watermark, m.lastSent = max(m.watermark, res.Watermark), sent
		if _, had := a.holds[k]; had {
			// A re-entry found the lock taken by someone else: our hold was lost.
			a.lose(k, "taken by another owner")
		}
		return false, res.TTL, nil
	}
	if lateGrant(sent, m.Lease) {
		// Redis answered after the lease had run out (a paused server, a slow network): the hold
		// may already be gone, and another owner may have it. It is never reported; what this call
		// may still hold is given back, and a waiter keeps waiting.
		a.giveBackLate(k, m.Lease, res.HoldCount)
		err := fmt.Errorf("%w (Redis answered after %v, lease %v)", ErrGrantTooLate, time.Since(sent).Round(time.Millisecond), m.Lease)
		a.noteRedisError(m, err)
		return false, 0, err
	}
	a.grant(m, res.HoldCount, res.Token, sent)
	if h := a.holds[k]; h != nil && h.watchdog && time.Until(h.expires) < a.env.WatchdogTimeout/2 {
		// A late answer left less validity than the watchdog's next tick may need: renew now. A hold
		// found gone leaves the head to be tried after this attempt (see deferHead).
		if a.renewHold(k, h) {
			a.deferHead()
		}
	}
	return true, 0, nil
}

// deferHead asks for the head waiter to be tried once the attempt being settled is done: by the
// outermost tryHead or batch settlement under way, or else after the message (afterMessage). Trying
// it at once, from inside an attempt that tryWaiter made, would change the queue under tryWaiter,
// which then removes its waiter by an index that no longer points at it.
func (a *lockActor) deferHead() { a.headWanted = true }

// ErrGrantTooLate is the error of an acquisition whose grant came back from Redis after the lease had
// run out, counting from when the call was sent, less the drift allowance. The hold was given back
// (with the owner check, so no other owner's hold is touched); a waiting caller keeps waiting.
var ErrGrantTooLate = errors.New("lockwarden: the lock was granted after its lease had run out; it was given back")

// ErrNoAnswer is the error of a wait that ended while an attempt had gone unanswered by Redis for
// NoAnswerAfter or longer: a paused, partitioned or restarting server, not another owner's hold.
var ErrNoAnswer = errors.New("lockwarden: Redis did not answer")

// NoAnswerAfter is how long an attempt in flight must have gone unanswered for a wait that ends then
// to report ErrNoAnswer rather than a plain "not obtained".
const NoAnswerAfter = 200 * time.Millisecond

// maxResyncs bounds the attempts of one command retried because the master's replicas changed
// (redisops.ErrReplicasChanged): a failover that leaves the new master with fewer replicas, and the
// replicas that join or drop while it settles.
const maxResyncs = 3

// noteRedisError tells the callers waiting for the lock the outcome of the latest attempt: err when
// it failed on a Redis error, nil when Redis answered. A caller whose wait ends reports the error that
// stood at that moment, rather than a plain "not obtained" that reads as another owner holding it.
func (a *lockActor) noteRedisError(m *Acquire, err error) {
	if err == nil && !a.failing {
		return
	}
	a.failing = err != nil
	m.Ticket.noteError(err)
	for _, w := range a.queue {
		w.Ticket.noteError(err)
	}
}

// grant records a successful acquisition and answers the caller. If the caller already gave up, the
// acquisition is undone at once.
func (a *lockActor) grant(m *Acquire, count, token int64, sent time.Time) {
	k := holdKey{m.Owner, m.Kind}
	h := a.holds[k]
	if h != nil && count == 1 {
		// A "re-entry" that starts a new hold: the old one lapsed in Redis, and someone else may
		// have held the lock in between.
		a.lose(k, "lease ran out before a re-entry")
		h = nil
	}
	fresh := h == nil
	if fresh {
		h = a.newHold(validUntil(sent, m.Lease))
		h.grantsEarly = m.AcceptEarlyGrant
		a.holds[k] = h
		a.kindHolds[k.kind]++
		a.env.Held.add(a.name, k.owner, k.kind, sent)
		delete(a.lost, k)
	}
	reentry := h.count > 0
	a.confirmedBy(k, h)
	h.count, h.token, h.lease = count, token, m.Lease
	h.confirmed = sent
	h.watchdog = h.watchdog || m.Watchdog
	h.shared = m.SharedOwner
	h.retryID = "" // Redis' count is known again
	switch {
	case fresh:
		// newHold gave it this call's validity, and its deadline.
	case reentry && a.proto.reentryRaisesExpiry(m.Kind) && validUntil(sent, m.Lease).Before(h.expires):
		// Such a re-entry never cuts the expiry in Redis, but a retried one whose first try's
		// addition a renewal has reset since may add nothing (rw_write_acquire.lua). So the estimate
		// is only ever raised, to this call's own validity.
	default:
		h.extend(sent, m.Lease)
	}
	if m.Kind == KindRead {
		if !reentry {
			h.reads = h.reads[:0]
		}
		h.pushRead(validUntil(sent, m.Lease))
	}
	if a.answer(m, Outcome{HoldCount: count, Token: token, Done: h.done, Attempts: m.attempts}) {
		h.announced = true
		typ := messages.EventAcquired
		if count > 1 {
			typ = messages.EventReentered
		}
		a.emit(messages.Event{Type: typ, Owner: m.Owner, Kind: kindOf(m.Kind), Token: token, HoldCount: count, Wait: waitOf(m), Queued: m.queued})
		return
	}
	// The caller left while we were obtaining the lock for it. The undo has its own deadline, because
	// the caller may have left because the coordinator is closing.
	if m.queued {
		a.emitWait(messages.EventWaitTimedOut, m, "")
	}
	ctx, cancel := a.env.stopContext()
	defer cancel()
	rel, err := a.proto.release(ctx, k, a.env.NewRequestID(), h.lease, nil)
	switch {
	case errors.Is(err, redisops.ErrNotHeld):
		a.lose(k, "lost before an abandoned acquisition was undone")
	case err != nil:
		// Redis may still count the abandoned hold, so the local count can no longer be trusted: give
		// the whole hold up (Done closes, the watchdog stops) and let its lease expire in Redis, rather
		// than renew a hold that one Unlock too few would leave behind.
		a.log().Warn("undoing an abandoned acquisition failed; the lease will expire", "owner", m.Owner, "err", err)
		a.lose(k, "undo of an abandoned acquisition failed")
	case rel.Remaining == 0:
		a.drop(k)
	default:
		h.count = rel.Remaining
	}
}
