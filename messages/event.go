package messages

import (
	"strconv"
	"time"
)

// EventType is what happened to a lock.
type EventType uint8

// The events in a lock's life.
const (
	// EventAcquired: an owner took a new hold of the lock.
	EventAcquired EventType = iota + 1
	// EventReentered: an owner that held the lock took one more hold (re-entry, or a writer's read hold).
	EventReentered
	// EventReleased: an owner released a hold (HoldCount is what is left): by Unlock, by Close, or
	// because the owner actor stopped (see Reason).
	EventReleased
	// EventRenewed: the watchdog extended a hold's lease, or the holder set the lease of a hold with a
	// fixed lease (Mutex.Extend; Reason is [RenewExtended]).
	EventRenewed
	// EventRenewalFailed: a renewal did not count (no answer, an answer too late, or replicas that did
	// not acknowledge it); the watchdog tries again after a tenth of its timeout (Reason is the error).
	EventRenewalFailed
	// EventLost: a hold ended without a release: its lease ran out, a renewal found it gone, it was
	// force-unlocked or taken by another owner (see Reason).
	EventLost
	// EventWaitStarted: an owner started to wait for the lock.
	EventWaitStarted
	// EventWaitTimedOut: a waiter gave up (its context ended, or its TryLock wait ran out).
	EventWaitTimedOut
	// EventForceUnlocked: the lock was force-unlocked through this coordinator.
	EventForceUnlocked
	// EventHandedOff: a release gave the lock straight to a waiter in the same call (Owner is the new
	// holder, From the one that released): a local waiter, or, on a fair lock, the waiter at the head
	// of the queue in any process, which is told on its channel. The coordinator of the release
	// publishes it; the new holder's coordinator publishes its EventAcquired.
	EventHandedOff
	// EventActorFailed: one of the coordinator's actors (a lock actor, the pub/sub bridge, the guardian,
	// the gateway, a group supervisor or member) panicked while it handled a message. The panic was
	// recovered and logged, and the actor goes on with its state: the caller of the command it was
	// handling got an error, and the holds it keeps are still renewed. Name is the lock's name when the
	// actor serves one lock, Reason says which actor and what the panic was.
	EventActorFailed
)

// String returns the event type's name, as in the event journal.
func (t EventType) String() string {
	switch t {
	case EventAcquired:
		return "acquired"
	case EventReentered:
		return "reentered"
	case EventReleased:
		return "released"
	case EventRenewed:
		return "renewed"
	case EventRenewalFailed:
		return "renewal-failed"
	case EventLost:
		return "lost"
	case EventWaitStarted:
		return "wait-started"
	case EventWaitTimedOut:
		return "wait-timed-out"
	case EventForceUnlocked:
		return "force-unlocked"
	case EventHandedOff:
		return "handed-off"
	case EventActorFailed:
		return "actor-failed"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// ParseEventType returns the event type named s (as String writes it), and false if there is none.
func ParseEventType(s string) (EventType, bool) {
	for t := EventAcquired; t <= EventActorFailed; t++ {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

// LockKind names the kind of a lock in events: "plain", "fair", "read" or "write" (the two sides of a
// read-write lock).
type LockKind string

// The kinds of lock.
const (
	LockPlain LockKind = "plain"
	LockFair  LockKind = "fair"
	LockRead  LockKind = "read"
	LockWrite LockKind = "write"
	// LockReadWrite names a read-write lock as a whole (both sides), in telemetry.
	LockReadWrite LockKind = "read-write"
	// LockMultiLock and LockRedLock name groups, in telemetry.
	LockMultiLock LockKind = "multilock"
	LockRedLock   LockKind = "redlock"
	// LockSemaphore, LockPermitSemaphore and LockLatch name a semaphore, a permit semaphore and a
	// count-down latch. In their events a hold is one taking of permits: HoldCount is how many
	// permits it took (a permit semaphore's events have one per permit, Owner its permit id).
	LockSemaphore       LockKind = "semaphore"
	LockPermitSemaphore LockKind = "permit-semaphore"
	LockLatch           LockKind = "latch"
)

// Event is one change in a lock's life, as seen by the coordinator where it happened. Fields that do
// not apply to the event's type are zero.
type Event struct {
	// Type is what happened; never zero in an event of the coordinator.
	Type EventType
	// Name is the lock's name (for EventActorFailed, empty when the actor that failed serves no one
	// lock).
	Name string
	// Kind is the kind of the lock, one of LockPlain, LockFair, LockRead, LockWrite, LockSemaphore,
	// LockPermitSemaphore and LockLatch; empty for EventActorFailed.
	Kind LockKind
	// Owner is the owner id of the hold or waiter (empty for EventForceUnlocked).
	Owner string
	// From is the owner that released, for EventHandedOff.
	From string
	// Token is the fencing token of the hold (acquired, reentered, handed-off; and of the hold that
	// ended, for released and lost).
	Token int64
	// HoldCount is the owner's hold count after the event.
	HoldCount int64
	// Queued reports, for acquired, that the owner had waited in the queue (an EventWaitStarted came
	// before).
	Queued bool
	// Time is when it happened.
	Time time.Time
	// Wait is how long the owner waited: from the call to the acquisition, or to giving up.
	Wait time.Duration
	// Held is how long the hold lasted, for released and lost.
	Held time.Duration
	// Reason says why, for released, lost and renewal-failed, and what renewed, for a renewal that the
	// holder asked for ([RenewExtended]).
	Reason string
	// Coordinator is the id of the coordinator where it happened.
	Coordinator string
}

// RenewExtended is the Reason of the EventRenewed of a hold whose holder set its fixed lease anew
// (Mutex.Extend); the watchdog's renewals have no Reason.
const RenewExtended = "extended"

// Reasons of EventReleased.
const (
	// ReleaseUnlocked: the owner's Unlock (or Release message).
	ReleaseUnlocked = "unlocked"
	// ReleaseClosed: the coordinator closed while the owner held the lock.
	ReleaseClosed = "coordinator closed"
	// ReleaseCallerLeft: the lock was obtained for a caller that had already given up, and given back.
	ReleaseCallerLeft = "caller left before it got the lock"
	// The owner actor of an actor-model application stopped while it held the lock:
	// [ReleaseCauseOwnerStopped].
)

// EventJSON is an [Event] as lockwarden's JSON outputs carry it (the debug page, the lockwarden
// command): its type in words, snake_case names, durations in nanoseconds.
type EventJSON struct {
	// Type is the event type in words ([EventType.String]): "acquired", "released", ...
	Type string `json:"type"`
	// Name is the lock name.
	Name string `json:"name"`
	// Kind is the kind of lock: "plain", "fair", "read", "write", "semaphore", ... ([LockKind]).
	Kind string `json:"kind"`
	// Owner is the owner id of the hold or waiter (none for a force unlock).
	Owner string `json:"owner,omitempty"`
	// From is the owner that released, for handed-off.
	From string `json:"from,omitempty"`
	// Token is the fencing token of the hold.
	Token int64 `json:"token,omitempty"`
	// HoldCount is the owner's hold count after the event.
	HoldCount int64 `json:"hold_count"`
	// Queued is set, for acquired, when the owner had waited in the queue.
	Queued bool `json:"queued,omitempty"`
	// Time is when it happened.
	Time time.Time `json:"time"`
	// Wait is how long the owner waited, in nanoseconds in JSON.
	Wait time.Duration `json:"wait_ns,omitempty"`
	// Held is how long the hold lasted, for released and lost, in nanoseconds in JSON.
	Held time.Duration `json:"held_ns,omitempty"`
	// Reason says why, for released, lost and renewal-failed.
	Reason string `json:"reason,omitempty"`
	// Coordinator is the id of the coordinator where it happened.
	Coordinator string `json:"coordinator,omitempty"`
}

// JSON returns the event as [EventJSON] writes it.
func (e Event) JSON() EventJSON {
	return EventJSON{Type: e.Type.String(), Name: e.Name, Kind: string(e.Kind), Owner: e.Owner, From: e.From,
		Token: e.Token, HoldCount: e.HoldCount, Queued: e.Queued, Time: e.Time, Wait: e.Wait, Held: e.Held,
		Reason: e.Reason, Coordinator: e.Coordinator}
}
