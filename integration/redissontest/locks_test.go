package redissontest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// TestLockScriptsAreRedissons: each script's SHA1 is that of the concatenated Java string literals
// of the call it names at redisson commit 66863978b4a92093b97c1f8c96f182a77e81d50e, so the scripts
// share Redis's script cache with Redisson's.
func TestLockScriptsAreRedissons(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script *redis.Script
		sha1   string
	}{
		{"RedissonLock.tryLockInnerAsync", lockTryLock, "149c5a8bf18676fd99e9e6e24923bd64d9b62f94"},
		{"RedissonLock.unlockInnerAsync", lockUnlock, "6866459238a13a701d42f4971f12d9f3a50e2442"},
		{"LockTask.buildChunk", lockRenew, "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635"},
		{"ReadLockTask.buildChunk", readLockRenew, "38d2b478dfbe264ab67c221b7e4be62245f00ba0"},
		{"RedissonFairLock.tryLockInnerAsync EVAL_LONG", fairTryLock, "8f6ed299ffd259f0539c20f89253998c0777ea75"},
		{"RedissonFairLock.unlockInnerAsync", fairUnlock, "367f80bd2e300e411fb0936d9b601e5bcb3fd4b6"},
		{"RedissonFairLock.acquireFailedAsync", fairAcquireFailed, "d1ddef65ad80886b5d36e023c99930044ddd653a"},
		{"RedissonReadLock.tryLockInnerAsync", readTryLock, "95553a6ff11176c18e71344e89d116b06fd6f753"},
		{"RedissonReadLock.unlockInnerAsync", readUnlock, "6e1b10e11ac0a3ed8e902562ecd32ce01b553039"},
		{"RedissonWriteLock.tryLockInnerAsync", writeTryLock, "6306ba3bf1f563b284bed52d305fce615c6664d9"},
		{"RedissonWriteLock.unlockInnerAsync", writeUnlock, "21f5fb0f8ddfa9be5c3e0c9757c128796add75c6"},
	} {
		if got := tc.script.Hash(); got != tc.sha1 {
			t.Errorf("%s: SHA1 %s, Redisson's is %s", tc.name, got, tc.sha1)
		}
	}
}

// TestLockKeyNames: keys, channels and owner names as Redisson builds them, for a name without and
// with a hash tag.
func TestLockKeyNames(t *testing.T) {
	const id = "6f1c1a52-3b8e-4a57-9d1e-2f0b6c1d9a10"
	for _, tc := range []struct {
		name                                         string
		channel, queue, timeout, rwChannel, rwPrefix string
		keyPrefix, latch                             string
	}{
		{"n", "redisson_lock__channel:{n}", "redisson_lock_queue:{n}", "redisson_lock_timeout:{n}",
			"redisson_rwlock:{n}", "{n}:" + id + ":7:rwlock_timeout", "{n}", "redisson_unlock_latch:{n}:r"},
		{"{t}n", "redisson_lock__channel:{t}n", "redisson_lock_queue:{t}n", "redisson_lock_timeout:{t}n",
			"redisson_rwlock:{t}n", "{t}n:" + id + ":7:rwlock_timeout", "{t}n", "redisson_unlock_latch:{t}n:r"},
	} {
		l := NewLock(nil, tc.name, id, 7)
		f := NewFairLock(nil, tc.name, id, 7)
		r := NewReadLock(nil, tc.name, id, 7)
		w := NewWriteLock(nil, tc.name, id, 7)
		for _, c := range []struct{ what, got, want string }{
			{"lock name", l.LockName, id + ":7"},
			{"lock channel", l.Channel, tc.channel},
			{"unlock latch", l.UnlockLatchName("r"), tc.latch},
			{"fair lock channel", f.Channel, tc.channel},
			{"fair lock owner channel", f.OwnerChannel, tc.channel + ":" + id + ":7"},
			{"fair lock queue", f.Queue, tc.queue},
			{"fair lock timeout", f.Timeout, tc.timeout},
			{"read lock name", r.LockName, id + ":7"},
			{"read lock write name", r.WriteLockName, id + ":7:write"},
			{"read lock channel", r.Channel, tc.rwChannel},
			{"read lock timeout prefix", r.TimeoutPrefix, tc.rwPrefix},
			{"read lock key prefix", r.KeyPrefix, tc.keyPrefix},
			{"write lock name", w.LockName, id + ":7:write"},
			{"write lock channel", w.Channel, tc.rwChannel},
		} {
			if c.got != c.want {
				t.Errorf("%q: %s = %q, want %q", tc.name, c.what, c.got, c.want)
			}
		}
	}
}

// startRedis starts a redis-server for the test and returns a client of it.
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Start(t).Client(t)
}

// subscribe subscribes c to channel and returns its messages once the subscription is confirmed.
func subscribe(t *testing.T, c *redis.Client, channel string) <-chan *redis.Message {
	t.Helper()
	ps := c.Subscribe(t.Context(), channel)
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(t.Context()); err != nil {
		t.Fatalf("subscribe %s: %v", channel, err)
	}
	return ps.Channel()
}

// expectMessage waits up to 5 seconds for the message payload on ch.
func expectMessage(t *testing.T, ch <-chan *redis.Message, channel, payload string) {
	t.Helper()
	select {
	case m := <-ch:
		if m.Channel != channel || m.Payload != payload {
			t.Fatalf("message %q on %s, want %q on %s", m.Payload, m.Channel, payload, channel)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no message %q on %s", payload, channel)
	}
}

// expectNoMessage checks that nothing was published on channel, whose messages are ch: it publishes
// a marker there and expects it to be the next message, Redis delivering a channel's messages in
// order.
func expectNoMessage(t *testing.T, c *redis.Client, ch <-chan *redis.Message, channel string) {
	t.Helper()
	const marker = "redissontest:marker"
	if err := c.Publish(t.Context(), channel, marker).Err(); err != nil {
		t.Fatal(err)
	}
	expectMessage(t, ch, channel, marker)
}

func mustAcquire(t *testing.T, what string, acquired bool, ttl time.Duration, err error) {
	t.Helper()
	if err != nil || !acquired || ttl != 0 {
		t.Fatalf("%s: TryLock = %v, %v, %v; want acquired", what, acquired, ttl, err)
	}
}

func mustRefuse(t *testing.T, what string, acquired bool, ttl, max time.Duration, err error) {
	t.Helper()
	if err != nil || acquired || ttl <= 0 || ttl > max {
		t.Fatalf("%s: TryLock = %v, %v, %v; want refused with a TTL in (0, %v]", what, acquired, ttl, err, max)
	}
}

func hget(t *testing.T, c *redis.Client, key, field string) string {
	t.Helper()
	v, err := c.HGet(t.Context(), key, field).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func pttl(t *testing.T, c *redis.Client, key string) time.Duration {
	t.Helper()
	d, err := c.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func exists(t *testing.T, c *redis.Client, key string) bool {
	t.Helper()
	n, err := c.Exists(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func lrange(t *testing.T, c *redis.Client, key string) []string {
	t.Helper()
	v, err := c.LRange(t.Context(), key, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func zscore(t *testing.T, c *redis.Client, key, member string) int64 {
	t.Helper()
	v, err := c.ZScore(t.Context(), key, member).Result()
	if err != nil {
		t.Fatalf("ZSCORE %s %s: %v", key, member, err)
	}
	return int64(v)
}

// TestLock: RLock's acquire, re-entry, refusal of a second owner with the TTL, watchdog renewal,
// unlock latch and unlock with its message.
func TestLock(t *testing.T) {
	c := startRedis(t)
	ctx := t.Context()
	name := "redissontest:lock:" + t.Name()
	idA, idB := NewClientID(), NewClientID()
	a, b := NewLock(c, name, idA, 1), NewLock(c, name, idB, 1)
	sameClient := NewLock(c, name, idA, 2)

	ok, ttl, err := a.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "a", ok, ttl, err)
	if got := hget(t, c, name, idA+":1"); got != "1" {
		t.Fatalf("hold count %q, want 1", got)
	}
	if d := pttl(t, c, name); d <= 0 || d > 10*time.Second {
		t.Fatalf("PTTL %v, want the 10s lease", d)
	}
	if d := a.InternalLockLeaseTime(); d != 10*time.Second {
		t.Fatalf("InternalLockLeaseTime %v after a 10s lease", d)
	}
	ok, ttl, err = a.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "a re-enters", ok, ttl, err)
	if got := hget(t, c, name, idA+":1"); got != "2" {
		t.Fatalf("hold count %q after re-entry, want 2", got)
	}
	ok, ttl, err = b.TryLock(ctx, 10*time.Second)
	mustRefuse(t, "b", ok, ttl, 10*time.Second, err)
	ok, ttl, err = sameClient.TryLock(ctx, 0)
	mustRefuse(t, "another thread of a's client", ok, ttl, 10*time.Second, err)

	if ok, err := b.Renew(ctx); ok || err != nil {
		t.Fatalf("b.Renew = %v, %v; want false", ok, err)
	}
	if ok, err := a.Renew(ctx); !ok || err != nil {
		t.Fatalf("a.Renew = %v, %v; want true", ok, err)
	}
	if d := pttl(t, c, name); d <= 10*time.Second || d > DefaultWatchdogTimeout {
		t.Fatalf("PTTL %v after the renewal, want the watchdog's %v", d, DefaultWatchdogTimeout)
	}
	if _, err := b.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("b.Unlock: %v, want ErrNotHeld", err)
	}

	// The latch: the same request again answers the same without touching the lock.
	const req = "0123456789abcdef0123456789abcdef"
	if freed, err := a.UnlockRequest(ctx, req); freed || err != nil {
		t.Fatalf("a.UnlockRequest = %v, %v; want false (still held)", freed, err)
	}
	if freed, err := a.UnlockRequest(ctx, req); freed || err != nil {
		t.Fatalf("a.UnlockRequest again = %v, %v; want false from the latch", freed, err)
	}
	if got := hget(t, c, name, idA+":1"); got != "1" {
		t.Fatalf("hold count %q after a request and its repeat, want 1", got)
	}
	if d := pttl(t, c, name); d <= 0 || d > 10*time.Second {
		t.Fatalf("PTTL %v after the partial unlock, want internalLockLeaseTime 10s", d)
	}
	if d := pttl(t, c, a.UnlockLatchName(req)); d <= 0 || d > DefaultUnlockLatchTimeout {
		t.Fatalf("latch PTTL %v, want up to %v", d, DefaultUnlockLatchTimeout)
	}

	msgs := subscribe(t, c, a.Channel)
	if freed, err := a.Unlock(ctx); !freed || err != nil {
		t.Fatalf("a.Unlock = %v, %v; want true", freed, err)
	}
	expectMessage(t, msgs, a.Channel, "0")
	if exists(t, c, name) {
		t.Fatal("the lock's key is still there after the last unlock")
	}
	if d := a.InternalLockLeaseTime(); d != DefaultWatchdogTimeout {
		t.Fatalf("InternalLockLeaseTime %v after the unlock, want the watchdog's", d)
	}
	if _, err := a.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("a.Unlock of a free lock: %v, want ErrNotHeld", err)
	}
	expectNoMessage(t, c, msgs, a.Channel)

	// Without a lease the lock is taken for the watchdog timeout.
	ok, ttl, err = b.TryLock(ctx, 0)
	mustAcquire(t, "b after the unlock", ok, ttl, err)
	if d := pttl(t, c, name); d <= 10*time.Second || d > DefaultWatchdogTimeout {
		t.Fatalf("PTTL %v without a lease, want the watchdog's %v", d, DefaultWatchdogTimeout)
	}
}

// TestFairLock: RFairLock queues the owners it refuses, in order, with Redisson's timeouts; the
// unlock tells the first of them on its channel; only the first may take the free lock; an owner
// that gives up leaves the queue; timed out owners are dropped.
func TestFairLock(t *testing.T) {
	c := startRedis(t)
	ctx := t.Context()
	name := "redissontest:fairlock:" + t.Name()
	now := time.Now()
	clock := func() time.Time { return now }
	owner := func(thread int64) *FairLock {
		l := NewFairLock(c, name, NewClientID(), thread)
		l.Now = clock
		return l
	}
	a, b, d := owner(1), owner(2), owner(3)
	const wait = 5 * time.Second

	ok, ttl, err := a.TryLock(ctx, wait, 10*time.Second)
	mustAcquire(t, "a", ok, ttl, err)
	ok, ttl, err = a.TryLock(ctx, wait, 10*time.Second)
	mustAcquire(t, "a re-enters", ok, ttl, err)
	if got := hget(t, c, name, a.LockName); got != "2" {
		t.Fatalf("hold count %q after re-entry, want 2", got)
	}

	ok, ttlB, err := b.TryLock(ctx, wait, 10*time.Second)
	mustRefuse(t, "b", ok, ttlB, 10*time.Second, err)
	if q := lrange(t, c, b.Queue); !slices.Equal(q, []string{b.LockName}) {
		t.Fatalf("queue %q, want [b]", q)
	}
	scoreB := zscore(t, c, b.Timeout, b.LockName)
	if want := ttlB.Milliseconds() + wait.Milliseconds() + now.UnixMilli(); scoreB != want {
		t.Fatalf("b's timeout %d, want ttl + wait + now = %d", scoreB, want)
	}
	ok, ttlD, err := d.TryLock(ctx, wait, 10*time.Second)
	if err != nil || ok || ttlD != time.Duration(scoreB-now.UnixMilli())*time.Millisecond {
		t.Fatalf("d: TryLock = %v, %v, %v; want refused with b's timeout from now", ok, ttlD, err)
	}
	if q := lrange(t, c, d.Queue); !slices.Equal(q, []string{b.LockName, d.LockName}) {
		t.Fatalf("queue %q, want [b d]", q)
	}
	if got, want := zscore(t, c, d.Timeout, d.LockName), scoreB+wait.Milliseconds(); got != want {
		t.Fatalf("d's timeout %d, want b's plus the wait %d", got, want)
	}
	// Asking again keeps the place.
	ok, ttl, err = b.TryLock(ctx, wait, 10*time.Second)
	mustRefuse(t, "b again", ok, ttl, 10*time.Second, err)
	if q := lrange(t, c, b.Queue); !slices.Equal(q, []string{b.LockName, d.LockName}) {
		t.Fatalf("queue %q after b asked again, want [b d]", q)
	}

	toB := subscribe(t, c, b.OwnerChannel)
	if freed, err := a.Unlock(ctx); freed || err != nil {
		t.Fatalf("a.Unlock = %v, %v; want false (still held)", freed, err)
	}
	expectNoMessage(t, c, toB, b.OwnerChannel)
	if freed, err := a.Unlock(ctx); !freed || err != nil {
		t.Fatalf("a.Unlock = %v, %v; want true", freed, err)
	}
	expectMessage(t, toB, b.OwnerChannel, "0")
	if exists(t, c, name) {
		t.Fatal("the lock's key is still there after the last unlock")
	}

	// d is not first: refused though the lock is free, with 0 (it is queued already).
	ok, ttl, err = d.TryLock(ctx, wait, 10*time.Second)
	if err != nil || ok || ttl != 0 {
		t.Fatalf("d before b: TryLock = %v, %v, %v; want refused with 0", ok, ttl, err)
	}
	ok, ttl, err = b.TryLock(ctx, wait, 10*time.Second)
	mustAcquire(t, "b, first in the queue", ok, ttl, err)
	if q := lrange(t, c, b.Queue); !slices.Equal(q, []string{d.LockName}) {
		t.Fatalf("queue %q after b acquired, want [d]", q)
	}
	if got, want := zscore(t, c, d.Timeout, d.LockName), scoreB; got != want {
		t.Fatalf("d's timeout %d after b acquired, want it less b's wait: %d", got, want)
	}

	// d gives up: it leaves the queue and the timeouts.
	if err := d.AcquireFailed(ctx, wait); err != nil {
		t.Fatal(err)
	}
	if q := lrange(t, c, d.Queue); len(q) != 0 {
		t.Fatalf("queue %q after d gave up, want empty", q)
	}
	if n, err := c.ZCard(ctx, d.Timeout).Result(); n != 0 || err != nil {
		t.Fatalf("ZCARD timeouts = %d, %v after d gave up, want 0", n, err)
	}

	// A queued owner whose place timed out is dropped by the next caller.
	ok, _, err = d.TryLock(ctx, wait, 10*time.Second)
	if ok || err != nil {
		t.Fatalf("d: TryLock = %v, %v; want refused", ok, err)
	}
	late := owner(4)
	later := now.Add(time.Hour)
	late.Now = func() time.Time { return later }
	ok, _, err = late.TryLock(ctx, wait, 10*time.Second)
	if ok || err != nil {
		t.Fatalf("late: TryLock = %v, %v; want refused (b holds the lock)", ok, err)
	}
	if q := lrange(t, c, late.Queue); !slices.Equal(q, []string{late.LockName}) {
		t.Fatalf("queue %q an hour later, want [late] (d timed out)", q)
	}

	if ok, err := b.Renew(ctx); !ok || err != nil {
		t.Fatalf("b.Renew = %v, %v; want true", ok, err)
	}
	if _, err := d.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("d.Unlock: %v, want ErrNotHeld", err)
	}
	if freed, err := b.Unlock(ctx); !freed || err != nil {
		t.Fatalf("b.Unlock = %v, %v; want true", freed, err)
	}
}

// TestReadLocksShared: two owners share the read lock, each hold with its rwlock_timeout key; a
// writer is refused; the read lock is freed with the last reader's unlock, and its message.
func TestReadLocksShared(t *testing.T) {
	c := startRedis(t)
	ctx := t.Context()
	name := "redissontest:rwlock:" + t.Name()
	id1, id2 := NewClientID(), NewClientID()
	r1, r2 := NewReadLock(c, name, id1, 1), NewReadLock(c, name, id2, 1)
	w := NewWriteLock(c, name, NewClientID(), 1)
	timeoutKey := func(id string, n string) string {
		return "{" + name + "}:" + id + ":1:rwlock_timeout:" + n
	}

	ok, ttl, err := r1.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "r1", ok, ttl, err)
	ok, ttl, err = r1.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "r1 re-enters", ok, ttl, err)
	ok, ttl, err = r2.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "r2", ok, ttl, err)
	if got := hget(t, c, name, "mode"); got != "read" {
		t.Fatalf("mode %q, want read", got)
	}
	if got1, got2 := hget(t, c, name, id1+":1"), hget(t, c, name, id2+":1"); got1 != "2" || got2 != "1" {
		t.Fatalf("hold counts %q, %q; want 2, 1", got1, got2)
	}
	for _, k := range []string{timeoutKey(id1, "1"), timeoutKey(id1, "2"), timeoutKey(id2, "1")} {
		if d := pttl(t, c, k); d <= 0 || d > 10*time.Second {
			t.Fatalf("PTTL %s = %v, want the 10s lease", k, d)
		}
	}
	if exists(t, c, timeoutKey(id2, "2")) {
		t.Fatal("r2 has a second timeout key for one hold")
	}

	ok, ttl, err = w.TryLock(ctx, 10*time.Second)
	mustRefuse(t, "writer while read", ok, ttl, 10*time.Second, err)

	if ok, err := r1.Renew(ctx); !ok || err != nil {
		t.Fatalf("r1.Renew = %v, %v; want true", ok, err)
	}
	for _, k := range []string{name, timeoutKey(id1, "1"), timeoutKey(id1, "2")} {
		if d := pttl(t, c, k); d <= 10*time.Second || d > DefaultWatchdogTimeout {
			t.Fatalf("PTTL %s = %v after the renewal, want the watchdog's %v", k, d, DefaultWatchdogTimeout)
		}
	}

	msgs := subscribe(t, c, r1.Channel)
	for i := range 2 {
		if freed, err := r1.Unlock(ctx); freed || err != nil {
			t.Fatalf("r1.Unlock #%d = %v, %v; want false (r2 still reads)", i+1, freed, err)
		}
	}
	if exists(t, c, timeoutKey(id1, "1")) || exists(t, c, timeoutKey(id1, "2")) || hget(t, c, name, id1+":1") != "" {
		t.Fatal("r1's holds or timeout keys are still there after its unlocks")
	}
	if _, err := r1.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("r1.Unlock after its last hold: %v, want ErrNotHeld", err)
	}
	expectNoMessage(t, c, msgs, r1.Channel)
	if freed, err := r2.Unlock(ctx); !freed || err != nil {
		t.Fatalf("r2.Unlock = %v, %v; want true", freed, err)
	}
	expectMessage(t, msgs, r2.Channel, "0")
	if exists(t, c, name) || exists(t, c, timeoutKey(id2, "1")) {
		t.Fatal("the lock or r2's timeout key is still there after the last unlock")
	}

	ok, ttl, err = w.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "writer after the readers", ok, ttl, err)
}

// TestWriteLockExcludes: the write lock excludes other writers and readers, is re-entrant, lets its
// own owner read, falls back to the mode read when its owner still reads, and is freed with its
// message.
func TestWriteLockExcludes(t *testing.T) {
	c := startRedis(t)
	ctx := t.Context()
	name := "redissontest:rwlock:" + t.Name()
	id := NewClientID()
	w := NewWriteLock(c, name, id, 1)
	ownRead := NewReadLock(c, name, id, 1)
	other := NewClientID()
	r := NewReadLock(c, name, other, 1)
	w2 := NewWriteLock(c, name, other, 2)

	ok, ttl, err := w.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "w", ok, ttl, err)
	if got, want := hget(t, c, name, "mode"), "write"; got != want {
		t.Fatalf("mode %q, want %q", got, want)
	}
	if got := hget(t, c, name, id+":1:write"); got != "1" {
		t.Fatalf("hold count of %s:1:write %q, want 1", id, got)
	}
	ok, ttl, err = w.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "w re-enters", ok, ttl, err)
	if got := hget(t, c, name, w.LockName); got != "2" {
		t.Fatalf("hold count %q after re-entry, want 2", got)
	}
	if d := pttl(t, c, name); d <= 10*time.Second || d > 20*time.Second {
		t.Fatalf("PTTL %v after re-entry, want the remaining lease plus 10s", d)
	}

	ok, ttl, err = r.TryLock(ctx, 10*time.Second)
	mustRefuse(t, "reader while written", ok, ttl, 20*time.Second, err)
	ok, ttl, err = w2.TryLock(ctx, 10*time.Second)
	mustRefuse(t, "second writer", ok, ttl, 20*time.Second, err)
	ok, ttl, err = ownRead.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "the writer reads", ok, ttl, err)
	if ok, err := w.Renew(ctx); !ok || err != nil {
		t.Fatalf("w.Renew = %v, %v; want true", ok, err)
	}
	if ok, err := w2.Renew(ctx); ok || err != nil {
		t.Fatalf("w2.Renew = %v, %v; want false", ok, err)
	}
	if _, err := w2.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("w2.Unlock: %v, want ErrNotHeld", err)
	}

	msgs := subscribe(t, c, w.Channel)
	if freed, err := w.Unlock(ctx); freed || err != nil {
		t.Fatalf("w.Unlock = %v, %v; want false (still held)", freed, err)
	}
	if freed, err := w.Unlock(ctx); !freed || err != nil {
		t.Fatalf("w.Unlock = %v, %v; want true", freed, err)
	}
	expectNoMessage(t, c, msgs, w.Channel)
	if got := hget(t, c, name, "mode"); got != "read" {
		t.Fatalf("mode %q after the writer left while it reads, want read", got)
	}
	ok, ttl, err = r.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "reader after the write lock", ok, ttl, err)
	ok, ttl, err = w2.TryLock(ctx, 10*time.Second)
	mustRefuse(t, "writer while read", ok, ttl, 10*time.Second, err)
	for _, l := range []*ReadLock{ownRead, r} {
		if _, err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expectMessage(t, msgs, w.Channel, "0")

	ok, ttl, err = w2.TryLock(ctx, 0)
	mustAcquire(t, "w2 on the free lock", ok, ttl, err)
	if freed, err := w2.Unlock(ctx); !freed || err != nil {
		t.Fatalf("w2.Unlock = %v, %v; want true", freed, err)
	}
	expectMessage(t, msgs, w2.Channel, "1")
	if exists(t, c, name) {
		t.Fatal("the lock's key is still there after the last unlock")
	}
}

// TestUnlockLatchOutlivesItsRequest: an unlock that freed the lock answers true again from its
// latch even after another owner took the lock, leaving that owner's hold alone.
func TestUnlockLatchOutlivesItsRequest(t *testing.T) {
	c := startRedis(t)
	ctx := t.Context()
	name := "redissontest:lock:" + t.Name()
	a, b := NewLock(c, name, NewClientID(), 1), NewLock(c, name, NewClientID(), 1)
	ok, ttl, err := a.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "a", ok, ttl, err)
	const req = "fedcba9876543210fedcba9876543210"
	if freed, err := a.UnlockRequest(ctx, req); !freed || err != nil {
		t.Fatalf("a.UnlockRequest = %v, %v; want true", freed, err)
	}
	ok, ttl, err = b.TryLock(ctx, 10*time.Second)
	mustAcquire(t, "b", ok, ttl, err)
	if freed, err := a.UnlockRequest(ctx, req); !freed || err != nil {
		t.Fatalf("a.UnlockRequest repeated = %v, %v; want true from the latch", freed, err)
	}
	if got := hget(t, c, name, b.LockName); got != "1" {
		t.Fatalf("b's hold count %q after a's repeated request, want 1", got)
	}
	// Unlock deletes its latch: nothing is left but b's lock.
	if freed, err := b.Unlock(ctx); !freed || err != nil {
		t.Fatalf("b.Unlock = %v, %v", freed, err)
	}
	if err := c.Del(ctx, a.UnlockLatchName(req)).Err(); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, "*"+name+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left after the unlocks: %q, %v", keys, err)
	}
}
