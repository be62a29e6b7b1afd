package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Routed is a command for the actor of one lock name; the guardian routes it by LockName.
type Routed interface {
	LockName() string
}

// Acquire asks for one hold of the lock Name for Owner.
type Acquire struct {
	Name  string
	Owner string
	// Lease is the lease in Redis. With Watchdog set it is the watchdog timeout and the hold is
	// renewed for as long as it lasts.
	Lease    time.Duration
	Watchdog bool
	// Wait queues the command until the lock is obtained or the ticket is abandoned. Without it the
	// command makes one attempt.
	Wait bool
	// SharedOwner marks an owner id that other coordinators may use too, so the local hold count is
	// not authoritative.
	SharedOwner bool
	Ticket      *Ticket
}

// Release drops one hold of the lock Name by Owner.
type Release struct {
	Name   string
	Owner  string
	Ticket *Ticket
}

// ForceUnlock frees the lock Name whoever holds it.
type ForceUnlock struct {
	Name   string
	Ticket *Ticket
}

// Abandon tells the actor that the caller of Ticket gave up, so a queued waiter can leave the queue.
type Abandon struct {
	Name   string
	Ticket *Ticket
}

// LockName implements Routed.
func (m *Acquire) LockName() string { return m.Name }

// LockName implements Routed.
func (m *Release) LockName() string { return m.Name }

// LockName implements Routed.
func (m *ForceUnlock) LockName() string { return m.Name }

// LockName implements Routed.
func (m *Abandon) LockName() string { return m.Name }

// idle is sent by a lock actor to the guardian when it has had no holders and no waiters for the idle
// period. routed is the number of commands it has received, so the guardian can tell whether more are
// on their way.
type idle struct {
	name   string
	pid    *actor.PID
	routed uint64
}

type (
	retryTick    struct{ gen uint64 }
	expiryTick   struct{ gen uint64 }
	idleTick     struct{ gen uint64 }
	watchdogTick struct{ gen uint64 }
)
