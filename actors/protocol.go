package actors

import (
	"context"
	"errors"
	"time"

	"github.com/lockwarden/lockwarden/redisops"
)

// protocol is what a lock actor asks of Redis for one family of locks: the part of its strategy (see
// strategy) that runs the family's scripts.
type protocol interface {
	// acquire makes one attempt for m. held is the owner's hold count of m's kind as far as the actor
	// knows, or redisops.UnknownHoldCount. enqueue asks a fair lock to keep a place in its queue.
	acquire(ctx context.Context, m *Acquire, held int64, enqueue bool) (redisops.Acquired, error)
	// release drops one hold. next is a local owner to hand the lock to, for a family that hands off.
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

// lockRenewals are the renewals of the reentrant or fair lock holds ks.
func lockRenewals(ks []holdKey, lease time.Duration) []redisops.Renewal {
	rs := make([]redisops.Renewal, len(ks))
	for i, k := range ks {
		rs[i] = redisops.Renewal{Owner: k.owner, Kind: redisops.RenewLock, Lease: lease}
	}
	return rs
}

// isUpgrade reports whether err is a refused upgrade of read holds to a write hold.
func isUpgrade(err error) bool { return errors.Is(err, redisops.ErrUpgrade) }

// isNotSynced reports whether err is a hold that replicas did not acknowledge, already given back.
func isNotSynced(err error) bool { return errors.Is(err, redisops.ErrNotSynced) }
