package actors

import (
	"context"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// plainStrategy is the reentrant lock (Redisson's RLock).
type plainStrategy struct {
	exclusive
	name string
	ops  *redisops.Ops
}

func newPlainStrategy(name string, ops *redisops.Ops) strategy {
	return plainStrategy{name: name, ops: ops}
}

func (plainStrategy) lockKind() messages.LockKind { return messages.LockPlain }

func (p plainStrategy) acquire(ctx context.Context, m *Acquire, held int64, _ bool) (redisops.Acquired, error) {
	return p.ops.Acquire(ctx, p.name, m.Owner, m.Lease, held)
}

func (p plainStrategy) release(ctx context.Context, k holdKey, requestID string, lease time.Duration, next *redisops.Handoff) (redisops.Released, error) {
	return p.ops.Release(ctx, p.name, k.owner, requestID, lease, next)
}

// releaseHeld tells the release the owner's hold count, which spares Redis the unlock latch while
// holds remain (redisops.Ops.ReleaseHeld).
func (p plainStrategy) releaseHeld(ctx context.Context, k holdKey, requestID string, lease time.Duration, held int64, next *redisops.Handoff) (redisops.Released, error) {
	return p.ops.ReleaseHeld(ctx, p.name, k.owner, requestID, lease, held, next)
}

func (p plainStrategy) renew(ctx context.Context, k holdKey, lease time.Duration) error {
	return p.ops.Renew(ctx, p.name, k.owner, lease)
}

func (p plainStrategy) renewMany(ctx context.Context, ks []holdKey, lease time.Duration) []error {
	return p.ops.RenewMany(ctx, p.name, lockRenewals(ks, lease))
}

func (p plainStrategy) forceUnlock(ctx context.Context, _ Kind) (bool, error) {
	return p.ops.ForceUnlock(ctx, p.name)
}

func (p plainStrategy) holdCount(ctx context.Context, k holdKey) (int64, error) {
	st, err := p.ops.Status(ctx, p.name, k.owner)
	return st.HoldCount, err
}

func (plainStrategy) leave(context.Context, *Acquire, bool) error { return nil }

func (p plainStrategy) channel(*Acquire) string { return redisops.ChannelName(p.name) }

// async: a reentrant lock's call goes to Redis without the actor waiting for it (solo.go).
func (plainStrategy) async() bool { return true }

// handoffCandidate returns the head waiter if the lock may go to it straight from owner's release.
func (plainStrategy) handoffCandidate(a *lockActor, owner string) *Acquire {
	if a.env.MaxHandoffs == 0 {
		return nil
	}
	for len(a.queue) > 0 && a.queue[0].Ticket.Abandoned() {
		a.unreserve(a.queue[0])
		a.emitWait(messages.EventWaitTimedOut, a.queue[0], "")
		a.queue = a.queue[1:]
	}
	if len(a.queue) == 0 || a.queue[0].Owner == owner || len(a.holds) > 1 {
		return nil
	}
	return a.queue[0]
}

func (plainStrategy) notice(a *lockActor, m *messages.Notice) {
	if !isUnlockNotice(m.Payload) {
		return
	}
	if len(a.holds) > 0 && !a.holdsGone() {
		// A local owner holds the lock, so the notice is about an earlier hold; the local release
		// will wake the queue.
		return
	}
	a.tryHead()
}
