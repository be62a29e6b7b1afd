package coordinator

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// WithReplicaSync sets the replica-sync safeguard (Redisson's checkLockSyncedSlaves). Redis replicates
// asynchronously, so a master that fails over right after granting a lock can leave the new master
// without it, and a second owner can take it. With the safeguard, every script that gives a lock to an
// owner (Lock, TryLock, RLock, TryRLock on every kind of lock, and a release that hands the lock to a
// local waiter) is followed by WAIT on the same connection, asking for min(replicas, replicas attached
// to the master) acknowledgements within timeout. When fewer acknowledge, the hold just taken is given
// back and the call fails with [ErrNotSynced]; a waiting Lock fails with it too, rather than retrying.
// The one exception: when the replica count, read again at once, is lower than the one asked for (a
// failover left the new master with fewer replicas), the acquisition is tried once more against it.
//
// The watchdog's renewals are followed by WAIT too. A renewal that fewer replicas acknowledge stands
// on the master but does not count: the hold keeps the validity of its last acknowledged renewal or
// acquisition, which is the expiry a promoted replica has (Redis replicates an expiry as an absolute
// time), and the watchdog tries again after a tenth of its timeout. So across a failover to a replica
// that acknowledged the hold, the hold either survives, renewed on the new master, or its [Mutex.Done]
// closes before the copy that replica kept expires and another owner can take the lock.
//
// The replicas attached to the master are counted with INFO replication (online replicas) when the
// coordinator first gives a lock, every 5s after that, and at once after a connection error or a WAIT
// that came back short, so a replica that joins or leaves, or a failover, is noticed. While the master
// has no replica nothing is waited for and nothing changes. WAIT is skipped as well on a server that
// does not report replicas (miniredis) and after WAIT answered an error (a server or proxy that does
// not offer it), and on clients other than *redis.Client (single server, Sentinel) and
// *redis.ClusterClient, whose script and WAIT go in one pipeline to the master of the lock's slot.
//
// The wait adds up to timeout to a lock call while a replica lags; it must stay below the client's
// ReadTimeout (go-redis' default is 3s), or it is cut to three quarters of it. replicas 0 turns the
// safeguard off, like [WithoutReplicaSync]. replicas must not be negative and timeout must be
// positive and at most [MaxDuration], or New returns [ErrInvalidOption]. The default is on, with 1 replica (Redisson fails a lock
// only when no replica acknowledged it) and a timeout of 1s (Redisson's slavesSyncTimeout).
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	return func(o *options) error {
		if replicas < 0 {
			return fmt.Errorf("%w: replica sync replicas %d must not be negative", ErrInvalidOption, replicas)
		}
		if timeout <= 0 || timeout > MaxDuration {
			return fmt.Errorf("%w: replica sync timeout %v must be in (0, %v]", ErrInvalidOption, timeout, MaxDuration)
		}
		o.syncReplicas, o.syncTimeout = replicas, timeout
		return nil
	}
}

// WithoutReplicaSync turns the replica-sync safeguard of [WithReplicaSync] off: locks are granted
// without waiting for replicas, which saves a WAIT per acquisition but lets a failover hand a lock to
// two owners. The default is on.
func WithoutReplicaSync() Option {
	return func(o *options) error {
		o.syncReplicas = 0
		return nil
	}
}

// newOps returns the script runner for client, of the deployment d, with the coordinator's replica-sync
// and fencing-token settings.
func newOps(client redis.UniversalClient, d redisops.Deployment, o options) *redisops.Ops {
	ops := redisops.NewFor(client, d)
	ops.SetReplicaSync(o.syncReplicas, o.syncTimeout)
	if o.persistentTokens {
		ops.SetTokenExpiry(0)
	}
	return ops
}
