package redisops_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// snapshot returns every key of the server with its type and serialized value (DUMP), so that a test
// can check that a call changed nothing at all.
func snapshot(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	ctx := t.Context()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	slices.Sort(keys)
	snap := make(map[string]string, len(keys))
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("TYPE %q: %v", k, err)
		}
		dump, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %q: %v", k, err)
		}
		snap[k] = typ + ":" + dump
	}
	return snap
}

// TestForceUnlockLeavesOtherTypes: a lock named like another lock's internal key must not delete that
// key. ForceUnlock of "redisson_lock_token:{X}" used to DEL X's token counter.
func TestForceUnlockLeavesOtherTypes(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	first := mustAcquire(t, ops, name, "A", lease)
	if _, err := ops.WriteAcquire(ctx, name+":rw", "A", lease, 0, 0); err != nil {
		t.Fatalf("WriteAcquire: %v", err)
	}
	// A string, a list and a zset at keys that other locks' force unlocks are asked to free.
	if err := c.RPush(ctx, "list:"+name, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx, "zset:"+name, redis.Z{Score: 1, Member: "x"}).Err(); err != nil {
		t.Fatal(err)
	}
	victims := []string{redisops.TokenKey(name), redisops.TokenKey(name + ":rw"), "list:" + name, "zset:" + name}
	before := snapshot(t, c)
	for _, victim := range victims {
		for _, force := range []struct {
			what string
			fn   func(context.Context, string) (bool, error)
		}{
			{"ForceUnlock", ops.ForceUnlock},
			{"FairForceUnlock", ops.FairForceUnlock},
			{"ForceUnlockRead", ops.ForceUnlockRead},
			{"ForceUnlockWrite", ops.ForceUnlockWrite},
		} {
			ok, err := force.fn(ctx, victim)
			if ok || !errors.Is(err, redisops.ErrWrongType) {
				t.Errorf("%s(%q) = %v, %v; want false, an error matching ErrWrongType", force.what, victim, ok, err)
			}
		}
	}
	if after := snapshot(t, c); !maps.Equal(before, after) {
		t.Fatalf("force unlocks of keys of another type changed Redis:\nbefore %q\nafter  %q", before, after)
	}
	// X's counter survived: its next token is higher than the first.
	if _, err := ops.Release(ctx, name, "A", "r1", lease, nil); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := mustAcquire(t, ops, name, "B", lease); got.Token <= first.Token {
		t.Errorf("token after the force unlocks: got %d, want above %d", got.Token, first.Token)
	}
}

// TestScriptsRefuseWrongTypes: a script that meets a key of another type than it expects answers an
// error matching ErrWrongType and changes nothing, even when the key it trips over comes late in the
// script (the token counter is INCRed after the lock is taken).
func TestScriptsRefuseWrongTypes(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	// shadow makes key a lock hash of its own: the lock named key, as a user could name one.
	shadow := func(t *testing.T, key string) {
		t.Helper()
		mustAcquire(t, ops, key, "Z", lease)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, name string)
		call  func(name string) error
	}{
		{"acquire, counter is a hash", func(t *testing.T, n string) { shadow(t, redisops.TokenKey(n)) },
			func(n string) error { _, err := ops.Acquire(ctx, n, "A", lease, 0); return err }},
		{"acquire, lock is a string", func(t *testing.T, n string) { c.Set(ctx, n, "v", 0) },
			func(n string) error { _, err := ops.Acquire(ctx, n, "A", lease, 0); return err }},
		{"handoff, counter is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			c.Del(ctx, redisops.TokenKey(n))
			shadow(t, redisops.TokenKey(n))
		}, func(n string) error {
			_, err := ops.Release(ctx, n, "A", "r1", lease, &redisops.Handoff{Owner: "B", Lease: lease})
			return err
		}},
		{"re-entry, counter is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			c.Del(ctx, redisops.TokenKey(n))
			shadow(t, redisops.TokenKey(n))
		}, func(n string) error { _, err := ops.Acquire(ctx, n, "A", lease, 1); return err }},
		{"release, lock is a string", func(t *testing.T, n string) { c.Set(ctx, n, "v", 0) },
			func(n string) error { _, err := ops.ReleaseHeld(ctx, n, "A", "r1", lease, 1, nil); return err }},
		{"last release, latch is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			shadow(t, redisops.UnlockLatchKey(n, "A"))
		}, func(n string) error { _, err := ops.ReleaseHeld(ctx, n, "A", "w:r1", lease, 1, nil); return err }},
		{"release of a re-entered hold, latch is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			mustAcquire(t, ops, n, "A", lease)
			shadow(t, redisops.UnlockLatchKey(n, "A"))
		}, func(n string) error { _, err := ops.ReleaseHeld(ctx, n, "A", "w:r1", lease, 2, nil); return err }},
		{"last release of an unknown count, latch is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			shadow(t, redisops.UnlockLatchKey(n, "r1"))
		}, func(n string) error { _, err := ops.Release(ctx, n, "A", "r1", lease, nil); return err }},
		{"release of an unexpected count, latch is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			mustAcquire(t, ops, n, "A", lease)
			shadow(t, redisops.UnlockLatchKey(n, "A"))
		}, func(n string) error { _, err := ops.ReleaseHeld(ctx, n, "A", "w:r1", lease, 1, nil); return err }},
		{"handoff, latch is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			shadow(t, redisops.UnlockLatchKey(n, "A"))
		}, func(n string) error {
			_, err := ops.ReleaseHeld(ctx, n, "A", "w:r1", lease, 1, &redisops.Handoff{Owner: "B", Lease: lease})
			return err
		}},
		{"handoff with the count known, counter is a hash", func(t *testing.T, n string) {
			mustAcquire(t, ops, n, "A", lease)
			c.Del(ctx, redisops.TokenKey(n))
			shadow(t, redisops.TokenKey(n))
		}, func(n string) error {
			_, err := ops.ReleaseHeld(ctx, n, "A", "w:r1", lease, 1, &redisops.Handoff{Owner: "B", Lease: lease})
			return err
		}},
		{"fair acquire, counter is a hash", func(t *testing.T, n string) { shadow(t, redisops.TokenKey(n)) },
			func(n string) error { _, err := ops.FairAcquire(ctx, n, "A", lease, lease, 0, true); return err }},
		{"fair acquire, queue is a hash", func(t *testing.T, n string) { shadow(t, redisops.FairQueueKey(n)) },
			func(n string) error { _, err := ops.FairAcquire(ctx, n, "A", lease, lease, 0, true); return err }},
		{"fair release, counter is a hash", func(t *testing.T, n string) {
			if _, err := ops.FairAcquire(ctx, n, "A", lease, lease, 0, true); err != nil {
				t.Fatal(err)
			}
			if _, err := ops.FairAcquire(ctx, n, "B", lease, lease, 0, true); err != nil {
				t.Fatal(err)
			}
			c.Del(ctx, redisops.TokenKey(n))
			shadow(t, redisops.TokenKey(n))
		}, func(n string) error {
			_, err := ops.FairRelease(ctx, n, "A", "r1", lease, &redisops.Handoff{Owner: "B", Lease: lease})
			return err
		}},
		{"fair cancel, timeouts are a hash", func(t *testing.T, n string) { shadow(t, redisops.FairTimeoutKey(n)) },
			func(n string) error { _, err := ops.FairCancel(ctx, n, "A", lease); return err }},
		{"write acquire, counter is a hash", func(t *testing.T, n string) { shadow(t, redisops.TokenKey(n)) },
			func(n string) error { _, err := ops.WriteAcquire(ctx, n, "A", lease, 0, 0); return err }},
		{"write acquire, intent is a hash", func(t *testing.T, n string) {
			if _, err := ops.WriteAcquire(ctx, n, "A", lease, 0, 0); err != nil {
				t.Fatal(err)
			}
			shadow(t, redisops.WriteIntentKey(n))
		}, func(n string) error { _, err := ops.WriteAcquire(ctx, n, "A", lease, 1, 0); return err }},
		{"read acquire, hold key is a hash", func(t *testing.T, n string) {
			shadow(t, redisops.ReadTimeoutKey(n, "A", 1))
		}, func(n string) error { _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); return err }},
		{"read acquire, lock is a string", func(t *testing.T, n string) { c.Set(ctx, n, "v", 0) },
			func(n string) error { _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); return err }},
		{"read acquire, intent is a hash", func(t *testing.T, n string) { shadow(t, redisops.WriteIntentKey(n)) },
			func(n string) error { _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); return err }},
		{"read re-entry, hold key is a hash", func(t *testing.T, n string) {
			if _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); err != nil {
				t.Fatal(err)
			}
			shadow(t, redisops.ReadTimeoutKey(n, "A", 2))
		}, func(n string) error { _, err := ops.ReadAcquire(ctx, n, "A", lease, 1); return err }},
		{"read release, latch is a hash", func(t *testing.T, n string) {
			if _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); err != nil {
				t.Fatal(err)
			}
			shadow(t, redisops.UnlockLatchKey(n, "r1"))
		}, func(n string) error { _, err := ops.ReadRelease(ctx, n, "A", "r1", lease); return err }},
		{"sequenced read release, latch is a hash", func(t *testing.T, n string) {
			if _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); err != nil {
				t.Fatal(err)
			}
			shadow(t, redisops.UnlockLatchKey(n, "A"))
		}, func(n string) error { _, err := ops.ReadReleaseHeld(ctx, n, "A", "w:r1", lease, 1); return err }},
		{"read release, lock is a string", func(t *testing.T, n string) { c.Set(ctx, n, "v", 0) },
			func(n string) error { _, err := ops.ReadRelease(ctx, n, "A", "r1", lease); return err }},
		{"read release, hold key is a hash", func(t *testing.T, n string) {
			if _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); err != nil {
				t.Fatal(err)
			}
			c.Del(ctx, redisops.ReadTimeoutKey(n, "A", 1))
			shadow(t, redisops.ReadTimeoutKey(n, "A", 1))
		}, func(n string) error { _, err := ops.ReadRelease(ctx, n, "A", "r1", lease); return err }},
		{"sequenced read release, hold key is a hash", func(t *testing.T, n string) {
			if _, err := ops.ReadAcquire(ctx, n, "A", lease, 0); err != nil {
				t.Fatal(err)
			}
			c.Del(ctx, redisops.ReadTimeoutKey(n, "A", 1))
			shadow(t, redisops.ReadTimeoutKey(n, "A", 1))
		}, func(n string) error { _, err := ops.ReadReleaseHeld(ctx, n, "A", "w:r1", lease, 1); return err }},
		{"raise token, counter is a hash", func(t *testing.T, n string) { shadow(t, redisops.TokenKey(n)) },
			func(n string) error { _, err := ops.RaiseToken(ctx, n, 5); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := t.Name()
			tt.setup(t, name)
			before := snapshot(t, c)
			if err := tt.call(name); !errors.Is(err, redisops.ErrWrongType) {
				t.Errorf("got error %v, want one matching ErrWrongType", err)
			}
			if after := snapshot(t, c); !maps.Equal(before, after) {
				t.Errorf("the refused call changed Redis:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}
