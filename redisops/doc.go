// Package redisops holds the Lua scripts of lockwarden's locks and the typed Go calls that run them.
//
// The data layout is Redisson's, so Java services running Redisson and Go services running lockwarden
// exclude each other on the same lock names:
//
//   - the reentrant lock N is a HASH at key N, field owner -> hold count, with a PEXPIRE;
//   - unlock notices are published on redisson_lock__channel:{N} ("0" = unlocked);
//   - every acquisition issues a fencing token on the counter redisson_lock_token:{N}, which expires
//     unless it is kept forever as Redisson's RFencedLock keeps it ([Ops.SetTokenExpiry]);
//   - releases are retry-safe: an owner whose releases the caller sequences ([Ops.ReleaseHeld],
//     [Ops.ReadReleaseHeld]) keeps the answer of its last release in its own latch
//     redisson_unlock_latch:{N}:<owner>, overwritten by each; an owner whose count the caller does not
//     know, and the fair and write releases, use the latch of the request,
//     redisson_unlock_latch:{N}:<request id>, as Redisson does; a release with no handoff of a hold
//     whose token the caller knows ([Ops.ReleaseHeldFenced]) needs no latch: the token counter tells
//     its retries and late copies apart.
//
// The fair lock adds Redisson's queue LIST and timeout ZSET, and a HASH of its own,
// lockwarden_fair_handoff:{N}, of the waiters to which a release may hand the lock in the same call
// ([Ops.FairWait], [Ops.FairRelease]).
//
// Every state change is one script, sent with EVALSHA (EVAL when the server does not have it). A call
// made on its own goes through the [Batcher] of its [Ops], which pipelines the calls pending at the
// same moment into one round trip. Calls that come already grouped skip it and go as one pipeline
// straight on the client: the renewals of [Ops.RenewHolds] (when they need two script calls or more)
// and the calls of a [Batch]. Calls followed by WAIT (see Replica sync below) go on their own
// connection.
//
// The scripts run on Redis 6.0 or later. Every key a script touches is passed in KEYS, and the keys
// of one lock share the hash tag {N}, so the scripts also run on Redis Cluster. A script refuses a key of another type before it changes anything: it
// reads the key's TYPE, or its first command on the key fails on another type before the script has
// written anything (Redis answers that as WRONGTYPE too). It answers WRONGTYPE ([ErrWrongType]) when a
// key holds another type, and WRONGKIND ([ErrKindMismatch]) when the owner's field in the lock's hash
// belongs to the other family of locks (plain and fair against read-write), or, for a force unlock,
// the lock is of the other family. The functions the scripts share (typeRefusal, kindRefusal,
// wrongType, kindMismatch, familyMismatch, issueToken, raiseTo, purgeLapsed, shiftDeadlines) are
// defined once, in lib.lua, and prepended to each script that calls them when it is loaded.
//
// # Replica sync
//
// Redis replicates asynchronously. With [Ops.SetReplicaSync], every script that gives a lock to an owner
// is followed by WAIT on the same connection, and a hold that too few replicas acknowledge is given
// back and reported as [ErrNotSynced] (Redisson's checkLockSyncedSlaves).
//
// The package keeps no global state: an [Ops] value carries settings and, with replica sync on, the
// number of replicas of each master it last read and the scripts each master is known to have.
package redisops
