// Redisson's RLock (RedissonLock), RFairLock (RedissonFairLock) and RReadWriteLock (RedissonReadLock,
// RedissonWriteLock), Redis side, in the manner of the rest of the package: the scripts are copied
// verbatim from github.com/redisson/redisson at commit 66863978b4a92093b97c1f8c96f182a77e81d50e (the
// files last changed in a5077398eb8707222deab0b3d54941c90801d801 for RedissonLock.java and
// RedissonFairLock.java, efe3ea7766640c9faef8c32c8b7ef4331ece9004 for RedissonReadLock.java and
// RedissonWriteLock.java, b1afa4c20fd7f2037aac35d7510cbfe47d4c1398 for renewal/LockTask.java and
// 1b921e30f654ff86e10491823c6a736179ba99f3 for renewal/ReadLockTask.java), at the lines given with
// each, under redisson/src/main/java/org/redisson/.

package redissontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Redisson's lock scripts, verbatim. Each is the concatenation of the Java string literals of the
// call it names, one literal per line (the Java comments between the literals are left out).
var (
	// lockTryLock is RedissonLock.tryLockInnerAsync, RedissonLock.java lines 216-222.
	lockTryLock = redis.NewScript("if ((redis.call('exists', KEYS[1]) == 0) " +
		"or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"return redis.call('pttl', KEYS[1]);")

	// lockUnlock is RedissonLock.unlockInnerAsync(long, String, long), RedissonLock.java lines 349-367.
	lockUnlock = redis.NewScript("local val = redis.call('get', KEYS[3]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
		"return 0; " +
		"else " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return 1; " +
		"end; ")

	// lockRenew is the watchdog's renewal of a lock, LockTask.buildChunk, renewal/LockTask.java lines
	// 84-93 (the renewal of RedissonLock, RedissonFairLock and RedissonWriteLock; RedissonBaseLock's
	// renewExpirationAsync of earlier versions).
	lockRenew = redis.NewScript("local result = {} " +
		"for i = 1, #KEYS, 1 do " +
		"if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then " +
		"redis.call('pexpire', KEYS[i], ARGV[1]); " +
		"table.insert(result, 1); " +
		"else " +
		"table.insert(result, 0); " +
		"end; " +
		"end; " +
		"return result;")

	// readLockRenew is the watchdog's renewal of a read lock, ReadLockTask.buildChunk,
	// renewal/ReadLockTask.java lines 93-116.
	readLockRenew = redis.NewScript("local result = {} " +
		"local argIdx = 2 " +
		"for i = 1, #KEYS, 2 do " +
		"local anyAlive = false; " +
		"local lockNamesCount = tonumber(ARGV[argIdx]); " +
		"argIdx = argIdx + 1; " +
		"for k = 1, lockNamesCount do " +
		"local counter = redis.call('hget', KEYS[i], ARGV[argIdx]); " +
		"if (counter ~= false) then " +
		"anyAlive = true; " +
		"for c=counter, 1, -1 do " +
		"redis.call('pexpire', KEYS[i+1] .. ':' .. ARGV[argIdx] .. ':rwlock_timeout:' .. c, ARGV[1]); " +
		"end; " +
		"end; " +
		"argIdx = argIdx + 1; " +
		"end; " +
		"if (anyAlive) then " +
		"redis.call('pexpire', KEYS[i], ARGV[1]); " +
		"table.insert(result, 1); " +
		"else " +
		"table.insert(result, 0); " +
		"end; " +
		"end; " +
		"return result;")

	// fairTryLock is RedissonFairLock.tryLockInnerAsync, its RedisCommands.EVAL_LONG branch (the one of
	// lock() and tryLock(waitTime, leaseTime, unit), which queues the owner when the lock is taken),
	// RedissonFairLock.java lines 155-226.
	fairTryLock = redis.NewScript("while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then " +
		"break;" +
		"end;" +
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then " +
		"redis.call('zrem', KEYS[3], firstThreadId2);" +
		"redis.call('lpop', KEYS[2]);" +
		"else " +
		"break;" +
		"end;" +
		"end;" +
		"if (redis.call('exists', KEYS[1]) == 0) " +
		"and ((redis.call('exists', KEYS[2]) == 0) " +
		"or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then " +
		"redis.call('lpop', KEYS[2]);" +
		"redis.call('zrem', KEYS[3], ARGV[2]);" +
		"local keys = redis.call('zrange', KEYS[3], 0, -1);" +
		"for i = 1, #keys, 1 do " +
		"redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);" +
		"end;" +
		"redis.call('hset', KEYS[1], ARGV[2], 1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then " +
		"redis.call('hincrby', KEYS[1], ARGV[2],1);" +
		"redis.call('pexpire', KEYS[1], ARGV[1]);" +
		"return nil;" +
		"end;" +
		"local timeout = redis.call('zscore', KEYS[3], ARGV[2]);" +
		"if timeout ~= false then " +
		"local ttl = redis.call('pttl', KEYS[1]);" +
		"return math.max(0, ttl); " +
		"end;" +
		"local lastThreadId = redis.call('lindex', KEYS[2], -1);" +
		"local ttl;" +
		"if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then " +
		"ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);" +
		"else " +
		"ttl = redis.call('pttl', KEYS[1]);" +
		"end;" +
		"local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);" +
		"if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then " +
		"redis.call('rpush', KEYS[2], ARGV[2]);" +
		"end;" +
		"return ttl;")

	// fairUnlock is RedissonFairLock.unlockInnerAsync(long, String, long), RedissonFairLock.java lines
	// 237-281.
	fairUnlock = redis.NewScript("local val = redis.call('get', KEYS[5]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"while true do " +
		"local firstThreadId2 = redis.call('lindex', KEYS[2], 0);" +
		"if firstThreadId2 == false then " +
		"break;" +
		"end; " +
		"local timeout = redis.call('zscore', KEYS[3], firstThreadId2);" +
		"if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then " +
		"redis.call('zrem', KEYS[3], firstThreadId2); " +
		"redis.call('lpop', KEYS[2]); " +
		"else " +
		"break;" +
		"end; " +
		"end;" +
		"if (redis.call('exists', KEYS[1]) == 0) then " +
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
		"if nextThreadId ~= false then " +
		"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
		"end; " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); " +
		"return 1; " +
		"end;" +
		"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[6]); " +
		"return 0; " +
		"end; " +
		"redis.call('del', KEYS[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[6]); " +
		"local nextThreadId = redis.call('lindex', KEYS[2], 0); " +
		"if nextThreadId ~= false then " +
		"redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); " +
		"end; " +
		"return 1; ")

	// fairAcquireFailed is RedissonFairLock.acquireFailedAsync, RedissonFairLock.java lines 78-93.
	fairAcquireFailed = redis.NewScript("local queue = redis.call('lrange', KEYS[1], 0, -1);" +
		"local i = 1;" +
		"while i <= #queue and queue[i] ~= ARGV[1] do " +
		"i = i + 1;" +
		"end;" +
		"i = i + 1;" +
		"while i <= #queue do " +
		"redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);" +
		"i = i + 1;" +
		"end;" +
		"redis.call('zrem', KEYS[2], ARGV[1]);" +
		"redis.call('lrem', KEYS[1], 0, ARGV[1]);")

	// readTryLock is RedissonReadLock.tryLockInnerAsync, RedissonReadLock.java lines 58-76.
	readTryLock = redis.NewScript("local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call('hset', KEYS[1], 'mode', 'read'); " +
		"redis.call('hset', KEYS[1], ARGV[2], 1); " +
		"redis.call('set', KEYS[2] .. ':1', 1); " +
		"redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then " +
		"local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"local key = KEYS[2] .. ':' .. ind;" +
		"redis.call('set', key, 1); " +
		"redis.call('pexpire', key, ARGV[1]); " +
		"local remainTime = redis.call('pttl', KEYS[1]); " +
		"redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); " +
		"return nil; " +
		"end;" +
		"return redis.call('pttl', KEYS[1]);")

	// readUnlock is RedissonReadLock.unlockInnerAsync(long, String, long), RedissonReadLock.java lines
	// 87-137.
	readUnlock = redis.NewScript("local val = redis.call('get', KEYS[5]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
		"return nil; " +
		"end; " +
		"local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); " +
		"if (lockExists == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); " +
		"if (counter == 0) then " +
		"redis.call('hdel', KEYS[1], ARGV[2]); " +
		"end;" +
		"redis.call('del', KEYS[3] .. ':' .. (counter+1)); " +
		"if (redis.call('hlen', KEYS[1]) > 1) then " +
		"local maxRemainTime = -3; " +
		"local keys = redis.call('hkeys', KEYS[1]); " +
		"for n, key in ipairs(keys) do " +
		"counter = tonumber(redis.call('hget', KEYS[1], key)); " +
		"if type(counter) == 'number' then " +
		"for i=counter, 1, -1 do " +
		"local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); " +
		"maxRemainTime = math.max(remainTime, maxRemainTime);" +
		"end; " +
		"end; " +
		"end; " +
		"if maxRemainTime > 0 then " +
		"redis.call('pexpire', KEYS[1], maxRemainTime); " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
		"return 0; " +
		"end;" +
		"if mode == 'write' then " +
		"redis.call('set', KEYS[5], 0, 'px', ARGV[4]); " +
		"return 0;" +
		"end; " +
		"end; " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[5], 1, 'px', ARGV[4]); " +
		"return 1; ")

	// writeTryLock is RedissonWriteLock.tryLockInnerAsync, RedissonWriteLock.java lines 56-71.
	writeTryLock = redis.NewScript("local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call('hset', KEYS[1], 'mode', 'write'); " +
		"redis.call('hset', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (mode == 'write') then " +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"local currentExpire = redis.call('pttl', KEYS[1]); " +
		"redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); " +
		"return nil; " +
		"end; " +
		"end;" +
		"return redis.call('pttl', KEYS[1]);")

	// writeUnlock is RedissonWriteLock.unlockInnerAsync(long, String, long), RedissonWriteLock.java
	// lines 79-114.
	writeUnlock = redis.NewScript("local val = redis.call('get', KEYS[3]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"local mode = redis.call('hget', KEYS[1], 'mode'); " +
		"if (mode == false) then " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return nil; " +
		"end;" +
		"if (mode == 'write') then " +
		"local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); " +
		"if (lockExists == 0) then " +
		"return nil;" +
		"else " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
		"return 0; " +
		"else " +
		"redis.call('hdel', KEYS[1], ARGV[3]); " +
		"if (redis.call('hlen', KEYS[1]) == 1) then " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"else " +
		"redis.call('hset', KEYS[1], 'mode', 'read'); " +
		"end; " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return 1; " +
		"end; " +
		"end; " +
		"end; " +
		"return nil;")
)

// Redisson's LockPubSub messages.
const (
	// UnlockMessage is LockPubSub.UNLOCK_MESSAGE, published when a lock, a fair lock or a read lock
	// is freed.
	UnlockMessage = 0
	// ReadUnlockMessage is LockPubSub.READ_UNLOCK_MESSAGE, published when a write lock is freed.
	ReadUnlockMessage = 1
)

// Redisson's defaults for the values the lock scripts are given.
const (
	// DefaultWatchdogTimeout is Config.lockWatchdogTimeout: the lease of a lock taken without one,
	// and the lease each renewal sets.
	DefaultWatchdogTimeout = 30 * time.Second
	// DefaultFairLockWaitTimeout is Config.fairLockWaitTimeout: how long a queued owner of a fair
	// lock keeps its place when it gave no wait time.
	DefaultFairLockWaitTimeout = 5 * time.Minute
	// DefaultUnlockLatchTimeout is how long an unlock's latch outlives it: RedissonBaseLock's
	// (timeout + retryDelay.calcDelay(retryAttempts)) * retryAttempts, at most (3000 ms + 2000 ms) * 4
	// with the default configuration (calcDelay is random, 1000 to 2000 ms there).
	DefaultUnlockLatchTimeout = 20 * time.Second
)

// ErrNotHeld is returned by the unlocks when the script answers nil: the owner does not hold the
// lock (Redisson's IllegalMonitorStateException, "attempt to unlock lock, not locked by current
// thread").
var ErrNotHeld = errors.New("redissontest: attempt to unlock lock, not locked by current thread")

// NewClientID returns a new Redisson client id: a random UUID in its canonical text form, as
// ServiceManager's UUID.randomUUID().toString().
func NewClientID() string {
	return uuid.NewString()
}

// newRequestID is ServiceManager.generateId(): 16 random bytes in lower-case hex.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Owner is what Redisson's locks have in common (RedissonBaseLock and RedissonLock): one owner, a
// thread of a client, of one lock. An Owner is safe for concurrent use, but like a Java thread it is
// meant to be used by one goroutine at a time.
type Owner struct {
	c redis.UniversalClient
	// Name is the lock's name, its key: a HASH of the owners' hold counts (and, for a read-write
	// lock, its "mode").
	Name string
	// Channel is the channel the lock's unlocks are published on: redisson_lock__channel:{Name}, or
	// redisson_rwlock:{Name} for a read-write lock.
	Channel string
	// ClientID is the client's id (a UUID, ServiceManager.getId()); ThreadID the thread's.
	ClientID string
	ThreadID int64
	// LockName is the owner's field in the lock's hash: ClientID:ThreadID (getLockName(threadId)),
	// with the suffix ":write" for a write lock.
	LockName string
	// Publish is the publish command passed to the scripts ("publish" or "spublish").
	Publish string
	// WatchdogTimeout is Config.lockWatchdogTimeout ([DefaultWatchdogTimeout]).
	WatchdogTimeout time.Duration
	// UnlockLatchTimeout is the time to live of an unlock's latch ([DefaultUnlockLatchTimeout]).
	UnlockLatchTimeout time.Duration

	// lease is RedissonLock.internalLockLeaseTime in milliseconds, 0 standing for WatchdogTimeout.
	lease atomic.Int64
}

func newOwner(c redis.UniversalClient, name, channel, clientID string, threadID int64) Owner {
	return Owner{c: c, Name: name, Channel: channel, ClientID: clientID, ThreadID: threadID,
		LockName: clientID + ":" + strconv.FormatInt(threadID, 10), Publish: publishCommand(c),
		WatchdogTimeout: DefaultWatchdogTimeout, UnlockLatchTimeout: DefaultUnlockLatchTimeout}
}

// InternalLockLeaseTime is RedissonLock.internalLockLeaseTime: the lease of the owner's last
// acquisition with one, until an unlock frees the lock, WatchdogTimeout otherwise. It is the lease
// given to an acquisition without one and the expiry an unlock that leaves the lock held sets.
func (o *Owner) InternalLockLeaseTime() time.Duration {
	if ms := o.lease.Load(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return o.WatchdogTimeout
}

// UnlockLatchName is the key of the latch of the unlock requestID (getUnlockLatchName):
// redisson_unlock_latch:{Name}:requestID.
func (o *Owner) UnlockLatchName(requestID string) string {
	return prefixName("redisson_unlock_latch", o.Name) + ":" + requestID
}

// leaseArg is the lease RedissonLock.tryAcquireAsync gives tryLockInnerAsync: lease when positive,
// internalLockLeaseTime otherwise, in milliseconds.
func (o *Owner) leaseArg(lease time.Duration) int64 {
	if lease > 0 {
		return lease.Milliseconds()
	}
	return o.InternalLockLeaseTime().Milliseconds()
}

// tryLockReply reads an EVAL_LONG answer of an acquisition: nil when acquired, when not the lock's
// time to live in milliseconds. A positive lease acquired becomes internalLockLeaseTime, as in
// RedissonLock.tryAcquireAsync.
func (o *Owner) tryLockReply(cmd *redis.Cmd, lease time.Duration) (bool, time.Duration, error) {
	ms, err := cmd.Int64()
	if errors.Is(err, redis.Nil) {
		if lease > 0 {
			o.lease.Store(lease.Milliseconds())
		}
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return false, time.Duration(ms) * time.Millisecond, nil
}

// unlockReply reads an EVAL_BOOLEAN answer of an unlock script: 1 (true), 0 (false), nil
// ([ErrNotHeld]).
func unlockReply(cmd *redis.Cmd) (bool, error) {
	n, err := cmd.Int64()
	if errors.Is(err, redis.Nil) {
		return false, ErrNotHeld
	}
	return n == 1, err
}

// unlock is RedissonBaseLock.unlockAsync(threadId): a new request id, the unlock script (inner),
// then the DEL of its latch when the script answered (RedissonBaseLock.unlockInnerAsync(threadId,
// requestId)), and internalLockLeaseTime back to the watchdog timeout unless the answer was false
// (RedissonLock.cancelExpirationRenewal).
func (o *Owner) unlock(ctx context.Context, inner func(context.Context, string) (bool, error)) (bool, error) {
	requestID := newRequestID()
	freed, err := inner(ctx, requestID)
	if err != nil || freed {
		o.lease.Store(0)
	}
	if err == nil || errors.Is(err, ErrNotHeld) {
		if derr := o.c.Del(ctx, o.UnlockLatchName(requestID)).Err(); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	return freed, err
}

// renew runs the renewal script of LockTask for the owner: true when it still holds the lock,
// whose time to live is then WatchdogTimeout.
func (o *Owner) renew(ctx context.Context) (bool, error) {
	res, err := lockRenew.Run(ctx, o.c, []string{o.Name}, o.WatchdogTimeout.Milliseconds(), o.LockName).Int64Slice()
	if err != nil {
		return false, err
	}
	return len(res) == 1 && res[0] == 1, nil
}

// Lock is a Redisson RLock (RedissonLock) client: one owner of the lock Name. Its Channel is
// redisson_lock__channel:{Name}.
type Lock struct {
	Owner
}

// NewLock returns the Redisson RLock client of the lock name on c for the thread threadID of the
// client clientID (a UUID, see [NewClientID]).
func NewLock(c redis.UniversalClient, name, clientID string, threadID int64) *Lock {
	return &Lock{Owner: newOwner(c, name, prefixName("redisson_lock__channel", name), clientID, threadID)}
}

// TryLock is one acquisition of RLock's tryLock(waitTime, leaseTime, unit) and lock(leaseTime, unit)
// (RedissonLock.tryAcquireAsync, tryLockInnerAsync with EVAL_LONG). A lease of 0 or less means none
// (Redisson's -1): the lock is taken for InternalLockLeaseTime, and Redisson's watchdog would then
// call [Lock.Renew]; nothing here does. It returns true when the lock was acquired or re-entered;
// false and the lock's time to live when another owner holds it (negative when the lock has no
// expiry).
func (l *Lock) TryLock(ctx context.Context, lease time.Duration) (acquired bool, ttl time.Duration, err error) {
	cmd := lockTryLock.Run(ctx, l.c, []string{l.Name}, l.leaseArg(lease), l.LockName)
	return l.tryLockReply(cmd, lease)
}

// Unlock is RLock.unlock(): true when the lock was freed (and [UnlockMessage] published on
// Channel), false when the owner still holds it (its hold count was above 1), [ErrNotHeld] when the
// owner does not hold it.
func (l *Lock) Unlock(ctx context.Context) (bool, error) {
	return l.unlock(ctx, l.UnlockRequest)
}

// UnlockRequest is the unlock script alone (RedissonLock.unlockInnerAsync(threadId, requestId,
// timeout)) with the request id requestID, as [Lock.Unlock] answers it. Its latch,
// UnlockLatchName(requestID), keeps the answer for UnlockLatchTimeout: the same request again
// answers the same without touching the lock, as a retried Redisson unlock does.
func (l *Lock) UnlockRequest(ctx context.Context, requestID string) (bool, error) {
	return unlockReply(lockUnlock.Run(ctx, l.c, []string{l.Name, l.Channel, l.UnlockLatchName(requestID)},
		UnlockMessage, l.InternalLockLeaseTime().Milliseconds(), l.LockName, l.Publish,
		l.UnlockLatchTimeout.Milliseconds()))
}

// Renew is one renewal of Redisson's watchdog for the owner (LockTask): true when it holds the lock,
// whose time to live is then WatchdogTimeout; false when it does not.
func (l *Lock) Renew(ctx context.Context) (bool, error) {
	return l.renew(ctx)
}

// FairLock is a Redisson RFairLock (RedissonFairLock) client: one owner of the fair lock Name. Its
// Channel is redisson_lock__channel:{Name}; the owner is told its turn on OwnerChannel.
type FairLock struct {
	Owner
	// Queue is redisson_lock_queue:{Name}, the LIST of the waiting owners' LockNames in their order;
	// Timeout is redisson_lock_timeout:{Name}, the ZSET of the epoch milliseconds until which each
	// keeps its place.
	Queue, Timeout string
	// OwnerChannel is Channel:LockName, the channel the owner waits on (RedissonFairLock.subscribe),
	// where the unlock of the owner before it publishes [UnlockMessage].
	OwnerChannel string
	// WaitTimeout is Config.fairLockWaitTimeout ([DefaultFairLockWaitTimeout]), the wait time given
	// to the scripts when the call gives none.
	WaitTimeout time.Duration
	// Now is the client's clock (System.currentTimeMillis()), time.Now unless a test sets another.
	Now func() time.Time
}

// NewFairLock returns the Redisson RFairLock client of the fair lock name on c for the thread
// threadID of the client clientID.
func NewFairLock(c redis.UniversalClient, name, clientID string, threadID int64) *FairLock {
	l := &FairLock{Owner: newOwner(c, name, prefixName("redisson_lock__channel", name), clientID, threadID),
		Queue: prefixName("redisson_lock_queue", name), Timeout: prefixName("redisson_lock_timeout", name),
		WaitTimeout: DefaultFairLockWaitTimeout, Now: time.Now}
	l.OwnerChannel = l.Channel + ":" + l.LockName
	return l
}

// waitArg is the wait time RedissonFairLock passes its scripts, in milliseconds: wait when
// positive, WaitTimeout otherwise.
func (l *FairLock) waitArg(wait time.Duration) int64 {
	if wait > 0 {
		return wait.Milliseconds()
	}
	return l.WaitTimeout.Milliseconds()
}

// TryLock is one acquisition of RFairLock's tryLock(waitTime, leaseTime, unit) (and of lock(), with
// a wait of 0 or less): the script of RedissonFairLock.tryLockInnerAsync with EVAL_LONG, given the
// lease, LockName, the wait time (wait, or WaitTimeout when wait is 0 or less) and Now. The lease is
// as in [Lock.TryLock]. It first drops the waiting owners whose place has timed out; then it
// acquires (or re-enters) the lock when it is free and the owner is first in Queue or Queue is
// empty; otherwise it answers false and a time to live, and puts the owner at the end of Queue when
// it is not there yet (its place kept until the time to live plus the wait time from Now).
func (l *FairLock) TryLock(ctx context.Context, wait, lease time.Duration) (acquired bool, ttl time.Duration, err error) {
	cmd := fairTryLock.Run(ctx, l.c, []string{l.Name, l.Queue, l.Timeout},
		l.leaseArg(lease), l.LockName, l.waitArg(wait), l.Now().UnixMilli())
	return l.tryLockReply(cmd, lease)
}

// AcquireFailed is RedissonFairLock.acquireFailedAsync, what RFairLock.tryLock calls when its wait
// time runs out: the owner leaves Queue and Timeout, and the owners after it have the wait time
// (wait, or WaitTimeout when wait is 0 or less) taken off their timeouts.
func (l *FairLock) AcquireFailed(ctx context.Context, wait time.Duration) error {
	return noReply(fairAcquireFailed.Run(ctx, l.c, []string{l.Queue, l.Timeout}, l.LockName, l.waitArg(wait)).Err())
}

// Unlock is RFairLock.unlock(), answering as [Lock.Unlock]; when it frees the lock (or finds it
// free) it publishes [UnlockMessage] on the channel of the first owner in Queue.
func (l *FairLock) Unlock(ctx context.Context) (bool, error) {
	return l.unlock(ctx, l.UnlockRequest)
}

// UnlockRequest is the unlock script alone (RedissonFairLock.unlockInnerAsync(threadId, requestId,
// timeout)) with the request id requestID, as [Lock.UnlockRequest].
func (l *FairLock) UnlockRequest(ctx context.Context, requestID string) (bool, error) {
	return unlockReply(fairUnlock.Run(ctx, l.c,
		[]string{l.Name, l.Queue, l.Timeout, l.Channel, l.UnlockLatchName(requestID)},
		UnlockMessage, l.InternalLockLeaseTime().Milliseconds(), l.LockName, l.Now().UnixMilli(), l.Publish,
		l.UnlockLatchTimeout.Milliseconds()))
}

// Renew is one renewal of Redisson's watchdog for the owner, as [Lock.Renew].
func (l *FairLock) Renew(ctx context.Context) (bool, error) {
	return l.renew(ctx)
}

// ReadLock is the read lock of a Redisson RReadWriteLock (RedissonReadLock): one reader of the
// read-write lock Name. Its Channel is redisson_rwlock:{Name}.
type ReadLock struct {
	Owner
	// WriteLockName is LockName:write, the owner's field when it holds the write lock, which lets it
	// take the read lock too (getWriteLockName).
	WriteLockName string
	// TimeoutPrefix is {Name}:LockName:rwlock_timeout (getReadWriteTimeoutNamePrefix): the key of the
	// owner's n-th hold is TimeoutPrefix:n, with that hold's lease as its time to live.
	TimeoutPrefix string
	// KeyPrefix is TimeoutPrefix up to ":LockName" (getKeyPrefix): {Name}, or Name when it has a
	// hash tag.
	KeyPrefix string
}

// NewReadLock returns the Redisson read lock client (RReadWriteLock.readLock()) of the read-write
// lock name on c for the thread threadID of the client clientID.
func NewReadLock(c redis.UniversalClient, name, clientID string, threadID int64) *ReadLock {
	l := &ReadLock{Owner: newOwner(c, name, prefixName("redisson_rwlock", name), clientID, threadID)}
	l.WriteLockName = l.LockName + ":write"
	l.TimeoutPrefix = suffixName(name, l.LockName) + ":rwlock_timeout"
	// Java's timeoutPrefix.split(":" + lockName)[0]; a lock name has no regular expression meta
	// characters when the client id is a UUID.
	l.KeyPrefix, _, _ = strings.Cut(l.TimeoutPrefix, ":"+l.LockName)
	return l
}

// TryLock is one acquisition of the read lock (RedissonReadLock.tryLockInnerAsync with EVAL_LONG),
// the lease as in [Lock.TryLock]. It acquires when the lock is free or held for reading, or when the
// owner holds the write lock; each hold sets the key TimeoutPrefix:n (n the owner's hold count) with
// the lease as its time to live. Otherwise it answers false and the lock's time to live.
func (l *ReadLock) TryLock(ctx context.Context, lease time.Duration) (acquired bool, ttl time.Duration, err error) {
	cmd := readTryLock.Run(ctx, l.c, []string{l.Name, l.TimeoutPrefix}, l.leaseArg(lease), l.LockName, l.WriteLockName)
	return l.tryLockReply(cmd, lease)
}

// Unlock is the read lock's unlock(): it drops one of the owner's holds and its timeout key; true
// when the lock was freed (and [UnlockMessage] published on Channel), false when it stays held, by
// this owner or another reader or a writer; [ErrNotHeld] when the owner holds no read lock (when the
// lock is free, [UnlockMessage] is published all the same, as in Redisson).
func (l *ReadLock) Unlock(ctx context.Context) (bool, error) {
	return l.unlock(ctx, l.UnlockRequest)
}

// UnlockRequest is the unlock script alone (RedissonReadLock.unlockInnerAsync(threadId, requestId,
// timeout)) with the request id requestID, as [Lock.UnlockRequest].
func (l *ReadLock) UnlockRequest(ctx context.Context, requestID string) (bool, error) {
	return unlockReply(readUnlock.Run(ctx, l.c,
		[]string{l.Name, l.Channel, l.TimeoutPrefix, l.KeyPrefix, l.UnlockLatchName(requestID)},
		UnlockMessage, l.LockName, l.Publish, l.UnlockLatchTimeout.Milliseconds()))
}

// Renew is one renewal of Redisson's watchdog for the reader (ReadLockTask, for this one lock
// name): true when it holds the read lock, whose time to live and that of each of the owner's
// timeout keys is then WatchdogTimeout; false when it does not.
func (l *ReadLock) Renew(ctx context.Context) (bool, error) {
	res, err := readLockRenew.Run(ctx, l.c, []string{l.Name, l.KeyPrefix},
		l.WatchdogTimeout.Milliseconds(), 1, l.LockName).Int64Slice()
	if err != nil {
		return false, err
	}
	return len(res) == 1 && res[0] == 1, nil
}

// WriteLock is the write lock of a Redisson RReadWriteLock (RedissonWriteLock): one writer of the
// read-write lock Name. Its Channel is redisson_rwlock:{Name}; its LockName is ClientID:ThreadID:write.
type WriteLock struct {
	Owner
}

// NewWriteLock returns the Redisson write lock client (RReadWriteLock.writeLock()) of the
// read-write lock name on c for the thread threadID of the client clientID.
func NewWriteLock(c redis.UniversalClient, name, clientID string, threadID int64) *WriteLock {
	l := &WriteLock{Owner: newOwner(c, name, prefixName("redisson_rwlock", name), clientID, threadID)}
	l.LockName += ":write"
	return l
}

// TryLock is one acquisition of the write lock (RedissonWriteLock.tryLockInnerAsync with
// EVAL_LONG), the lease as in [Lock.TryLock]. It acquires when the lock is free, or re-enters when
// the owner holds the write lock (adding the lease to the lock's time to live); otherwise it
// answers false and the lock's time to live.
func (l *WriteLock) TryLock(ctx context.Context, lease time.Duration) (acquired bool, ttl time.Duration, err error) {
	cmd := writeTryLock.Run(ctx, l.c, []string{l.Name}, l.leaseArg(lease), l.LockName)
	return l.tryLockReply(cmd, lease)
}

// Unlock is the write lock's unlock(): true when the owner's last write hold was dropped (the lock
// then freed, with [ReadUnlockMessage] published on Channel, or, when the owner still holds read
// locks, left in the mode "read"); false when it still holds the write lock; [ErrNotHeld] when it
// does not hold it (when the lock is free, [ReadUnlockMessage] is published all the same).
func (l *WriteLock) Unlock(ctx context.Context) (bool, error) {
	return l.unlock(ctx, l.UnlockRequest)
}

// UnlockRequest is the unlock script alone (RedissonWriteLock.unlockInnerAsync(threadId, requestId,
// timeout)) with the request id requestID, as [Lock.UnlockRequest].
func (l *WriteLock) UnlockRequest(ctx context.Context, requestID string) (bool, error) {
	return unlockReply(writeUnlock.Run(ctx, l.c, []string{l.Name, l.Channel, l.UnlockLatchName(requestID)},
		ReadUnlockMessage, l.InternalLockLeaseTime().Milliseconds(), l.LockName, l.Publish,
		l.UnlockLatchTimeout.Milliseconds()))
}

// Renew is one renewal of Redisson's watchdog for the writer, as [Lock.Renew].
func (l *WriteLock) Renew(ctx context.Context) (bool, error) {
	return l.renew(ctx)
}
