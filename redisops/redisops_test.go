package redisops_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

const (
	lease      = 30 * time.Second
	longLease  = 90 * time.Second
	ttlSlack   = 2 * time.Second
	msgTimeout = 5 * time.Second
)

// setup starts a redis-server for the calling top-level test and returns an Ops on it together with a
// raw client for inspecting and preparing state. The Ops keeps persistent token counters, so that
// tests can check exact, sequential tokens; setupExpiringTokens has the default.
func setup(t *testing.T) (*redisops.Ops, *redis.Client) {
	t.Helper()
	ops, c := setupExpiringTokens(t)
	ops.SetTokenExpiry(0)
	return ops, c
}

// setupExpiringTokens is setup with the default token counters, which expire ([Ops.SetTokenExpiry]).
func setupExpiringTokens(t *testing.T) (*redisops.Ops, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	c := srv.Client(t)
	return redisops.New(c), c
}

// checkPTTL fails unless the key's PTTL lies in (want-ttlSlack, want].
func checkPTTL(t *testing.T, c *redis.Client, key string, want time.Duration) {
	t.Helper()
	got, err := c.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %q: %v", key, err)
	}
	if got <= want-ttlSlack || got > want {
		t.Errorf("PTTL %q: got %v, want about %v", key, got, want)
	}
}

// checkHash fails unless the lock hash holds exactly want.
func checkHash(t *testing.T, c *redis.Client, key string, want map[string]string) {
	t.Helper()
	got, err := c.HGetAll(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("HGETALL %q: %v", key, err)
	}
	if len(got) != len(want) {
		t.Fatalf("HGETALL %q: got %v, want %v", key, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("HGETALL %q: got %v, want %v", key, got, want)
		}
	}
}

// checkGone fails unless key does not exist.
func checkGone(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	n, err := c.Exists(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("EXISTS %q: %v", key, err)
	}
	if n != 0 {
		t.Errorf("EXISTS %q: got %d, want 0", key, n)
	}
}

// subscribe subscribes to channel and waits for the subscription confirmation, so that anything
// published afterwards is delivered.
func subscribe(t *testing.T, c *redis.Client, channel string) *redis.PubSub {
	t.Helper()
	ps := c.Subscribe(t.Context(), channel)
	t.Cleanup(func() { _ = ps.Close() })
	msg, err := ps.Receive(t.Context())
	if err != nil {
		t.Fatalf("subscribe %q: %v", channel, err)
	}
	sub, ok := msg.(*redis.Subscription)
	if !ok || sub.Kind != "subscribe" || sub.Channel != channel {
		t.Fatalf("subscribe %q: got confirmation %#v, want a subscribe to the channel", channel, msg)
	}
	return ps
}

// nextMessage returns the payload of the next message on ps, failing after msgTimeout.
func nextMessage(t *testing.T, ps *redis.PubSub) string {
	t.Helper()
	deadline := time.Now().Add(msgTimeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("no message within %v", msgTimeout)
		}
		msg, err := ps.ReceiveTimeout(t.Context(), left)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		switch m := msg.(type) {
		case *redis.Message:
			return m.Payload
		case *redis.Pong:
			continue
		default:
			t.Fatalf("receive: got %#v, want a message", msg)
		}
	}
}

// expectNoMessage checks that nothing was published on channel so far: it publishes a marker and
// requires it to be the next message, since a server delivers one connection's messages in order.
func expectNoMessage(t *testing.T, c *redis.Client, ps *redis.PubSub, channel string) {
	t.Helper()
	const marker = "marker"
	if err := c.Publish(t.Context(), channel, marker).Err(); err != nil {
		t.Fatalf("publish marker: %v", err)
	}
	if got := nextMessage(t, ps); got != marker {
		t.Fatalf("next message: got %q, want the marker %q (something was published before it)", got, marker)
	}
}

func mustAcquire(t *testing.T, ops *redisops.Ops, name, owner string, l time.Duration) redisops.Acquired {
	t.Helper()
	got, err := ops.Acquire(t.Context(), name, owner, l, redisops.UnknownHoldCount)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", name, owner, err)
	}
	if !got.OK {
		t.Fatalf("Acquire(%q, %q): got %+v, want OK", name, owner, got)
	}
	return got
}

func TestScriptsLoad(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	scripts := redisops.Scripts()
	for _, name := range []string{"acquire", "release", "renew", "forceunlock", "status"} {
		if scripts[name] == nil {
			t.Errorf("Scripts()[%q]: missing", name)
		}
	}
	for name, s := range scripts {
		t.Run(name, func(t *testing.T) {
			sha, err := s.Load(t.Context(), c).Result()
			if err != nil {
				t.Fatalf("SCRIPT LOAD: %v", err)
			}
			if sha != s.Hash() {
				t.Errorf("SCRIPT LOAD sha: got %s, want %s", sha, s.Hash())
			}
			exists, err := s.Exists(t.Context(), c).Result()
			if err != nil {
				t.Fatalf("SCRIPT EXISTS: %v", err)
			}
			if len(exists) != 1 || !exists[0] {
				t.Errorf("SCRIPT EXISTS: got %v, want [true]", exists)
			}
		})
	}
}

// TestRunWithoutLoadedScripts checks that the calls work on a server whose script cache is empty
// (EVALSHA falls back to EVAL).
func TestRunWithoutLoadedScripts(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	name := t.Name()
	mustAcquire(t, ops, name, "A", lease)
	if _, err := ops.Status(t.Context(), name, "A"); err != nil {
		t.Fatalf("Status: %v", err)
	}
	if err := ops.Renew(t.Context(), name, "A", lease); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := ops.Release(t.Context(), name, "A", "r1", lease, nil); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := ops.ForceUnlock(t.Context(), name); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
}

func TestKeyNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fn   string
		got  string
		want string
	}{
		{"LockKey", redisops.LockKey("orders"), "orders"},
		{"LockKey braces", redisops.LockKey("a{b}c"), "a{b}c"},
		{"ChannelName", redisops.ChannelName("orders"), "redisson_lock__channel:{orders}"},
		{"ChannelName braces", redisops.ChannelName("a{b}c"), "redisson_lock__channel:a{b}c"},
		{"TokenKey", redisops.TokenKey("orders"), "redisson_lock_token:{orders}"},
		{"TokenKey braces", redisops.TokenKey("a{b}c"), "redisson_lock_token:a{b}c"},
		{"UnlockLatchKey", redisops.UnlockLatchKey("orders", "req-1"), "redisson_unlock_latch:{orders}:req-1"},
		{"UnlockLatchKey braces", redisops.UnlockLatchKey("a{b}c", "req-1"), "redisson_unlock_latch:a{b}c:req-1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.fn, tt.got, tt.want)
		}
	}
}

// TestKeysShareSlot checks with CLUSTER KEYSLOT of a real cluster-enabled server that the keys of one
// lock land in one Redis Cluster slot, as the scripts require.
func TestKeysShareSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes"))
	c := srv.Client(t)
	for _, name := range []string{"orders", "a{b}c", "{user:1}:lock", "x:y:z"} {
		keys := []string{
			redisops.LockKey(name),
			redisops.ChannelName(name),
			redisops.TokenKey(name),
			redisops.UnlockLatchKey(name, "req-1"),
		}
		want, err := c.ClusterKeySlot(t.Context(), keys[0]).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", keys[0], err)
		}
		for _, k := range keys[1:] {
			got, err := c.ClusterKeySlot(t.Context(), k).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
			}
			if got != want {
				t.Errorf("slot of %q: got %d, want %d (slot of lock key %q)", k, got, want, keys[0])
			}
		}
	}
}

func TestAcquire(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()

	got := mustAcquire(t, ops, name, "A", lease)
	if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: 1}); got != want {
		t.Errorf("first Acquire: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	checkPTTL(t, c, redisops.LockKey(name), lease)

	// Re-entry bumps the count, issues a new token and resets the lease.
	got = mustAcquire(t, ops, name, "A", longLease)
	if want := (redisops.Acquired{OK: true, HoldCount: 2, Token: 2}); got != want {
		t.Errorf("re-entrant Acquire: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "2"})
	checkPTTL(t, c, redisops.LockKey(name), longLease)

	// Another owner is refused and told the holder's remaining lease.
	got, err := ops.Acquire(t.Context(), name, "B", lease, redisops.UnknownHoldCount)
	if err != nil {
		t.Fatalf("Acquire by B: %v", err)
	}
	if got.OK || got.HoldCount != 0 || got.Token != 0 {
		t.Errorf("Acquire by B: got %+v, want not OK", got)
	}
	if got.TTL <= longLease-ttlSlack || got.TTL > longLease {
		t.Errorf("Acquire by B: got TTL %v, want about %v", got.TTL, longLease)
	}
	// A refused acquisition changes nothing.
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "2"})
	if tok, err := c.Get(t.Context(), redisops.TokenKey(name)).Result(); err != nil || tok != "2" {
		t.Errorf("token counter after refused Acquire: got %q (err %v), want \"2\"", tok, err)
	}
}

func TestAcquireNoExpiry(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	// A lock written without expiry (e.g. by hand or by a foreign client).
	if err := c.HSet(t.Context(), redisops.LockKey(name), "A", 1).Err(); err != nil {
		t.Fatalf("HSET: %v", err)
	}
	got, err := ops.Acquire(t.Context(), name, "B", lease, redisops.UnknownHoldCount)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if want := (redisops.Acquired{TTL: -1}); got != want {
		t.Errorf("Acquire: got %+v, want %+v", got, want)
	}
}

func TestAcquireTokensAcrossOwners(t *testing.T) {
	t.Parallel()
	ops, _ := setup(t)
	name := t.Name()
	var want int64
	for i, owner := range []string{"A", "B", "A", "C"} {
		want++
		got := mustAcquire(t, ops, name, owner, lease)
		if got.Token != want {
			t.Errorf("acquisition %d by %s: got token %d, want %d", i, owner, got.Token, want)
		}
		if _, err := ops.Release(t.Context(), name, owner, fmt.Sprintf("r%d", i), lease, nil); err != nil {
			t.Fatalf("Release by %s: %v", owner, err)
		}
	}
}

func TestRelease(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("counts down then publishes", func(t *testing.T) {
		name := t.Name()
		ps := subscribe(t, c, redisops.ChannelName(name))
		mustAcquire(t, ops, name, "A", lease)
		mustAcquire(t, ops, name, "A", lease)

		got, err := ops.Release(t.Context(), name, "A", "r1", longLease, nil)
		if err != nil {
			t.Fatalf("first Release: %v", err)
		}
		if want := (redisops.Released{Remaining: 1}); got != want {
			t.Errorf("first Release: got %+v, want %+v", got, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
		checkPTTL(t, c, redisops.LockKey(name), longLease) // the lease is reset while holds remain
		expectNoMessage(t, c, ps, redisops.ChannelName(name))

		got, err = ops.Release(t.Context(), name, "A", "r2", lease, nil)
		if err != nil {
			t.Fatalf("second Release: %v", err)
		}
		if want := (redisops.Released{}); got != want {
			t.Errorf("second Release: got %+v, want %+v", got, want)
		}
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, ps, redisops.ChannelName(name))
	})

	t.Run("non-owner", func(t *testing.T) {
		name := t.Name()
		ps := subscribe(t, c, redisops.ChannelName(name))
		mustAcquire(t, ops, name, "A", lease)

		_, err := ops.Release(t.Context(), name, "B", "r1", lease, nil)
		if !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("Release by non-owner: got error %v, want %v", err, redisops.ErrNotHeld)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
		checkPTTL(t, c, redisops.LockKey(name), lease)
		checkGone(t, c, redisops.UnlockLatchKey(name, "r1"))
		expectNoMessage(t, c, ps, redisops.ChannelName(name))
	})

	t.Run("double release", func(t *testing.T) {
		name := t.Name()
		ps := subscribe(t, c, redisops.ChannelName(name))
		mustAcquire(t, ops, name, "A", lease)
		if _, err := ops.Release(t.Context(), name, "A", "r1", lease, nil); err != nil {
			t.Fatalf("first Release: %v", err)
		}
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		_, err := ops.Release(t.Context(), name, "A", "r2", lease, nil)
		if !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("second Release: got error %v, want %v", err, redisops.ErrNotHeld)
		}
		expectNoMessage(t, c, ps, redisops.ChannelName(name))
	})

	t.Run("free lock", func(t *testing.T) {
		_, err := ops.Release(t.Context(), t.Name(), "A", "r1", lease, nil)
		if !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("Release of a free lock: got error %v, want %v", err, redisops.ErrNotHeld)
		}
	})
}

func TestReleaseRetry(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("last hold", func(t *testing.T) {
		name := t.Name()
		ps := subscribe(t, c, redisops.ChannelName(name))
		mustAcquire(t, ops, name, "A", lease)
		for i := range 2 {
			got, err := ops.Release(t.Context(), name, "A", "req", lease, nil)
			if err != nil {
				t.Fatalf("Release attempt %d: %v", i+1, err)
			}
			if want := (redisops.Released{}); got != want {
				t.Errorf("Release attempt %d: got %+v, want %+v", i+1, got, want)
			}
		}
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "req"), redisops.DefaultLatchExpiry)
		// Only the first attempt released, so only one notice went out.
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, ps, redisops.ChannelName(name))
	})

	t.Run("holds remain", func(t *testing.T) {
		name := t.Name()
		for range 3 {
			mustAcquire(t, ops, name, "A", lease)
		}
		for i := range 2 {
			got, err := ops.Release(t.Context(), name, "A", "req", lease, nil)
			if err != nil {
				t.Fatalf("Release attempt %d: %v", i+1, err)
			}
			if want := (redisops.Released{Remaining: 2}); got != want {
				t.Errorf("Release attempt %d: got %+v, want %+v", i+1, got, want)
			}
		}
		// The retry did not drop a second hold.
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "2"})
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "req"), redisops.DefaultLatchExpiry)
	})

	t.Run("after re-acquisition by another owner", func(t *testing.T) {
		name := t.Name()
		mustAcquire(t, ops, name, "A", lease)
		if _, err := ops.Release(t.Context(), name, "A", "req", lease, nil); err != nil {
			t.Fatalf("Release: %v", err)
		}
		mustAcquire(t, ops, name, "B", lease)
		got, err := ops.Release(t.Context(), name, "A", "req", lease, nil)
		if err != nil {
			t.Fatalf("retried Release: %v", err)
		}
		if want := (redisops.Released{}); got != want {
			t.Errorf("retried Release: got %+v, want %+v", got, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
	})
}

func TestReleaseHandoff(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	channel := redisops.ChannelName(name)
	ps := subscribe(t, c, channel)

	prev := mustAcquire(t, ops, name, "A", lease)
	next := &redisops.Handoff{Owner: "B", Lease: longLease}
	got, err := ops.Release(t.Context(), name, "A", "r1", lease, next)
	if err != nil {
		t.Fatalf("Release with handoff: %v", err)
	}
	if want := (redisops.Released{Remaining: 0, HandedOff: true, Token: prev.Token + 1}); got != want {
		t.Errorf("Release with handoff: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
	checkPTTL(t, c, redisops.LockKey(name), longLease)
	if tok, err := c.Get(t.Context(), redisops.TokenKey(name)).Int64(); err != nil || tok != prev.Token+1 {
		t.Errorf("token counter: got %d (err %v), want %d", tok, err, prev.Token+1)
	}

	// A retry returns the stored answer and hands nothing off twice.
	again, err := ops.Release(t.Context(), name, "A", "r1", lease, next)
	if err != nil {
		t.Fatalf("retried Release with handoff: %v", err)
	}
	if again != got {
		t.Errorf("retried Release with handoff: got %+v, want %+v", again, got)
	}
	if tok, err := c.Get(t.Context(), redisops.TokenKey(name)).Int64(); err != nil || tok != prev.Token+1 {
		t.Errorf("token counter after retry: got %d (err %v), want %d", tok, err, prev.Token+1)
	}

	// The new owner holds the lock like any other owner.
	st, err := ops.Status(t.Context(), name, "B")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if !st.Locked || st.HoldCount != 1 {
		t.Errorf("Status for B: got %+v, want locked with count 1", st)
	}
	if _, err := ops.Release(t.Context(), name, "A", "r2", lease, nil); !errors.Is(err, redisops.ErrNotHeld) {
		t.Errorf("Release by former owner: got error %v, want %v", err, redisops.ErrNotHeld)
	}

	// The handoff published nothing: the first message seen is the one of B's plain release, and it
	// is the only one.
	rel, err := ops.Release(t.Context(), name, "B", "r3", lease, nil)
	if err != nil {
		t.Fatalf("Release by B: %v", err)
	}
	if want := (redisops.Released{}); rel != want {
		t.Errorf("Release by B: got %+v, want %+v", rel, want)
	}
	checkGone(t, c, redisops.LockKey(name))
	if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
		t.Errorf("first message: got %q, want %q", msg, redisops.UnlockMessage)
	}
	expectNoMessage(t, c, ps, channel)
}

func TestReleaseHandoffWithHoldsLeft(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	mustAcquire(t, ops, name, "A", lease)
	mustAcquire(t, ops, name, "A", lease)
	got, err := ops.Release(t.Context(), name, "A", "r1", lease, &redisops.Handoff{Owner: "B", Lease: lease})
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if want := (redisops.Released{Remaining: 1}); got != want {
		t.Errorf("Release: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
}

func TestRenew(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("owner", func(t *testing.T) {
		name := t.Name()
		mustAcquire(t, ops, name, "A", lease)
		if err := ops.Renew(t.Context(), name, "A", longLease); err != nil {
			t.Fatalf("Renew: got %v, want nil", err)
		}
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	})

	t.Run("non-owner", func(t *testing.T) {
		name := t.Name()
		mustAcquire(t, ops, name, "A", lease)
		if err := ops.Renew(t.Context(), name, "B", longLease); !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("Renew by non-owner: got %v, want %v", err, redisops.ErrNotHeld)
		}
		checkPTTL(t, c, redisops.LockKey(name), lease)
	})

	t.Run("after expiry", func(t *testing.T) {
		name := t.Name()
		mustAcquire(t, ops, name, "A", 50*time.Millisecond)
		deadline := time.Now().Add(5 * time.Second)
		for {
			ttl, err := c.PTTL(t.Context(), redisops.LockKey(name)).Result()
			if err != nil {
				t.Fatalf("PTTL: %v", err)
			}
			if ttl == -2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lock still present with PTTL %v after 5s", ttl)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := ops.Renew(t.Context(), name, "A", lease); !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("Renew after expiry: got %v, want %v", err, redisops.ErrNotHeld)
		}
		checkGone(t, c, redisops.LockKey(name))
		if _, err := ops.Release(t.Context(), name, "A", "r1", lease, nil); !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("Release after expiry: got %v, want %v", err, redisops.ErrNotHeld)
		}
	})
}

func TestForceUnlock(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("held", func(t *testing.T) {
		name := t.Name()
		ps := subscribe(t, c, redisops.ChannelName(name))
		mustAcquire(t, ops, name, "A", lease)
		mustAcquire(t, ops, name, "A", lease)
		ok, err := ops.ForceUnlock(t.Context(), name)
		if err != nil {
			t.Fatalf("ForceUnlock: %v", err)
		}
		if !ok {
			t.Errorf("ForceUnlock: got false, want true")
		}
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		if _, err := ops.Release(t.Context(), name, "A", "r1", lease, nil); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("Release after ForceUnlock: got %v, want %v", err, redisops.ErrNotHeld)
		}
	})

	t.Run("free", func(t *testing.T) {
		name := t.Name()
		ps := subscribe(t, c, redisops.ChannelName(name))
		ok, err := ops.ForceUnlock(t.Context(), name)
		if err != nil {
			t.Fatalf("ForceUnlock: %v", err)
		}
		if ok {
			t.Errorf("ForceUnlock of a free lock: got true, want false")
		}
		expectNoMessage(t, c, ps, redisops.ChannelName(name))
	})
}

func TestStatus(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	name := t.Name() + "/held"
	mustAcquire(t, ops, name, "A", lease)
	mustAcquire(t, ops, name, "A", lease)
	noExpiry := t.Name() + "/noexpiry"
	if err := c.HSet(t.Context(), noExpiry, "A", 1).Err(); err != nil {
		t.Fatalf("HSET: %v", err)
	}

	tests := []struct {
		name   string
		lock   string
		owner  string
		locked bool
		count  int64
		ttl    time.Duration // exact when negative, else about
	}{
		{"free", t.Name() + "/free", "A", false, 0, -2},
		{"free, empty owner", t.Name() + "/free", "", false, 0, -2},
		{"held, owner", name, "A", true, 2, lease},
		{"held, other owner", name, "B", true, 0, lease},
		{"held, empty owner", name, "", true, 0, lease},
		{"no expiry", noExpiry, "A", true, 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ops.Status(t.Context(), tt.lock, tt.owner)
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			if got.Locked != tt.locked || got.HoldCount != tt.count {
				t.Errorf("Status: got %+v, want Locked %v, HoldCount %d", got, tt.locked, tt.count)
			}
			if tt.ttl < 0 {
				if got.TTL != tt.ttl {
					t.Errorf("Status TTL: got %d, want %d", got.TTL, tt.ttl)
				}
			} else if got.TTL <= tt.ttl-ttlSlack || got.TTL > tt.ttl {
				t.Errorf("Status TTL: got %v, want about %v", got.TTL, tt.ttl)
			}
		})
	}
}

// TestAcquireRetryIsIdempotent replays an acquire whose reply was lost: with the hold count the caller
// knew, the replay must not take a second hold. It answers a fresh token, above the first (which the
// caller never saw): the hold it finds may as well be a dead one of the owner's, lost to the caller,
// and the caller's next hold must not get that hold's token again.
func TestAcquireRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	client := redistest.Start(t).Client(t)
	ops := redisops.New(client)
	name := t.Name()
	first, err := ops.Acquire(t.Context(), name, "A", time.Minute, 0)
	if err != nil || !first.OK || first.HoldCount != 1 {
		t.Fatalf("first acquire = %+v, %v", first, err)
	}
	replay, err := ops.Acquire(t.Context(), name, "A", time.Minute, 0)
	if err != nil || !replay.OK || replay.HoldCount != 1 || replay.Token <= first.Token {
		t.Fatalf("replayed acquire = %+v, %v; want the same hold (count 1) with a token above %d", replay, err, first.Token)
	}
	reentry, err := ops.Acquire(t.Context(), name, "A", time.Minute, 1)
	if err != nil || reentry.HoldCount != 2 || reentry.Token <= replay.Token {
		t.Fatalf("re-entry = %+v, %v; want count 2, a token above %d", reentry, err, replay.Token)
	}
	unknown, err := ops.Acquire(t.Context(), name, "A", time.Minute, redisops.UnknownHoldCount)
	if err != nil || unknown.HoldCount != 3 {
		t.Fatalf("acquire with unknown count = %+v, %v; want count 3", unknown, err)
	}
	if got, _ := client.HGet(t.Context(), name, "A").Result(); got != "3" {
		t.Fatalf("HGET %s A = %q, want 3", name, got)
	}
}

// TestReleaseCountsListeners: a release that frees the lock with a handoff and CountListeners hands it
// off whoever listens, and says how many clients were subscribed to the lock's channel; one with
// OnlyIfAlone counts them too, and hands off only when there is one. A release with neither counts
// nothing (Listeners 0).
func TestReleaseCountsListeners(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	channel := redisops.ChannelName(name)
	subscribe(t, c, channel)

	mustAcquire(t, ops, name, "A", lease)
	got, err := ops.Release(t.Context(), name, "A", "r1", lease, &redisops.Handoff{Owner: "B", Lease: lease, CountListeners: true})
	if err != nil || !got.HandedOff || got.Listeners != 1 {
		t.Fatalf("Release with CountListeners and one listener: %+v, %v; want a handoff and 1 listener", got, err)
	}
	subscribe(t, c, channel)
	got, err = ops.Release(t.Context(), name, "B", "r2", lease, &redisops.Handoff{Owner: "C", Lease: lease, CountListeners: true})
	if err != nil || !got.HandedOff || got.Listeners != 2 {
		t.Fatalf("Release with CountListeners and two listeners: %+v, %v; want a handoff and 2 listeners", got, err)
	}
	got, err = ops.Release(t.Context(), name, "C", "r3", lease, &redisops.Handoff{Owner: "D", Lease: lease, OnlyIfAlone: true})
	if err != nil || got.HandedOff || got.Listeners != 2 {
		t.Fatalf("Release with OnlyIfAlone and two listeners: %+v, %v; want no handoff and 2 listeners", got, err)
	}
	checkGone(t, c, redisops.LockKey(name))
	mustAcquire(t, ops, name, "A", lease)
	got, err = ops.Release(t.Context(), name, "A", "r4", lease, &redisops.Handoff{Owner: "B", Lease: lease})
	if err != nil || !got.HandedOff || got.Listeners != 0 {
		t.Fatalf("Release with a handoff and no count: %+v, %v; want a handoff and Listeners 0", got, err)
	}
}

// TestReleaseHandoffWithProposedToken: a release that hands the lock to a next owner the caller has
// already let in, with the token it gave it (Handoff.Token: the holder's plus one), hands it off with
// that token and raises the counter to it. When a token as high was issued meanwhile, it hands off
// all the same, with a fresh token above the counter. A release that
// finds the holder gone raises the counter all the same, so that no later token equals the one given.
func TestReleaseHandoffWithProposedToken(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ops.SetTokenExpiry(redisops.DefaultTokenExpiry) // tokens from the clock, as lockwarden's default
	name := t.Name()
	ctx := t.Context()
	ps := subscribe(t, c, redisops.ChannelName(name))
	counter := func() int64 {
		t.Helper()
		v, err := c.Get(ctx, redisops.TokenKey(name)).Int64()
		if err != nil {
			t.Fatalf("GET token counter: %v", err)
		}
		return v
	}

	a := mustAcquire(t, ops, name, "A", lease)
	got, err := ops.Release(ctx, name, "A", "r1", lease, &redisops.Handoff{Owner: "B", Lease: longLease, Token: a.Token + 1})
	if err != nil {
		t.Fatalf("Release with a proposed token: %v", err)
	}
	if want := (redisops.Released{HandedOff: true, Token: a.Token + 1}); got != want {
		t.Fatalf("Release with a proposed token: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
	// The counter keeps the token above B's for B's own local handoff (see issueToken).
	if v := counter(); v != a.Token+2 {
		t.Fatalf("token counter: %d, want %d (B's token plus one)", v, a.Token+2)
	}
	if ttl := c.PTTL(ctx, redisops.TokenKey(name)).Val(); ttl <= 0 {
		t.Fatalf("token counter PTTL %v, want an expiry", ttl)
	}

	// A token as high issued meanwhile: the lock is handed off all the same (its next owner may be
	// using it), with a fresh token above the counter, which tells the caller to give it back.
	high := a.Token + 100
	if err := c.Set(ctx, redisops.TokenKey(name), high, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got, err = ops.Release(ctx, name, "B", "r2", lease, &redisops.Handoff{Owner: "C", Lease: longLease, Token: a.Token + 2})
	if err != nil || !got.HandedOff || got.Remaining != 0 || got.Token <= high {
		t.Fatalf("Release with a proposed token below the counter: %+v, %v; want handed off with a token above %d", got, err, high)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"C": "1"})
	high = counter()
	if _, err := ops.Release(ctx, name, "C", "r3", lease, nil); err != nil {
		t.Fatalf("C's release: %v", err)
	}
	if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
		t.Fatalf("message after the release: %q, want the unlock notice", msg)
	}

	// The holder gone: not held, and the counter raised past the token given (to the one above it).
	_, err = ops.Release(ctx, name, "C", "r4", lease, &redisops.Handoff{Owner: "D", Lease: longLease, Token: high + 5})
	if !errors.Is(err, redisops.ErrNotHeld) {
		t.Fatalf("Release by an owner that holds nothing: %v, want ErrNotHeld", err)
	}
	if v := counter(); v != high+6 {
		t.Fatalf("token counter after the release that found nothing: %d, want %d", v, high+6)
	}
	next := mustAcquire(t, ops, name, "E", lease)
	if next.Token <= high+5 {
		t.Fatalf("the next acquisition's token %d is not above the token given, %d", next.Token, high+5)
	}
}

// TestReleaseHandoffWithProposedTokenAfterLatch: a copy of a release that handed the lock over with a
// proposed token, run again once its latch has expired, finds its owner gone and the next owner
// holding the lock with that token: it answers what the first copy did (handed off, with the token),
// not "not held", and changes nothing.
func TestReleaseHandoffWithProposedTokenAfterLatch(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ops.SetTokenExpiry(redisops.DefaultTokenExpiry)
	name := t.Name()
	ctx := t.Context()
	a := mustAcquire(t, ops, name, "A", lease)
	next := &redisops.Handoff{Owner: "B", Lease: longLease, Token: a.Token + 1}
	first, err := ops.Release(ctx, name, "A", "r1", lease, next)
	if err != nil || !first.HandedOff || first.Token != a.Token+1 {
		t.Fatalf("Release with a proposed token: %+v, %v", first, err)
	}
	if err := c.Del(ctx, redisops.UnlockLatchKey(name, "r1")).Err(); err != nil { // as if it expired
		t.Fatal(err)
	}
	again, err := ops.Release(ctx, name, "A", "r1", lease, next)
	if err != nil || again != first {
		t.Fatalf("the same release run again after its latch expired: %+v, %v; want %+v", again, err, first)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
}
