package actors

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// plainStrategy is the reentrant lock (Redisson's RLock).
type plainStrategy struct {
	exclusive
	name string
	// names are the lock's keys and channel, built once.
	names *redisops.Names
	ops   *redisops.Ops
}

func newPlainStrategy(name string, ops *redisops.Ops) strategy {
	names := redisops.NamesOf(name)
	return plainStrategy{name: name, names: &names, ops: ops}
}

func (plainStrategy) lockKind() messages.LockKind { return messages.LockPlain }

func (p plainStrategy) acquire(ctx context.Context, m *Acquire, held int64, _ bool) (redisops.Acquired, error) {
	return p.ops.AcquireNamed(ctx, p.names, m.Owner, m.Lease, held)
}

func (p plainStrategy) release(ctx context.Context, k holdKey, requestID string, lease time.Duration, next *redisops.Handoff) (redisops.Released, error) {
	return p.ops.Release(ctx, p.name, k.owner, requestID, lease, next)
}

// releaseHeld tells the release the owner's hold count, and its request id sequences the owner's
// releases, so that the answer goes to the owner's own latch rather than to a key created per release
// (redisops.Ops.ReleaseHeld). A release with no handoff of a hold whose token is known (token > 0)
// uses no latch at all: the token counter tells its retries apart (redisops.Ops.ReleaseHeldFenced).
func (p plainStrategy) releaseHeld(ctx context.Context, k holdKey, requestID string, lease time.Duration, held, token int64, next *redisops.Handoff) (redisops.Released, error) {
	if next == nil && token > 0 {
		return p.ops.ReleaseHeldFenced(ctx, p.names, k.owner, requestID, lease, held, token)
	}
	return p.ops.ReleaseHeldNamed(ctx, p.names, k.owner, requestID, lease, held, next)
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

func (p plainStrategy) channel(*Acquire) string { return p.names.Channel }

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
	// The next unlock notice after a release that gave way is that release's own (Redis sends the
	// notices of one channel in order), unless it was lost (a pub/sub reconnect) or came long after:
	// only a notice within othersTurnWindow of the release counts, and any notice ends the turn.
	othersTurn := !a.othersTurnSince.IsZero() && time.Since(a.othersTurnSince) < othersTurnWindow
	a.othersTurnSince = time.Time{}
	if len(a.holds) > 0 && !a.holdsGone() {
		// A local owner holds the lock, so the notice is about an earlier hold; the local release
		// will wake the queue.
		return
	}
	// Every process whose waiters listen got this notice, and their heads race for the lock. Redis
	// writes a notice to its subscribers in the order they subscribed, so that the same process
	// would win most races; the head tries after a random delay of up to noticeJitter instead, so
	// that the processes win in turn.
	if othersTurn {
		// This is the notice of this actor's own release, which freed the lock for the other
		// processes' waiters after a run of local handoffs: they go first.
		a.retry.setAt(time.Now().Add(othersTurnDelay))
		return
	}
	a.retry.setAt(time.Now().Add(rand.N(noticeJitter)))
}

// noticeJitter bounds the random delay after which the head waiter of a reentrant lock tries once an
// unlock notice woke it (see notice). The retry goes through the coordinator's timer service: a delay
// shorter than the service's own wake-up (tens of microseconds, different in each process) has
// mostly passed by the time the service looks, and the retry is sent at once; a longer one waits on
// a runtime timer, and a runtime timer less than a millisecond away fires a millisecond late or more
// once every thread of the process has gone to sleep (the network poller sleeps whole milliseconds),
// as in a process whose goroutines all wait while another process holds the lock.
//
// With 4 processes of 32 waiters on one lock (BenchmarkContendedProcesses), trying at once lets the
// same process win most races (fewest acquisitions of one process over the most: 0.21-0.37). A bound
// of 300 µs made every handoff between two processes take 1.05-1.23 ms on average (util 0.80-0.84,
// fewest/most 0.35-0.69), 50 µs 0.51-0.71 ms (util 0.82-0.87, fewest/most 0.58-0.71), in alternating
// runs. A precise delay (a goroutine waiting out up to 50, 100 or 150 µs while yielding its
// processor) gave no more util: the waiting took CPU from the round trips.
const noticeJitter = 50 * time.Microsecond

// othersTurnDelay is how long the head waiter of a reentrant lock lets the other processes' waiters go
// first after its own actor's release freed the lock for them, at the end of a run of local handoffs
// (see Env.MaxHandoffs): enough for any of them to take it, after which the local head tries as
// after any notice. Without it, the process that had the run raced the others for the lock on its own
// notice, and won some of those races: with 4 processes of 32 waiters on one lock
// (BenchmarkContendedProcesses), the fewest acquisitions of one process over the most were 0.43-0.85
// in 9 runs; letting the others go first, 0.70-0.94 in 9 runs alternating with them, at the same util
// (0.85-0.88).
const othersTurnDelay = 2 * time.Millisecond

// othersTurnWindow bounds how long after a release that gave way its unlock notice is expected: a
// notice that comes later is taken for another's.
const othersTurnWindow = 100 * time.Millisecond
