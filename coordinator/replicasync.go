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
// local waiter) is followed by WAIT on the same connection, asking for acknowledgements from replicas
// replicas of the master (at most as many as are attached to it), or from a majority of those attached
// with [MajorityOfReplicas], within timeout. When fewer acknowledge, the hold just taken is given back
// and the call fails with [ErrNotSynced]; a waiting Lock fails with it too, rather than retrying. The
// one exception: when the replica count, read again after the WAIT answered, is lower than the one
// asked for (a failover left the new master with fewer replicas), the acquisition is tried again
// against it, so the new master's first locks are granted.
//
// Which count to pick: a failover promotes one replica, and a hold survives it only if that replica
// has it. With n replicas, a hold that k of them acknowledged survives the loss of the master together
// with any n-k replicas. The default, a majority, survives the loss of the master with any minority of
// its replicas (with 2 replicas, both must acknowledge), at the price of failing every lock, after the
// timeout, while a majority lags or is down. 1 (Redisson's rule) keeps locks available while all but
// one replica lag, and loses the lagged holds if the master and the one replica that had them fail
// together. n asks for every replica. The count applies to the watchdog's renewals too: with the
// majority default every renewal must reach a majority. A replica listed online that does not
// acknowledge (one still loading a full sync, the old master rejoining as a replica after a failover,
// one cut off by a partition, which the master lists until repl-timeout, 60s by default) makes
// renewals fail until it catches up; from 2/3 of the watchdog timeout, less the drift allowance, after
// it stopped, watchdog holds have their [Mutex.Done] closed, and after the whole timeout every one of them. With 2 replicas one
// such replica is enough.
//
// The watchdog's renewals are followed by WAIT too. A renewal that fewer replicas acknowledge stands
// on the master but does not count: the hold keeps the validity of its last acknowledged renewal or
// acquisition, which is the expiry a promoted replica has (Redis replicates an expiry as an absolute
// time), and the watchdog tries again after a tenth of its timeout. So across a failover to a replica
// that acknowledged the hold, the hold either survives, renewed on the new master, or its [Mutex.Done]
// closes before the copy that replica kept expires and another owner can take the lock. With a master
// that fails fast, at worst the hold survives when the new master takes renewals within
// 2T/3 − drift − (T/10 + timeout) after the replica stopped acknowledging (T the watchdog timeout):
// about 15.7s with the defaults, 2.3s with a 6s watchdog, since a failed round spends up to timeout in
// WAIT before the next is armed. A master that hangs (paused, or cut off without a reset) makes a
// round wait up to the client's ReadTimeout (5s by default), or the hold's validity with
// ContextTimeoutEnabled, and a tick that sends its renewals twice (the replica count dropped, or
// NOSCRIPT) spends up to two timeouts: the figures leave both out.
//
// The replicas attached to the master (those INFO replication lists as online) are counted when the
// coordinator first gives a lock, every 5s after that, and at once after a connection error, a WAIT
// that came back short or a server that lost its scripts, so a replica that joins or leaves, or a
// failover, is noticed. While the master has no replica nothing is waited for and nothing changes.
// WAIT is skipped as well on a server that does not report replicas (miniredis) and after WAIT
// answered an error (a server or proxy that does not offer it), and on clients other than
// *redis.Client (single server, Sentinel) and *redis.ClusterClient, whose script and WAIT go in one
// pipeline to the master of the lock's slot.
//
// The wait adds up to timeout to a lock call, and to each watchdog tick of a lock name (the renewals
// of its holds in one coordinator share one WAIT), while a replica lags, and holds a pool connection
// meanwhile.
// It must stay below the client's ReadTimeout (go-redis' default is 5s), or it is cut to three
// quarters of it (a timeout of 5s or more waits 3.75s with the default); with ContextTimeoutEnabled a
// renewal's is cut to three quarters of the time the renewal has left too (at most
// [WithStopReleaseTimeout]), so that a lagging replica still reads as not acknowledged. Other calls
// bounded by the stop release timeout (a release, an Extend) fail with a timeout instead when it is
// shorter than the WAIT. replicas 0 turns the
// safeguard off, like [WithoutReplicaSync].
// replicas must be positive, 0 or [MajorityOfReplicas], and timeout must be positive and at most
// [MaxDuration], or New returns [ErrInvalidOption]. The default is on, with [MajorityOfReplicas] and a
// timeout of 1s (Redisson's slavesSyncTimeout).
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	return func(o *options) error {
		if replicas < 0 && replicas != MajorityOfReplicas {
			return fmt.Errorf("%w: replica sync replicas %d must be positive, 0 or MajorityOfReplicas", ErrInvalidOption, replicas)
		}
		if err := checkDuration("replica sync timeout", timeout); err != nil {
			return err
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
