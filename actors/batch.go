package actors

import (
	"time"

	"github.com/lockwarden/lockwarden/redisops"
)

// readBatch is a group commit of a read-write lock's read side. Readers share the lock, so the read
// acquires and read releases that reach the actor while it waits on Redis need not wait for each
// other: they join one batch, which goes to Redis as one pipeline when the actor gets to it. The
// actor runs the pending batch before any other message, so every other command sees the state as if
// the batched calls had run one by one in arrival order.
type readBatch struct {
	calls *redisops.Batch
	// keys are the holds the batch touches: a second call on the same hold waits for the batch,
	// because its retry-safety depends on the answer to the first.
	keys map[holdKey]struct{}
	// settle runs after the pipeline, in the order the calls were added, with the time it was sent.
	settle []func(sent time.Time)
}

// batchable reports whether a call on the hold of owner and kind can join the pending batch, or
// start one: a read hold of a read-write lock that the batch does not touch yet.
func (a *lockActor) batchable(owner string, kind Kind) bool {
	if a.family != familyRW || kind != KindRead {
		return false
	}
	if a.batch == nil {
		return true
	}
	_, busy := a.batch.keys[holdKey{owner, kind}]
	return !busy
}

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
	reply := b.calls.ReadAcquire(a.name, m.Owner, m.Lease, a.knownHeld(m))
	b.settle = append(b.settle, func(sent time.Time) {
		res, err := reply()
		then(a.settleAttempt(m, sent, res, err))
	})
}

// batchRelease adds the release of one read hold of m's owner to the batch; then runs with Redis'
// answer.
func (a *lockActor) batchRelease(m *Release, then func(sent time.Time, rel redisops.Released, err error)) {
	b := a.pendingBatch()
	b.keys[holdKey{m.Owner, m.Kind}] = struct{}{}
	reply := b.calls.ReadRelease(a.name, m.Owner, a.env.NewRequestID())
	b.settle = append(b.settle, func(sent time.Time) {
		rel, err := reply()
		then(sent, rel, err)
	})
}

// flush runs the pending batch, if any, and settles each of its calls.
func (a *lockActor) flush() {
	b := a.batch
	if b == nil {
		return
	}
	a.batch = nil
	sent := time.Now()
	b.calls.Exec(a.redisContext())
	for _, settle := range b.settle {
		settle(sent)
	}
}
