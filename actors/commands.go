package actors

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"

	"github.com/asynkron/protoactor-go/actor"
)

// Kind is the kind of lock a command is about: the one enum of lock kinds, messages.Kind. The family
// of a kind (the lock actor that serves it) comes from the families table (see family.go).
type Kind = messages.Kind

// The kinds of lock: the values of messages.Kind under this package's names.
const (
	KindPlain = messages.KindPlain // the reentrant lock (Redisson's RLock); the zero Kind
	KindFair  = messages.KindFair  // the fair lock (Redisson's RFairLock)
	KindRead  = messages.KindRead  // the read side of a read-write lock
	KindWrite = messages.KindWrite // the write side of a read-write lock

	KindSemaphore       = messages.KindSemaphore       // the semaphore (Redisson's RSemaphore)
	KindPermitSemaphore = messages.KindPermitSemaphore // the permit semaphore (RPermitExpirableSemaphore)
	KindLatch           = messages.KindLatch           // the count-down latch (RCountDownLatch)
)

// Routed is a command for the actor of one lock name and kind; the guardian routes it by both.
type Routed interface {
	// LockName returns the lock name the command is about; never empty in a command the guardian
	// routes.
	LockName() string
	// LockKind returns the kind of lock the command is about, which picks the actor's family.
	LockKind() Kind
	// routeKey is the guardian's key of the actor for the command (see RouteKey).
	routeKey() string
}

// Acquire asks for one hold of the lock Name for Owner.
type Acquire struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of lock: KindPlain, KindFair, KindRead or KindWrite.
	Kind Kind
	// Owner is the owner id of the hold; it must not be empty. Holds of one owner re-enter.
	Owner string
	// Lease is the lease in Redis. With Watchdog set it is the watchdog timeout and the hold is
	// renewed for as long as it lasts.
	Lease time.Duration
	// Watchdog makes the hold a watchdog hold: renewed every third of Lease until released or lost.
	// Without it the hold expires after Lease unless released first.
	Watchdog bool
	// Wait queues the command until the lock is obtained or the ticket is abandoned. Without it the
	// command makes one attempt.
	Wait bool
	// SharedOwner marks an owner id that other coordinators may use too, so the local hold count is
	// not authoritative.
	SharedOwner bool
	// WaitWindow is how long a fair-lock waiter keeps its place in the Redis queue without trying
	// again before other clients purge it as gone. Fair locks only.
	WaitWindow time.Duration
	// AcceptEarlyGrant says that the caller takes a grant that Redis has not confirmed yet (with
	// Outcome.Pending): a reentrant lock's actor may then grant the command from a local handoff as
	// soon as the holder releases, before Redis has answered the release that hands the lock over (see
	// lockActor.handsOffEarly). Without it the grant waits for that answer.
	AcceptEarlyGrant bool
	// Started is when the caller asked; events measure the wait from it (zero: from arrival).
	Started time.Time
	// Span is the caller's span (nil when none): the lock actor records its Redis calls for the
	// command as events on it.
	Span trace.Span
	// Ticket gets the command's one outcome; it must not be nil. Abandoning it makes the actor drop
	// the command, and give back a hold obtained for it.
	Ticket *Ticket
	// Route is RouteKey(Kind, Name), which a handle computes once for all its commands; empty means
	// that the guardian computes it.
	Route string

	// queued is set once the command waited in the actor's queue; attempts counts its Redis attempts;
	// resyncs counts the attempts retried because the master's replicas changed; lastSent is
	// when its latest attempt that Redis answered with a refusal was sent; waitID names a fair waiter's wait in its handoff registration
	// and in the grant notice.
	queued   bool
	attempts int
	resyncs  int
	lastSent time.Time
	waitID   string
	// watermark is the highest Acquired.Watermark of a fair waiter's refused attempts: a grant notice
	// whose token is not above it is older than an attempt that did not find the lock granted to it.
	watermark int64
	// reserved is set while the command holds its kind's reservation in Env.Held (see HeldKinds).
	reserved bool
}

// Release drops one hold of the lock Name by Owner.
type Release struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of lock the hold is of.
	Kind Kind
	// Owner is the owner id whose hold is dropped; an owner that holds nothing gets ReasonNotHeld.
	Owner string
	// Reason is why the hold is released, for the Released event; empty means messages.ReleaseUnlocked.
	Reason string
	// Span is the caller's span (nil when none), as for Acquire.
	Span trace.Span
	// Ticket gets the command's one outcome (HoldCount: the owner's holds left); it must not be nil.
	Ticket *Ticket
	// Route is RouteKey(Kind, Name), or empty (see Acquire.Route).
	Route string
}

// ForceUnlock frees the lock Name whoever holds it.
type ForceUnlock struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of lock; a side of a read-write lock is freed only when the lock is in its
	// mode.
	Kind Kind
	// Ticket gets the command's one outcome (Deleted: whether the lock was held); it must not be nil.
	Ticket *Ticket
}

// Extend sets the lease of Owner's hold of Kind on the lock Name, a hold with a fixed lease, to Lease
// from now (see lockActor.onExtend).
type Extend struct {
	// Name is the lock name; it must not be empty.
	Name string
	// Kind is the kind of the hold to extend.
	Kind Kind
	// Owner is the owner id of the hold.
	Owner string
	// Lease is the new lease, counted from when the actor sends it to Redis; the coordinator checks
	// that it is within its bounds.
	Lease time.Duration
	// Ticket gets the command's one outcome; it must not be nil.
	Ticket *Ticket
	// Route is RouteKey(Kind, Name), or empty (see Acquire.Route).
	Route string
}

// Abandon tells the actor that the caller of Ticket gave up, so a queued waiter can leave the queue
// (and, for a fair lock, its place in the Redis queue). Ack, when not nil, is delivered once the
// actor has done so.
type Abandon struct {
	// Name is the lock name of the abandoned command.
	Name string
	// Kind is the kind of lock of the abandoned command.
	Kind Kind
	// Ticket is the abandoned command's ticket, already abandoned by its caller.
	Ticket *Ticket
	// Ack, when not nil, gets an empty outcome once the waiter has left the queue; nil asks for none.
	Ack *Ticket
}

// RouteKey returns the key by which the guardian knows the actor of the lock name of kind k.
func RouteKey(k Kind, name string) string { return routeKey(familyOf(k), name) }

func (m *Acquire) routeKey() string {
	if m.Route != "" {
		return m.Route
	}
	return RouteKey(m.Kind, m.Name)
}

func (m *Release) routeKey() string {
	if m.Route != "" {
		return m.Route
	}
	return RouteKey(m.Kind, m.Name)
}

func (m *ForceUnlock) routeKey() string { return RouteKey(m.Kind, m.Name) }

func (m *Abandon) routeKey() string { return RouteKey(m.Kind, m.Name) }

func (m *Extend) routeKey() string {
	if m.Route != "" {
		return m.Route
	}
	return RouteKey(m.Kind, m.Name)
}

// LockName implements Routed.
func (m *Acquire) LockName() string { return m.Name }

// LockKind implements Routed.
func (m *Acquire) LockKind() Kind { return m.Kind }

// LockName implements Routed.
func (m *Release) LockName() string { return m.Name }

// LockKind implements Routed.
func (m *Release) LockKind() Kind { return m.Kind }

// LockName implements Routed.
func (m *ForceUnlock) LockName() string { return m.Name }

// LockKind implements Routed.
func (m *ForceUnlock) LockKind() Kind { return m.Kind }

// LockName implements Routed.
func (m *Extend) LockName() string { return m.Name }

// LockKind implements Routed.
func (m *Extend) LockKind() Kind { return m.Kind }

// LockName implements Routed.
func (m *Abandon) LockName() string { return m.Name }

// LockKind implements Routed.
func (m *Abandon) LockKind() Kind { return m.Kind }

// idle is sent by a lock actor to the guardian when it has had no holders and no waiters for the idle
// period. routed is the number of commands it has received, so the guardian can tell whether more are
// on their way.
type idle struct {
	key     string
	pid     *actor.PID
	routed  uint64
	binding uint64
}

type (
	retryTick    struct{ gen uint64 }
	expiryTick   struct{ gen uint64 }
	idleTick     struct{ gen uint64 }
	watchdogTick struct{ gen uint64 }
	intentTick   struct{ gen uint64 }
	// flushBatch runs the pending read batch; the actor sends it to itself when it starts a batch, so
	// that the commands already in the mailbox join it.
	flushBatch struct{}
	// batchDone says that a running read batch has its answers.
	batchDone struct{ batch *readBatch }
)
