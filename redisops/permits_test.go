package redisops_test

import (
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redissontest"
	"github.com/lockwarden/lockwarden/redisops"
)

// msNow returns the present time to the millisecond, the precision of the permits' scores.
func msNow() time.Time { return time.UnixMilli(time.Now().UnixMilli()) }

// rawID returns the 16 bytes of the hex permit id, as the ZSET stores them.
func rawID(t *testing.T, id string) string {
	t.Helper()
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != 16 {
		t.Fatalf("permit id %q: %v (%d bytes)", id, err, len(b))
	}
	return string(b)
}

// newIDs returns n new permit ids.
func newIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = redisops.NewPermitID()
	}
	return ids
}

// checkPermits fails unless the ZSET of name's acquired permits holds exactly want: hex id -> score.
func checkPermits(t *testing.T, c *redis.Client, name string, want map[string]int64) {
	t.Helper()
	zs, err := c.ZRangeWithScores(t.Context(), redisops.PermitTimeoutKey(name), 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE %q: %v", redisops.PermitTimeoutKey(name), err)
	}
	got := make(map[string]int64, len(zs))
	for _, z := range zs {
		got[hex.EncodeToString([]byte(z.Member.(string)))] = int64(z.Score)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("acquired permits of %q: got %v, want %v", name, got, want)
	}
}

// mustPermitsAcquire acquires the ids on name or fails.
func mustPermitsAcquire(t *testing.T, ops *redisops.Ops, name string, ids []string, expiresAt, now time.Time) {
	t.Helper()
	got, err := ops.PermitsTryAcquire(t.Context(), name, ids, expiresAt, now)
	if err != nil || !got.OK {
		t.Fatalf("PermitsTryAcquire(%q, %d ids): %+v, %v; want OK", name, len(ids), got, err)
	}
}

func TestPermitsSetAndAdd(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)
	ps := subscribe(t, c, channel)
	now := msNow()

	if ok, err := ops.PermitsTrySetPermits(ctx, name, "", 3); !ok || err != nil {
		t.Fatalf("PermitsTrySetPermits: %v, %v; want true", ok, err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("message: got %q, want %q", got, "3")
	}
	if ok, err := ops.PermitsTrySetPermits(ctx, name, "", 5); ok || err != nil {
		t.Fatalf("PermitsTrySetPermits on a set semaphore: %v, %v; want false", ok, err)
	}
	checkString(t, c, name, "3")

	// addPermits publishes the delta, not the new count, and only a positive one.
	if err := ops.PermitsAddPermits(ctx, name, "", 2); err != nil {
		t.Fatal(err)
	}
	if got := nextMessage(t, ps); got != "2" {
		t.Fatalf("addPermits(2) message: got %q, want the delta %q", got, "2")
	}
	checkString(t, c, name, "5")
	if err := ops.PermitsAddPermits(ctx, name, "", -1); err != nil {
		t.Fatal(err)
	}
	expectNoMessage(t, c, ps, channel)
	checkString(t, c, name, "4")

	// Retry-safe with a request id.
	for range 2 {
		if err := ops.PermitsAddPermits(ctx, name, "add", 3); err != nil {
			t.Fatal(err)
		}
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("addPermits(3) message: got %q, want %q", got, "3")
	}
	expectNoMessage(t, c, ps, channel)
	checkString(t, c, name, "7")
	checkPTTL(t, c, redisops.RetryLatchKey(name, "add"), redisops.DefaultLatchExpiry)

	// setPermits makes the total (available + acquired) the permits given.
	ids := newIDs(2)
	mustPermitsAcquire(t, ops, name, ids, time.Time{}, now)
	checkString(t, c, name, "5")
	if err := ops.PermitsSetPermits(ctx, name, 10, now); err != nil {
		t.Fatal(err)
	}
	if got := nextMessage(t, ps); got != "10" {
		t.Fatalf("setPermits(10) message: got %q, want %q", got, "10")
	}
	checkString(t, c, name, "8")
	if err := ops.PermitsSetPermits(ctx, name, 10, now); err != nil { // unchanged: nothing published
		t.Fatal(err)
	}
	expectNoMessage(t, c, ps, channel)
	if err := ops.PermitsSetPermits(ctx, name, 1, now); err != nil {
		t.Fatal(err)
	}
	if got := nextMessage(t, ps); got != "1" {
		t.Fatalf("setPermits(1) message: got %q, want %q", got, "1")
	}
	checkString(t, c, name, "-1")

	absent := name + ":absent"
	if err := ops.PermitsSetPermits(ctx, absent, 4, now); err != nil {
		t.Fatal(err)
	}
	checkString(t, c, absent, "4")
}

func TestPermitsAcquireRelease(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)
	now := msNow()
	expires := now.Add(lease)

	// An absent semaphore has no permits, and nothing to wait for but a message.
	if got, err := ops.PermitsTryAcquire(ctx, name, newIDs(1), expires, now); got.OK || !got.NextExpiry.IsZero() || err != nil {
		t.Fatalf("PermitsTryAcquire on an absent semaphore: %+v, %v; want not OK, no expiry", got, err)
	}
	checkGone(t, c, name)

	if _, err := ops.PermitsTrySetPermits(ctx, name, "", 3); err != nil {
		t.Fatal(err)
	}
	ps := subscribe(t, c, channel)
	ids := newIDs(2)
	mustPermitsAcquire(t, ops, name, ids, expires, now)
	checkString(t, c, name, "1")
	checkPermits(t, c, name, map[string]int64{ids[0]: expires.UnixMilli(), ids[1]: expires.UnixMilli()})
	if ttl, err := c.PTTL(ctx, redisops.PermitTimeoutKey(name)).Result(); ttl != -1 || err != nil {
		t.Fatalf("PTTL of the permits: %v, %v; want none, as the semaphore has none", ttl, err)
	}

	// Retry: the same ids again take nothing more.
	mustPermitsAcquire(t, ops, name, ids, expires, now)
	checkString(t, c, name, "1")

	// Not enough: the waiter is told when the first lease ends.
	got, err := ops.PermitsTryAcquire(ctx, name, newIDs(2), expires, now)
	if err != nil || got.OK || !got.NextExpiry.Equal(expires) {
		t.Fatalf("PermitsTryAcquire(2) of 1: %+v, %v; want not OK, NextExpiry %v", got, err, expires)
	}
	expectNoMessage(t, c, ps, channel) // acquisitions publish nothing

	if n, err := ops.PermitsAvailable(ctx, name, now); n != 1 || err != nil {
		t.Fatalf("PermitsAvailable: %d, %v; want 1", n, err)
	}
	if n, err := ops.PermitsAcquiredCount(ctx, name, now); n != 2 || err != nil {
		t.Fatalf("PermitsAcquiredCount: %d, %v; want 2", n, err)
	}

	rel, err := ops.PermitsRelease(ctx, name, ids[0], now)
	if err != nil || !rel.Removed || rel.Expired {
		t.Fatalf("PermitsRelease: %+v, %v; want removed, not expired", rel, err)
	}
	if got := nextMessage(t, ps); got != "2" {
		t.Fatalf("release message: got %q, want %q", got, "2")
	}
	checkString(t, c, name, "2")
	checkPermits(t, c, name, map[string]int64{ids[1]: expires.UnixMilli()})
	// A second release (a retry) removes nothing and publishes nothing.
	if rel, err := ops.PermitsRelease(ctx, name, ids[0], now); err != nil || rel.Removed || rel.Expired {
		t.Fatalf("PermitsRelease again: %+v, %v; want nothing removed", rel, err)
	}
	expectNoMessage(t, c, ps, channel)
	checkString(t, c, name, "2")

	// Without a lease the score is Redisson's, and a refused waiter waits for a message only.
	forever := newIDs(2)
	mustPermitsAcquire(t, ops, name, forever, time.Time{}, now)
	checkPermits(t, c, name, map[string]int64{ids[1]: expires.UnixMilli(),
		forever[0]: redisops.NonExpirableTimeout, forever[1]: redisops.NonExpirableTimeout})
	if rel, err := ops.PermitsRelease(ctx, name, ids[1], now); err != nil || !rel.Removed {
		t.Fatalf("PermitsRelease: %+v, %v; want removed", rel, err)
	}
	if got := nextMessage(t, ps); got != "1" {
		t.Fatalf("release message: got %q, want %q", got, "1")
	}
	if got, err := ops.PermitsTryAcquire(ctx, name, newIDs(2), expires, now); got.OK || !got.NextExpiry.IsZero() || err != nil {
		t.Fatalf("PermitsTryAcquire(2) of 1 with only unleased permits out: %+v, %v; want not OK, no expiry", got, err)
	}
}

// TestPermitsExpiryFollowsSemaphore: a semaphore key with an expiry gives it to the permits' ZSET on
// acquisition, as Redisson's script does.
func TestPermitsExpiryFollowsSemaphore(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	if _, err := ops.PermitsTrySetPermits(ctx, name, "", 2); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx, name, longLease).Err(); err != nil {
		t.Fatal(err)
	}
	mustPermitsAcquire(t, ops, name, newIDs(1), time.Time{}, msNow())
	checkPTTL(t, c, redisops.PermitTimeoutKey(name), longLease)
}

// TestPermitsReclaim: permits whose lease ended come back before a call does anything else; the
// acquisition takes back at most as many as it asks for, the other calls all of them.
func TestPermitsReclaim(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)
	t0 := msNow()
	if _, err := ops.PermitsTrySetPermits(ctx, name, "", 4); err != nil {
		t.Fatal(err)
	}
	short := newIDs(3)
	mustPermitsAcquire(t, ops, name, short, t0.Add(time.Second), t0)
	long := newIDs(1)
	mustPermitsAcquire(t, ops, name, long, t0.Add(time.Hour), t0)
	checkString(t, c, name, "0")
	ps := subscribe(t, c, channel)

	// Before the leases end nothing comes back; the waiter is told when the first one ends.
	got, err := ops.PermitsTryAcquire(ctx, name, newIDs(1), t0.Add(time.Hour), t0.Add(500*time.Millisecond))
	if err != nil || got.OK || !got.NextExpiry.Equal(t0.Add(time.Second)) {
		t.Fatalf("PermitsTryAcquire before the leases end: %+v, %v; want not OK, NextExpiry %v", got, err, t0.Add(time.Second))
	}

	// After: an acquisition of 1 takes back 1 (the count published), then takes it.
	t1 := t0.Add(2 * time.Second)
	fresh := newIDs(1)
	mustPermitsAcquire(t, ops, name, fresh, t1.Add(time.Hour), t1)
	if got := nextMessage(t, ps); got != "1" {
		t.Fatalf("reclaim message: got %q, want %q", got, "1")
	}
	checkString(t, c, name, "0")
	zc, err := c.ZCard(ctx, redisops.PermitTimeoutKey(name)).Result()
	if err != nil || zc != 4 {
		t.Fatalf("ZCARD: %d, %v; want 4 (2 ended permits left, 1 long, 1 fresh)", zc, err)
	}

	// The count takes back all the others.
	if n, err := ops.PermitsAcquiredCount(ctx, name, t1); n != 2 || err != nil {
		t.Fatalf("PermitsAcquiredCount: %d, %v; want 2", n, err)
	}
	if got := nextMessage(t, ps); got != "2" {
		t.Fatalf("reclaim message: got %q, want %q", got, "2")
	}
	checkPermits(t, c, name, map[string]int64{long[0]: t0.Add(time.Hour).UnixMilli(), fresh[0]: t1.Add(time.Hour).UnixMilli()})
	if n, err := ops.PermitsAvailable(ctx, name, t1); n != 2 || err != nil {
		t.Fatalf("PermitsAvailable: %d, %v; want 2", n, err)
	}
	expectNoMessage(t, c, ps, channel)

	// A release of a permit whose lease ended gives it back all the same, and says so.
	t2 := t1.Add(2 * time.Hour)
	rel, err := ops.PermitsRelease(ctx, name, long[0], t2)
	if err != nil || !rel.Removed || !rel.Expired {
		t.Fatalf("PermitsRelease of an ended permit: %+v, %v; want removed, expired", rel, err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("release message: got %q, want %q", got, "3")
	}
	// Available at t2 takes back the last one.
	if n, err := ops.PermitsAvailable(ctx, name, t2); n != 4 || err != nil {
		t.Fatalf("PermitsAvailable: %d, %v; want 4", n, err)
	}
	if got := nextMessage(t, ps); got != "4" {
		t.Fatalf("reclaim message: got %q, want %q", got, "4")
	}
	checkPermits(t, c, name, map[string]int64{})
}

func TestPermitsRenew(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)
	t0 := msNow()
	if _, err := ops.PermitsTrySetPermits(ctx, name, "", 5); err != nil {
		t.Fatal(err)
	}
	live, released, expired := newIDs(2), newIDs(1), newIDs(1)
	mustPermitsAcquire(t, ops, name, live, t0.Add(10*time.Second), t0)
	mustPermitsAcquire(t, ops, name, released, t0.Add(10*time.Second), t0)
	mustPermitsAcquire(t, ops, name, expired, t0.Add(time.Second), t0)
	if _, err := ops.PermitsRelease(ctx, name, released[0], t0); err != nil {
		t.Fatal(err)
	}
	checkString(t, c, name, "2")
	ps := subscribe(t, c, channel)

	t1 := t0.Add(5 * time.Second)
	ids := []string{live[0], released[0], expired[0], live[1]}
	renewed, err := ops.PermitsRenew(ctx, name, ids, t1.Add(lease), t1)
	if err != nil || !slices.Equal(renewed, []bool{true, false, false, true}) {
		t.Fatalf("PermitsRenew: %v, %v; want [true false false true]", renewed, err)
	}
	if got := nextMessage(t, ps); got != "3" { // the ended permit came back
		t.Fatalf("reclaim message: got %q, want %q", got, "3")
	}
	expectNoMessage(t, c, ps, channel)
	checkString(t, c, name, "3")
	checkPermits(t, c, name, map[string]int64{live[0]: t1.Add(lease).UnixMilli(), live[1]: t1.Add(lease).UnixMilli()})

	// A retry renews again, to the same expiry; the zero time removes the lease.
	for range 2 {
		renewed, err = ops.PermitsRenew(ctx, name, live[:1], time.Time{}, t1)
		if err != nil || !slices.Equal(renewed, []bool{true}) {
			t.Fatalf("PermitsRenew without a lease: %v, %v; want [true]", renewed, err)
		}
	}
	checkPermits(t, c, name, map[string]int64{live[0]: redisops.NonExpirableTimeout, live[1]: t1.Add(lease).UnixMilli()})
	checkString(t, c, name, "3")
}

func TestPermitsBadArguments(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	now := msNow()
	id := redisops.NewPermitID()
	for _, bad := range [][]string{nil, {}, {"xyz"}, {id[:31]}, {id + "0"}, {strings.Repeat("g", 32)}, {id, id}} {
		if _, err := ops.PermitsTryAcquire(ctx, name, bad, time.Time{}, now); !errors.Is(err, redisops.ErrBadArgument) {
			t.Errorf("PermitsTryAcquire(%q): got %v, want an error matching ErrBadArgument", bad, err)
		}
		if _, err := ops.PermitsRenew(ctx, name, bad, time.Time{}, now); !errors.Is(err, redisops.ErrBadArgument) {
			t.Errorf("PermitsRenew(%q): got %v, want an error matching ErrBadArgument", bad, err)
		}
	}
	for _, bad := range []string{"", "xyz", id[:31], strings.Repeat("g", 32)} {
		if _, err := ops.PermitsRelease(ctx, name, bad, now); !errors.Is(err, redisops.ErrBadArgument) {
			t.Errorf("PermitsRelease(%q): got %v, want an error matching ErrBadArgument", bad, err)
		}
	}
	for _, p := range []int64{0, -1} {
		if _, err := ops.PermitsTrySetPermits(ctx, name, "", p); !errors.Is(err, redisops.ErrBadArgument) {
			t.Errorf("PermitsTrySetPermits(%d): got %v, want an error matching ErrBadArgument", p, err)
		}
		if err := ops.PermitsSetPermits(ctx, name, p, now); !errors.Is(err, redisops.ErrBadArgument) {
			t.Errorf("PermitsSetPermits(%d): got %v, want an error matching ErrBadArgument", p, err)
		}
	}
	if err := ops.PermitsAddPermits(ctx, name, "r", 0); !errors.Is(err, redisops.ErrBadArgument) {
		t.Errorf("PermitsAddPermits(0): got %v, want an error matching ErrBadArgument", err)
	}
	// Upper-case hex is an id too.
	if _, err := ops.PermitsRelease(ctx, name, strings.ToUpper(id), now); err != nil {
		t.Errorf("PermitsRelease of an upper-case id: %v", err)
	}
	if n, err := c.DBSize(ctx).Result(); n != 0 || err != nil {
		t.Fatalf("DBSIZE after refused calls: %d, %v; want 0", n, err)
	}
}

// TestPermitsWrongType: every call on a semaphore whose key, permits ZSET or retry latch holds another
// type answers ErrWrongType and changes nothing, expired permits included.
func TestPermitsWrongType(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	t0 := msNow()
	t1 := t0.Add(time.Hour)

	// hashName is a lock (a hash at the name), with an ended permit in its ZSET; zsetName has a
	// string where its ZSET goes; latchName is sound, but its retry latch is a hash.
	hashName, zsetName, latchName := t.Name()+":hash", t.Name()+":zset", t.Name()+":latch"
	mustAcquire(t, ops, hashName, "A", lease)
	id := redisops.NewPermitID()
	if err := c.ZAdd(ctx, redisops.PermitTimeoutKey(hashName), redis.Z{Score: float64(t0.UnixMilli()), Member: rawID(t, id)}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, zsetName, "3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, redisops.PermitTimeoutKey(zsetName), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, latchName, "3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, redisops.RetryLatchKey(latchName, "r"), "x", "1").Err(); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, c)
	calls := []struct {
		what string
		fn   func(name string) error
	}{
		{"TryAcquire", func(n string) error {
			_, err := ops.PermitsTryAcquire(ctx, n, []string{id}, time.Time{}, t1)
			return err
		}},
		{"Release", func(n string) error { _, err := ops.PermitsRelease(ctx, n, id, t1); return err }},
		{"Renew", func(n string) error { _, err := ops.PermitsRenew(ctx, n, []string{id}, time.Time{}, t1); return err }},
		{"Available", func(n string) error { _, err := ops.PermitsAvailable(ctx, n, t1); return err }},
		{"AcquiredCount", func(n string) error { _, err := ops.PermitsAcquiredCount(ctx, n, t1); return err }},
		{"SetPermits", func(n string) error { return ops.PermitsSetPermits(ctx, n, 9, t1) }},
	}
	for _, call := range calls {
		for _, n := range []string{hashName, zsetName} {
			if err := call.fn(n); !errors.Is(err, redisops.ErrWrongType) {
				t.Errorf("%s(%q): got %v, want an error matching ErrWrongType", call.what, n, err)
			}
		}
	}
	if _, err := ops.PermitsTrySetPermits(ctx, hashName, "", 1); !errors.Is(err, redisops.ErrWrongType) {
		t.Errorf("TrySetPermits on a hash: got %v, want an error matching ErrWrongType", err)
	}
	for _, n := range []string{hashName, latchName} {
		if err := ops.PermitsAddPermits(ctx, n, "r", 1); !errors.Is(err, redisops.ErrWrongType) {
			t.Errorf("AddPermits(%q): got %v, want an error matching ErrWrongType", n, err)
		}
	}
	if after := snapshot(t, c); !maps.Equal(before, after) {
		t.Fatalf("calls on keys of another type changed Redis:\nbefore %q\nafter  %q", before, after)
	}
}

// TestPermitsInterop: a Redisson client (integration/redissontest, with Redisson's own scripts) and
// lockwarden share a permit-expirable semaphore both ways: the permits one side acquires, the other
// sees, renews and releases, with the same messages.
func TestPermitsInterop(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.SemaphoreChannel(name)
	rs := redissontest.NewPermitSemaphore(c, name)
	if rs.Channel != channel || rs.Timeout != redisops.PermitTimeoutKey(name) {
		t.Fatalf("keys differ: Redisson %q, %q; lockwarden %q, %q", rs.Channel, rs.Timeout, channel, redisops.PermitTimeoutKey(name))
	}
	t0 := msNow()
	rs.Now = func() time.Time { return t0 }
	ps := subscribe(t, c, channel)

	if ok, err := rs.TrySetPermits(ctx, 4); !ok || err != nil {
		t.Fatalf("Redisson TrySetPermits: %v, %v", ok, err)
	}
	if got := nextMessage(t, ps); got != "4" {
		t.Fatalf("Redisson's trySetPermits message: got %q, want %q", got, "4")
	}

	// Redisson acquires two permits with a lease; lockwarden sees them and releases one of them.
	rids, err := rs.TryAcquire(ctx, 2, lease)
	if err != nil || len(rids) != 2 {
		t.Fatalf("Redisson TryAcquire(2): %v, %v", rids, err)
	}
	checkPermits(t, c, name, map[string]int64{rids[0]: t0.Add(lease).UnixMilli(), rids[1]: t0.Add(lease).UnixMilli()})
	if n, err := ops.PermitsAcquiredCount(ctx, name, t0); n != 2 || err != nil {
		t.Fatalf("PermitsAcquiredCount: %d, %v; want 2", n, err)
	}
	if rel, err := ops.PermitsRelease(ctx, name, rids[0], t0); err != nil || !rel.Removed || rel.Expired {
		t.Fatalf("PermitsRelease of Redisson's permit: %+v, %v; want removed, not expired", rel, err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("lockwarden's release message: got %q, want %q", got, "3")
	}
	// Redisson's release of the same id now fails, as after its own release.
	if ok, err := rs.Release(ctx, rids[0]); ok || err != nil {
		t.Fatalf("Redisson Release of a released permit: %v, %v; want false", ok, err)
	}

	// lockwarden acquires; Redisson sees the count and releases lockwarden's permit.
	lids := newIDs(3)
	mustPermitsAcquire(t, ops, name, lids, time.Time{}, t0)
	if n, err := rs.AvailablePermits(ctx); n != 0 || err != nil {
		t.Fatalf("Redisson AvailablePermits: %d, %v; want 0", n, err)
	}
	// Redisson, refused, is told the same lowest expiry lockwarden would be told.
	_, reply, err := rs.TryAcquireReply(ctx, 1, lease)
	if err != nil || reply != ":"+strconv.FormatInt(t0.Add(lease).UnixMilli(), 10) {
		t.Fatalf("Redisson TryAcquire(1) of 0: %q, %v; want the lowest expiry", reply, err)
	}
	if got, err := ops.PermitsTryAcquire(ctx, name, newIDs(1), time.Time{}, t0); err != nil || got.OK || !got.NextExpiry.Equal(t0.Add(lease)) {
		t.Fatalf("PermitsTryAcquire(1) of 0: %+v, %v; want NextExpiry %v", got, err, t0.Add(lease))
	}
	if ok, err := rs.Release(ctx, lids[1]); !ok || err != nil {
		t.Fatalf("Redisson Release of lockwarden's permit: %v, %v; want true", ok, err)
	}
	if got := nextMessage(t, ps); got != "1" {
		t.Fatalf("Redisson's release message: got %q, want %q", got, "1")
	}
	if renewed, err := ops.PermitsRenew(ctx, name, []string{lids[0], lids[1], rids[1]}, t0.Add(longLease), t0); err != nil ||
		!slices.Equal(renewed, []bool{true, false, true}) {
		t.Fatalf("PermitsRenew: %v, %v; want [true false true]", renewed, err)
	}
	checkPermits(t, c, name, map[string]int64{lids[0]: t0.Add(longLease).UnixMilli(),
		lids[2]: redisops.NonExpirableTimeout, rids[1]: t0.Add(longLease).UnixMilli()})

	// Leases end on Redisson's clock: Redisson's reclaim and lockwarden's find the same state.
	t1 := t0.Add(longLease + time.Second)
	rs.Now = func() time.Time { return t1 }
	if n, err := rs.AvailablePermits(ctx); n != 3 || err != nil {
		t.Fatalf("Redisson AvailablePermits after the leases ended: %d, %v; want 3", n, err)
	}
	if got := nextMessage(t, ps); got != "3" {
		t.Fatalf("Redisson's reclaim message: got %q, want %q", got, "3")
	}
	if n, err := ops.PermitsAvailable(ctx, name, t1); n != 3 || err != nil {
		t.Fatalf("PermitsAvailable: %d, %v; want 3", n, err)
	}
	if n, err := ops.PermitsAcquiredCount(ctx, name, t1); n != 1 || err != nil {
		t.Fatalf("PermitsAcquiredCount: %d, %v; want 1", n, err)
	}
	expectNoMessage(t, c, ps, channel)

	// addPermits from both sides publishes the delta.
	if err := rs.AddPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := ops.PermitsAddPermits(ctx, name, "", 2); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"Redisson", "lockwarden"} {
		if got := nextMessage(t, ps); got != "2" {
			t.Fatalf("%s's addPermits message: got %q, want %q", who, got, "2")
		}
	}
	checkString(t, c, name, "7")
}

// TestPermitsSameAsRedisson: each operation, run by Redisson on one name and by lockwarden on another
// from the same state with the same ids and clock, leaves the same keys and publishes the same
// messages.
func TestPermitsSameAsRedisson(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	rn, ln := t.Name()+":redisson", t.Name()+":lockwarden"
	rps := subscribe(t, c, redisops.SemaphoreChannel(rn))
	lps := subscribe(t, c, redisops.SemaphoreChannel(ln))
	rs := redissontest.NewPermitSemaphore(c, rn)
	t0 := msNow()
	rs.Now = func() time.Time { return t0 }

	if _, err := rs.TrySetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.PermitsTrySetPermits(ctx, ln, "", 3); err != nil {
		t.Fatal(err)
	}
	same := func(what string, message bool) {
		t.Helper()
		if message {
			if rm, lm := nextMessage(t, rps), nextMessage(t, lps); rm != lm {
				t.Fatalf("%s: Redisson published %q, lockwarden %q", what, rm, lm)
			}
		} else {
			expectNoMessage(t, c, rps, redisops.SemaphoreChannel(rn))
			expectNoMessage(t, c, lps, redisops.SemaphoreChannel(ln))
		}
		checkSameKey(t, c, rn, ln)
		rz, err := c.ZRangeWithScores(ctx, redisops.PermitTimeoutKey(rn), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(rz) == 0 {
			return
		}
		// Redisson's ids are its own: the scores must match, the members be 16 bytes each.
		lz, err := c.ZRangeWithScores(ctx, redisops.PermitTimeoutKey(ln), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(rz) != len(lz) {
			t.Fatalf("%s: Redisson has %d permits, lockwarden %d", what, len(rz), len(lz))
		}
		for i := range rz {
			if rz[i].Score != lz[i].Score || len(rz[i].Member.(string)) != 16 || len(lz[i].Member.(string)) != 16 {
				t.Fatalf("%s: Redisson's permits %v, lockwarden's %v", what, rz, lz)
			}
		}
	}
	same("trySetPermits", true)

	// Acquire 2 with a lease, as Redisson does it at t0.
	rids, err := rs.TryAcquire(ctx, 2, time.Second)
	if err != nil || len(rids) != 2 {
		t.Fatalf("Redisson TryAcquire: %v, %v", rids, err)
	}
	lids := newIDs(2)
	mustPermitsAcquire(t, ops, ln, lids, t0.Add(time.Second), t0)
	same("tryAcquire", false)

	// At t1 the leases have ended: an acquisition of 1 takes back 1 first.
	t1 := t0.Add(2 * time.Second)
	rs.Now = func() time.Time { return t1 }
	if ids, err := rs.TryAcquire(ctx, 1, -1); err != nil || len(ids) != 1 {
		t.Fatalf("Redisson TryAcquire after the leases ended: %v, %v", ids, err)
	}
	mustPermitsAcquire(t, ops, ln, newIDs(1), time.Time{}, t1)
	same("tryAcquire with reclaim", true)

	// Release of the permit whose lease ended, not yet taken back.
	rz, _ := c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: redisops.PermitTimeoutKey(rn), ByScore: true, Start: "0", Stop: strconv.FormatInt(t1.UnixMilli(), 10)}).Result()
	lz, _ := c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: redisops.PermitTimeoutKey(ln), ByScore: true, Start: "0", Stop: strconv.FormatInt(t1.UnixMilli(), 10)}).Result()
	if len(rz) != 1 || len(lz) != 1 {
		t.Fatalf("ended permits: Redisson %d, lockwarden %d; want 1 each", len(rz), len(lz))
	}
	if ok, err := rs.Release(ctx, hex.EncodeToString([]byte(rz[0]))); ok || err != nil {
		t.Fatalf("Redisson Release of an ended permit: %v, %v; want false", ok, err)
	}
	if rel, err := ops.PermitsRelease(ctx, ln, hex.EncodeToString([]byte(lz[0])), t1); !rel.Removed || !rel.Expired || err != nil {
		t.Fatalf("PermitsRelease of an ended permit: %+v, %v; want removed, expired", rel, err)
	}
	same("release", true)

	if err := rs.AddPermits(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if err := ops.PermitsAddPermits(ctx, ln, "", -1); err != nil {
		t.Fatal(err)
	}
	same("addPermits(-1)", false)
	if _, err := rs.AvailablePermits(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.PermitsAvailable(ctx, ln, t1); err != nil {
		t.Fatal(err)
	}
	same("availablePermits", false)
}
