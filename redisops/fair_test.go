package redisops_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// fairWindow is the wait window of the fair lock tests that do not wait for a waiter to be purged.
const fairWindow = 10 * time.Second

// fairTry makes one FairAcquire attempt with an unknown hold count and fails the test on an error.
func fairTry(t *testing.T, ops *redisops.Ops, name, owner string, l, w time.Duration, enqueue bool) redisops.Acquired {
	t.Helper()
	got, err := ops.FairAcquire(t.Context(), name, owner, l, w, redisops.UnknownHoldCount, enqueue)
	if err != nil {
		t.Fatalf("FairAcquire(%q, %q): %v", name, owner, err)
	}
	return got
}

// mustFairAcquire takes the fair lock, failing unless it is obtained.
func mustFairAcquire(t *testing.T, ops *redisops.Ops, name, owner string, l time.Duration) redisops.Acquired {
	t.Helper()
	got := fairTry(t, ops, name, owner, l, fairWindow, true)
	if !got.OK {
		t.Fatalf("FairAcquire(%q, %q): got %+v, want OK", name, owner, got)
	}
	return got
}

// mustFairQueue makes a queueing attempt that must not obtain the lock, and returns its answer.
func mustFairQueue(t *testing.T, ops *redisops.Ops, name, owner string, w time.Duration) redisops.Acquired {
	t.Helper()
	got := fairTry(t, ops, name, owner, lease, w, true)
	if got.OK || got.TTL < time.Millisecond {
		t.Fatalf("FairAcquire(%q, %q): got %+v, want not OK with a TTL of at least 1ms", name, owner, got)
	}
	return got
}

// checkFairTTL fails unless got lies in (want-ttlSlack, want].
func checkFairTTL(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got <= want-ttlSlack || got > want {
		t.Errorf("%s: got %v, want about %v", what, got, want)
	}
}

// checkFairQueue fails unless the queue LIST holds exactly owners, in order, and the timeout ZSET holds the
// same owners with scores increasing in queue order.
func checkFairQueue(t *testing.T, c *redis.Client, name string, owners ...string) {
	t.Helper()
	list, err := c.LRange(t.Context(), redisops.FairQueueKey(name), 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE: %v", err)
	}
	if !slices.Equal(list, owners) && (len(list) > 0 || len(owners) > 0) {
		t.Fatalf("queue: got %q, want %q", list, owners)
	}
	zs, err := c.ZRangeWithScores(t.Context(), redisops.FairTimeoutKey(name), 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE: %v", err)
	}
	members := make([]string, 0, len(zs))
	for i, z := range zs {
		members = append(members, z.Member.(string))
		if i > 0 && z.Score <= zs[i-1].Score {
			t.Errorf("timeouts: score of %v not above its predecessor's %v", z, zs[i-1])
		}
	}
	if !slices.Equal(members, owners) && (len(members) > 0 || len(owners) > 0) {
		t.Fatalf("timeouts by score: got %q, want %q", members, owners)
	}
	if len(owners) == 0 {
		checkGone(t, c, redisops.FairQueueKey(name))
		checkGone(t, c, redisops.FairTimeoutKey(name))
	}
}

// fairScore returns owner's score in the timeout ZSET, failing when it has none.
func fairScore(t *testing.T, c *redis.Client, name, owner string) int64 {
	t.Helper()
	s, err := c.ZScore(t.Context(), redisops.FairTimeoutKey(name), owner).Result()
	if err != nil {
		t.Fatalf("ZSCORE %q: %v", owner, err)
	}
	return int64(s)
}

// fairServerMillis returns the Redis server's clock in milliseconds.
func fairServerMillis(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now.UnixMilli()
}

// fairExpire marks owner's window as passed, as if it had died long ago.
func fairExpire(t *testing.T, c *redis.Client, name, owner string) {
	t.Helper()
	z := redis.Z{Score: float64(fairServerMillis(t, c) - 1), Member: owner}
	if err := c.ZAddXX(t.Context(), redisops.FairTimeoutKey(name), z).Err(); err != nil {
		t.Fatalf("ZADD XX %q: %v", owner, err)
	}
}

// fairToken returns the value of the fencing token counter.
func fairToken(t *testing.T, c *redis.Client, name string) int64 {
	t.Helper()
	n, err := c.Get(t.Context(), redisops.TokenKey(name)).Int64()
	if err != nil {
		t.Fatalf("GET token: %v", err)
	}
	return n
}

func TestFairKeyNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fn   string
		got  string
		want string
	}{
		{"FairQueueKey", redisops.FairQueueKey("orders"), "redisson_lock_queue:{orders}"},
		{"FairQueueKey braces", redisops.FairQueueKey("a{b}c"), "redisson_lock_queue:a{b}c"},
		{"FairTimeoutKey", redisops.FairTimeoutKey("orders"), "redisson_lock_timeout:{orders}"},
		{"FairTimeoutKey braces", redisops.FairTimeoutKey("a{b}c"), "redisson_lock_timeout:a{b}c"},
		{"FairChannelName", redisops.FairChannelName("orders", "u:1"), "redisson_lock__channel:{orders}:u:1"},
		{"FairChannelName braces", redisops.FairChannelName("a{b}c", "u:1"), "redisson_lock__channel:a{b}c:u:1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.fn, tt.got, tt.want)
		}
	}
}

// TestFairKeysShareSlot checks that the fair lock's keys and the owners' channels (for SPUBLISH) land in
// the lock key's Redis Cluster slot.
func TestFairKeysShareSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes"))
	c := srv.Client(t)
	for _, name := range []string{"orders", "a{b}c", "{user:1}:lock", "x:y:z"} {
		want, err := c.ClusterKeySlot(t.Context(), redisops.LockKey(name)).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", name, err)
		}
		for _, k := range []string{
			redisops.FairQueueKey(name),
			redisops.FairTimeoutKey(name),
			redisops.FairChannelName(name, "uuid:{x}:7"),
		} {
			got, err := c.ClusterKeySlot(t.Context(), k).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
			}
			if got != want {
				t.Errorf("slot of %q: got %d, want %d (slot of lock key %q)", k, got, want, name)
			}
		}
	}
}

func TestFairScriptsLoad(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	scripts := redisops.FairScripts()
	for _, name := range []string{"fair_acquire", "fair_release", "fair_cancel", "fair_forceunlock"} {
		if scripts[name] == nil {
			t.Errorf("FairScripts()[%q]: missing", name)
		}
	}
	for name, s := range scripts {
		if redisops.Scripts()[name] != s {
			t.Errorf("Scripts()[%q]: not the fair script", name)
		}
		sha, err := s.Load(t.Context(), c).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD %s: %v", name, err)
		}
		if sha != s.Hash() {
			t.Errorf("SCRIPT LOAD %s sha: got %s, want %s", name, sha, s.Hash())
		}
	}
}

func TestFairAcquire(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("free and re-entry", func(t *testing.T) {
		name := t.Name()
		got := mustFairAcquire(t, ops, name, "A", lease)
		if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: 1}); got != want {
			t.Errorf("first FairAcquire: got %+v, want %+v", got, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
		checkPTTL(t, c, redisops.LockKey(name), lease)
		checkFairQueue(t, c, name)

		got = mustFairAcquire(t, ops, name, "A", longLease)
		if want := (redisops.Acquired{OK: true, HoldCount: 2, Token: 2}); got != want {
			t.Errorf("re-entry: got %+v, want %+v", got, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "2"})
		checkPTTL(t, c, redisops.LockKey(name), longLease)

		// A single attempt on a free lock takes it as well; the token keeps counting up.
		other := name + "/other"
		if err := c.Set(t.Context(), redisops.TokenKey(other), 41, 0).Err(); err != nil {
			t.Fatalf("SET token: %v", err)
		}
		got = fairTry(t, ops, other, "B", lease, fairWindow, false)
		if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: 42}); got != want {
			t.Errorf("single attempt on a free lock: got %+v, want %+v", got, want)
		}
		checkFairQueue(t, c, other)
	})

	t.Run("retry is idempotent", func(t *testing.T) {
		name := t.Name()
		first, err := ops.FairAcquire(t.Context(), name, "A", lease, fairWindow, 0, true)
		if err != nil || !first.OK || first.HoldCount != 1 {
			t.Fatalf("first FairAcquire = %+v, %v", first, err)
		}
		replay, err := ops.FairAcquire(t.Context(), name, "A", longLease, fairWindow, 0, true)
		// The same hold, with a fresh token (see TestAcquireRetryIsIdempotent).
		if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: first.Token + 1}); err != nil || replay != want {
			t.Fatalf("replayed FairAcquire = %+v, %v; want %+v", replay, err, want)
		}
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		reentry, err := ops.FairAcquire(t.Context(), name, "A", lease, fairWindow, 1, true)
		if err != nil || reentry.HoldCount != 2 || reentry.Token != first.Token+2 {
			t.Fatalf("re-entry = %+v, %v; want count 2, token %d", reentry, err, first.Token+2)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "2"})
		if got := fairToken(t, c, name); got != first.Token+2 {
			t.Errorf("token counter: got %d, want %d", got, first.Token+2)
		}
	})

	t.Run("held by another", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		got := mustFairQueue(t, ops, name, "B", fairWindow)
		checkFairTTL(t, "TTL of a queued waiter", got.TTL, lease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
		if got := fairToken(t, c, name); got != 1 {
			t.Errorf("token counter: got %d, want 1", got)
		}
	})
}

func TestFairEnqueueOrder(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	mustFairAcquire(t, ops, name, "A", lease)

	before := fairServerMillis(t, c)
	ttls := map[string]time.Duration{}
	for _, o := range []string{"B", "C", "D"} {
		ttls[o] = mustFairQueue(t, ops, name, o, fairWindow).TTL
	}
	after := fairServerMillis(t, c)
	checkFairQueue(t, c, name, "B", "C", "D")

	// The first waiter's window starts when the lease runs out; every later one starts when its
	// predecessor's ends.
	w := fairWindow.Milliseconds()
	b := fairScore(t, c, name, "B")
	if low, high := before+lease.Milliseconds()-2000, after+lease.Milliseconds()+w; b <= low || b > high {
		t.Errorf("score of B: got %d, want in (%d, %d]", b, low, high)
	}
	if got := fairScore(t, c, name, "C"); got != b+w {
		t.Errorf("score of C: got %d, want %d", got, b+w)
	}
	if got := fairScore(t, c, name, "D"); got != b+2*w {
		t.Errorf("score of D: got %d, want %d", got, b+2*w)
	}
	// Every waiter is told to look again when the lease runs out, since an expiring lease publishes
	// nothing.
	checkFairTTL(t, "TTL of B", ttls["B"], lease)
	checkFairTTL(t, "TTL of C", ttls["C"], lease)
	checkFairTTL(t, "TTL of D", ttls["D"], lease)

	// Trying again keeps the place and the score.
	for range 3 {
		got := mustFairQueue(t, ops, name, "C", fairWindow)
		checkFairTTL(t, "TTL of C's retry", got.TTL, lease)
	}
	if got := fairScore(t, c, name, "C"); got != b+w {
		t.Errorf("score of C after retries: got %d, want %d", got, b+w)
	}
	got := mustFairQueue(t, ops, name, "B", fairWindow)
	checkFairTTL(t, "TTL of B's retry", got.TTL, lease)
	checkFairQueue(t, c, name, "B", "C", "D")
}

func TestFairSingleAttemptLeavesNoTrace(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("held", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		got := fairTry(t, ops, name, "B", lease, fairWindow, false)
		if got.OK {
			t.Fatalf("single attempt on a held lock: got %+v, want not OK", got)
		}
		checkFairTTL(t, "TTL", got.TTL, lease)
		checkFairQueue(t, c, name)
	})

	t.Run("held with waiters", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		got := fairTry(t, ops, name, "C", lease, fairWindow, false)
		if got.OK {
			t.Fatalf("single attempt: got %+v, want not OK", got)
		}
		checkFairTTL(t, "TTL", got.TTL, lease)
		checkFairQueue(t, c, name, "B")
	})

	t.Run("free with waiters", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); err != nil {
			t.Fatalf("FairRelease: %v", err)
		}
		got := fairTry(t, ops, name, "C", lease, fairWindow, false)
		if got.OK {
			t.Fatalf("single attempt while B is at the head: got %+v, want not OK", got)
		}
		// B's window ends at its score: about lease + window from now.
		checkFairTTL(t, "TTL", got.TTL, lease+fairWindow)
		checkFairQueue(t, c, name, "B")
		checkGone(t, c, redisops.LockKey(name))
	})

	t.Run("no expiry", func(t *testing.T) {
		name := t.Name()
		if err := c.HSet(t.Context(), name, "A", 1).Err(); err != nil {
			t.Fatalf("HSET: %v", err)
		}
		got := fairTry(t, ops, name, "B", lease, fairWindow, false)
		if want := (redisops.Acquired{TTL: -1}); got != want {
			t.Errorf("single attempt on a lock without expiry: got %+v, want %+v", got, want)
		}
		checkFairQueue(t, c, name)
	})
}

func TestFairOnlyHeadAcquires(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	prev := mustFairAcquire(t, ops, name, "A", lease)
	mustFairQueue(t, ops, name, "B", fairWindow)
	mustFairQueue(t, ops, name, "C", fairWindow)
	mustFairQueue(t, ops, name, "D", fairWindow)
	c0, d0 := fairScore(t, c, name, "C"), fairScore(t, c, name, "D")
	if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); err != nil {
		t.Fatalf("FairRelease: %v", err)
	}

	// The lock is free, but only the head may take it.
	for _, o := range []string{"C", "D", "E"} {
		got := fairTry(t, ops, name, o, lease, fairWindow, true)
		if got.OK || got.TTL < time.Millisecond {
			t.Errorf("FairAcquire by %s behind the head: got %+v, want not OK with a TTL", o, got)
		}
	}
	checkGone(t, c, redisops.LockKey(name))
	checkFairQueue(t, c, name, "B", "C", "D", "E")
	e0 := fairScore(t, c, name, "E")

	got := fairTry(t, ops, name, "B", lease, fairWindow, true)
	if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: prev.Token + 1}); got != want {
		t.Fatalf("FairAcquire by the head: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
	checkFairQueue(t, c, name, "C", "D", "E")
	// Everyone moved up one place, so one window earlier.
	w := fairWindow.Milliseconds()
	for o, want := range map[string]int64{"C": c0 - w, "D": d0 - w, "E": e0 - w} {
		if got := fairScore(t, c, name, o); got != want {
			t.Errorf("score of %s: got %d, want %d", o, got, want)
		}
	}
}

func TestFairReleaseNotifiesHead(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	plain := subscribe(t, c, redisops.ChannelName(name))
	psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
	psC := subscribe(t, c, redisops.FairChannelName(name, "C"))

	mustFairAcquire(t, ops, name, "A", lease)
	mustFairAcquire(t, ops, name, "A", lease)
	mustFairQueue(t, ops, name, "B", fairWindow)
	mustFairQueue(t, ops, name, "C", fairWindow)

	got, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil)
	if err != nil {
		t.Fatalf("FairRelease with holds left: %v", err)
	}
	if want := (redisops.Released{Remaining: 1}); got != want {
		t.Errorf("FairRelease with holds left: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	checkPTTL(t, c, redisops.LockKey(name), lease)

	got, err = ops.FairRelease(t.Context(), name, "A", "r2", lease, nil)
	if err != nil {
		t.Fatalf("last FairRelease: %v", err)
	}
	if want := (redisops.Released{Next: "B"}); got != want {
		t.Errorf("last FairRelease: got %+v, want %+v", got, want)
	}
	checkGone(t, c, redisops.LockKey(name))
	checkFairQueue(t, c, name, "B", "C")
	if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
		t.Errorf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
	}
	expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
	expectNoMessage(t, c, psC, redisops.FairChannelName(name, "C"))
	expectNoMessage(t, c, plain, redisops.ChannelName(name))

	// With no waiters, a release publishes nothing at all.
	mustFairAcquire(t, ops, name+"/alone", "A", lease)
	lone := subscribe(t, c, redisops.ChannelName(name+"/alone"))
	if _, err := ops.FairRelease(t.Context(), name+"/alone", "A", "r1", lease, nil); err != nil {
		t.Fatalf("FairRelease without waiters: %v", err)
	}
	checkGone(t, c, redisops.LockKey(name+"/alone"))
	expectNoMessage(t, c, lone, redisops.ChannelName(name+"/alone"))
}

// TestFairReleasePurgesDeadHead checks that a release tells the first live waiter, not a dead one.
func TestFairReleasePurgesDeadHead(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
	psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
	mustFairAcquire(t, ops, name, "A", lease)
	mustFairQueue(t, ops, name, "B", fairWindow)
	mustFairQueue(t, ops, name, "C", fairWindow)
	fairExpire(t, c, name, "B")

	if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); err != nil {
		t.Fatalf("FairRelease: %v", err)
	}
	checkFairQueue(t, c, name, "C")
	if msg := nextMessage(t, psC); msg != redisops.UnlockMessage {
		t.Errorf("message to C: got %q, want %q", msg, redisops.UnlockMessage)
	}
	expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
}

func TestFairReleaseRetry(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("holds remain", func(t *testing.T) {
		name := t.Name()
		for range 3 {
			mustFairAcquire(t, ops, name, "A", lease)
		}
		for i := range 2 {
			got, err := ops.FairRelease(t.Context(), name, "A", "req", lease, nil)
			if err != nil {
				t.Fatalf("FairRelease attempt %d: %v", i+1, err)
			}
			if want := (redisops.Released{Remaining: 2}); got != want {
				t.Errorf("FairRelease attempt %d: got %+v, want %+v", i+1, got, want)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "2"})
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "req"), redisops.DefaultLatchExpiry)
	})

	t.Run("last hold", func(t *testing.T) {
		name := t.Name()
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		var first redisops.Released
		for i := range 2 {
			got, err := ops.FairRelease(t.Context(), name, "A", "req", lease, nil)
			if err != nil {
				t.Fatalf("FairRelease attempt %d: %v", i+1, err)
			}
			// The first call names the waiter it woke; the stored answer of a retry does too.
			want := redisops.Released{Next: "B"}
			if got != want {
				t.Errorf("FairRelease attempt %d: got %+v, want %+v", i+1, got, want)
			}
			if i == 0 {
				first = got
				// B takes the lock between the attempts: the retry must still answer as the first.
				mustFairAcquire(t, ops, name, "B", lease)
			} else if got.Remaining != first.Remaining {
				t.Errorf("retried FairRelease: got %+v, want %+v", got, first)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
		checkFairQueue(t, c, name)
		// Only the first attempt released, so only one notice went out.
		if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
			t.Errorf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
	})
}

func TestFairReleaseNotHeld(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	plain := subscribe(t, c, redisops.ChannelName(name))
	psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
	mustFairAcquire(t, ops, name, "A", lease)
	mustFairQueue(t, ops, name, "B", fairWindow)
	b0 := fairScore(t, c, name, "B")

	for _, o := range []string{"B", "C"} {
		_, err := ops.FairRelease(t.Context(), name, o, "r-"+o, lease, nil)
		if !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("FairRelease by non-owner %s: got error %v, want %v", o, err, redisops.ErrNotHeld)
		}
		checkGone(t, c, redisops.UnlockLatchKey(name, "r-"+o))
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	checkPTTL(t, c, redisops.LockKey(name), lease)
	checkFairQueue(t, c, name, "B")
	if got := fairScore(t, c, name, "B"); got != b0 {
		t.Errorf("score of B: got %d, want %d", got, b0)
	}
	expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
	expectNoMessage(t, c, plain, redisops.ChannelName(name))

	if _, err := ops.FairRelease(t.Context(), name+"/free", "A", "r1", lease, nil); !errors.Is(err, redisops.ErrNotHeld) {
		t.Errorf("FairRelease of a free lock: got error %v, want %v", err, redisops.ErrNotHeld)
	}
}

func TestFairCancel(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	w := fairWindow.Milliseconds()

	t.Run("shifts later waiters", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		for _, o := range []string{"B", "C", "D", "E"} {
			mustFairQueue(t, ops, name, o, fairWindow)
		}
		b, c0, d, e := fairScore(t, c, name, "B"), fairScore(t, c, name, "C"), fairScore(t, c, name, "D"), fairScore(t, c, name, "E")

		ok, err := ops.FairCancel(t.Context(), name, "C", fairWindow)
		if err != nil || !ok {
			t.Fatalf("FairCancel(C): got %v, %v; want true", ok, err)
		}
		checkFairQueue(t, c, name, "B", "D", "E")
		for o, want := range map[string]int64{"B": b, "D": d - w, "E": e - w} {
			if got := fairScore(t, c, name, o); got != want {
				t.Errorf("score of %s: got %d, want %d", o, got, want)
			}
		}
		// D now ends its window where C's used to end.
		if got := fairScore(t, c, name, "D"); got != c0 {
			t.Errorf("score of D: got %d, want C's old score %d", got, c0)
		}

		ok, err = ops.FairCancel(t.Context(), name, "C", fairWindow)
		if err != nil || ok {
			t.Fatalf("second FairCancel(C): got %v, %v; want false", ok, err)
		}
		ok, err = ops.FairCancel(t.Context(), name, "A", fairWindow)
		if err != nil || ok {
			t.Fatalf("FairCancel of the holder: got %v, %v; want false", ok, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
		checkFairQueue(t, c, name, "B", "D", "E")

		ok, err = ops.FairCancel(t.Context(), name, "E", fairWindow)
		if err != nil || !ok {
			t.Fatalf("FairCancel(E): got %v, %v; want true", ok, err)
		}
		checkFairQueue(t, c, name, "B", "D")
		if got := fairScore(t, c, name, "D"); got != d-w {
			t.Errorf("score of D after the tail left: got %d, want %d", got, d-w)
		}
	})

	t.Run("head of a free lock notifies the next", func(t *testing.T) {
		name := t.Name()
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		mustFairQueue(t, ops, name, "C", fairWindow)
		if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); err != nil {
			t.Fatalf("FairRelease: %v", err)
		}
		if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
			t.Fatalf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
		}

		// B gives up instead of taking the lock: C is told at once and can take it.
		ok, err := ops.FairCancel(t.Context(), name, "B", fairWindow)
		if err != nil || !ok {
			t.Fatalf("FairCancel(B): got %v, %v; want true", ok, err)
		}
		if msg := nextMessage(t, psC); msg != redisops.UnlockMessage {
			t.Errorf("message to C: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
		checkFairQueue(t, c, name, "C")
		got := fairTry(t, ops, name, "C", lease, fairWindow, true)
		if !got.OK {
			t.Fatalf("FairAcquire by C: got %+v, want OK", got)
		}
		checkFairQueue(t, c, name)
	})

	t.Run("no notice while held or when not at the head", func(t *testing.T) {
		name := t.Name()
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		psD := subscribe(t, c, redisops.FairChannelName(name, "D"))
		mustFairAcquire(t, ops, name, "A", lease)
		for _, o := range []string{"B", "C", "D"} {
			mustFairQueue(t, ops, name, o, fairWindow)
		}
		// The head leaves while the lock is held: nobody is told.
		if ok, err := ops.FairCancel(t.Context(), name, "B", fairWindow); err != nil || !ok {
			t.Fatalf("FairCancel(B): got %v, %v; want true", ok, err)
		}
		if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); err != nil {
			t.Fatalf("FairRelease: %v", err)
		}
		if msg := nextMessage(t, psC); msg != redisops.UnlockMessage {
			t.Fatalf("message to C: got %q, want %q", msg, redisops.UnlockMessage)
		}
		// A waiter behind the head leaves while the lock is free: nobody is told either.
		if ok, err := ops.FairCancel(t.Context(), name, "D", fairWindow); err != nil || !ok {
			t.Fatalf("FairCancel(D): got %v, %v; want true", ok, err)
		}
		expectNoMessage(t, c, psC, redisops.FairChannelName(name, "C"))
		expectNoMessage(t, c, psD, redisops.FairChannelName(name, "D"))
		checkFairQueue(t, c, name, "C")
	})
}

// TestFairDeadWaiterPurged lets a waiter die (it never tries again): once its window has passed, the
// next waiter takes the lock.
func TestFairDeadWaiterPurged(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	const (
		shortLease  = 100 * time.Millisecond
		shortWindow = 50 * time.Millisecond
	)
	if got := fairTry(t, ops, name, "A", shortLease, shortWindow, true); !got.OK {
		t.Fatalf("FairAcquire by A: got %+v, want OK", got)
	}
	mustFairQueue(t, ops, name, "B", shortWindow)
	checkFairQueue(t, c, name, "B")

	deadline := time.Now().Add(5 * time.Second)
	for tries := 1; ; tries++ {
		got := fairTry(t, ops, name, "C", lease, shortWindow, true)
		if got.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("C did not get the lock within 5s (%d tries, last answer %+v)", tries, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"C": "1"})
	checkFairQueue(t, c, name)

	// B comes back late: it lost its place and queues again behind the holder.
	got := mustFairQueue(t, ops, name, "B", shortWindow)
	checkFairTTL(t, "TTL of B", got.TTL, lease)
	checkFairQueue(t, c, name, "B")
}

// TestFairScoresStayBounded checks that waiters joining and leaving do not push the scores of the
// others forward ("timeout drift").
func TestFairScoresStayBounded(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("waiters cancel", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		var owners []string
		for i := range 50 {
			if i == 25 {
				owners = append(owners, "X")
			}
			owners = append(owners, fmt.Sprintf("W%02d", i))
		}
		for _, o := range owners {
			mustFairQueue(t, ops, name, o, fairWindow)
		}
		checkFairQueue(t, c, name, owners...)
		first := fairScore(t, c, name, owners[0])
		for _, o := range owners {
			if o == "X" {
				continue
			}
			if ok, err := ops.FairCancel(t.Context(), name, o, fairWindow); err != nil || !ok {
				t.Fatalf("FairCancel(%s): got %v, %v; want true", o, ok, err)
			}
		}
		checkFairQueue(t, c, name, "X")
		// X is alone, so its window is the first one: exactly where the first waiter's was.
		if got := fairScore(t, c, name, "X"); got != first {
			t.Errorf("score of X: got %d, want %d", got, first)
		}
		got := mustFairQueue(t, ops, name, "X", fairWindow)
		checkFairTTL(t, "TTL of X", got.TTL, lease)
	})

	t.Run("waiters take the lock in turn", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		var owners []string
		for i := range 50 {
			owners = append(owners, fmt.Sprintf("W%02d", i))
		}
		for _, o := range owners {
			mustFairQueue(t, ops, name, o, fairWindow)
		}
		mustFairQueue(t, ops, name, "X", fairWindow)
		first := fairScore(t, c, name, owners[0])
		prev := "A"
		for _, o := range owners {
			if _, err := ops.FairRelease(t.Context(), name, prev, "r-"+prev, lease, nil); err != nil {
				t.Fatalf("FairRelease by %s: %v", prev, err)
			}
			if got := fairTry(t, ops, name, o, lease, fairWindow, true); !got.OK {
				t.Fatalf("FairAcquire by the head %s: got %+v, want OK", o, got)
			}
			// X keeps trying; that moves nothing either.
			mustFairQueue(t, ops, name, "X", fairWindow)
			prev = o
		}
		checkFairQueue(t, c, name, "X")
		// X moved up 50 places: its window is now exactly where the first waiter's was.
		if got := fairScore(t, c, name, "X"); got != first {
			t.Errorf("score of X: got %d, want %d", got, first)
		}
	})
}

func TestFairForceUnlock(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("held with waiters", func(t *testing.T) {
		name := t.Name()
		plain := subscribe(t, c, redisops.ChannelName(name))
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		mustFairQueue(t, ops, name, "C", fairWindow)
		fairExpire(t, c, name, "B")

		ok, err := ops.FairForceUnlock(t.Context(), name)
		if err != nil || !ok {
			t.Fatalf("FairForceUnlock: got %v, %v; want true", ok, err)
		}
		checkGone(t, c, redisops.LockKey(name))
		// The dead head was purged, and the live one told.
		checkFairQueue(t, c, name, "C")
		if msg := nextMessage(t, psC); msg != redisops.UnlockMessage {
			t.Errorf("message to C: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
		expectNoMessage(t, c, plain, redisops.ChannelName(name))
		if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("FairRelease after FairForceUnlock: got %v, want %v", err, redisops.ErrNotHeld)
		}
	})

	t.Run("free", func(t *testing.T) {
		name := t.Name()
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); err != nil {
			t.Fatalf("FairRelease: %v", err)
		}
		if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
			t.Fatalf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
		}
		ok, err := ops.FairForceUnlock(t.Context(), name)
		if err != nil || ok {
			t.Fatalf("FairForceUnlock of a free lock: got %v, %v; want false", ok, err)
		}
		expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
		checkFairQueue(t, c, name, "B")
	})
}

// TestFairWithPlainOps checks that Renew and Status of the plain lock work on a fair lock, and that the
// fair scripts run on a server whose script cache is empty.
func TestFairWithPlainOps(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	name := t.Name()
	mustFairAcquire(t, ops, name, "A", lease)
	mustFairAcquire(t, ops, name, "A", lease)
	if err := ops.Renew(t.Context(), name, "A", longLease); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	checkPTTL(t, c, redisops.LockKey(name), longLease)
	st, err := ops.Status(t.Context(), name, "A")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if !st.Locked || st.HoldCount != 2 {
		t.Errorf("Status: got %+v, want locked with count 2", st)
	}
	mustFairQueue(t, ops, name, "B", fairWindow)
	if ok, err := ops.FairCancel(t.Context(), name, "B", fairWindow); err != nil || !ok {
		t.Fatalf("FairCancel: got %v, %v; want true", ok, err)
	}
	if _, err := ops.FairRelease(t.Context(), name, "A", "r1", lease, nil); err != nil {
		t.Fatalf("FairRelease: %v", err)
	}
	if ok, err := ops.FairForceUnlock(t.Context(), name); err != nil || !ok {
		t.Fatalf("FairForceUnlock: got %v, %v; want true", ok, err)
	}
}

// fairReleaseWith releases one hold of owner with the handoff next and fails the test on an error.
func fairReleaseWith(t *testing.T, ops *redisops.Ops, name, owner, requestID string, next *redisops.Handoff) redisops.Released {
	t.Helper()
	got, err := ops.FairRelease(t.Context(), name, owner, requestID, lease, next)
	if err != nil {
		t.Fatalf("FairRelease(%q, %q): %v", name, owner, err)
	}
	return got
}

func TestFairReleaseHandoff(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	w := fairWindow.Milliseconds()

	t.Run("to the head", func(t *testing.T) {
		name := t.Name()
		plain := subscribe(t, c, redisops.ChannelName(name))
		plain2 := subscribe(t, c, redisops.ChannelName(name))
		ps := map[string]*redis.PubSub{}
		for _, o := range []string{"B", "C", "D"} {
			ps[o] = subscribe(t, c, redisops.FairChannelName(name, o))
		}
		prev := mustFairAcquire(t, ops, name, "A", lease)
		for _, o := range []string{"B", "C", "D"} {
			mustFairQueue(t, ops, name, o, fairWindow)
		}
		c0, d0 := fairScore(t, c, name, "C"), fairScore(t, c, name, "D")

		// OnlyIfAlone is ignored: other clients listen on the plain channel.
		next := &redisops.Handoff{Owner: "B", Lease: longLease, WaitWindow: fairWindow, OnlyIfAlone: true}
		got := fairReleaseWith(t, ops, name, "A", "r1", next)
		if want := (redisops.Released{HandedOff: true, Token: prev.Token + 1, Next: "B"}); got != want {
			t.Errorf("FairRelease with handoff: got %+v, want %+v", got, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		if tok := fairToken(t, c, name); tok != prev.Token+1 {
			t.Errorf("token counter: got %d, want %d", tok, prev.Token+1)
		}
		// B left the queue; the waiters behind it moved up one window, as when B wins FairAcquire.
		checkFairQueue(t, c, name, "C", "D")
		if got := fairScore(t, c, name, "C"); got != c0-w {
			t.Errorf("score of C: got %d, want %d", got, c0-w)
		}
		if got := fairScore(t, c, name, "D"); got != d0-w {
			t.Errorf("score of D: got %d, want %d", got, d0-w)
		}
		// Nothing was published: the lock is not free.
		for o, p := range ps {
			expectNoMessage(t, c, p, redisops.FairChannelName(name, o))
		}
		expectNoMessage(t, c, plain, redisops.ChannelName(name))
		expectNoMessage(t, c, plain2, redisops.ChannelName(name))

		// B holds the lock like any owner: it re-enters, renews, and its release tells C.
		if got := mustFairAcquire(t, ops, name, "B", lease); got.HoldCount != 2 || got.Token != prev.Token+2 {
			t.Errorf("re-entry by B: got %+v, want count 2, token %d", got, prev.Token+2)
		}
		if err := ops.Renew(t.Context(), name, "B", lease); err != nil {
			t.Errorf("Renew by B: %v", err)
		}
		if _, err := ops.FairRelease(t.Context(), name, "A", "r2", lease, nil); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("FairRelease by the former owner: got %v, want %v", err, redisops.ErrNotHeld)
		}
		fairReleaseWith(t, ops, name, "B", "r3", nil)
		if got := fairReleaseWith(t, ops, name, "B", "r4", nil); got != (redisops.Released{Next: "C"}) {
			t.Errorf("FairRelease by B: got %+v, want Next C", got)
		}
		if msg := nextMessage(t, ps["C"]); msg != redisops.UnlockMessage {
			t.Errorf("message to C: got %q, want %q", msg, redisops.UnlockMessage)
		}
	})

	t.Run("a next that is not the head", func(t *testing.T) {
		for i, next := range []*redisops.Handoff{
			{Owner: "C", Lease: longLease, WaitWindow: fairWindow},
			{Owner: "X", Lease: longLease, WaitWindow: fairWindow},
			nil,
		} {
			name := t.Name() + "/" + strconv.Itoa(i)
			psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
			psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
			prev := mustFairAcquire(t, ops, name, "A", lease)
			mustFairQueue(t, ops, name, "B", fairWindow)
			mustFairQueue(t, ops, name, "C", fairWindow)
			b0, c0 := fairScore(t, c, name, "B"), fairScore(t, c, name, "C")

			if got := fairReleaseWith(t, ops, name, "A", "r1", next); got != (redisops.Released{Next: "B"}) {
				t.Errorf("%d: FairRelease: got %+v, want Next B and no handoff", i, got)
			}
			checkGone(t, c, redisops.LockKey(name))
			checkFairQueue(t, c, name, "B", "C")
			if got := fairScore(t, c, name, "B"); got != b0 {
				t.Errorf("%d: score of B: got %d, want %d", i, got, b0)
			}
			if got := fairScore(t, c, name, "C"); got != c0 {
				t.Errorf("%d: score of C: got %d, want %d", i, got, c0)
			}
			if tok := fairToken(t, c, name); tok != prev.Token {
				t.Errorf("%d: token counter: got %d, want %d", i, tok, prev.Token)
			}
			if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
				t.Errorf("%d: message to B: got %q, want %q", i, msg, redisops.UnlockMessage)
			}
			expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
			expectNoMessage(t, c, psC, redisops.FairChannelName(name, "C"))
		}
	})

	t.Run("an empty queue", func(t *testing.T) {
		name := t.Name()
		prev := mustFairAcquire(t, ops, name, "A", lease)
		got := fairReleaseWith(t, ops, name, "A", "r1", &redisops.Handoff{Owner: "B", Lease: lease, WaitWindow: fairWindow})
		if got != (redisops.Released{}) {
			t.Errorf("FairRelease: got %+v, want a plain release", got)
		}
		checkGone(t, c, redisops.LockKey(name))
		checkFairQueue(t, c, name)
		if tok := fairToken(t, c, name); tok != prev.Token {
			t.Errorf("token counter: got %d, want %d", tok, prev.Token)
		}
	})

	t.Run("holds remain", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		got := fairReleaseWith(t, ops, name, "A", "r1", &redisops.Handoff{Owner: "B", Lease: lease, WaitWindow: fairWindow})
		if got != (redisops.Released{Remaining: 1}) {
			t.Errorf("FairRelease: got %+v, want Remaining 1", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
		checkFairQueue(t, c, name, "B")
	})

	t.Run("a purged head is skipped", func(t *testing.T) {
		name := t.Name()
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		prev := mustFairAcquire(t, ops, name, "A", lease)
		for _, o := range []string{"B", "C", "D"} {
			mustFairQueue(t, ops, name, o, fairWindow)
		}
		d0 := fairScore(t, c, name, "D")
		fairExpire(t, c, name, "B")

		// C is the live head behind the dead B: it gets the lock.
		got := fairReleaseWith(t, ops, name, "A", "r1", &redisops.Handoff{Owner: "C", Lease: lease, WaitWindow: fairWindow})
		if want := (redisops.Released{HandedOff: true, Token: prev.Token + 1, Next: "C"}); got != want {
			t.Errorf("FairRelease: got %+v, want %+v", got, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"C": "1"})
		checkFairQueue(t, c, name, "D")
		if got := fairScore(t, c, name, "D"); got != d0-w {
			t.Errorf("score of D: got %d, want %d", got, d0-w)
		}
		expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
		expectNoMessage(t, c, psC, redisops.FairChannelName(name, "C"))

		// The dead head itself gets nothing: the live head is told instead.
		name2 := name + "/dead"
		psB2 := subscribe(t, c, redisops.FairChannelName(name2, "B"))
		psC2 := subscribe(t, c, redisops.FairChannelName(name2, "C"))
		mustFairAcquire(t, ops, name2, "A", lease)
		mustFairQueue(t, ops, name2, "B", fairWindow)
		mustFairQueue(t, ops, name2, "C", fairWindow)
		fairExpire(t, c, name2, "B")
		got = fairReleaseWith(t, ops, name2, "A", "r1", &redisops.Handoff{Owner: "B", Lease: lease, WaitWindow: fairWindow})
		if got != (redisops.Released{Next: "C"}) {
			t.Errorf("FairRelease to a dead head: got %+v, want Next C and no handoff", got)
		}
		checkGone(t, c, redisops.LockKey(name2))
		checkFairQueue(t, c, name2, "C")
		if msg := nextMessage(t, psC2); msg != redisops.UnlockMessage {
			t.Errorf("message to C: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, psB2, redisops.FairChannelName(name2, "B"))
	})

	t.Run("without a wait window", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, "B", fairWindow)
		mustFairQueue(t, ops, name, "C", fairWindow)
		c0 := fairScore(t, c, name, "C")
		got := fairReleaseWith(t, ops, name, "A", "r1", &redisops.Handoff{Owner: "B", Lease: lease})
		if !got.HandedOff || got.Next != "B" {
			t.Errorf("FairRelease: got %+v, want a handoff to B", got)
		}
		if got := fairScore(t, c, name, "C"); got != c0 {
			t.Errorf("score of C: got %d, want %d (unchanged)", got, c0)
		}
	})

	t.Run("retry", func(t *testing.T) {
		name := t.Name()
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		prev := mustFairAcquire(t, ops, name, "A", lease)
		for _, o := range []string{"B", "C", "D"} {
			mustFairQueue(t, ops, name, o, fairWindow)
		}
		next := &redisops.Handoff{Owner: "B", Lease: lease, WaitWindow: fairWindow}
		first := fairReleaseWith(t, ops, name, "A", "req", next)
		if want := (redisops.Released{HandedOff: true, Token: prev.Token + 1, Next: "B"}); first != want {
			t.Fatalf("FairRelease: got %+v, want %+v", first, want)
		}
		c1, d1 := fairScore(t, c, name, "C"), fairScore(t, c, name, "D")
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "req"), redisops.DefaultLatchExpiry)

		// The retry returns the same answer, and neither pops C nor moves the scores nor issues a
		// token; a retry with another next (or none) too.
		for _, again := range []*redisops.Handoff{next, {Owner: "C", Lease: lease, WaitWindow: fairWindow}, nil} {
			if got := fairReleaseWith(t, ops, name, "A", "req", again); got != first {
				t.Errorf("retried FairRelease (next %+v): got %+v, want %+v", again, got, first)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
		checkFairQueue(t, c, name, "C", "D")
		if got := fairScore(t, c, name, "C"); got != c1 {
			t.Errorf("score of C: got %d, want %d", got, c1)
		}
		if got := fairScore(t, c, name, "D"); got != d1 {
			t.Errorf("score of D: got %d, want %d", got, d1)
		}
		if tok := fairToken(t, c, name); tok != prev.Token+1 {
			t.Errorf("token counter: got %d, want %d", tok, prev.Token+1)
		}
		expectNoMessage(t, c, psC, redisops.FairChannelName(name, "C"))

		// After B released too, a late retry of A's release still answers the same.
		fairReleaseWith(t, ops, name, "B", "r2", nil)
		if got := fairReleaseWith(t, ops, name, "A", "req", next); got != first {
			t.Errorf("late retried FairRelease: got %+v, want %+v", got, first)
		}
	})

	t.Run("an owner id with colons survives the latch", func(t *testing.T) {
		name := t.Name()
		const b = "0f3c-uuid:worker:7"
		mustFairAcquire(t, ops, name, "A", lease)
		mustFairQueue(t, ops, name, b, fairWindow)
		first := fairReleaseWith(t, ops, name, "A", "req", &redisops.Handoff{Owner: b, Lease: lease, WaitWindow: fairWindow})
		if !first.HandedOff || first.Next != b {
			t.Fatalf("FairRelease: got %+v, want a handoff to %q", first, b)
		}
		if got := fairReleaseWith(t, ops, name, "A", "req", nil); got != first {
			t.Errorf("retried FairRelease: got %+v, want %+v", got, first)
		}
	})

	t.Run("an older latch", func(t *testing.T) {
		// A latch written before the handoff ("remaining:token") still answers.
		name := t.Name()
		if err := c.Set(t.Context(), redisops.UnlockLatchKey(name, "req"), "0:0", time.Minute).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
		if got := fairReleaseWith(t, ops, name, "A", "req", nil); got != (redisops.Released{}) {
			t.Errorf("FairRelease with an older latch: got %+v, want a plain release", got)
		}
	})
}

// TestFairQueueKeepsPlacesAlive: a waiter queued with FairQueue gets one window from now as its
// deadline, not the sum of the windows ahead of it and the holder's lease; FairRefresh pushes the
// deadlines of queued waiters forward and reports the ones that are not queued; a waiter queued with
// Redisson's arithmetic behind them still gets the previous deadline plus its window.
func TestFairQueueKeepsPlacesAlive(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	const window = 2 * time.Second
	w := window.Milliseconds()
	mustFairAcquire(t, ops, name, "A", lease)
	for _, o := range []string{"B", "C"} {
		before := fairServerMillis(t, c)
		got, err := ops.FairQueue(t.Context(), name, o, lease, window, 0)
		if err != nil || got.OK {
			t.Fatalf("FairQueue(%s) = %+v, %v; want queued", o, got, err)
		}
		after := fairServerMillis(t, c)
		if s := fairScore(t, c, name, o); s < before+w || s > after+w {
			t.Errorf("score of %s: got now%+dms, want one window (%dms) from now", o, s-after, w)
		}
	}
	d := mustFairQueue(t, ops, name, "D", window) // Redisson's arithmetic
	if got, want := fairScore(t, c, name, "D"), fairScore(t, c, name, "C")+w; got != want {
		t.Errorf("score of D: got %d, want C's + one window = %d", got, want)
	}
	checkFairTTL(t, "TTL of D", d.TTL, lease)

	c0 := fairScore(t, c, name, "C")
	queued, err := ops.FairRefresh(t.Context(), name, []redisops.FairPlace{
		{Owner: "B", WaitWindow: window}, {Owner: "X", WaitWindow: window}, {Owner: "C", WaitWindow: 3 * window}})
	want := []redisops.FairPlaceState{redisops.FairPlaceQueued, redisops.FairPlaceGone, redisops.FairPlaceQueued}
	if err != nil || !slices.Equal(queued, want) {
		t.Fatalf("FairRefresh = %v, %v; want %v", queued, err, want)
	}
	now := fairServerMillis(t, c)
	if s := fairScore(t, c, name, "C"); s < now+3*w-100 || s > now+3*w || s <= c0 {
		t.Errorf("score of C after its refresh: got now%+dms, want now+%dms", s-now, 3*w)
	}
	if q := c.LRange(t.Context(), redisops.FairQueueKey(name), 0, -1).Val(); !slices.Equal(q, []string{"B", "C", "D"}) {
		t.Errorf("queue after the refresh: got %q, want [B C D]", q)
	}
	if _, err := c.ZScore(t.Context(), redisops.FairTimeoutKey(name), "X").Result(); err == nil {
		t.Error("FairRefresh of an owner that is not queued gave it a score")
	}
}

// TestFairAcquireTellsTheHead: when an attempt finds the lock free but another waiter at the head (the
// holder's lease ran out, which publishes nothing), that waiter is told on its channel.
func TestFairAcquireTellsTheHead(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
	mustFairAcquire(t, ops, name, "A", 50*time.Millisecond)
	if got, err := ops.FairQueue(t.Context(), name, "B", lease, fairWindow, 0); err != nil || got.OK {
		t.Fatalf("FairQueue(B) = %+v, %v; want queued", got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Exists(t.Context(), redisops.LockKey(name)).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lease of A did not run out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := fairTry(t, ops, name, "C", lease, fairWindow, true); got.OK {
		t.Fatalf("FairAcquire by C behind B: got %+v, want not OK", got)
	}
	if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
		t.Errorf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
	}
}
