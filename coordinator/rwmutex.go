package coordinator

import (
	"context"
	"time"

	"github.com/lockwarden/lockwarden/actors"
)

// RWMutex is a handle on a distributed read-write lock in Redisson's layout (RReadWriteLock). Many
// owners may hold the read side at once; the write side excludes everyone else. The handle is one
// owner for both sides, like a thread in Java, and both sides are reentrant.
//
// The owner that holds the write side may also take read holds (a downgrade): after its last write
// Unlock, its read holds keep the lock in read mode. An owner that holds only read holds may not take
// the write side: Lock returns [ErrUpgrade] at once instead of waiting for itself forever.
//
// Each read hold has its own lease in Redis (a rwlock_timeout key), and the lock's expiry follows the
// longest remaining one, so a short reader never waits behind a long one's lease. The watchdog renews
// read and write holds taken without a lease. A write unlock wakes every local waiter of the name; a read
// unlock wakes the next. Write holds get fencing tokens; read holds get none.
//
// A writer that waits for readers to leave keeps new readers out, in its own coordinator and, through a
// write intent key in Redis, in every lockwarden process, so readers cannot starve it. Re-entries and
// the writer's own read holds are let in. Redisson readers do not know the intent key.
//
// The methods follow [sync.RWMutex]: RLock, RUnlock, TryRLock for the read side; Lock, Unlock,
// TryLock for the write side. [RWMutex.Read] and [RWMutex.Write] return each side as a [Mutex] for the
// rest: ForceUnlock, IsLocked, IsHeld, HoldCount, TTL, Token and Done.
type RWMutex struct {
	read, write *Mutex
}

// RWMutex returns a handle on the read-write lock name. It does no I/O, and returns no error: an empty
// name or the first invalid option is the handle's construction error, which [RWMutex.Err] reports at
// once and every call on either side returns, as for [Coordinator.Mutex]. [WithOwner] and [WithLease]
// apply to both sides.
//
// A read-write lock and a plain or fair lock on the same name share the lock hash, as in Redisson; do
// not mix them. As in Redisson, a read or write hold keeps a plain or fair lock out, but a plain or fair
// hold keeps neither side out: the read-write scripts look only at the hash's mode field.
func (c *Coordinator) RWMutex(name string, opts ...MutexOption) *RWMutex {
	read := c.newMutex(actors.KindRead, name, opts)
	return &RWMutex{read: read, write: c.handle(actors.KindWrite, name, read.mutexOptions, read.err)}
}

// Read returns the read side. Its IsLocked reports whether the lock is in read mode, and its
// ForceUnlock frees the lock only when it is in read mode.
func (rw *RWMutex) Read() *Mutex { return rw.read }

// Write returns the write side. Its IsLocked reports whether the lock is in write mode, and its
// ForceUnlock frees the lock only when it is in write mode.
func (rw *RWMutex) Write() *Mutex { return rw.write }

// Name returns the lock name.
func (rw *RWMutex) Name() string { return rw.read.name }

// Owner returns the owner id of the handle, shared by both sides.
func (rw *RWMutex) Owner() string { return rw.read.owner }

// Err returns the handle's construction error, shared by both sides: [ErrEmptyName] for an empty
// name, or the error of the first invalid option ([ErrEmptyOwner], [ErrInvalidLease]). Every call on
// either side returns this same error, without I/O. It returns nil for a valid handle.
func (rw *RWMutex) Err() error { return rw.read.err }

// RLock takes a read hold, waiting while another owner holds the write side, like [Mutex.Lock].
func (rw *RWMutex) RLock(ctx context.Context) error { return rw.read.Lock(ctx) }

// TryRLock tries to take a read hold, like [Mutex.TryLock].
func (rw *RWMutex) TryRLock(ctx context.Context, opts ...TryOption) (bool, error) {
	return rw.read.TryLock(ctx, opts...)
}

// RUnlock drops one read hold, like [Mutex.Unlock].
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.read.Unlock(ctx) }

// Lock takes a write hold, waiting while any other owner holds either side, like [Mutex.Lock]. It
// returns [ErrUpgrade] when the handle holds read holds but no write hold.
func (rw *RWMutex) Lock(ctx context.Context) error { return rw.write.Lock(ctx) }

// TryLock tries to take a write hold, like [Mutex.TryLock]. It returns [ErrUpgrade] when the handle
// holds read holds but no write hold.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...TryOption) (bool, error) {
	return rw.write.TryLock(ctx, opts...)
}

// Unlock drops one write hold, like [Mutex.Unlock].
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.write.Unlock(ctx) }

// Extend sets the remaining lease of the handle's write hold, a hold with a fixed lease, to lease
// from now, as [Mutex.Extend] does on the write side ([RWMutex.Write]).
func (rw *RWMutex) Extend(ctx context.Context, lease time.Duration) error {
	return rw.write.Extend(ctx, lease)
}

// RExtend sets the remaining lease of the handle's read holds, taken with a fixed lease, to lease
// from now, as [Mutex.Extend] does on the read side ([RWMutex.Read]). Every read hold has its own
// expiry in Redis: when one of them has already run out (an inner hold taken with a shorter lease),
// RExtend returns [ErrNotHeld] and the read holds end (Done closes), although the outer holds' field
// stays in Redis until its own expiry.
func (rw *RWMutex) RExtend(ctx context.Context, lease time.Duration) error {
	return rw.read.Extend(ctx, lease)
}
