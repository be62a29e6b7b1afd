package actors

import (
	"context"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// writeIntent is how long a waiting writer's intent keeps new readers out of a read-write lock unless
// the writer refreshes it: a waiting writer tries again at least every half of it, and a writer that
// died stops holding readers back within it.
const writeIntent = 2 * time.Second

// rwStrategy is the read-write lock (Redisson's RReadWriteLock); the hold key's kind picks the side.
type rwStrategy struct {
	exclusive
	name string
	// names are the lock's keys and channel, built once, and its readers' keys, built once per reader.
	names  *redisops.RWNames
	ops    *redisops.Ops
	intent time.Duration
}

func newRWStrategy(name string, ops *redisops.Ops) strategy {
	return rwStrategy{name: name, names: redisops.RWNamesOf(name), ops: ops, intent: writeIntent}
}

func (rwStrategy) lockKind() messages.LockKind { return messages.LockReadWrite }

// acquire of the write side by a waiter (enqueue) leaves a write intent while readers hold the lock, and
// asks to be tried again before the intent runs out.
func (p rwStrategy) acquire(ctx context.Context, m *Acquire, held int64, enqueue bool) (redisops.Acquired, error) {
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
	return p.ops.ReadAcquireNamed(ctx, p.names, m.Owner, m.Lease, held)
}

func (p rwStrategy) release(ctx context.Context, k holdKey, requestID string, lease time.Duration, _ *redisops.Handoff) (redisops.Released, error) {
	if k.kind == KindWrite {
		return p.ops.WriteRelease(ctx, p.name, k.owner, requestID, lease)
	}
	return p.ops.ReadReleaseNamed(ctx, p.names, k.owner, requestID, redisops.UnknownHoldCount)
}

func (p rwStrategy) releaseHeld(ctx context.Context, k holdKey, requestID string, lease time.Duration, held, _ int64, next *redisops.Handoff) (redisops.Released, error) {
	if k.kind == KindWrite {
		return p.release(ctx, k, requestID, lease, next)
	}
	return p.ops.ReadReleaseNamed(ctx, p.names, k.owner, requestID, held)
}

func (p rwStrategy) renew(ctx context.Context, k holdKey, lease time.Duration) error {
	if k.kind == KindWrite {
		return p.ops.WriteRenew(ctx, p.name, k.owner, lease)
	}
	return p.ops.ReadRenew(ctx, p.name, k.owner, lease)
}

func (p rwStrategy) renewMany(ctx context.Context, ks []holdKey, lease time.Duration) []error {
	rs := make([]redisops.Renewal, len(ks))
	for i, k := range ks {
		rs[i] = redisops.Renewal{Owner: k.owner, Kind: p.renewKind(k.kind), Lease: lease}
	}
	return p.ops.RenewMany(ctx, p.name, rs)
}

func (rwStrategy) renewKind(k Kind) redisops.RenewKind {
	if k == KindWrite {
		return redisops.RenewWrite
	}
	return redisops.RenewRead
}

func (p rwStrategy) forceUnlock(ctx context.Context, kind Kind) (bool, error) {
	if kind == KindWrite {
		return p.ops.ForceUnlockWrite(ctx, p.name)
	}
	return p.ops.ForceUnlockRead(ctx, p.name)
}

func (p rwStrategy) holdCount(ctx context.Context, k holdKey) (int64, error) {
	st, err := p.ops.RWStatus(ctx, p.name, k.owner)
	if k.kind == KindWrite {
		return st.WriteHolds, err
	}
	return st.ReadHolds, err
}

// leave withdraws the write intent of a writer that gave up waiting; readers leave nothing behind.
func (p rwStrategy) leave(ctx context.Context, m *Acquire, _ bool) error {
	if m.Kind != KindWrite {
		return nil
	}
	_, err := p.ops.ClearWriteIntent(ctx, p.name, m.Owner)
	return err
}

func (p rwStrategy) channel(*Acquire) string { return p.names.Channel() }

// shares: readers share with readers.
func (rwStrategy) shares(m, held Kind) bool { return m != KindWrite && held != KindWrite }

// enteredThrough: a writer takes read holds as re-entries (a downgrade).
func (rwStrategy) enteredThrough(k Kind) (Kind, bool) { return KindWrite, k == KindRead }

// refusesUpgrade reports whether m asks for the write side while its owner holds only read holds:
// Redisson would wait forever for itself; we refuse.
func (rwStrategy) refusesUpgrade(a *lockActor, m *Acquire) bool {
	if m.Kind != KindWrite {
		return false
	}
	_, reads := a.holds[holdKey{m.Owner, KindRead}]
	_, writes := a.holds[holdKey{m.Owner, KindWrite}]
	return reads && !writes
}

func (rwStrategy) batches(k Kind) bool { return k == KindRead }

func (p rwStrategy) readNames() *redisops.RWNames { return p.names }

// reentryRaisesExpiry: a read re-entry raises the hash's expiry to its lease, a write re-entry adds its
// lease to what is left (rw_write_acquire.lua), and the releases only raise it too.
func (rwStrategy) reentryRaisesExpiry(Kind) bool { return true }

// releaseRaisesExpiry: a write release with holds left only raises the expiry (rw_write_release.lua).
func (rwStrategy) releaseRaisesExpiry(k Kind) bool { return k == KindWrite }

// freed lets the local waiters that were only kept out by the released hold (writers behind local
// readers) try now.
func (rwStrategy) freed(a *lockActor, _ *Release, _ redisops.Released) { a.tryHead() }

func (rwStrategy) forceUnlockKeepsHolds() bool { return true }

// headKeepsOut: a writer at the head keeps the readers behind it out, even those that could share the
// lock with its local readers; nothing else would wake them while those readers hold it.
func (rwStrategy) headKeepsOut() bool { return true }

func (rwStrategy) keepsInRedis(m *Acquire) bool { return m.Kind == KindWrite }

func (rwStrategy) leaveFailed(a *lockActor, gone *Acquire, err error) bool {
	a.log().Warn("withdrawing the write intent failed; it lapses by itself", "owner", gone.Owner, "err", err)
	return false
}

// notice: readers of other processes come and go while we hold: whether a local waiter may try is
// decided by the local holds (nextInLine), and lost holds by the watchdog.
func (rwStrategy) notice(a *lockActor, m *messages.Notice) {
	if isUnlockNotice(m.Payload) {
		a.tryHead()
	}
}

func (rwStrategy) tend(a *lockActor) { a.keepWriteIntent() }

// keepWriteIntent leaves the write intent of the first writer that waits while readers of this
// coordinator hold the lock, and refreshes it every half of its expiry while that lasts. Such a writer
// does not ask Redis for the lock (the local read holds keep it out), so no refused attempt leaves its
// intent, and without it readers of other processes would keep coming in. A writer that may try Redis
// leaves its intent with its attempts.
func (a *lockActor) keepWriteIntent() {
	var w *Acquire
	for _, m := range a.queue {
		if m.Kind == KindWrite && !m.Ticket.Abandoned() {
			w = m
			break
		}
	}
	if w == nil || len(a.holds) == 0 || a.compatible(w) || a.isReentry(w) {
		a.intentOwner = ""
		a.intent.stop()
		return
	}
	if a.intentOwner == w.Owner && time.Since(a.intentSent) < writeIntent/2 && a.intent.armed() {
		return
	}
	a.intentOwner, a.intentSent = w.Owner, time.Now()
	ctx, cancel := a.inlineContext()
	_, err := a.env.Ops.SetWriteIntent(ctx, a.name, w.Owner, writeIntent)
	cancel()
	if err != nil {
		a.log().Warn("leaving the write intent failed; retrying", "owner", w.Owner, "err", err)
		a.intent.setAt(time.Now().Add(a.nextBackOff()))
		return
	}
	a.intent.setAt(time.Now().Add(writeIntent / 2))
}
