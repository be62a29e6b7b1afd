// Package redissontest is a foreign client for tests: it speaks Redisson's protocol for RLock,
// RFairLock, RReadWriteLock (locks.go), RSemaphore,
// RPermitExpirableSemaphore and RCountDownLatch, with Redisson's own Lua scripts, keys, arguments and
// channels, so that tests can check that lockwarden's calls and a Redisson client's share state and
// messages both ways. It implements the Redis side of each call only: no waiting, no subscriptions,
// no retries.
//
// The scripts are copied verbatim (the same text, so the same SHA1) from github.com/redisson/redisson
// at commit 66863978b4a92093b97c1f8c96f182a77e81d50e (master after tag redisson-4.7.0; the three
// files last changed in ed88424179b4b76b6f8b12ae4dd62e46a571b53e), files
// redisson/src/main/java/org/redisson/RedissonSemaphore.java, RedissonPermitExpirableSemaphore.java
// and RedissonCountDownLatch.java, at the lines given with each. Times are the client's epoch
// milliseconds, as Redisson's System.currentTimeMillis().
package redissontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redisson's scripts, verbatim. Each is the concatenation of the Java string literals of the call it
// names, one literal per line.
var (
	// semTryAcquire is RedissonSemaphore.tryAcquireAsync0(int), RedissonSemaphore.java lines 267-272.
	semTryAcquire = redis.NewScript("local value = redis.call('get', KEYS[1]); " +
		"if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then " +
		"local val = redis.call('decrby', KEYS[1], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return 0;")

	// semRelease is RedissonSemaphore.releaseAsync(int), RedissonSemaphore.java lines 459-460.
	semRelease = redis.NewScript("local value = redis.call('incrby', KEYS[1], ARGV[1]); " +
		"redis.call(ARGV[2], KEYS[2], value); ")

	// semDrain is RedissonSemaphore.drainPermitsAsync(), RedissonSemaphore.java lines 509-514.
	semDrain = redis.NewScript("local value = redis.call('get', KEYS[1]); " +
		"if (value == false) then " +
		"return 0; " +
		"end; " +
		"redis.call('set', KEYS[1], 0); " +
		"return value;")

	// semTrySetPermits is RedissonSemaphore.trySetPermitsAsync(int), RedissonSemaphore.java lines 536-542.
	semTrySetPermits = redis.NewScript("local value = redis.call('get', KEYS[1]); " +
		"if (value == false) then " +
		"redis.call('set', KEYS[1], ARGV[1]); " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"return 1;" +
		"end;" +
		"return 0;")

	// semAddPermits is RedissonSemaphore.addPermitsAsync(int), RedissonSemaphore.java lines 596-601.
	semAddPermits = redis.NewScript("local value = redis.call('get', KEYS[1]); " +
		"if (value == false) then " +
		"value = 0;" +
		"end;" +
		"redis.call('set', KEYS[1], value + ARGV[1]); " +
		"redis.call(ARGV[2], KEYS[2], value + ARGV[1]); ")

	// permitsTryAcquire is RedissonPermitExpirableSemaphore.tryAcquireAsync(List<String>, long), RedissonPermitExpirableSemaphore.java lines 383-409.
	permitsTryAcquire = redis.NewScript("local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); " +
		"if #expiredIds > 0 then " +
		"redis.call('zrem', KEYS[2], unpack(expiredIds)); " +
		"local value = redis.call('incrby', KEYS[1], #expiredIds); " +
		"if tonumber(value) > 0 then " +
		"redis.call(ARGV[5], KEYS[3], value); " +
		"end;" +
		"end; " +
		"local value = redis.call('get', KEYS[1]); " +
		"if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then " +
		"redis.call('decrby', KEYS[1], ARGV[1]); " +
		"for i = 6, #ARGV, 1 do " +
		"redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); " +
		"end; " +
		"local ttl = redis.call('pttl', KEYS[1]); " +
		"if ttl > 0 then " +
		"redis.call('pexpire', KEYS[2], ttl); " +
		"end; " +
		"return 'OK'; " +
		"end; " +
		"local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); " +
		"if v[1] ~= nil and v[2] ~= ARGV[4] then " +
		"return ':' .. tostring(v[2]); " +
		"end " +
		"return nil;")

	// permitsTryRelease is RedissonPermitExpirableSemaphore.tryReleaseAsync(String), RedissonPermitExpirableSemaphore.java lines 619-629.
	permitsTryRelease = redis.NewScript("local expire = redis.call('zscore', KEYS[3], ARGV[1]);" +
		"local removed = redis.call('zrem', KEYS[3], ARGV[1]);" +
		"if tonumber(removed) ~= 1 then " +
		"return 0;" +
		"end;" +
		"local value = redis.call('incrby', KEYS[1], ARGV[2]); " +
		"redis.call(ARGV[4], KEYS[2], value); " +
		"if tonumber(expire) <= tonumber(ARGV[3]) then " +
		"return 0;" +
		"end;" +
		"return 1;")

	// permitsAvailable is RedissonPermitExpirableSemaphore.availablePermitsAsync(), RedissonPermitExpirableSemaphore.java lines 756-766.
	permitsAvailable = redis.NewScript("local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); " +
		"if #expiredIds > 0 then " +
		"redis.call('zrem', KEYS[2], unpack(expiredIds)); " +
		"local value = redis.call('incrby', KEYS[1], #expiredIds); " +
		"if tonumber(value) > 0 then " +
		"redis.call(ARGV[2], KEYS[3], value); " +
		"end;" +
		"return value; " +
		"end; " +
		"local ret = redis.call('get', KEYS[1]); " +
		"return ret == false and 0 or ret;")

	// permitsTrySetPermits is RedissonPermitExpirableSemaphore.trySetPermitsAsync(int), RedissonPermitExpirableSemaphore.java lines 845-851.
	permitsTrySetPermits = redis.NewScript("local value = redis.call('get', KEYS[1]); " +
		"if (value == false) then " +
		"redis.call('set', KEYS[1], ARGV[1]); " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"return 1;" +
		"end;" +
		"return 0;")

	// permitsAddPermits is RedissonPermitExpirableSemaphore.addPermitsAsync(int), RedissonPermitExpirableSemaphore.java lines 864-871.
	permitsAddPermits = redis.NewScript("local value = redis.call('get', KEYS[1]); " +
		"if (value == false) then " +
		"value = 0;" +
		"end;" +
		"redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1])); " +
		"if tonumber(ARGV[1]) > 0 then " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"end;")

	// latchCountDown is RedissonCountDownLatch.countDownAsync(), RedissonCountDownLatch.java lines 255-257.
	latchCountDown = redis.NewScript("local v = redis.call('decr', KEYS[1]);" +
		"if v <= 0 then redis.call('del', KEYS[1]) end;" +
		"if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;")

	// latchTrySetCount is RedissonCountDownLatch.trySetCountAsync(long), RedissonCountDownLatch.java lines 288-294.
	latchTrySetCount = redis.NewScript("if redis.call('exists', KEYS[1]) == 0 then " +
		"redis.call('set', KEYS[1], ARGV[2]); " +
		"redis.call(ARGV[3], KEYS[2], ARGV[1]); " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end")

	// latchDelete is RedissonCountDownLatch.deleteAsync(), RedissonCountDownLatch.java lines 302-307.
	latchDelete = redis.NewScript("if redis.call('del', KEYS[1]) == 1 then " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end")
)

// NonExpirableTimeout is Redisson's score of a permit acquired without a lease (nonExpirableTimeout).
const NonExpirableTimeout = 922337203685477

// publishCommand is the publish command Redisson passes its scripts on the deployment of c: SPUBLISH
// on Redis Cluster (PublishSubscribeService.shardingSupported, on Redis 7 and later), PUBLISH
// elsewhere.
func publishCommand(c redis.UniversalClient) string {
	if _, ok := c.(*redis.ClusterClient); ok {
		return "spublish"
	}
	return "publish"
}

// prefixName is Redisson's RedissonObject.prefixName.
func prefixName(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// suffixName is Redisson's RedissonObject.suffixName.
func suffixName(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// getLong is Redisson's GET with LongCodec: the decimal value of key, 0 when absent.
func getLong(ctx context.Context, c redis.UniversalClient, key string) (int64, error) {
	n, err := c.Get(ctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Semaphore is a Redisson RSemaphore client of the semaphore Name.
type Semaphore struct {
	c redis.UniversalClient
	// Name is the semaphore's name, its key; Channel is redisson_sc:{Name}.
	Name, Channel string
	// Publish is the publish command passed to the scripts ("publish" or "spublish").
	Publish string
}

// NewSemaphore returns a Redisson RSemaphore client of the semaphore name on c.
func NewSemaphore(c redis.UniversalClient, name string) *Semaphore {
	return &Semaphore{c: c, Name: name, Channel: prefixName("redisson_sc", name), Publish: publishCommand(c)}
}

// TrySetPermits is RSemaphore.trySetPermits(permits).
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	n, err := semTrySetPermits.Run(ctx, s.c, []string{s.Name, s.Channel}, permits, s.Publish).Int64()
	return n == 1, err
}

// AddPermits is RSemaphore.addPermits(delta).
func (s *Semaphore) AddPermits(ctx context.Context, delta int64) error {
	return noReply(semAddPermits.Run(ctx, s.c, []string{s.Name, s.Channel}, delta, s.Publish).Err())
}

// TryAcquire is RSemaphore.tryAcquire(permits): true without a call for 0 permits, as in Redisson.
func (s *Semaphore) TryAcquire(ctx context.Context, permits int64) (bool, error) {
	if permits < 0 {
		return false, fmt.Errorf("redissontest: permits %d: Permits amount can't be negative", permits)
	}
	if permits == 0 {
		return true, nil
	}
	n, err := semTryAcquire.Run(ctx, s.c, []string{s.Name}, permits).Int64()
	return n == 1, err
}

// Release is RSemaphore.release(permits): nothing for 0 permits, as in Redisson.
func (s *Semaphore) Release(ctx context.Context, permits int64) error {
	if permits < 0 {
		return fmt.Errorf("redissontest: permits %d: Permits amount can't be negative", permits)
	}
	if permits == 0 {
		return nil
	}
	return noReply(semRelease.Run(ctx, s.c, []string{s.Name, s.Channel}, permits, s.Publish).Err())
}

// AvailablePermits is RSemaphore.availablePermits(): a GET, 0 when absent.
func (s *Semaphore) AvailablePermits(ctx context.Context) (int64, error) {
	return getLong(ctx, s.c, s.Name)
}

// DrainPermits is RSemaphore.drainPermits().
func (s *Semaphore) DrainPermits(ctx context.Context) (int64, error) {
	return semDrain.Run(ctx, s.c, []string{s.Name}).Int64()
}

// PermitSemaphore is a Redisson RPermitExpirableSemaphore client (3.23.4 and later) of the semaphore
// Name.
type PermitSemaphore struct {
	c redis.UniversalClient
	// Name is the semaphore's name, the key of its available permits; Timeout is {Name}:timeout, the
	// ZSET of acquired permits; Channel is redisson_sc:{Name}.
	Name, Timeout, Channel string
	// Publish is the publish command passed to the scripts ("publish" or "spublish").
	Publish string
	// Now is the client's clock (System.currentTimeMillis()), time.Now unless a test sets another.
	Now func() time.Time
}

// NewPermitSemaphore returns a Redisson RPermitExpirableSemaphore client of the semaphore name on c.
func NewPermitSemaphore(c redis.UniversalClient, name string) *PermitSemaphore {
	return &PermitSemaphore{c: c, Name: name, Timeout: suffixName(name, "timeout"),
		Channel: prefixName("redisson_sc", name), Publish: publishCommand(c), Now: time.Now}
}

// TrySetPermits is RPermitExpirableSemaphore.trySetPermits(permits).
func (s *PermitSemaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	n, err := permitsTrySetPermits.Run(ctx, s.c, []string{s.Name, s.Channel}, permits, s.Publish).Int64()
	return n == 1, err
}

// AddPermits is RPermitExpirableSemaphore.addPermits(delta).
func (s *PermitSemaphore) AddPermits(ctx context.Context, delta int64) error {
	return noReply(permitsAddPermits.Run(ctx, s.c, []string{s.Name, s.Channel}, delta, s.Publish).Err())
}

// TryAcquire is RPermitExpirableSemaphore's tryAcquire(permits, leaseTime) as one script call (the
// internal tryAcquireAsync(ids, timeoutDate)): it makes one id per permit (ServiceManager.generateId)
// and returns them, 32 lower-case hex characters each, when the permits were acquired; nil when not
// (Redisson's ':'<expiry> and nil answers alike). A negative lease means none (Redisson's -1), which
// stores the permits with the score [NonExpirableTimeout].
func (s *PermitSemaphore) TryAcquire(ctx context.Context, permits int, lease time.Duration) ([]string, error) {
	ids, reply, err := s.tryAcquire(ctx, permits, lease)
	if err != nil || reply != "OK" {
		return nil, err
	}
	return ids, nil
}

// TryAcquireReply is [PermitSemaphore.TryAcquire] that also returns the script's raw answer: "OK",
// ":"<lowest expiry>, or "" for nil.
func (s *PermitSemaphore) TryAcquireReply(ctx context.Context, permits int, lease time.Duration) ([]string, string, error) {
	return s.tryAcquire(ctx, permits, lease)
}

func (s *PermitSemaphore) tryAcquire(ctx context.Context, permits int, lease time.Duration) ([]string, string, error) {
	if permits < 0 {
		return nil, "", fmt.Errorf("redissontest: permits %d: Permits amount can't be negative", permits)
	}
	now := s.Now().UnixMilli()
	timeoutDate := int64(NonExpirableTimeout)
	if lease >= 0 {
		timeoutDate = now + lease.Milliseconds()
	}
	ids := make([]string, permits)
	args := []any{permits, timeoutDate, now, int64(NonExpirableTimeout), s.Publish}
	for i := range ids {
		var b [16]byte
		_, _ = rand.Read(b[:])
		ids[i] = hex.EncodeToString(b[:])
		args = append(args, b[:])
	}
	reply, err := permitsTryAcquire.Run(ctx, s.c, []string{s.Name, s.Timeout, s.Channel}, args...).Text()
	if errors.Is(err, redis.Nil) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if reply != "OK" {
		return nil, reply, nil
	}
	return ids, reply, nil
}

// Release is RPermitExpirableSemaphore.tryRelease(id): true when the permit was acquired and its
// lease had not ended (Redisson's release(id) throws IllegalArgumentException on false, though an
// ended permit has been given back all the same).
func (s *PermitSemaphore) Release(ctx context.Context, id string) (bool, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, fmt.Errorf("redissontest: permit id %q: %w", id, err)
	}
	n, err := permitsTryRelease.Run(ctx, s.c, []string{s.Name, s.Channel, s.Timeout},
		raw, 1, s.Now().UnixMilli(), s.Publish).Int64()
	return n == 1, err
}

// AvailablePermits is RPermitExpirableSemaphore.availablePermits().
func (s *PermitSemaphore) AvailablePermits(ctx context.Context) (int64, error) {
	return permitsAvailable.Run(ctx, s.c, []string{s.Name, s.Timeout, s.Channel},
		s.Now().UnixMilli(), s.Publish).Int64()
}

// CountDownLatch is a Redisson RCountDownLatch client of the latch Name.
type CountDownLatch struct {
	c redis.UniversalClient
	// Name is the latch's name, its key; Channel is redisson_countdownlatch__channel__{Name}.
	Name, Channel string
	// Publish is the publish command passed to the scripts ("publish" or "spublish").
	Publish string
}

// Redisson's CountDownLatchPubSub messages.
const (
	ZeroCountMessage = 0
	NewCountMessage  = 1
)

// NewCountDownLatch returns a Redisson RCountDownLatch client of the latch name on c.
func NewCountDownLatch(c redis.UniversalClient, name string) *CountDownLatch {
	return &CountDownLatch{c: c, Name: name, Channel: "redisson_countdownlatch__channel__{" + name + "}",
		Publish: publishCommand(c)}
}

// TrySetCount is RCountDownLatch.trySetCount(count).
func (l *CountDownLatch) TrySetCount(ctx context.Context, count int64) (bool, error) {
	n, err := latchTrySetCount.Run(ctx, l.c, []string{l.Name, l.Channel},
		NewCountMessage, count, l.Publish).Int64()
	return n == 1, err
}

// CountDown is RCountDownLatch.countDown().
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	return noReply(latchCountDown.Run(ctx, l.c, []string{l.Name, l.Channel},
		ZeroCountMessage, l.Publish).Err())
}

// GetCount is RCountDownLatch.getCount(): a GET, 0 when absent.
func (l *CountDownLatch) GetCount(ctx context.Context) (int64, error) {
	return getLong(ctx, l.c, l.Name)
}

// Delete is RCountDownLatch.delete().
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	n, err := latchDelete.Run(ctx, l.c, []string{l.Name, l.Channel}, NewCountMessage, l.Publish).Int64()
	return n == 1, err
}

// noReply drops the redis.Nil of a script that answers nothing (Redisson's EVAL_VOID).
func noReply(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}
