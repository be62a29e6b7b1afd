package messages

import (
	"math"
	"time"
)

// Kind is the kind of lock: of a message of the actor message API, of a lock actor's commands, and of
// the lock in events ([Kind.LockKind]). It is the one enum of lock kinds. The zero value is [KindPlain].
type Kind uint8

const (
	// KindPlain is the reentrant lock (Redisson's RLock).
	KindPlain Kind = iota
	// KindFair is the fair lock (Redisson's RFairLock): waiters get it in arrival order.
	KindFair
	// KindRead is the read side of a read-write lock (Redisson's RReadWriteLock).
	KindRead
	// KindWrite is the write side of a read-write lock.
	KindWrite
	// KindSemaphore is the semaphore (Redisson's RSemaphore).
	KindSemaphore
	// KindPermitSemaphore is the semaphore of permits with ids and expiry (Redisson's
	// RPermitExpirableSemaphore).
	KindPermitSemaphore
	// KindLatch is the count-down latch (Redisson's RCountDownLatch).
	KindLatch
)

// String returns the kind's name: "plain", "fair", "read", "write", "semaphore", "permit-semaphore",
// "latch", or "unknown".
func (k Kind) String() string {
	switch k {
	case KindPlain:
		return "plain"
	case KindFair:
		return "fair"
	case KindRead:
		return "read"
	case KindWrite:
		return "write"
	case KindSemaphore:
		return "semaphore"
	case KindPermitSemaphore:
		return "permit-semaphore"
	case KindLatch:
		return "latch"
	default:
		return "unknown"
	}
}

// LockKind names the kind in events and telemetry: [LockPlain], [LockFair], [LockRead] or [LockWrite];
// an unknown kind is named [LockPlain].
func (k Kind) LockKind() LockKind {
	switch k {
	case KindFair:
		return LockFair
	case KindRead:
		return LockRead
	case KindWrite:
		return LockWrite
	case KindSemaphore:
		return LockSemaphore
	case KindPermitSemaphore:
		return LockPermitSemaphore
	case KindLatch:
		return LockLatch
	default:
		return LockPlain
	}
}

// WaitForever is the [Acquire.Wait] that waits until the lock is obtained, like a Lock call with no
// deadline. The wait still ends when the owner actor stops or the coordinator closes.
const WaitForever time.Duration = math.MaxInt64

// ReleaseCauseOwnerStopped is the cause given when the coordinator releases a hold because the actor
// that owned it stopped (death watch): in the log record of the release, and in the Released event of
// the lock event stream.
const ReleaseCauseOwnerStopped = "owner stopped"

// Acquire asks the coordinator's gateway for one hold of the lock Name. Send it with Request or
// RequestFuture to the PID that the coordinator's PID method returns. The reply is [*Acquired],
// [*NotObtained] or [*Error].
type Acquire struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of lock; the zero value is KindPlain. When the owner holds Name as another kind
	// of lock, or has an Acquire of another kind of Name waiting or under way (a fair and a plain
	// Acquire sent together: one is served, the other refused), the reply is an [*Error] matching
	// coordinator.ErrKindMismatch.
	Kind Kind
	// Wait is how long to wait for the lock: 0 makes one attempt, a positive duration waits up to
	// that long, and WaitForever waits until the lock is obtained. A negative Wait, or one above
	// coordinator.MaxDuration (a year) other than WaitForever, is an error.
	Wait time.Duration
	// Lease is the lease of the hold: 0 takes a watchdog hold, renewed for as long as it is held; a
	// positive lease expires unless released first. A negative Lease, or one above
	// coordinator.MaxDuration (a year), is an error.
	Lease time.Duration
	// Owner is the owner id of the hold. When empty, the sender actor is the owner, and its holds are
	// released when it stops. An explicit Owner is not tied to the sender: any actor may use it in
	// later messages, and its holds last until released (or their lease runs out).
	Owner string
}

// Release drops one hold of the lock Name. The reply is [*Released], [*NotHeld] or [*Error].
type Release struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of lock the hold is of. When the owner holds Name as another kind (it acquired
	// KindFair, say, and releases KindPlain), the reply is an [*Error] matching
	// coordinator.ErrKindMismatch and nothing is released.
	Kind Kind
	// Owner is the owner id; when empty, the sender actor is the owner, as for Acquire.
	Owner string
}

// ForceUnlock frees the lock Name whoever holds it. The reply is [*ForceUnlocked] or [*Error].
type ForceUnlock struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of lock; a side of a read-write lock is freed only when the lock is in its mode.
	// A plain or fair ForceUnlock of a read-write lock, or a read-write one of a plain or fair lock,
	// gets an [*Error] matching coordinator.ErrKindMismatch and frees nothing.
	Kind Kind
}

// Status asks about the lock Name, as seen in Redis now. The reply is [*StatusReply] or [*Error].
type Status struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of lock.
	Kind Kind
	// Owner is the owner whose hold count is reported; when empty, the sender actor, as for Acquire.
	Owner string
}

// Acquired is the reply to an [Acquire] that obtained the lock.
type Acquired struct {
	// Name is the lock name, as in the Acquire.
	Name string
	// Kind is the kind of lock, as in the Acquire.
	Kind Kind
	// Owner is the owner id of the hold: the Acquire's Owner, or, when that was empty, the id the
	// coordinator gave the sender actor (use it to name the hold from another actor).
	Owner string
	// Token is the fencing token of this acquisition (0 for a read hold, which gets none).
	Token int64
	// Lease is the lease of the hold; for a watchdog hold, the watchdog timeout it is renewed for.
	Lease time.Duration
	// Watchdog reports whether the hold is renewed by the watchdog.
	Watchdog bool
	// HoldCount is the owner's hold count after this acquisition: 1, or more for a re-entry.
	HoldCount int64
}

// NotObtained is the reply to an [Acquire] that did not obtain the lock.
type NotObtained struct {
	// Name is the lock name, as in the Acquire.
	Name string
	// Kind is the kind of lock, as in the Acquire.
	Kind Kind
	// Owner is the owner id the Acquire was made for: its Owner, or the sender actor's id when that
	// was empty (as in [Acquired.Owner]).
	Owner string
	// Reason is ReasonNotObtained when another owner held the lock for the whole wait, and
	// ReasonUpgrade when the owner holds read holds of a read-write lock and asked for its write side.
	Reason Reason
}

// Released is the reply to a [Release] that dropped a hold.
type Released struct {
	// Name is the lock name, as in the Release.
	Name string
	// Kind is the kind of lock, as in the Release.
	Kind Kind
	// Owner is the owner id whose hold was dropped: the Release's Owner, or the sender actor's id when
	// that was empty (as in [Acquired.Owner]).
	Owner string
	// HoldCount is the owner's remaining hold count; the lock is free of the owner when it is 0.
	HoldCount int64
}

// NotHeld is the reply to a [Release] when the owner does not hold the lock: it never took it,
// already released it, or its hold was lost.
type NotHeld struct {
	// Name is the lock name, as in the Release.
	Name string
	// Kind is the kind of lock, as in the Release.
	Kind Kind
	// Owner is the owner id that holds nothing: the Release's Owner, or the sender actor's id when
	// that was empty (as in [Acquired.Owner]).
	Owner string
}

// ForceUnlocked is the reply to a [ForceUnlock].
type ForceUnlocked struct {
	// Name is the lock name, as in the ForceUnlock.
	Name string
	// Kind is the kind of lock, as in the ForceUnlock.
	Kind Kind
	// Deleted reports whether the lock was held.
	Deleted bool
}

// StatusReply is the reply to a [Status].
type StatusReply struct {
	// Name is the lock name, as in the Status.
	Name string
	// Kind is the kind of lock, as in the Status.
	Kind Kind
	// Owner is the owner id the hold count is of: the Status's Owner, or the sender actor's id when
	// that was empty (as in [Acquired.Owner]).
	Owner string
	// Locked reports whether any owner holds the lock (for a side of a read-write lock: whether the
	// lock is in that side's mode).
	Locked bool
	// Held reports whether Owner holds the lock.
	Held bool
	// HoldCount is how many times Owner holds the lock.
	HoldCount int64
	// TTL is the lock's remaining lease, 0 when it is free.
	TTL time.Duration
}

// Error is the reply to a message that could not be carried out: invalid input, a Kind other than the
// kind of the owner's holds of the name, a Redis error, or a closed coordinator. Err matches one of the coordinator's sentinel errors with errors.Is (for
// example coordinator.ErrEmptyName), or wraps the Redis error.
type Error struct {
	// Name is the lock name of the request; empty when the request could not be read as a message of
	// the API (an unknown message type, or a failure of the gateway while handling it).
	Name string
	// Kind is the kind of lock of the request; KindPlain (the zero value) when Name is empty.
	Kind Kind
	// Request is the message this replies to.
	Request any
	// Err is the cause, never nil in a reply of the coordinator: a sentinel error of package
	// coordinator (match it with errors.Is), or an error that wraps the Redis error.
	Err error
}

// Error returns the text of Err, so that the reply itself can be used as an error.
func (e *Error) Error() string {
	if e.Err == nil {
		return "lockwarden: error"
	}
	return e.Err.Error()
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }
