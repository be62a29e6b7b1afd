package coordinator

import (
	"errors"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/redisops"
)

// Sentinel errors. Check them with [errors.Is]; the errors lockwarden returns may wrap them or join
// them with a context's error.
var (
	// ErrNotObtained is returned by Lock when its context ends before the lock is held, joined with
	// the context's error so that errors.Is(err, context.DeadlineExceeded) also works.
	ErrNotObtained = errors.New("lockwarden: lock not obtained")
	// ErrNotHeld is returned when the owner does not hold the lock: it never took it, already released
	// it, or its lease ran out.
	ErrNotHeld = redisops.ErrNotHeld
	// ErrClosed is returned by every call on a closed Coordinator or on a handle of one.
	ErrClosed = errors.New("lockwarden: coordinator closed")
	// ErrNilClient is returned by New when the Redis client is nil.
	ErrNilClient = errors.New("lockwarden: nil redis client")
	// ErrUnsupportedClient is returned by New for a *redis.Ring, or for a client of a type other than
	// *redis.Client (a single server, or Sentinel's failover client) and *redis.ClusterClient. A Ring
	// moves the keys of a server that fails its health checks to the other servers, so a lock held
	// there could be taken a second time by another owner; use a client per server with RedLock or
	// MultiLock across them, or a Redis Cluster.
	ErrUnsupportedClient = redisops.ErrUnsupportedClient
	// ErrEmptyName is the construction error of a handle created with an empty lock name: its Err
	// reports it and every call on it returns it.
	ErrEmptyName = errors.New("lockwarden: empty lock name")
	// ErrEmptyOwner is the error of WithOwner(""): the construction error of a handle created with
	// it, which its Err reports and every call on it returns.
	ErrEmptyOwner = errors.New("lockwarden: empty owner id")
	// ErrInvalidLease is returned when a lease is below [MinLease] or above [MaxDuration]: the error of
	// [WithLease] (a handle's construction error) or [Lease] (returned by TryLock).
	ErrInvalidLease = errors.New("lockwarden: lease must be between 10ms and a year")
	// ErrInvalidWait is returned when a wait is zero, negative or above [MaxDuration]: the error of
	// [Wait] (returned by TryLock).
	ErrInvalidWait = errors.New("lockwarden: wait must be positive and at most a year")

	// ErrInvalidPermits is returned for a number of permits that is not positive (or a delta of 0).
	ErrInvalidPermits = errors.New("lockwarden: permits must be positive")

	// ErrInvalidCount is returned for a count-down latch count that is not positive.
	ErrInvalidCount = errors.New("lockwarden: count must be positive")

	// ErrInvalidPermitID is returned for a permit id that is not 32 hexadecimal characters.
	ErrInvalidPermitID = errors.New("lockwarden: invalid permit id")
	// ErrListTruncated is returned by [Coordinator.List], with the names found, when more names match
	// than [DefaultListLimit]: narrow the pattern.
	ErrListTruncated = errors.New("lockwarden: more names match than listed")
	// ErrUpgrade is returned when the owner of read holds of a read-write lock asks for its write lock.
	// Redisson would wait forever for the owner's own read holds; lockwarden refuses at once. Release
	// the read holds first. (The other way, a writer taking read holds, is allowed: a downgrade.)
	ErrUpgrade = redisops.ErrUpgrade
	// ErrInvalidOption is returned by New when an option has an invalid value (a duration above
	// [MaxDuration] included). It is also the construction error of a Group made with an invalid
	// [GroupOption], which [Group.Err] reports and every call on the group returns.
	ErrInvalidOption = errors.New("lockwarden: invalid option")
	// ErrNotSynced is returned by Lock, TryLock, RLock and TryRLock when Redis gave the lock but fewer
	// replicas than required acknowledged it within the sync timeout ([WithReplicaSync]). The hold was
	// given back before the call returned, so a failover cannot hand the lock to a second owner behind
	// the caller's back; the caller does not hold the lock and may try again. A waiting Lock fails with
	// it too, rather than retrying for as long as the replicas lag. [Mutex.Extend] returns it when the
	// master took the new lease but too few replicas acknowledged it: there the hold is kept, with the
	// deadline it had (or the new lease's, if shorter).
	ErrNotSynced = redisops.ErrNotSynced
	// ErrWrongType is returned when a key of the lock holds another type of data than the lock keeps
	// there: the lock's name is another lock's internal key (such as "redisson_lock_token:{X}", the
	// token counter of lock X) or data of the application. The call changed nothing in Redis; Lock and
	// TryLock fail at once instead of waiting. Pick another name.
	ErrWrongType = redisops.ErrWrongType
	// ErrKindMismatch is returned by a call of one kind of lock (plain, fair, or a side of a
	// read-write lock) when its owner holds the lock's name as another kind, or has a call of another
	// kind on it waiting or under way: the same owner id, given with [WithOwner] or an actor's, used
	// for a fair and a plain lock, say. Releasing or taking one kind's hold through another would count
	// or delete the other kind's data in Redis (they share the hash at the name), so the call changes
	// nothing. Of two acquisitions of different kinds sent together, one goes on and the other gets
	// this error. The coordinator refuses it for the holds and calls it drives; Redis refuses it for the holds of other processes where the data tells the kinds apart
	// (a read-write lock from a plain or fair one; a plain and a fair hold look alike in Redis). It is
	// also the error of an [messages.Error] reply to a Release, or an Acquire, of the wrong Kind. A
	// ForceUnlock returns it too when the name is held as a lock of the other family (a plain or fair
	// ForceUnlock of a read-write lock, or the other way round), which it leaves alone.
	ErrKindMismatch = redisops.ErrKindMismatch
	// ErrInvalidKind is the error of an [messages.Error] reply to a message whose Kind is not one of
	// the kinds the messages package defines.
	ErrInvalidKind = errors.New("lockwarden: unknown lock kind")
	// ErrNoOwner is the error of an [messages.Error] reply to a message that gives no Owner and was not
	// sent by an actor with Request (a future's sender, as from RequestFuture, cannot be death-watched):
	// set Owner, or send with Request from an actor.
	ErrNoOwner = errors.New("lockwarden: no owner: set Owner or send with Request from an actor")
	// ErrInvalidMessage is the error of an [messages.Error] reply to a message that the coordinator's
	// gateway does not know, or a nil message.
	ErrInvalidMessage = errors.New("lockwarden: invalid message")
	// ErrGrantTooLate is joined with [ErrNotObtained] by TryLock without [Wait] when Redis granted the
	// lock but its answer came back after the lease had run out, less the drift allowance (a paused
	// server, a slow network): the hold may already be gone, so it was given back. A waiting Lock or
	// TryLock does not return it: it waits on.
	ErrGrantTooLate = actors.ErrGrantTooLate
	// ErrNoAnswer is joined with [ErrNotObtained] when a wait ends (TryLock's [Wait], or Lock's ctx)
	// while an attempt has gone unanswered by Redis for 200 ms or more: a paused, partitioned or
	// restarting server, not another owner's hold.
	ErrNoAnswer = actors.ErrNoAnswer
	// ErrInvalidGroup is the construction error of a MultiLock or RedLock created with no members, a
	// nil member, or the same member twice: [Group.Err] reports it and every call on the group returns
	// it.
	ErrInvalidGroup = errors.New("lockwarden: invalid lock group")
	// ErrActorFailed is returned by a call whose command one of the coordinator's actors was handling
	// when it panicked. The panic is recovered, logged through [WithLogger] and published as a
	// [messages.EventActorFailed] event, and the actor goes on with its state: the locks it holds are
	// still renewed. The command may or may not have taken effect, as when a Redis reply is lost: an
	// acquisition that was granted after all is given back. The other calls that the actor had in
	// hand (a batch of read calls being settled) are answered as usual.
	ErrActorFailed = actors.ErrActorFailed

	// ErrLockLost says that a hold ended while [Mutex.Do] (or [RWMutex.Do], [RWMutex.RDo], [Group.Do])
	// ran its function: its Done channel closed because a renewal found the hold gone, its lease ran
	// out, it was force-unlocked, or the coordinator closed. It is the cause (context.Cause) of the
	// context the function was given, which is cancelled at that moment, and the error Do returns
	// then matches it too, joined with the function's error.
	ErrLockLost = errors.New("lockwarden: lock lost while held")
	// ErrNilFunc is returned by [Mutex.Do] (and [RWMutex.Do], [RWMutex.RDo], [Group.Do]) for a nil
	// function: nothing is locked, nothing is run.
	ErrNilFunc = errors.New("lockwarden: nil function")

	// ErrWatchdogHold is returned by [Mutex.Extend] for a hold that the watchdog renews (taken without
	// a fixed lease): the watchdog keeps it for as long as it is held, and Extend changes nothing.
	// Take the lock with [WithLease] or [Lease] to set its lease yourself.
	ErrWatchdogHold = actors.ErrWatchdogHold

	// ErrResendTooLate is the error of a semaphore's or latch's operation that failed on a connection
	// error and was sent again, when the resend reached the name's actor too late to be sent to
	// Redis under its request id (its retry latch may be gone): whether the first run took effect is
	// not known.
	ErrResendTooLate = actors.ErrResendTooLate
)

// UnlockError is the error of an Unlock whose release failed on a Redis error; see [Mutex.Unlock]. Its
// Expires says when the hold, no longer renewed, runs out at the latest. errors.As finds it; it
// unwraps to the Redis error.
type UnlockError = actors.UnlockError
