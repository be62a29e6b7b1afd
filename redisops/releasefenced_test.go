package redisops_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// fencedCopy runs release_fenced.lua as a copy of a release that go-redis sent again, or that reached
// Redis late, would: the very script call, with no fallback to release.lua. It returns the script's
// answer (remaining, -1 or -3).
func fencedCopy(t *testing.T, c *redis.Client, name, owner string, held, token int64) int64 {
	t.Helper()
	n := redisops.NamesOf(name)
	got, err := redisops.Scripts()["release_fenced"].Run(t.Context(), c,
		[]string{n.Name, n.Channel, n.Token}, lease.Milliseconds(), owner, held, token+1, "publish").Int64()
	if err != nil {
		t.Fatalf("release_fenced.lua(%q, %q, held %d, token %d): %v", name, owner, held, token, err)
	}
	return got
}

// releaseFenced calls ReleaseHeldFenced and fails the test on an error.
func releaseFenced(t *testing.T, ops *redisops.Ops, name, owner, req string, held, token int64) redisops.Released {
	t.Helper()
	n := redisops.NamesOf(name)
	got, err := ops.ReleaseHeldFenced(t.Context(), &n, owner, req, lease, held, token)
	if err != nil {
		t.Fatalf("ReleaseHeldFenced(%q, %q, %q, held %d, token %d): %v", name, owner, req, held, token, err)
	}
	return got
}

// releaseFencedErr is a ReleaseHeldFenced of owner's hold of name (request "q:r1") that must fail: it
// returns the error, or fails the test when the release succeeded.
func releaseFencedErr(t *testing.T, ops *redisops.Ops, name, owner string, held, token int64) error {
	t.Helper()
	n := redisops.NamesOf(name)
	got, err := ops.ReleaseHeldFenced(t.Context(), &n, owner, "q:r1", lease, held, token)
	if err == nil {
		t.Fatalf("ReleaseHeldFenced(%q, %q, held %d, token %d) = %+v, want an error", name, owner, held, token, got)
	}
	return err
}

// acquireHeld takes one more hold of owner, whose count was held, and returns its token.
func acquireHeld(t *testing.T, ops *redisops.Ops, name, owner string, held int64) int64 {
	t.Helper()
	got, err := ops.Acquire(t.Context(), name, owner, lease, held)
	if err != nil || !got.OK || got.HoldCount != held+1 {
		t.Fatalf("Acquire(%q, %q) with %d held: %+v, %v", name, owner, held, got, err)
	}
	return got.Token
}

// counterValue reads the token counter of name.
func counterValue(t *testing.T, c *redis.Client, name string) int64 {
	t.Helper()
	v, err := c.Get(t.Context(), redisops.TokenKey(name)).Int64()
	if err != nil {
		t.Fatalf("GET %s: %v", redisops.TokenKey(name), err)
	}
	return v
}

// TestReleaseHeldFenced: a release checked by the token counter drops one hold per release, frees
// the lock and publishes the unlock notice with the last, and keeps no unlock latch: no key is left
// but the counter, which the last release raises by one.
func TestReleaseHeldFenced(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	name := t.Name()
	ps := subscribe(t, c, redisops.ChannelName(name))
	var token int64
	for held := range int64(3) {
		token = acquireHeld(t, ops, name, "A", held)
	}
	for held := int64(3); held > 1; held-- {
		if got := releaseFenced(t, ops, name, "A", "q:r"+strconv.FormatInt(10-held, 10), held, token); got != (redisops.Released{Remaining: held - 1}) {
			t.Errorf("release of %d holds: got %+v, want %d left", held, got, held-1)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": strconv.FormatInt(held-1, 10)})
		checkPTTL(t, c, redisops.LockKey(name), lease)
	}
	before := counterValue(t, c, name)
	if got := releaseFenced(t, ops, name, "A", "q:r9", 1, token); got != (redisops.Released{}) {
		t.Errorf("release of the last hold: got %+v, want %+v", got, redisops.Released{})
	}
	checkGone(t, c, redisops.LockKey(name))
	if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
		t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
	}
	if after := counterValue(t, c, name); after != before+1 {
		t.Errorf("counter after the last release = %d, want %d (one above)", after, before+1)
	}
	checkNoKey(t, c, redisops.UnlockLatchKey(name, "A"))
	if keys, err := c.Keys(t.Context(), "*"+name+"*").Result(); err != nil || len(keys) != 1 || keys[0] != redisops.TokenKey(name) {
		t.Errorf("keys left = %v, %v; want only the token counter", keys, err)
	}
	// The next acquisition's token is above the last one's.
	if next := mustAcquire(t, ops, name, "B", lease); next.Token <= token {
		t.Errorf("token after the release = %d, want above %d", next.Token, token)
	}
}

// TestReleaseFencedCopies: a copy of a release checked by the token counter, sent again after a lost
// reply or reaching Redis late, never drops a second hold: it answers what the first run did while
// nothing happened since, and changes nothing once the owner acquired again.
func TestReleaseFencedCopies(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)

	t.Run("inner hold sent again", func(t *testing.T) {
		name := t.Name()
		acquireHeld(t, ops, name, "A", 0)
		token := acquireHeld(t, ops, name, "A", 1)
		for i := range 2 {
			if got := fencedCopy(t, c, name, "A", 2, token); got != 1 {
				t.Errorf("run %d: got %d, want 1 left", i+1, got)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	})

	t.Run("last hold sent again", func(t *testing.T) {
		name := t.Name()
		token := acquireHeld(t, ops, name, "A", 0)
		for i := range 2 {
			if got := fencedCopy(t, c, name, "A", 1, token); got != 0 {
				t.Errorf("run %d: got %d, want 0", i+1, got)
			}
		}
		checkGone(t, c, redisops.LockKey(name))
		// Through the Go call, the retry answers the same.
		if got := releaseFenced(t, ops, name, "A", "q:r1", 1, token); got != (redisops.Released{}) {
			t.Errorf("ReleaseHeldFenced after the release ran: got %+v, want released", got)
		}
	})

	t.Run("inner hold sent again after the counter moved", func(t *testing.T) {
		// The first run left no latch; the retry finds the counter gone and goes through
		// release.lua, which finds the count one below the caller's.
		name := t.Name()
		acquireHeld(t, ops, name, "A", 0)
		token := acquireHeld(t, ops, name, "A", 1)
		if got := fencedCopy(t, c, name, "A", 2, token); got != 1 {
			t.Fatalf("first run: got %d, want 1", got)
		}
		checkNoKey(t, c, redisops.UnlockLatchKey(name, "A"))
		if err := c.Del(t.Context(), redisops.TokenKey(name)).Err(); err != nil {
			t.Fatal(err)
		}
		if got := releaseFenced(t, ops, name, "A", "q:r6", 2, token); got != (redisops.Released{Remaining: 1, Latched: true}) {
			t.Errorf("retry: got %+v, want 1 left, through the latch", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
		if got, err := c.Get(t.Context(), redisops.UnlockLatchKey(name, "A")).Result(); err != nil || got != "6|1:0" {
			t.Errorf("latch after the retry = %q, %v; want its answer 6|1:0, for a later copy", got, err)
		}
		// The same with an older release's answer in the latch (a copy of it that came late): the
		// latch does not hold this release's, and the count tells.
		if err := c.Set(t.Context(), redisops.UnlockLatchKey(name, "A"), "5|0:0", redisops.DefaultLatchExpiry).Err(); err != nil {
			t.Fatal(err)
		}
		if got := releaseFenced(t, ops, name, "A", "q:r6", 2, token); got != (redisops.Released{Remaining: 1, Latched: true}) {
			t.Errorf("retry with an older answer in the latch: got %+v, want 1 left", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	})

	t.Run("last hold late after a new acquisition", func(t *testing.T) {
		name := t.Name()
		first := acquireHeld(t, ops, name, "A", 0)
		if got := fencedCopy(t, c, name, "A", 1, first); got != 0 {
			t.Fatalf("release: got %d, want 0", got)
		}
		acquireHeld(t, ops, name, "A", 0)
		if got := fencedCopy(t, c, name, "A", 1, first); got != -3 {
			t.Errorf("late copy: got %d, want -3 (cannot tell, changes nothing)", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	})

	t.Run("inner hold late after a re-entry", func(t *testing.T) {
		name := t.Name()
		acquireHeld(t, ops, name, "A", 0)
		token := acquireHeld(t, ops, name, "A", 1)
		if got := fencedCopy(t, c, name, "A", 2, token); got != 1 {
			t.Fatalf("release: got %d, want 1", got)
		}
		acquireHeld(t, ops, name, "A", 1) // back to 2 holds, with a new token
		if got := fencedCopy(t, c, name, "A", 2, token); got != -3 {
			t.Errorf("late copy: got %d, want -3", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "2"})
	})

	t.Run("inner hold late after a later release", func(t *testing.T) {
		name := t.Name()
		acquireHeld(t, ops, name, "A", 0)
		acquireHeld(t, ops, name, "A", 1)
		token := acquireHeld(t, ops, name, "A", 2)
		if got := fencedCopy(t, c, name, "A", 3, token); got != 2 {
			t.Fatalf("release: got %d, want 2", got)
		}
		if got := fencedCopy(t, c, name, "A", 2, token); got != 1 {
			t.Fatalf("next release: got %d, want 1", got)
		}
		if got := fencedCopy(t, c, name, "A", 3, token); got != -3 {
			t.Errorf("late copy of the first: got %d, want -3", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	})
}

// TestReleaseFencedLost: a release of a hold that was lost answers ErrNotHeld and leaves the lock to
// whoever has it, whether or not another owner acquired since; a counter that moved or expired for
// another reason sends the release through the latch, which releases the hold.
func TestReleaseFencedLost(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)

	t.Run("deleted", func(t *testing.T) {
		name := t.Name()
		token := acquireHeld(t, ops, name, "A", 0)
		before := counterValue(t, c, name)
		if _, err := ops.ForceUnlock(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		if err := releaseFencedErr(t, ops, name, "A", 1, token); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("release of a deleted hold: %v, want ErrNotHeld", err)
		}
		if after := counterValue(t, c, name); after != before {
			t.Errorf("counter = %d, want %d unchanged", after, before)
		}
	})

	t.Run("taken by another", func(t *testing.T) {
		name := t.Name()
		token := acquireHeld(t, ops, name, "A", 0)
		if _, err := ops.ForceUnlock(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, ops, name, "B", lease)
		if err := releaseFencedErr(t, ops, name, "A", 1, token); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("release of a hold taken by another: %v, want ErrNotHeld", err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
	})

	t.Run("counter expired", func(t *testing.T) {
		name := t.Name()
		token := acquireHeld(t, ops, name, "A", 0)
		if err := c.Del(t.Context(), redisops.TokenKey(name)).Err(); err != nil {
			t.Fatal(err)
		}
		if got := releaseFenced(t, ops, name, "A", "q:r1", 1, token); got != (redisops.Released{Latched: true}) {
			t.Errorf("release after the counter expired: got %+v, want released through the latch", got)
		}
		checkGone(t, c, redisops.LockKey(name))
	})

	t.Run("counter raised", func(t *testing.T) {
		name := t.Name()
		acquireHeld(t, ops, name, "A", 0)
		token := acquireHeld(t, ops, name, "A", 1)
		if _, err := ops.RaiseToken(t.Context(), name, token+100); err != nil {
			t.Fatal(err)
		}
		if got := releaseFenced(t, ops, name, "A", "q:r1", 2, token); got != (redisops.Released{Remaining: 1, Latched: true}) {
			t.Errorf("release after a raise: got %+v, want 1 left through the latch", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	})
}

// TestReleaseFencedRefusals: a release checked by the token counter refuses a read-write lock's hold
// and keys of another type before changing anything, and with a counter kept forever (or no token)
// it is a release through the latch.
func TestReleaseFencedRefusals(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)

	t.Run("read-write lock", func(t *testing.T) {
		name := t.Name()
		if err := c.HSet(t.Context(), name, "mode", "read", "A", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := releaseFencedErr(t, ops, name, "A", 1, 7); !errors.Is(err, redisops.ErrKindMismatch) {
			t.Errorf("release of a read hold: %v, want ErrKindMismatch", err)
		}
		checkHash(t, c, name, map[string]string{"mode": "read", "A": "1"})
	})

	t.Run("counter of another type", func(t *testing.T) {
		name := t.Name()
		token := acquireHeld(t, ops, name, "A", 0)
		if err := c.Del(t.Context(), redisops.TokenKey(name)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.RPush(t.Context(), redisops.TokenKey(name), "x").Err(); err != nil {
			t.Fatal(err)
		}
		if err := releaseFencedErr(t, ops, name, "A", 1, token); !errors.Is(err, redisops.ErrWrongType) {
			t.Errorf("release with a list as the counter: %v, want ErrWrongType", err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
	})

	t.Run("persistent counter", func(t *testing.T) {
		persistent, c := setup(t)
		name := t.Name()
		token := acquireHeld(t, persistent, name, "A", 0)
		if got := releaseFenced(t, persistent, name, "A", "q:r1", 1, token); got != (redisops.Released{Latched: true}) {
			t.Errorf("release: got %+v, want released through the latch", got)
		}
		// Through the latch: the owner's latch keeps the answer.
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "A"), redisops.DefaultLatchExpiry)
	})
}
