package actors

import (
	"context"
	"errors"
	"time"

	"github.com/lockwarden/lockwarden/redisops"
)

// protocol is what a lock actor asks of Redis for one family of locks. The actor's queueing, timers,
// watchdog and subscriptions are the same for every family; the scripts differ.
type protocol interface {
	// acquire makes one attempt for m. held is the owner's hold count of m's kind as far as the actor
	// knows, or redisops.UnknownHoldCount. enqueue asks a fair lock to keep a place in its queue.
	acquire(ctx context.Context, m *Acquire, held int64, enqueue bool) (redisops.Acquired, error)
	// release drops one hold. next is a local owner to hand the lock to (plain locks only).
	release(ctx context.Context, k holdKey, requestID string, lease time.Duration, next *redisops.Handoff) (redisops.Released, error)
	renew(ctx context.Context, k holdKey, lease time.Duration) error
	// renewMany renews the holds ks in one round trip (one WAIT with replica sync on), and returns
	// each one's error in the order of ks.
	renewMany(ctx context.Context, ks []holdKey, lease time.Duration) []error
	forceUnlock(ctx context.Context, kind Kind) (bool, error)
	// holdCount reads the owner's hold count of the kind from Redis.
	holdCount(ctx context.Context, k holdKey) (int64, error)
	// leave gives up what a waiter left in Redis while it waited: its place in a fair lock's queue, or
	// a writer's intent on a read-write lock. unclaimed says that the actor knows of no hold of m's
	// owner and kind, so that a fair lock's handoff that m did not learn of is given back too.
	leave(ctx context.Context, m *Acquire, unclaimed bool) error
	// channel is the pub/sub channel on which the waiter m is woken.
	channel(m *Acquire) string
}

func newProtocol(f family, name string, ops *redisops.Ops) protocol {
	switch f {
	case familyFair:
		return fairProtocol{name: name, ops: ops}
	case familyRW:
		return rwProtocol{name: name, ops: ops, intent: writeIntent}
	default:
		names := redisops.NamesOf(name)
		return plainProtocol{name: name, names: &names, ops: ops}
	}
}

// plainProtocol is the reentrant lock.
type plainProtocol struct {
	name  string
	names *redisops.Names
	ops   *redisops.Ops
}

func (p plainProtocol) acquire(ctx context.Context, m *Acquire, held int64, _ bool) (redisops.Acquired, error) {
	return p.ops.AcquireNamed(ctx, p.names, m.Owner, m.Lease, held)
}

func (p plainProtocol) release(ctx context.Context, k holdKey, requestID string, lease time.Duration, next *redisops.Handoff) (redisops.Released, error) {
	return p.ops.Release(ctx, p.name, k.owner, requestID, lease, next)
}

// releaseHeld drops one hold k through p, like p.release, telling the reentrant lock's release the
// owner's hold count held as the actor knows it (redisops.UnknownHoldCount when it does not), which
// spares Redis the unlock latch while holds remain (redisops.Ops.ReleaseHeld). The other families take
// no count.
func releaseHeld(ctx context.Context, p protocol, k holdKey, requestID string, lease time.Duration, held int64, next *redisops.Handoff) (redisops.Released, error) {
	if pp, ok := p.(plainProtocol); ok {
		return pp.ops.ReleaseHeldNamed(ctx, pp.names, k.owner, requestID, lease, held, next)
	}
	return p.release(ctx, k, requestID, lease, next)
}

func (p plainProtocol) renew(ctx context.Context, k holdKey, lease time.Duration) error {
	return p.ops.Renew(ctx, p.name, k.owner, lease)
}

func (p plainProtocol) renewMany(ctx context.Context, ks []holdKey, lease time.Duration) []error {
	return p.ops.RenewMany(ctx, p.name, lockRenewals(ks, lease))
}

// lockRenewals are the renewals of the reentrant or fair lock holds ks.
func lockRenewals(ks []holdKey, lease time.Duration) []redisops.Renewal {
	rs := make([]redisops.Renewal, len(ks))
	for i, k := range ks {
		rs[i] = redisops.Renewal{Owner: k.owner, Kind: redisops.RenewLock, Lease: lease}
	}
	return rs
}

func (p plainProtocol) forceUnlock(ctx context.Context, _ Kind) (bool, error) {
	return p.ops.ForceUnlock(ctx, p.name)
}

func (p plainProtocol) holdCount(ctx context.Context, k holdKey) (int64, error) {
	st, err := p.ops.Status(ctx, p.name, k.owner)
	return st.HoldCount, err
}

func (plainProtocol) leave(context.Context, *Acquire, bool) error { return nil }

func (p plainProtocol) channel(*Acquire) string { return p.names.Channel }

// fairProtocol is the fair lock: every waiter keeps a place in a queue in Redis and is woken on a
// channel of its own. A waiter whose owner id is this process's alone registers for handoffs, so that
// a release in any process gives it the lock in the same call and tells it on its channel.
type fairProtocol struct {
	name string
	ops  *redisops.Ops
}

// acquire queues a waiter (enqueue) with a place that the lock actor keeps alive (refresh), so that
// its deadline lapses one window after its process stopped.
func (p fairProtocol) acquire(ctx context.Context, m *Acquire, held int64, enqueue bool) (redisops.Acquired, error) {
	switch {
	case enqueue && handsOff(m) && m.waitID != "":
		return p.ops.FairWait(ctx, p.name, m.Owner, m.Lease, m.WaitWindow, held, m.waitID)
	case enqueue:
		return p.ops.FairQueue(ctx, p.name, m.Owner, m.Lease, m.WaitWindow, held)
	}
	return p.ops.FairAcquire(ctx, p.name, m.Owner, m.Lease, m.WaitWindow, held, false)
}

// refresh keeps the Redis places of the waiting owners alive and reports, for each, whether it is
// still queued.
func (p fairProtocol) refresh(ctx context.Context, places []redisops.FairPlace) ([]redisops.FairPlaceState, error) {
	return p.ops.FairRefresh(ctx, p.name, places)
}

// handsOff reports whether the fair waiter m registers for handoffs: not with an owner id that other
// processes may use, since the grant is told to whoever listens for the owner.
func handsOff(m *Acquire) bool { return m.Wait && !m.SharedOwner }

func (p fairProtocol) release(ctx context.Context, k holdKey, requestID string, lease time.Duration, next *redisops.Handoff) (redisops.Released, error) {
	return p.ops.FairRelease(ctx, p.name, k.owner, requestID, lease, next)
}

func (p fairProtocol) renew(ctx context.Context, k holdKey, lease time.Duration) error {
	return p.ops.Renew(ctx, p.name, k.owner, lease)
}

func (p fairProtocol) renewMany(ctx context.Context, ks []holdKey, lease time.Duration) []error {
	return p.ops.RenewMany(ctx, p.name, lockRenewals(ks, lease))
}

func (p fairProtocol) forceUnlock(ctx context.Context, _ Kind) (bool, error) {
	return p.ops.FairForceUnlock(ctx, p.name)
}

func (p fairProtocol) holdCount(ctx context.Context, k holdKey) (int64, error) {
	st, err := p.ops.Status(ctx, p.name, k.owner)
	return st.HoldCount, err
}

func (p fairProtocol) leave(ctx context.Context, m *Acquire, unclaimed bool) error {
	if unclaimed && handsOff(m) {
		_, err := p.ops.FairLeave(ctx, p.name, m.Owner, m.WaitWindow)
		return err
	}
	_, err := p.ops.FairCancel(ctx, p.name, m.Owner, m.WaitWindow)
	return err
}

func (p fairProtocol) channel(m *Acquire) string { return redisops.FairChannelName(p.name, m.Owner) }

// writeIntent is how long a waiting writer's intent keeps new readers out of a read-write lock unless
// the writer refreshes it: a waiting writer tries again at least every half of it, and a writer that
// died stops holding readers back within it.
const writeIntent = 2 * time.Second

// rwProtocol is the read-write lock; the hold key's kind picks the side.
type rwProtocol struct {
	name   string
	ops    *redisops.Ops
	intent time.Duration
}

// acquire of the write side by a waiter (enqueue) leaves a write intent while readers hold the lock, and
// asks to be tried again before the intent runs out.
func (p rwProtocol) acquire(ctx context.Context, m *Acquire, held int64, enqueue bool) (redisops.Acquired, error) {
	if m.Kind == KindWrite {
		intent := time.Duration(0)
		if enqueue {
			intent = p.intent
		}
		res, err := p.ops.WriteAcquire(ctx, p.name, m.Owner, m.Lease, held, intent)
		// A TTL of 0 is a lock that expires this very millisecond: the retry comes at once. One with no
		// expiry (negative) or a long one is retried before the intent runs out.
		if err == nil && !res.OK && intent > 0 && (res.TTL < 0 || res.TTL > intent/2) {
			res.TTL = intent / 2
		}
		return res, err
	}
	return p.ops.ReadAcquire(ctx, p.name, m.Owner, m.Lease, held)
}

func (p rwProtocol) release(ctx context.Context, k holdKey, requestID string, lease time.Duration, _ *redisops.Handoff) (redisops.Released, error) {
	if k.kind == KindWrite {
		return p.ops.WriteRelease(ctx, p.name, k.owner, requestID, lease)
	}
	return p.ops.ReadRelease(ctx, p.name, k.owner, requestID, lease)
}

func (p rwProtocol) renew(ctx context.Context, k holdKey, lease time.Duration) error {
	if k.kind == KindWrite {
		return p.ops.WriteRenew(ctx, p.name, k.owner, lease)
	}
	return p.ops.ReadRenew(ctx, p.name, k.owner, lease)
}

func (p rwProtocol) renewMany(ctx context.Context, ks []holdKey, lease time.Duration) []error {
	rs := make([]redisops.Renewal, len(ks))
	for i, k := range ks {
		kind := redisops.RenewRead
		if k.kind == KindWrite {
			kind = redisops.RenewWrite
		}
		rs[i] = redisops.Renewal{Owner: k.owner, Kind: kind, Lease: lease}
	}
	return p.ops.RenewMany(ctx, p.name, rs)
}

func (p rwProtocol) forceUnlock(ctx context.Context, kind Kind) (bool, error) {
	if kind == KindWrite {
		return p.ops.ForceUnlockWrite(ctx, p.name)
	}
	return p.ops.ForceUnlockRead(ctx, p.name)
}

func (p rwProtocol) holdCount(ctx context.Context, k holdKey) (int64, error) {
	st, err := p.ops.RWStatus(ctx, p.name, k.owner)
	if k.kind == KindWrite {
		return st.WriteHolds, err
	}
	return st.ReadHolds, err
}

// leave withdraws the write intent of a writer that gave up waiting; readers leave nothing behind.
func (p rwProtocol) leave(ctx context.Context, m *Acquire, _ bool) error {
	if m.Kind != KindWrite {
		return nil
	}
	_, err := p.ops.ClearWriteIntent(ctx, p.name, m.Owner)
	return err
}

func (p rwProtocol) channel(*Acquire) string { return redisops.RWChannelName(p.name) }

// isUpgrade reports whether err is a refused upgrade of read holds to a write hold.
func isUpgrade(err error) bool { return errors.Is(err, redisops.ErrUpgrade) }

// isNotSynced reports whether err is a hold that replicas did not acknowledge, already given back.
func isNotSynced(err error) bool { return errors.Is(err, redisops.ErrNotSynced) }
