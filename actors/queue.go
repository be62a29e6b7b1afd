package actors

import (
	"slices"
	"time"

	"github.com/lockwarden/lockwarden/messages"
)

// tryHead lets the head waiter try Redis, and keeps granting while the next head is an owner that
// already holds the lock (a queued re-entry).
//
// Called while a tryHead or the settlement of a read batch is under way (a settled release that frees
// the lock), it only notes the call, and the outermost of them tries the head again when it is done.
// Otherwise a nested tryHead could grant the readers that the outer one is still trying, which would
// then take a second hold for them, and later batches would settle in the middle of an earlier one.
func (a *lockActor) tryHead() {
	if a.headBusy > 0 {
		a.headWanted = true
		return
	}
	a.headBusy++
	defer func() { a.headBusy-- }()
	for {
		a.headWanted = false
		a.tryQueue()
		if !a.headWanted {
			return
		}
	}
}

// tryQueue is one pass of tryHead.
func (a *lockActor) tryQueue() {
	for len(a.queue) > 0 {
		i := a.nextInLine()
		if i < 0 {
			// Held by another local owner: its release or loss wakes the queue.
			return
		}
		if run := a.readRun(i); len(run) > 1 {
			if !a.attemptReads(run) {
				return
			}
			continue
		}
		m := a.queue[i]
		ok, ttl, err := a.attempt(m)
		switch {
		case isUpgrade(err):
			a.refuse(m, Outcome{Reason: messages.ReasonUpgrade, Err: err})
		case err != nil:
			a.armRetry(a.nextBackOff())
			return
		case !ok:
			a.armRetry(ttl)
			return
		}
		a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
	}
}

// readRun returns the waiters that may try along with the waiter at index i: when it is at the head of
// the queue and its kind goes to Redis in read batches (strategy.batches: a read-write lock's readers),
// the waiters of such kinds that follow it up to the first of another kind (a waiting writer keeps
// later readers out). It is nil otherwise.
func (a *lockActor) readRun(i int) []*Acquire {
	if i != 0 || !a.proto.batches(a.queue[0].Kind) {
		return nil
	}
	var run []*Acquire
	seen := make(map[string]struct{})
	for _, m := range a.queue {
		if !a.proto.batches(m.Kind) {
			break
		}
		if _, dup := seen[m.Owner]; dup || m.Ticket.Abandoned() || !a.compatible(m) {
			continue // a second call of one owner waits for the answer to its first
		}
		seen[m.Owner] = struct{}{}
		run = append(run, m)
	}
	return run
}

// attemptReads makes one attempt for every reader of run in one batch, takes the ones that got the
// lock out of the queue, and reports whether all of them did; if not, the retry timer is armed.
func (a *lockActor) attemptReads(run []*Acquire) bool {
	a.flush()
	settled := make(map[*Acquire]bool, len(run))
	called := make(map[*Acquire]bool, len(run))
	all := true
	for _, m := range run {
		if err := a.beforeAttempt(m); err != nil {
			called[m] = true // it waits on in the queue
			all = false
			a.armRetry(a.nextBackOff())
			continue
		}
		a.batchAcquire(m, func(ok bool, ttl time.Duration, err error) {
			called[m] = true
			switch {
			case ok:
				settled[m] = true
			case isUpgrade(err):
				a.refuse(m, Outcome{Reason: messages.ReasonUpgrade, Err: err})
				settled[m] = true
			case err != nil:
				all = false
				a.armRetry(a.nextBackOff())
			default:
				all = false
				a.armRetry(ttl)
			}
		})
	}
	a.flush()
	for _, m := range run {
		if !called[m] {
			// Its call was failed as a whole (the batch panicked; see settleUpTo) and its caller
			// answered: it leaves the queue.
			settled[m] = true
		}
	}
	a.queue = slices.DeleteFunc(a.queue, func(m *Acquire) bool { return settled[m] })
	return all
}

// nextInLine drops abandoned waiters and returns the index of the waiter that may try Redis now: a
// queued re-entry of a local holder first, else the head if no local owner holds the lock, else -1.
func (a *lockActor) nextInLine() int {
	var gone []*Acquire
	live := a.queue[:0]
	for _, m := range a.queue {
		if m.Ticket.Abandoned() {
			gone = append(gone, m)
		} else {
			live = append(live, m)
		}
	}
	clear(a.queue[len(live):])
	a.queue = live
	for _, m := range gone {
		// The event comes after the leave, so that it tells that the waiter's kind is free again.
		a.leaveQueue(m)
		a.emitWait(messages.EventWaitTimedOut, m, "")
	}
	if len(a.queue) == 0 {
		return -1
	}
	for i, m := range a.queue {
		if a.isReentry(m) {
			return i
		}
	}
	if a.compatible(a.queue[0]) {
		return 0
	}
	return -1
}

// armRetry sets the fallback wake-up of the head waiter: the holder's remaining lease, in case no
// unlock notice ever comes (a holder that crashed publishes nothing).
func (a *lockActor) armRetry(ttl time.Duration) {
	if ttl <= 0 {
		// The lock vanished or has no expiry: try again soon rather than never.
		ttl = 10 * time.Millisecond
	}
	a.retry.setAt(time.Now().Add(ttl))
}

func (a *lockActor) onAbandon(m *Abandon) {
	headLeft := a.dropWaiter(m.Ticket)
	if m.Ack != nil {
		m.Ack.deliver(Outcome{}) // the waiter has left: its caller need not wait for the next one's try
	}
	if headLeft && a.proto.headKeepsOut() {
		a.tryHead()
	}
}

// dropWaiter takes the waiter of ticket out of the queue, gives up what it keeps in Redis (see
// leaveQueue), and then reports it gone (EventWaitTimedOut). It reports whether that waiter was the
// head.
func (a *lockActor) dropWaiter(ticket *Ticket) bool {
	for i, w := range a.queue {
		if w.Ticket == ticket {
			a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
			a.leaveQueue(w)
			a.emitWait(messages.EventWaitTimedOut, w, "")
			return i == 0
		}
	}
	return false
}

// leaveQueue gives up what a waiter that was taken out of the local queue because its caller left
// keeps in Redis (a fair lock's queue place, a writer's intent), unless its owner still waits through
// another call or holds the lock, and then frees the waiter's reservation. (When the waiter was
// already dropped by nextInLine, the Abandon message finds nothing: nextInLine left for it.)
//
// The reservation stands until the leave is done, and while a failed leave of a fair waiter is
// retried: until then Redis may hand the fair lock to the owner (another process's release), and a
// plain acquisition of the same owner would re-enter that hold, which the leave then gives back.
func (a *lockActor) leaveQueue(gone *Acquire) {
	retrying := false
	defer func() {
		// Deferred, so that a panic on the way does not keep the kind reserved.
		if !retrying {
			a.unreserve(gone)
		}
	}()
	if !a.proto.keepsInRedis(gone) {
		return
	}
	for _, w := range a.queue {
		if w.Owner == gone.Owner && w.Kind == gone.Kind && !w.Ticket.Abandoned() {
			return // the owner still waits through another call, which has a reservation of its own
		}
	}
	if _, holds := a.holds[holdKey{gone.Owner, gone.Kind}]; holds {
		return // the hold's record keeps the kind
	}
	if err := a.leaveBounded(gone); err != nil {
		retrying = a.proto.leaveFailed(a, gone, err)
	}
}

// tryWaiter makes one attempt for the first live waiter that match accepts, if its owner may hold the
// lock next to the local holds.
func (a *lockActor) tryWaiter(match func(*Acquire) bool) {
	for i, w := range a.queue {
		if w.Ticket.Abandoned() || !match(w) {
			continue
		}
		if !a.compatible(w) {
			return
		}
		ok, ttl, err := a.attempt(w)
		switch {
		case ok:
			a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
		case err != nil:
			a.armRetry(a.nextBackOff())
		default:
			a.armRetry(ttl)
		}
		return
	}
}

// refuse answers the acquire m with an unsuccessful outcome; a waiter that had queued is reported as
// no longer waiting.
func (a *lockActor) refuse(m *Acquire, o Outcome) {
	if a.answer(m, o) && m.queued {
		a.emitWait(messages.EventWaitTimedOut, m, o.Reason.String())
	}
}

// reserve reserves m's kind of lock for its owner on the name (see HeldKinds), and reports false when
// the owner holds or asks for the name as a kind of another family.
func (a *lockActor) reserve(m *Acquire) bool {
	if !a.env.Held.reserve(a.name, m.Owner, m.Kind, m.Started) {
		return false
	}
	m.reserved = true
	return true
}

// unreserve frees m's reservation, once m ends: answered, or dropped after its caller left. A hold
// that m got is recorded before (grant), so that the kind stays taken without a gap.
func (a *lockActor) unreserve(m *Acquire) {
	if m.reserved {
		m.reserved = false
		a.env.Held.unreserve(a.name, m.Owner, m.Kind)
	}
}

// answer ends the acquire m with o: it frees m's reservation, then answers the caller, and reports
// whether the caller was still waiting. The reservation goes first, so that a caller that goes on to
// a call of another kind finds the kind free.
func (a *lockActor) answer(m *Acquire, o Outcome) bool {
	a.unreserve(m)
	return m.Ticket.deliver(o)
}

// leaveBounded gives up what the waiter gone keeps in Redis, on the actor (see inlineContext). A failed
// leave is retried by the caller.
func (a *lockActor) leaveBounded(gone *Acquire) error {
	ctx, cancel := a.inlineContext()
	defer cancel()
	return a.proto.leave(ctx, gone, true)
}
