package redisops_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/lockwarden/lockwarden/integration/redissontest"
	"github.com/lockwarden/lockwarden/redisops"
)

func TestLatchCountDown(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.LatchChannel(name)
	ps := subscribe(t, c, channel)

	if ok, err := ops.LatchTrySetCount(ctx, name, "", 2); !ok || err != nil {
		t.Fatalf("LatchTrySetCount: %v, %v; want true", ok, err)
	}
	if got := nextMessage(t, ps); got != redisops.LatchNewCountMessage {
		t.Fatalf("trySetCount message: got %q, want %q", got, redisops.LatchNewCountMessage)
	}
	checkString(t, c, name, "2")
	checkNoExpiry(t, c, name)
	if ok, err := ops.LatchTrySetCount(ctx, name, "", 5); ok || err != nil {
		t.Fatalf("LatchTrySetCount on a set latch: %v, %v; want false", ok, err)
	}
	expectNoMessage(t, c, ps, channel)

	if n, err := ops.LatchCountDown(ctx, name, ""); n != 1 || err != nil {
		t.Fatalf("LatchCountDown: %d, %v; want 1", n, err)
	}
	expectNoMessage(t, c, ps, channel)
	if n, err := ops.LatchCount(ctx, name); n != 1 || err != nil {
		t.Fatalf("LatchCount: %d, %v; want 1", n, err)
	}
	if n, err := ops.LatchCountDown(ctx, name, ""); n != 0 || err != nil {
		t.Fatalf("LatchCountDown to 0: %d, %v; want 0", n, err)
	}
	if got := nextMessage(t, ps); got != redisops.LatchZeroMessage {
		t.Fatalf("zero message: got %q, want %q", got, redisops.LatchZeroMessage)
	}
	checkGone(t, c, name)

	// Counting down an absent latch leaves nothing, and publishes nothing.
	if n, err := ops.LatchCountDown(ctx, name, ""); n != 0 || err != nil {
		t.Fatalf("LatchCountDown of an absent latch: %d, %v; want 0", n, err)
	}
	checkGone(t, c, name)
	if n, err := ops.LatchCount(ctx, name); n != 0 || err != nil {
		t.Fatalf("LatchCount of an absent latch: %d, %v; want 0", n, err)
	}
	expectNoMessage(t, c, ps, channel)
	checkRetryLatches(t, c, 0)
}

func TestLatchCountDownRetrySafe(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.LatchChannel(name)
	if _, err := ops.LatchTrySetCount(ctx, name, "", 2); err != nil {
		t.Fatal(err)
	}
	ps := subscribe(t, c, channel)
	for range 2 {
		if n, err := ops.LatchCountDown(ctx, name, "d1"); n != 1 || err != nil {
			t.Fatalf("LatchCountDown(d1): %d, %v; want 1", n, err)
		}
		checkString(t, c, name, "1")
	}
	checkPTTL(t, c, redisops.RetryLatchKey(name, "d1"), redisops.DefaultLatchExpiry)
	for range 2 {
		if n, err := ops.LatchCountDown(ctx, name, "d2"); n != 0 || err != nil {
			t.Fatalf("LatchCountDown(d2): %d, %v; want 0", n, err)
		}
	}
	if got := nextMessage(t, ps); got != redisops.LatchZeroMessage {
		t.Fatalf("zero message: got %q, want %q", got, redisops.LatchZeroMessage)
	}
	expectNoMessage(t, c, ps, channel) // the retry published nothing
	checkGone(t, c, name)

	// A latch set again is not counted down by a late retry of an earlier count-down.
	if _, err := ops.LatchTrySetCount(ctx, name, "", 3); err != nil {
		t.Fatal(err)
	}
	if n, err := ops.LatchCountDown(ctx, name, "d1"); n != 1 || err != nil {
		t.Fatalf("retried LatchCountDown(d1): %d, %v; want its first answer 1", n, err)
	}
	checkString(t, c, name, "3")
}

func TestLatchDelete(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	channel := redisops.LatchChannel(name)
	ps := subscribe(t, c, channel)
	if ok, err := ops.LatchDelete(ctx, name); ok || err != nil {
		t.Fatalf("LatchDelete of an absent latch: %v, %v; want false", ok, err)
	}
	expectNoMessage(t, c, ps, channel)
	if _, err := ops.LatchTrySetCount(ctx, name, "", 2); err != nil {
		t.Fatal(err)
	}
	if got := nextMessage(t, ps); got != redisops.LatchNewCountMessage {
		t.Fatalf("trySetCount message: got %q", got)
	}
	if ok, err := ops.LatchDelete(ctx, name); !ok || err != nil {
		t.Fatalf("LatchDelete: %v, %v; want true", ok, err)
	}
	// Redisson publishes the new-count message on delete, not the zero message.
	if got := nextMessage(t, ps); got != redisops.LatchNewCountMessage {
		t.Fatalf("delete message: got %q, want %q", got, redisops.LatchNewCountMessage)
	}
	checkGone(t, c, name)
}

func TestLatchBadArguments(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	for _, n := range []int64{0, -1} {
		if _, err := ops.LatchTrySetCount(ctx, t.Name(), "", n); !errors.Is(err, redisops.ErrBadArgument) {
			t.Errorf("LatchTrySetCount(%d): got %v, want an error matching ErrBadArgument", n, err)
		}
	}
	if n, err := c.DBSize(ctx).Result(); n != 0 || err != nil {
		t.Fatalf("DBSIZE after refused calls: %d, %v; want 0", n, err)
	}
}

// TestLatchWrongType: every call on a name that holds another type (a lock's hash), or a count-down
// whose retry latch does, answers ErrWrongType and changes nothing; Redisson's delete would delete
// the hash.
func TestLatchWrongType(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	mustAcquire(t, ops, name, "A", lease)
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
		fn   func() error
	}{
		{"TrySetCount", func() error { _, err := ops.LatchTrySetCount(ctx, name, "", 1); return err }},
		{"CountDown", func() error { _, err := ops.LatchCountDown(ctx, name, ""); return err }},
		{"CountDown with a request id", func() error { _, err := ops.LatchCountDown(ctx, name, "r"); return err }},
		{"CountDown with a retry latch of another type", func() error { _, err := ops.LatchCountDown(ctx, latched, "r"); return err }},
		{"Count", func() error { _, err := ops.LatchCount(ctx, name); return err }},
		{"Delete", func() error { _, err := ops.LatchDelete(ctx, name); return err }},
	} {
		if err := call.fn(); !errors.Is(err, redisops.ErrWrongType) {
			t.Errorf("%s: got %v, want an error matching ErrWrongType", call.what, err)
		}
	}
	if after := snapshot(t, c); !maps.Equal(before, after) {
		t.Fatalf("calls on keys of another type changed Redis:\nbefore %q\nafter  %q", before, after)
	}
}

// TestLatchInterop: a Redisson client (integration/redissontest, with Redisson's own scripts) and
// lockwarden share a count-down latch both ways, and publish the same messages.
func TestLatchInterop(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	for _, name := range []string{t.Name(), t.Name() + "{tagged}"} {
		channel := redisops.LatchChannel(name)
		rl := redissontest.NewCountDownLatch(c, name)
		if rl.Channel != channel {
			t.Fatalf("channels differ: Redisson %q, lockwarden %q", rl.Channel, channel)
		}
		ps := subscribe(t, c, channel)

		// Redisson sets the count; lockwarden counts down, then Redisson to zero.
		if ok, err := rl.TrySetCount(ctx, 2); !ok || err != nil {
			t.Fatalf("Redisson TrySetCount: %v, %v", ok, err)
		}
		if got := nextMessage(t, ps); got != redisops.LatchNewCountMessage {
			t.Fatalf("Redisson's trySetCount message: got %q, want %q", got, redisops.LatchNewCountMessage)
		}
		if ok, err := ops.LatchTrySetCount(ctx, name, "", 7); ok || err != nil {
			t.Fatalf("LatchTrySetCount after Redisson's: %v, %v; want false", ok, err)
		}
		if n, err := ops.LatchCount(ctx, name); n != 2 || err != nil {
			t.Fatalf("LatchCount: %d, %v; want 2", n, err)
		}
		if n, err := ops.LatchCountDown(ctx, name, "d"); n != 1 || err != nil {
			t.Fatalf("LatchCountDown: %d, %v; want 1", n, err)
		}
		if n, err := rl.GetCount(ctx); n != 1 || err != nil {
			t.Fatalf("Redisson GetCount: %d, %v; want 1", n, err)
		}
		if err := rl.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if got := nextMessage(t, ps); got != redisops.LatchZeroMessage {
			t.Fatalf("Redisson's zero message: got %q, want %q", got, redisops.LatchZeroMessage)
		}
		checkGone(t, c, name)

		// lockwarden sets the count; Redisson counts down, then lockwarden to zero.
		if ok, err := ops.LatchTrySetCount(ctx, name, "", 2); !ok || err != nil {
			t.Fatalf("LatchTrySetCount: %v, %v", ok, err)
		}
		if got := nextMessage(t, ps); got != redisops.LatchNewCountMessage {
			t.Fatalf("lockwarden's trySetCount message: got %q, want %q", got, redisops.LatchNewCountMessage)
		}
		if ok, err := rl.TrySetCount(ctx, 9); ok || err != nil {
			t.Fatalf("Redisson TrySetCount after lockwarden's: %v, %v; want false", ok, err)
		}
		if err := rl.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		expectNoMessage(t, c, ps, channel)
		if n, err := ops.LatchCountDown(ctx, name, ""); n != 0 || err != nil {
			t.Fatalf("LatchCountDown to 0: %d, %v; want 0", n, err)
		}
		if got := nextMessage(t, ps); got != redisops.LatchZeroMessage {
			t.Fatalf("lockwarden's zero message: got %q, want %q", got, redisops.LatchZeroMessage)
		}
		if n, err := rl.GetCount(ctx); n != 0 || err != nil {
			t.Fatalf("Redisson GetCount: %d, %v; want 0", n, err)
		}

		// Delete: each side deletes what the other set, with the same message.
		if _, err := rl.TrySetCount(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if ok, err := ops.LatchDelete(ctx, name); !ok || err != nil {
			t.Fatalf("LatchDelete: %v, %v; want true", ok, err)
		}
		if _, err := ops.LatchTrySetCount(ctx, name, "", 3); err != nil {
			t.Fatal(err)
		}
		if ok, err := rl.Delete(ctx); !ok || err != nil {
			t.Fatalf("Redisson Delete: %v, %v; want true", ok, err)
		}
		for _, what := range []string{"Redisson's trySetCount", "lockwarden's delete", "lockwarden's trySetCount", "Redisson's delete"} {
			if got := nextMessage(t, ps); got != redisops.LatchNewCountMessage {
				t.Fatalf("%s message: got %q, want %q", what, got, redisops.LatchNewCountMessage)
			}
		}
		expectNoMessage(t, c, ps, channel)
		checkGone(t, c, name)
	}
}
