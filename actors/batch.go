package actors

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockwarden/lockwarden/redisops"
)

// readBatch is a group commit of a read-write lock's read side. Readers share the lock, so the read
// acquires and read releases that reach the actor while it waits on Redis need not wait for each
// other: they join one batch, which goes to Redis as one call when the actor gets to it (see
// redisops.Batch: the calls share the commands on the lock's hash).
//
// A batch runs on its own goroutine, so that the actor keeps collecting the next one, and up to
// maxReadBatchesInFlight run at once. Their calls commute: they are reads of distinct owners (a call
// on a hold that a pending or running batch touches waits for it), and reads only ever share. The
// actor settles the batches in the order it sent them. Before any other message, the actor sends the
// pending batch, waits for every running one and settles them all, so that every other command sees
// the state as if the batched calls had run one by one in arrival order.
//
// When a batch answers (batchDone), the actor settles it, sends the pending batch at once and yields
// its processor (runtime.Gosched): settling woke the callers of a whole batch on the actor's own
// processor, and they run and send their next calls sooner than if they waited for the actor's turn
// to end. With 32 readers on 2 CPUs the yield alone raises read throughput by about a fifth
// (BenchmarkRWReaders).
type readBatch struct {
	calls *redisops.Batch
	// exec, when not nil, runs instead of calls: a solo batch is one call of another kind than a read
	// (see startCall), which nothing joins.
	exec func(ctx context.Context)
	solo bool
	// keys are the holds the batch touches: a second call on the same hold waits for the batch,
	// because its retry-safety depends on the answer to the first.
	keys map[holdKey]struct{}
	// settle runs after the batch's Redis call, in the order the calls were added, with the time it
	// was sent; next is the index of the next one to run.
	settle []batchCall
	next   int
	sent   time.Time
	// done receives one value when Redis has answered; run is what the batch's goroutine runs.
	done chan struct{}
	run  func()
	// err is set, before done, when the call panicked on the batch's goroutine: it matches
	// ErrActorFailed, and every call of the batch fails with it (see settleUpTo and soloCall.settle).
	err error
	// carrier is the ticket of a solo call's command, whose caller may run the call on its own
	// goroutine (see Ticket.OpenCarry); nil for a read batch.
	carrier *Ticket
}

// batchCall is one call of a read batch: the command (an *Acquire or a *Release) and what settles it.
type batchCall struct {
	cmd any
	run func(sent time.Time)
}

// maxReadBatchesInFlight bounds the read batches of one lock that run at once.
const maxReadBatchesInFlight = 4

// batchable reports whether a call on the hold of owner and kind can join the pending batch, or
// start one: a read hold of a read-write lock that the batch does not touch yet.
func (a *lockActor) batchable(owner string, kind Kind) bool {
	if !a.proto.batches(kind) {
		return false
	}
	return !a.batchTouches(holdKey{owner, kind})
}

// batchTouches reports whether the pending batch or a running one has a call on the hold k.
func (a *lockActor) batchTouches(k holdKey) bool {
	if a.batch != nil {
		if _, busy := a.batch.keys[k]; busy || a.batch.solo {
			return true
		}
	}
	for _, b := range a.running {
		if _, busy := b.keys[k]; busy || b.solo {
			return true
		}
	}
	return false
}

// batching reports whether a read batch is pending or running: a command that cannot join must wait
// for them (flush) so that it sees their outcome.
func (a *lockActor) batching() bool { return a.batch != nil || len(a.running) > 0 }

// pendingBatch returns the batch to add to, starting one (and asking for its flush) if none is
// pending.
func (a *lockActor) pendingBatch() *readBatch {
	if a.batch == nil {
		a.batch = &readBatch{calls: a.env.Ops.NewBatch(), keys: make(map[holdKey]struct{})}
		a.root.Send(a.self, flushBatch{})
	}
	return a.batch
}

// batchAcquire adds an attempt for the read acquire m to the batch; then runs with its outcome, as
// attempt reports it.
func (a *lockActor) batchAcquire(m *Acquire, then func(ok bool, ttl time.Duration, err error)) {
	b := a.pendingBatch()
	b.keys[holdKey{m.Owner, m.Kind}] = struct{}{}
	m.attempts++
	reply := b.calls.ReadAcquire(a.proto.readNames(), m.Owner, m.Lease, a.knownHeld(m))
	b.settle = append(b.settle, batchCall{m, func(sent time.Time) {
		res, err := reply()
		acquireEvent(m, sent, res.OK, err)
		then(a.settleAttempt(m, sent, res, err))
	}})
}

// batchRelease adds the release of one read hold of m's owner, with request id requestID, to the
// batch (held: the owner's count as the actor knows it, or redisops.UnknownHoldCount for an owner id
// shared across processes, whose releases are not sequenced); then runs with Redis' answer.
func (a *lockActor) batchRelease(m *Release, requestID string, held int64, then func(sent time.Time, rel redisops.Released, err error)) {
	b := a.pendingBatch()
	b.keys[holdKey{m.Owner, m.Kind}] = struct{}{}
	reply := b.calls.ReadRelease(a.proto.readNames(), m.Owner, requestID, held)
	b.settle = append(b.settle, batchCall{m, func(sent time.Time) {
		rel, err := reply()
		releaseEvent(m.Span, sent, err)
		then(sent, rel, err)
	}})
}

// startCall sends the call s, made for the command cmd, on a goroutine of its own, as a solo batch
// that nothing joins; s settles it on the actor once it has answered. The actor goes on taking
// messages meanwhile: those that come stay in the stash until the call is settled (see Receive). It
// must be called only while no batch is pending or running.
func (a *lockActor) startCall(s *soloCall, cmd any) {
	s.proto = a.proto
	b := &s.batch
	b.settle[0].cmd, b.next, b.err = cmd, 0, nil
	b.carrier = commandTicket(cmd)
	a.batch = b
	a.send()
}

// send starts the pending batch, if any, on its own goroutine, after settling the oldest running
// batches while maxReadBatchesInFlight are running.
func (a *lockActor) send() {
	for a.batch != nil && len(a.running) >= maxReadBatchesInFlight {
		a.settleUpTo(a.running[0])
	}
	// The batch is taken only now: settling may have sent it already (a tryHead that flushes).
	b := a.batch
	if b == nil {
		return
	}
	a.batch = nil
	b.sent = time.Now()
	a.running = append(a.running, b)
	if len(a.running) == 1 {
		a.inflight.Store(b.sent.UnixNano()) // the callers' tickets watch the oldest unanswered call
	}
	if b.run == nil {
		// Bound once per batch; a solo batch is reused, and so is its function.
		ctx, self, root := a.redisContext(), a.self, a.root
		b.done = make(chan struct{}, 1)
		b.run = func() {
			b.execute(ctx)
			b.done <- struct{}{}
			root.Send(self, batchDone{b})
		}
	}
	if b.carrier.hand(b.run) {
		return // the caller, posting the command on its own goroutine, runs the call
	}
	a.spawn(b.run)
}

// execute runs the batch's calls, on its goroutine. A panic there (in go-redis, a hook, or the call's
// own code) is recovered into err rather than ending the process: the batch still answers.
func (b *readBatch) execute(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			b.err = fmt.Errorf("%w: a Redis call panicked: %v", ErrActorFailed, r)
		}
	}()
	if b.exec != nil {
		b.exec(ctx)
		return
	}
	b.calls.Exec(ctx)
}

// settleUpTo waits for the running batches up to and including last, in the order they were sent,
// and settles each of their calls. A batch that was already settled is not in running any more: then
// it does nothing and reports false.
func (a *lockActor) settleUpTo(last *readBatch) bool {
	if !slices.Contains(a.running, last) {
		return false
	}
	// A settled call that wants the queue tried waits for the end of the settlement (see tryHead).
	a.headBusy++
	defer func() {
		a.headBusy--
		if a.headBusy == 0 && a.headWanted {
			a.tryHead()
		}
	}()
	for len(a.running) > 0 {
		b := a.running[0]
		// Shifted rather than resliced, so that the slice keeps its capacity: a reentrant lock's
		// calls go one at a time, and each would otherwise allocate running anew.
		a.running = slices.Delete(a.running, 0, 1)
		if run := b.carrier.claimCarried(); run != nil {
			// Handed to a caller that has not run it yet: the actor cannot wait for it. It runs on
			// a goroutine of its own, so that the actor still gives up on it when the coordinator
			// closes (see awaitBatch).
			a.spawn(run)
		}
		if !a.awaitBatch(b) {
			a.abandon(b)
			if b == last {
				break
			}
			continue
		}
		if len(a.running) > 0 {
			a.inflight.Store(a.running[0].sent.UnixNano())
		} else {
			a.inflight.Store(0)
		}
		// A batch taken out of running is in settling until all of its calls are settled, so that
		// a panic in one of them does not leave the others unanswered (see settleRest).
		a.settling = append(a.settling, b)
		for b.next < len(b.settle) {
			c := b.settle[b.next]
			b.next++
			if b.err != nil && !b.solo {
				a.failCall(c, b.err) // the answers were not read: the call is failed as a whole
				continue
			}
			c.run(b.sent)
		}
		a.settling = a.settling[:len(a.settling)-1]
		if b == last {
			break
		}
	}
	return true
}

// awaitBatch waits for the running batch b to answer and reports whether it did. Once the coordinator
// closes (its context ends) or the actor stops, it waits only until the stop's deadline (stopBy):
// go-redis ends a read blocked on a stalled connection at its context's deadline or the client's read
// timeout, not when the context is cancelled, so a call sent without a deadline (a release, whose
// answer the actor needs whether its caller waits or not) would otherwise hold the coordinator's Close
// for the whole read timeout.
func (a *lockActor) awaitBatch(b *readBatch) bool {
	// An answer that is there already (the common case: a batchDone settles its batch) wins, and
	// costs no select over two channels.
	select {
	case <-b.done:
		return true
	default:
	}
	if a.stopBy.IsZero() {
		select {
		case <-b.done:
			return true
		case <-a.env.Context.Done():
			// The coordinator closes: the actor stops next, and the wait takes no longer than the
			// stop's.
			a.stopBy = a.env.stopDeadline()
		}
		select { // as above: an answer that came meanwhile wins over the deadline
		case <-b.done:
			return true
		default:
		}
	}
	left := time.Until(a.stopBy)
	if left <= 0 {
		return false
	}
	wait := time.NewTimer(left)
	defer wait.Stop()
	select {
	case <-b.done:
		return true
	case <-wait.C:
		return false
	}
}

// abandon answers the calls of the batch b, which has not answered by the stop's deadline, as the
// commands left in the mailbox of a stopped actor are: the coordinator closed. What the calls did in
// Redis is unknown; a hold they took or kept lapses with its lease. b's goroutine ends when the client
// gives up on the call (its read timeout, or the client's Close).
func (a *lockActor) abandon(b *readBatch) {
	if a.soloCall != nil && b == &a.soloCall.batch {
		a.soloCall = nil // its goroutine still uses it: a later call takes a new one
	}
	for b.next < len(b.settle) {
		c := b.settle[b.next]
		b.next++
		if m, ok := c.cmd.(*Acquire); ok {
			a.unreserve(m)
		}
		answerClosed(c.cmd)
	}
	if len(a.running) > 0 {
		a.inflight.Store(a.running[0].sent.UnixNano())
	} else {
		a.inflight.Store(0)
	}
}

// settleRest finishes the settlements that a panic interrupted (the batches still in settling), after
// the panic was recovered: the call whose settlement panicked is answered with err and its kind's
// reservation freed (its hold, if Redis granted one and it was not recorded yet, is not renewed and
// lapses with its lease), and the calls after it are settled as usual, so that their callers get an
// answer and their reservations end. A call whose settlement panics again is treated like the first.
func (a *lockActor) settleRest(err error) {
	batches := a.settling
	a.settling = nil
	a.headBusy++
	defer func() {
		a.headBusy--
		if a.headBusy == 0 && a.headWanted {
			a.tryHead()
		}
	}()
	for _, b := range batches {
		if b.next > 0 {
			a.failCall(b.settle[b.next-1], err)
		}
		for b.next < len(b.settle) {
			c := b.settle[b.next]
			b.next++
			a.settleRecovering(b, c, err)
		}
	}
}

// settleRecovering settles the batch call c of b, and fails it with err should that panic.
func (a *lockActor) settleRecovering(b *readBatch, c batchCall, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.log().Error("settling a batched call panicked", "panic", fmt.Sprint(r))
			a.failCall(c, err)
		}
	}()
	c.run(b.sent)
}

// failCall answers the caller of the batch call c with err (unless it was answered already) and frees
// the reservation of an acquisition.
func (a *lockActor) failCall(c batchCall, err error) {
	if m, ok := c.cmd.(*Acquire); ok {
		a.unreserve(m)
	}
	answerFailed(c.cmd, err)
}

// flush sends the pending batch and settles every running one: afterwards no batched call is
// outstanding.
func (a *lockActor) flush() {
	for a.batch != nil || len(a.running) > 0 {
		a.send()
		if n := len(a.running); n > 0 {
			a.settleUpTo(a.running[n-1])
		}
	}
}

// spawn runs fn on a goroutine of its own: one of the dispatcher's warm workers when it has one free
// (a fresh goroutine would grow its stack on the way into go-redis, which costs more than the batch),
// otherwise a new one.
func (a *lockActor) spawn(fn func()) {
	if a.env.Dispatcher != nil {
		a.env.Dispatcher.Schedule(fn)
		return
	}
	go fn()
}
