package redisops_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redissontest"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// checkString fails unless key holds the string want.
func checkString(t *testing.T, c *redis.Client, key, want string) {
	t.Helper()
	got, err := c.Get(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("GET %q: %v (want %q)", key, err, want)
	}
	if got != want {
		t.Fatalf("GET %q: got %q, want %q", key, got, want)
	}
}

// checkNoExpiry fails unless key exists without an expiry.
func checkNoExpiry(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	got, err := c.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %q: %v", key, err)
	}
	if got != -1 {
		t.Fatalf("PTTL %q: got %v, want no expiry (-1)", key, got)
	}
}

// checkRetryLatches fails unless the server holds exactly n retry latch keys.
func checkRetryLatches(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	keys, err := c.Keys(t.Context(), "lockwarden_retry_latch:*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	if len(keys) != n {
		t.Fatalf("retry latches: got %q, want %d", keys, n)
	}
}

func TestPrimitiveKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ got, want string }{
		{redisops.SemaphoreChannel("s"), "redisson_sc:{s}"},
		{redisops.SemaphoreChannel("a{b}"), "redisson_sc:a{b}"},
		{redisops.PermitTimeoutKey("s"), "{s}:timeout"},
		{redisops.PermitTimeoutKey("a{b}"), "a{b}:timeout"},
		{redisops.LatchChannel("l"), "redisson_countdownlatch__channel__{l}"},
		{redisops.LatchChannel("a{b}"), "redisson_countdownlatch__channel__{a{b}}"},
		{redisops.RetryLatchKey("s", "r1"), "lockwarden_retry_latch:{s}:r1"},
		{redisops.RetryLatchKey("a{b}", "r1"), "lockwarden_retry_latch:a{b}:r1"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	// Every key of one name is in the slot of the name.
	for _, name := range []string{"s", "a{b}c"} {
		for _, key := range []string{redisops.SemaphoreChannel(name), redisops.PermitTimeoutKey(name),
			redisops.RetryLatchKey(name, "x")} {
			if redisops.Slot(key) != redisops.Slot(name) {
				t.Errorf("%q: slot %d, want %d (the slot of %q)", key, redisops.Slot(key), redisops.Slot(name), name)
			}
		}
	}
	seen := map[string]bool{}
	for range 100 {
		id := redisops.NewPermitID()
		if len(id) != 32 || seen[id] {
			t.Fatalf("NewPermitID: %q (len %d, seen before %v)", id, len(id), seen[id])
		}
		for _, r := range id {
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
				t.Fatalf("NewPermitID: %q is not lower-case hex", id)
			}
		}
		seen[id] = true
	}
}

func TestSemaphoreTrySetPermits(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	ps := subscribe(t, c, redisops.SemaphoreChannel(name))

	if ok, err := ops.SemaphoreTrySetPermits(ctx, name, "", 5, 0); !ok || err != nil {
		t.Fatalf("SemaphoreTrySetPermits on an absent semaphore: %v, %v; want true", ok, err)
	}
	if got := nextMessage(t, ps); got != "5" {
		t.Fatalf("message: got %q, want %q", got, "5")
	}
	checkString(t, c, name, "5")
	checkNoExpiry(t, c, name)
	if ok, err := ops.SemaphoreTrySetPermits(ctx, name, "", 7, 0); ok || err != nil {
		t.Fatalf("SemaphoreTrySetPermits on a set semaphore: %v, %v; want false", ok, err)
	}
	checkString(t, c, name, "5")
	expectNoMessage(t, c, ps, redisops.SemaphoreChannel(name))

	// With a time to live.
	ttlName := name + ":ttl"
	if ok, err := ops.SemaphoreTrySetPermits(ctx, ttlName, "", 2, lease); !ok || err != nil {
		t.Fatalf("SemaphoreTrySetPermits with a ttl: %v, %v; want true", ok, err)
	}
	checkString(t, c, ttlName, "2")
	checkPTTL(t, c, ttlName, lease)
}

func TestSemaphoreAcquireRelease(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)

	// An absent semaphore has no permits.
	if ok, err := ops.SemaphoreTryAcquire(ctx, name, "", 1); ok || err != nil {
		t.Fatalf("SemaphoreTryAcquire on an absent semaphore: %v, %v; want false", ok, err)
	}
	checkGone(t, c, name)
	if n, err := ops.SemaphoreAvailable(ctx, name); n != 0 || err != nil {
		t.Fatalf("SemaphoreAvailable on an absent semaphore: %d, %v; want 0", n, err)
	}

	if _, err := ops.SemaphoreTrySetPermits(ctx, name, "", 3, 0); err != nil {
		t.Fatal(err)
	}
	ps := subscribe(t, c, channel)
	if ok, err := ops.SemaphoreTryAcquire(ctx, name, "", 2); !ok || err != nil {
		t.Fatalf("SemaphoreTryAcquire(2) of 3: %v, %v; want true", ok, err)
	}
	checkString(t, c, name, "1")
	if ok, err := ops.SemaphoreTryAcquire(ctx, name, "", 2); ok || err != nil {
		t.Fatalf("SemaphoreTryAcquire(2) of 1: %v, %v; want false", ok, err)
	}
	checkString(t, c, name, "1")
	expectNoMessage(t, c, ps, channel) // acquisitions publish nothing
	if n, err := ops.SemaphoreAvailable(ctx, name); n != 1 || err != nil {
		t.Fatalf("SemaphoreAvailable: %d, %v; want 1", n, err)
	}

	if n, err := ops.SemaphoreRelease(ctx, name, "", 2); n != 3 || err != nil {
		t.Fatalf("SemaphoreRelease(2): %d, %v; want 3", n, err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("release message: got %q, want %q", got, "3")
	}
	checkString(t, c, name, "3")
	checkRetryLatches(t, c, 0) // no request id, no latch

	// A release creates an absent semaphore, as Redisson's does.
	other := name + ":other"
	if n, err := ops.SemaphoreRelease(ctx, other, "", 4); n != 4 || err != nil {
		t.Fatalf("SemaphoreRelease on an absent semaphore: %d, %v; want 4", n, err)
	}
	checkString(t, c, other, "4")
}

func TestSemaphoreAddPermitsAndDrain(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	ps := subscribe(t, c, redisops.SemaphoreChannel(name))

	if n, err := ops.SemaphoreAddPermits(ctx, name, "", 4); n != 4 || err != nil {
		t.Fatalf("SemaphoreAddPermits(4) on an absent semaphore: %d, %v; want 4", n, err)
	}
	if got := nextMessage(t, ps); got != "4" {
		t.Fatalf("message: got %q, want %q", got, "4")
	}
	if n, err := ops.SemaphoreAddPermits(ctx, name, "", -6); n != -2 || err != nil {
		t.Fatalf("SemaphoreAddPermits(-6): %d, %v; want -2", n, err)
	}
	if got := nextMessage(t, ps); got != "-2" { // always published, as Redisson does
		t.Fatalf("message: got %q, want %q", got, "-2")
	}
	checkString(t, c, name, "-2")

	// AddPermits and Drain SET the key, which drops its expiry, as Redisson's do.
	ttlName := name + ":ttl"
	if _, err := ops.SemaphoreTrySetPermits(ctx, ttlName, "", 2, lease); err != nil {
		t.Fatal(err)
	}
	if n, err := ops.SemaphoreAddPermits(ctx, ttlName, "", 1); n != 3 || err != nil {
		t.Fatalf("SemaphoreAddPermits(1): %d, %v; want 3", n, err)
	}
	checkNoExpiry(t, c, ttlName)

	if n, err := ops.SemaphoreDrain(ctx, ttlName, ""); n != 3 || err != nil {
		t.Fatalf("SemaphoreDrain: %d, %v; want 3", n, err)
	}
	checkString(t, c, ttlName, "0")
	absent := name + ":absent"
	if n, err := ops.SemaphoreDrain(ctx, absent, ""); n != 0 || err != nil {
		t.Fatalf("SemaphoreDrain on an absent semaphore: %d, %v; want 0", n, err)
	}
	checkGone(t, c, absent)
	expectNoMessage(t, c, ps, redisops.SemaphoreChannel(name))
}

// TestSemaphoreRetrySafe: a call sent again with the same request id (as go-redis does after a lost
// reply) answers what the first run answered and changes nothing.
func TestSemaphoreRetrySafe(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)
	if _, err := ops.SemaphoreTrySetPermits(ctx, name, "", 3, 0); err != nil {
		t.Fatal(err)
	}
	ps := subscribe(t, c, channel)

	for range 2 {
		if ok, err := ops.SemaphoreTryAcquire(ctx, name, "acq", 2); !ok || err != nil {
			t.Fatalf("SemaphoreTryAcquire: %v, %v; want true", ok, err)
		}
		checkString(t, c, name, "1")
	}
	checkPTTL(t, c, redisops.RetryLatchKey(name, "acq"), redisops.DefaultLatchExpiry)

	// A refusal is kept too: permits given back since do not turn a retry of it into a success.
	if ok, err := ops.SemaphoreTryAcquire(ctx, name, "refused", 2); ok || err != nil {
		t.Fatalf("SemaphoreTryAcquire(2) of 1: %v, %v; want false", ok, err)
	}
	if _, err := ops.SemaphoreRelease(ctx, name, "", 5); err != nil {
		t.Fatal(err)
	}
	if got := nextMessage(t, ps); got != "6" {
		t.Fatalf("message: got %q, want %q", got, "6")
	}
	if ok, err := ops.SemaphoreTryAcquire(ctx, name, "refused", 2); ok || err != nil {
		t.Fatalf("retried refusal: %v, %v; want false", ok, err)
	}
	checkString(t, c, name, "6")

	for range 2 {
		if n, err := ops.SemaphoreRelease(ctx, name, "rel", 1); n != 7 || err != nil {
			t.Fatalf("SemaphoreRelease: %d, %v; want 7", n, err)
		}
	}
	if got := nextMessage(t, ps); got != "7" {
		t.Fatalf("message: got %q, want %q", got, "7")
	}
	expectNoMessage(t, c, ps, channel) // the retry published nothing
	checkString(t, c, name, "7")

	for range 2 {
		if n, err := ops.SemaphoreAddPermits(ctx, name, "add", 3); n != 10 || err != nil {
			t.Fatalf("SemaphoreAddPermits: %d, %v; want 10", n, err)
		}
	}
	if got := nextMessage(t, ps); got != "10" {
		t.Fatalf("message: got %q, want %q", got, "10")
	}
	expectNoMessage(t, c, ps, channel)
	checkString(t, c, name, "10")

	if n, err := ops.SemaphoreDrain(ctx, name, "drain"); n != 10 || err != nil {
		t.Fatalf("SemaphoreDrain: %d, %v; want 10", n, err)
	}
	if _, err := ops.SemaphoreRelease(ctx, name, "", 4); err != nil {
		t.Fatal(err)
	}
	if n, err := ops.SemaphoreDrain(ctx, name, "drain"); n != 10 || err != nil {
		t.Fatalf("retried SemaphoreDrain: %d, %v; want the first answer 10", n, err)
	}
	checkString(t, c, name, "4")
	checkRetryLatches(t, c, 5)
}

func TestSemaphoreBadArguments(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	for _, call := range []struct {
		what string
		fn   func() error
	}{
		{"TrySetPermits(0)", func() error { _, err := ops.SemaphoreTrySetPermits(ctx, name, "", 0, 0); return err }},
		{"TrySetPermits(-1)", func() error { _, err := ops.SemaphoreTrySetPermits(ctx, name, "", -1, 0); return err }},
		{"AddPermits(0)", func() error { _, err := ops.SemaphoreAddPermits(ctx, name, "r", 0); return err }},
		{"TryAcquire(0)", func() error { _, err := ops.SemaphoreTryAcquire(ctx, name, "r", 0); return err }},
		{"TryAcquire(-2)", func() error { _, err := ops.SemaphoreTryAcquire(ctx, name, "r", -2); return err }},
		{"Release(0)", func() error { _, err := ops.SemaphoreRelease(ctx, name, "r", 0); return err }},
		{"Release(-1)", func() error { _, err := ops.SemaphoreRelease(ctx, name, "r", -1); return err }},
	} {
		if err := call.fn(); !errors.Is(err, redisops.ErrBadArgument) {
			t.Errorf("%s: got %v, want an error matching ErrBadArgument", call.what, err)
		}
	}
	if n, err := c.DBSize(ctx).Result(); n != 0 || err != nil {
		t.Fatalf("DBSIZE after refused calls: %d, %v; want 0", n, err)
	}
}

// TestSemaphoreWrongType: every call on a name that holds another type (a lock's hash), or whose retry
// latch does, answers ErrWrongType and changes nothing.
func TestSemaphoreWrongType(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	mustAcquire(t, ops, name, "A", lease) // the name is a lock hash
	latched := name + ":latched"
	if err := c.Set(ctx, latched, "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, redisops.RetryLatchKey(latched, "r"), "x", "1").Err(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, c)
	for _, call := range []struct {
		what string
		fn   func(name string) error
	}{
		{"TrySetPermits", func(n string) error { _, err := ops.SemaphoreTrySetPermits(ctx, n, "r", 1, 0); return err }},
		{"TrySetPermits with ttl", func(n string) error { _, err := ops.SemaphoreTrySetPermits(ctx, n, "r", 1, lease); return err }},
		{"AddPermits", func(n string) error { _, err := ops.SemaphoreAddPermits(ctx, n, "r", 1); return err }},
		{"TryAcquire", func(n string) error { _, err := ops.SemaphoreTryAcquire(ctx, n, "r", 1); return err }},
		{"Release", func(n string) error { _, err := ops.SemaphoreRelease(ctx, n, "r", 1); return err }},
		{"Drain", func(n string) error { _, err := ops.SemaphoreDrain(ctx, n, "r"); return err }},
		{"Available", func(n string) error { _, err := ops.SemaphoreAvailable(ctx, n); return err }},
	} {
		if err := call.fn(name); !errors.Is(err, redisops.ErrWrongType) {
			t.Errorf("%s on a lock hash: got %v, want an error matching ErrWrongType", call.what, err)
		}
		if call.what == "Available" {
			continue // it uses no retry latch
		}
		if err := call.fn(latched); !errors.Is(err, redisops.ErrWrongType) {
			t.Errorf("%s with a retry latch of another type: got %v, want an error matching ErrWrongType", call.what, err)
		}
	}
	if after := snapshot(t, c); !maps.Equal(before, after) {
		t.Fatalf("calls on keys of another type changed Redis:\nbefore %q\nafter  %q", before, after)
	}
}

// TestSemaphoreInterop: a Redisson client (integration/redissontest, with Redisson's own scripts) and
// lockwarden share a semaphore both ways, and publish the same messages.
func TestSemaphoreInterop(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)
	rs := redissontest.NewSemaphore(c, name)
	if rs.Channel != channel {
		t.Fatalf("channels differ: Redisson %q, lockwarden %q", rs.Channel, channel)
	}
	ps := subscribe(t, c, channel)

	// Redisson sets the permits; lockwarden sees and takes them.
	if ok, err := rs.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("Redisson TrySetPermits: %v, %v", ok, err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("Redisson's trySetPermits message: got %q, want %q", got, "3")
	}
	if ok, err := ops.SemaphoreTrySetPermits(ctx, name, "", 9, 0); ok || err != nil {
		t.Fatalf("SemaphoreTrySetPermits after Redisson's: %v, %v; want false", ok, err)
	}
	if n, err := ops.SemaphoreAvailable(ctx, name); n != 3 || err != nil {
		t.Fatalf("SemaphoreAvailable: %d, %v; want 3", n, err)
	}
	if ok, err := ops.SemaphoreTryAcquire(ctx, name, "a1", 2); !ok || err != nil {
		t.Fatalf("SemaphoreTryAcquire: %v, %v; want true", ok, err)
	}

	// Redisson sees what lockwarden left, and gives permits back; lockwarden hears it.
	if n, err := rs.AvailablePermits(ctx); n != 1 || err != nil {
		t.Fatalf("Redisson AvailablePermits: %d, %v; want 1", n, err)
	}
	if ok, err := rs.TryAcquire(ctx, 2); ok || err != nil {
		t.Fatalf("Redisson TryAcquire(2) of 1: %v, %v; want false", ok, err)
	}
	if err := rs.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("Redisson's release message: got %q, want %q", got, "3")
	}
	if n, err := ops.SemaphoreRelease(ctx, name, "r1", 2); n != 5 || err != nil {
		t.Fatalf("SemaphoreRelease: %d, %v; want 5", n, err)
	}
	if got := nextMessage(t, ps); got != "5" {
		t.Fatalf("lockwarden's release message: got %q, want %q", got, "5")
	}
	if ok, err := rs.TryAcquire(ctx, 5); !ok || err != nil {
		t.Fatalf("Redisson TryAcquire(5) of 5: %v, %v; want true", ok, err)
	}
	if n, err := ops.SemaphoreAvailable(ctx, name); n != 0 || err != nil {
		t.Fatalf("SemaphoreAvailable: %d, %v; want 0", n, err)
	}

	// addPermits and drainPermits, one side after the other.
	if err := rs.AddPermits(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if got := nextMessage(t, ps); got != "-1" {
		t.Fatalf("Redisson's addPermits message: got %q, want %q", got, "-1")
	}
	if n, err := ops.SemaphoreAddPermits(ctx, name, "", 4); n != 3 || err != nil {
		t.Fatalf("SemaphoreAddPermits: %d, %v; want 3", n, err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("lockwarden's addPermits message: got %q, want %q", got, "3")
	}
	if n, err := rs.DrainPermits(ctx); n != 3 || err != nil {
		t.Fatalf("Redisson DrainPermits: %d, %v; want 3", n, err)
	}
	if n, err := ops.SemaphoreDrain(ctx, name, ""); n != 0 || err != nil {
		t.Fatalf("SemaphoreDrain after Redisson's: %d, %v; want 0", n, err)
	}
	expectNoMessage(t, c, ps, channel)
}

// TestSemaphoreSameAsRedisson: each operation, run by Redisson on one name and by lockwarden on another
// from the same state, leaves the same value and expiry and publishes the same message.
func TestSemaphoreSameAsRedisson(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	type side struct {
		name string
		ps   *redis.PubSub
	}
	mk := func(suffix string) side {
		n := t.Name() + suffix
		return side{n, subscribe(t, c, redisops.SemaphoreChannel(n))}
	}
	r, l := mk(":redisson"), mk(":lockwarden")
	rs := redissontest.NewSemaphore(c, r.name)
	steps := []struct {
		what      string
		redisson  func() error
		lockwardn func() error
		message   bool
	}{
		{"trySetPermits", func() error { _, err := rs.TrySetPermits(ctx, 4); return err },
			func() error { _, err := ops.SemaphoreTrySetPermits(ctx, l.name, "", 4, 0); return err }, true},
		{"tryAcquire", func() error { _, err := rs.TryAcquire(ctx, 3); return err },
			func() error { _, err := ops.SemaphoreTryAcquire(ctx, l.name, "", 3); return err }, false},
		{"release", func() error { return rs.Release(ctx, 2) },
			func() error { _, err := ops.SemaphoreRelease(ctx, l.name, "", 2); return err }, true},
		{"addPermits", func() error { return rs.AddPermits(ctx, -7) },
			func() error { _, err := ops.SemaphoreAddPermits(ctx, l.name, "", -7); return err }, true},
		{"addPermits", func() error { return rs.AddPermits(ctx, 12) },
			func() error { _, err := ops.SemaphoreAddPermits(ctx, l.name, "", 12); return err }, true},
		{"drainPermits", func() error { _, err := rs.DrainPermits(ctx); return err },
			func() error { _, err := ops.SemaphoreDrain(ctx, l.name, ""); return err }, false},
	}
	for _, s := range steps {
		if err := s.redisson(); err != nil {
			t.Fatalf("Redisson %s: %v", s.what, err)
		}
		if err := s.lockwardn(); err != nil {
			t.Fatalf("lockwarden %s: %v", s.what, err)
		}
		if s.message {
			if rm, lm := nextMessage(t, r.ps), nextMessage(t, l.ps); rm != lm {
				t.Fatalf("%s: Redisson published %q, lockwarden %q", s.what, rm, lm)
			}
		} else {
			expectNoMessage(t, c, r.ps, redisops.SemaphoreChannel(r.name))
			expectNoMessage(t, c, l.ps, redisops.SemaphoreChannel(l.name))
		}
		checkSameKey(t, c, r.name, l.name)
	}
}

// checkSameKey fails unless keys a and b hold the same type and value (DUMP) and both have an expiry
// or neither.
func checkSameKey(t *testing.T, c *redis.Client, a, b string) {
	t.Helper()
	ctx := t.Context()
	dump := func(key string) (string, bool) {
		v, err := c.Dump(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return "", false
		}
		if err != nil {
			t.Fatalf("DUMP %q: %v", key, err)
		}
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %q: %v", key, err)
		}
		return v, ttl >= 0
	}
	da, ea := dump(a)
	db, eb := dump(b)
	if da != db || ea != eb {
		va, _ := c.Get(ctx, a).Result()
		vb, _ := c.Get(ctx, b).Result()
		t.Fatalf("%q holds %q (expiry %v), %q holds %q (expiry %v)", a, va, ea, b, vb, eb)
	}
}

// TestShardedPrimitives runs the semaphore, permit and latch calls on Redis Cluster, beside a Redisson
// client there: the keys of each call share a slot, and both publish with SPUBLISH on the same shard
// channels. A latch name with a hash tag fails on Cluster, as Redisson's does: its channel always
// adds braces, which gives it another slot than the name.
func TestShardedPrimitives(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	o := redisops.New(cc)
	ctx := t.Context()
	name := t.Name()

	sub := func(channel string) *redis.PubSub { return shardSubscribe(t, cc, channel) }
	expect := func(ps *redis.PubSub, channel, payload string) { expectShardMessage(t, ps, channel, payload) }

	for _, sem := range []string{name + ":sem", name + ":{sem}"} {
		ch := redisops.SemaphoreChannel(sem)
		ps := sub(ch)
		rs := redissontest.NewSemaphore(cc, sem)
		if ok, err := rs.TrySetPermits(ctx, 2); !ok || err != nil {
			t.Fatalf("Redisson TrySetPermits(%q): %v, %v", sem, ok, err)
		}
		expect(ps, ch, "2")
		if ok, err := o.SemaphoreTryAcquire(ctx, sem, "a", 2); !ok || err != nil {
			t.Fatalf("SemaphoreTryAcquire(%q): %v, %v", sem, ok, err)
		}
		if n, err := o.SemaphoreRelease(ctx, sem, "r", 1); n != 1 || err != nil {
			t.Fatalf("SemaphoreRelease(%q): %d, %v", sem, n, err)
		}
		expect(ps, ch, "1")
		if err := rs.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		expect(ps, ch, "2")
		if n, err := o.SemaphoreAddPermits(ctx, sem, "p", 1); n != 3 || err != nil {
			t.Fatalf("SemaphoreAddPermits(%q): %d, %v", sem, n, err)
		}
		expect(ps, ch, "3")
		if n, err := o.SemaphoreDrain(ctx, sem, "d"); n != 3 || err != nil {
			t.Fatalf("SemaphoreDrain(%q): %d, %v", sem, n, err)
		}

		// The permit semaphore on the same channel.
		pn := sem + ":permits"
		pch := redisops.SemaphoreChannel(pn)
		pps := sub(pch)
		rp := redissontest.NewPermitSemaphore(cc, pn)
		if _, err := o.PermitsTrySetPermits(ctx, pn, "", 2); err != nil {
			t.Fatal(err)
		}
		expect(pps, pch, "2")
		ids, err := rp.TryAcquire(ctx, 1, lease)
		if err != nil || len(ids) != 1 {
			t.Fatalf("Redisson TryAcquire(%q): %v, %v", pn, ids, err)
		}
		now := msNow()
		lids := newIDs(1)
		mustPermitsAcquire(t, o, pn, lids, now.Add(lease), now)
		if renewed, err := o.PermitsRenew(ctx, pn, append(lids, ids...), now.Add(longLease), now); err != nil || !slices.Equal(renewed, []bool{true, true}) {
			t.Fatalf("PermitsRenew(%q): %v, %v", pn, renewed, err)
		}
		if rel, err := o.PermitsRelease(ctx, pn, ids[0], now); err != nil || !rel.Removed {
			t.Fatalf("PermitsRelease(%q): %+v, %v", pn, rel, err)
		}
		expect(pps, pch, "1")
		if err := o.PermitsAddPermits(ctx, pn, "p", 2); err != nil {
			t.Fatal(err)
		}
		expect(pps, pch, "2")
		if err := o.PermitsSetPermits(ctx, pn, 5, now); err != nil {
			t.Fatal(err)
		}
		expect(pps, pch, "5")
		if n, err := o.PermitsAvailable(ctx, pn, now); n != 4 || err != nil {
			t.Fatalf("PermitsAvailable(%q): %d, %v; want 4", pn, n, err)
		}
		if n, err := o.PermitsAcquiredCount(ctx, pn, now); n != 1 || err != nil {
			t.Fatalf("PermitsAcquiredCount(%q): %d, %v; want 1", pn, n, err)
		}
	}

	latch := name + ":latch"
	lch := redisops.LatchChannel(latch)
	lps := sub(lch)
	rl := redissontest.NewCountDownLatch(cc, latch)
	if ok, err := o.LatchTrySetCount(ctx, latch, "", 2); !ok || err != nil {
		t.Fatalf("LatchTrySetCount: %v, %v", ok, err)
	}
	expect(lps, lch, redisops.LatchNewCountMessage)
	if err := rl.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := o.LatchCountDown(ctx, latch, "d"); n != 0 || err != nil {
		t.Fatalf("LatchCountDown: %d, %v", n, err)
	}
	expect(lps, lch, redisops.LatchZeroMessage)
	if ok, err := o.LatchDelete(ctx, latch); ok || err != nil {
		t.Fatalf("LatchDelete of a counted-down latch: %v, %v; want false", ok, err)
	}

	// A latch whose name has a hash tag: its channel (braces added around the whole name) is in
	// another slot. Redisson's scripts fail there; lockwarden's leave the notice to the client, which
	// publishes it with SPUBLISH on the channel's own shard.
	tagged := name + ":{latch}"
	if redisops.Slot(tagged) == redisops.Slot(redisops.LatchChannel(tagged)) {
		t.Fatalf("the test needs a tagged latch name whose channel is in another slot: %q", tagged)
	}
	if _, err := redissontest.NewCountDownLatch(cc, tagged).TrySetCount(ctx, 1); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("Redisson TrySetCount(%q) on Cluster: %v; want CROSSSLOT", tagged, err)
	}
	tch := redisops.LatchChannel(tagged)
	tps := sub(tch)
	if ok, err := o.LatchTrySetCount(ctx, tagged, "", 1); !ok || err != nil {
		t.Fatalf("LatchTrySetCount(%q) on Cluster: %v, %v", tagged, ok, err)
	}
	expect(tps, tch, redisops.LatchNewCountMessage)
	if n, err := o.LatchCountDown(ctx, tagged, "t"); n != 0 || err != nil {
		t.Fatalf("LatchCountDown(%q) on Cluster: %d, %v", tagged, n, err)
	}
	expect(tps, tch, redisops.LatchZeroMessage)
	if n, err := o.LatchCount(ctx, tagged); n != 0 || err != nil {
		t.Fatalf("LatchCount(%q) = %d, %v; want 0", tagged, n, err)
	}
}

// TestTrySetRetrySafe: a try-set sent again under its request id (a resend after a lost reply) answers
// what the first run did, true, rather than false for the count that run set; a new id answers false.
func TestTrySetRetrySafe(t *testing.T) {
	t.Parallel()
	ops, _ := setup(t)
	ctx := t.Context()
	name := t.Name()
	calls := []struct {
		what string
		run  func(id string) (bool, error)
	}{
		{"SemaphoreTrySetPermits", func(id string) (bool, error) { return ops.SemaphoreTrySetPermits(ctx, name+":sem", id, 3, 0) }},
		{"PermitsTrySetPermits", func(id string) (bool, error) { return ops.PermitsTrySetPermits(ctx, name+":permits", id, 3) }},
		{"LatchTrySetCount", func(id string) (bool, error) { return ops.LatchTrySetCount(ctx, name+":latch", id, 3) }},
	}
	for _, c := range calls {
		for i, want := range []bool{true, true} {
			if ok, err := c.run("req-1"); ok != want || err != nil {
				t.Errorf("%s run %d under one id = %v, %v; want %v", c.what, i+1, ok, err, want)
			}
		}
		if ok, err := c.run("req-2"); ok || err != nil {
			t.Errorf("%s under a new id = %v, %v; want false", c.what, ok, err)
		}
	}
}
