package redisops_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

func TestRaiseToken(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	key := redisops.TokenKey(name)

	// A counter that does not exist yet is raised to the floor.
	if got, err := ops.RaiseToken(t.Context(), name, 5); err != nil || got != 5 {
		t.Fatalf("RaiseToken(5) on no counter = %d, %v; want 5, nil", got, err)
	}
	// A lower floor never lowers it.
	if got, err := ops.RaiseToken(t.Context(), name, 3); err != nil || got != 5 {
		t.Fatalf("RaiseToken(3) on 5 = %d, %v; want 5, nil", got, err)
	}
	// The next acquisition continues from the raised value.
	got := mustAcquire(t, ops, name, "A", lease)
	if got.Token != 6 {
		t.Errorf("token after a raise to 5: got %d, want 6", got.Token)
	}
	if got, err := ops.RaiseToken(t.Context(), name, 9); err != nil || got != 9 {
		t.Fatalf("RaiseToken(9) on 6 = %d, %v; want 9, nil", got, err)
	}
	if v, err := c.Get(t.Context(), key).Int64(); err != nil || v != 9 {
		t.Errorf("GET %s = %d, %v; want 9", key, v, err)
	}
}

// TestExpiringTokensIncrease: with the default, expiring counter, every path that issues a token
// (acquire, re-entry, local handoff, fair acquire, fair handoff to a registered waiter, write acquire)
// issues one above every earlier token of the name, the counter always has an expiry, and a token
// issued after the counter expired is still above them all.
func TestExpiringTokensIncrease(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	ops.SetTokenExpiry(300 * time.Millisecond)
	ctx := t.Context()
	name := t.Name()
	key := redisops.TokenKey(name)
	var last int64
	check := func(what string, token int64) {
		t.Helper()
		if token <= last {
			t.Fatalf("%s: token %d, want above %d", what, token, last)
		}
		last = token
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil || ttl <= 0 || ttl > time.Second {
			t.Fatalf("%s: PTTL of the counter = %v, %v; want an expiry of about 300ms", what, ttl, err)
		}
	}
	for round := range 2 {
		check("acquire", mustAcquire(t, ops, name, "A", lease).Token)
		check("re-entry", mustAcquire(t, ops, name, "A", lease).Token)
		if _, err := ops.Release(ctx, name, "A", fmt.Sprint("r1-", round), lease, nil); err != nil {
			t.Fatal(err)
		}
		rel, err := ops.Release(ctx, name, "A", fmt.Sprint("r2-", round), lease, &redisops.Handoff{Owner: "B", Lease: lease})
		if err != nil || !rel.HandedOff {
			t.Fatalf("Release with handoff = %+v, %v", rel, err)
		}
		check("handoff", rel.Token)
		if _, err := ops.Release(ctx, name, "B", fmt.Sprint("r3-", round), lease, nil); err != nil {
			t.Fatal(err)
		}
		got, err := ops.WriteAcquire(ctx, name, "W", lease, 0, 0)
		if err != nil || !got.OK {
			t.Fatalf("WriteAcquire = %+v, %v", got, err)
		}
		check("write acquire", got.Token)
		if _, err := ops.WriteRelease(ctx, name, "W", fmt.Sprint("r4-", round), lease); err != nil {
			t.Fatal(err)
		}
		got, err = ops.FairAcquire(ctx, name, "F", lease, lease, 0, true)
		if err != nil || !got.OK {
			t.Fatalf("FairAcquire = %+v, %v", got, err)
		}
		check("fair acquire", got.Token)
		ps := subscribe(t, c, redisops.FairChannelName(name, "G"))
		if got, err := ops.FairWait(ctx, name, "G", lease, 2*lease, 0, "w1"); err != nil || got.OK {
			t.Fatalf("FairWait = %+v, %v; want queued", got, err)
		}
		rel, err = ops.FairRelease(ctx, name, "F", fmt.Sprint("r5-", round), lease, nil)
		if err != nil || !rel.Registered {
			t.Fatalf("FairRelease = %+v, %v; want a handoff to the registered waiter", rel, err)
		}
		check("fair handoff", rel.Token)
		// The grant notice carries the token in digits, as ParseFairGrant reads it.
		if token, waitID, ok := redisops.ParseFairGrant(nextMessage(t, ps)); !ok || token != rel.Token || waitID != "w1" {
			t.Fatalf("grant notice = %d, %q, %v; want %d, w1", token, waitID, ok, rel.Token)
		}
		if _, err := ops.FairRelease(ctx, name, "G", fmt.Sprint("r6-", round), lease, nil); err != nil {
			t.Fatal(err)
		}
		// The counter expires; the next round's tokens, taken from the clock, are still higher.
		waitGone(t, c, key, 5*time.Second)
	}
}

// waitGone waits until key no longer exists, polling, and fails the test after within.
func waitGone(t *testing.T, c *redis.Client, key string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.Exists(t.Context(), key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after %v", key, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRaiseTokenExpiring: a RedLock floor ahead of this server's clock (another node's) is kept until
// the clock has passed it, so the next token is above it even after the counter's usual expiry.
func TestRaiseTokenExpiring(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	ops.SetTokenExpiry(200 * time.Millisecond)
	ctx := t.Context()
	name := t.Name()
	floor := time.Now().Add(2 * time.Second).UnixMicro() // a node whose clock is 2 s ahead
	// An expiring counter keeps the value above the last token issued (see issueToken).
	if got, err := ops.RaiseToken(ctx, name, floor); err != nil || got != floor+1 {
		t.Fatalf("RaiseToken(%d) = %d, %v; want the floor plus one", floor, got, err)
	}
	if ttl := c.PTTL(ctx, redisops.TokenKey(name)).Val(); ttl < time.Second || ttl > 3*time.Second {
		t.Fatalf("PTTL of a counter raised 2s ahead of the clock = %v, want about 2.2s", ttl)
	}
	if got := mustAcquire(t, ops, name, "A", lease); got.Token <= floor {
		t.Fatalf("token after the raise: got %d, want above %d", got.Token, floor)
	}
	// A lower floor changes nothing.
	if got, err := ops.RaiseToken(ctx, name, 5); err != nil || got <= floor {
		t.Fatalf("RaiseToken(5) = %d, %v; want the counter, above %d", got, err, floor)
	}
}

// TestNamesLeaveNoTokenKeys: with expiring counters, 1,000 names locked and released leave no token
// counter behind once the expiry has passed (the unlock latches expire on their own clock).
func TestNamesLeaveNoTokenKeys(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	ops.SetTokenExpiry(300 * time.Millisecond)
	ctx := t.Context()
	for i := range 1000 {
		name := fmt.Sprintf("%s:%d", t.Name(), i)
		mustAcquire(t, ops, name, "A", lease)
		if _, err := ops.Release(ctx, name, "A", "r", lease, nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		keys, err := c.Keys(ctx, redisops.TokenKey(t.Name()+":*")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d token counters left, e.g. %s", len(keys), keys[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRetryAfterCounterExpiryIssuesAToken: the retry of an acquisition whose reply was lost finds the
// hold; when the expiring counter is gone by then (a hold outlives its token's counter), it answers a
// fresh token above the first, never 0.
func TestRetryAfterCounterExpiryIssuesAToken(t *testing.T) {
	ops, c := setupExpiringTokens(t)
	ops.SetTokenExpiry(200 * time.Millisecond)
	name := t.Name()
	first, err := ops.Acquire(t.Context(), name, "A", 5*time.Second, 0)
	if err != nil || !first.OK {
		t.Fatalf("Acquire: %+v %v", first, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Exists(t.Context(), redisops.TokenKey(name)).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the token counter did not expire")
		}
		time.Sleep(20 * time.Millisecond) // polls Redis for the state the test waits on
	}
	// The reply of the first call was lost: the caller still knows of no hold (held 0) and tries again.
	retry, err := ops.Acquire(t.Context(), name, "A", 5*time.Second, 0)
	if err != nil || !retry.OK || retry.HoldCount != 1 {
		t.Fatalf("retry = %+v, %v; want the same hold", retry, err)
	}
	if retry.Token < first.Token {
		t.Fatalf("the retry answered token %d, below the hold's %d", retry.Token, first.Token)
	}
}

// TestFairWatermarkBoundsTokens: a refused fair attempt's watermark is at least every token issued on
// the name before it, and below every token issued after it (a registered handoff's included), both
// while the expiring counter lives (later tokens are its INCRs, below the clock) and once it has
// expired (later tokens come from the clock).
func TestFairWatermarkBoundsTokens(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	ops.SetTokenExpiry(200 * time.Millisecond)
	ctx := t.Context()
	name := t.Name()
	for round, expired := range []bool{false, true} {
		got, err := ops.FairAcquire(ctx, name, "A", lease, lease, 0, true)
		if err != nil || !got.OK {
			t.Fatalf("round %d: FairAcquire by A = %+v, %v", round, got, err)
		}
		before := got.Token
		if expired {
			waitGone(t, c, redisops.TokenKey(name), 5*time.Second)
		}
		ps := subscribe(t, c, redisops.FairChannelName(name, "B"))
		refused, err := ops.FairWait(ctx, name, "B", lease, 2*lease, 0, fmt.Sprint("w", round))
		if err != nil || refused.OK {
			t.Fatalf("round %d: FairWait by B = %+v, %v; want queued", round, refused, err)
		}
		if refused.Watermark < before {
			t.Errorf("round %d: watermark %d is below A's earlier token %d", round, refused.Watermark, before)
		}
		rel, err := ops.FairRelease(ctx, name, "A", fmt.Sprint("a", round), lease, nil)
		if err != nil || !rel.Registered {
			t.Fatalf("round %d: FairRelease by A = %+v, %v; want a handoff to B", round, rel, err)
		}
		if rel.Token <= refused.Watermark {
			t.Errorf("round %d: B was handed token %d, not above the watermark %d of its refused attempt (the grant would read as stale)",
				round, rel.Token, refused.Watermark)
		}
		if token, _, ok := redisops.ParseFairGrant(nextMessage(t, ps)); !ok || token != rel.Token {
			t.Errorf("round %d: grant notice token %d, %v; want %d", round, token, ok, rel.Token)
		}
		if _, err := ops.FairRelease(ctx, name, "B", fmt.Sprint("b", round), lease, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExpiringCounterKeepsTheNextToken: an acquisition with the expiring counter leaves the token
// above its own unissued (a local handoff granted before Redis answers gets it, see release.lua), so
// that when the holder's field is gone without a release that raised the counter (it lapsed while
// the release could not reach Redis), the next acquisition is issued a token above that one too.
func TestExpiringCounterKeepsTheNextToken(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	name := t.Name()
	a := mustAcquire(t, ops, name, "A", lease)
	if err := c.Del(t.Context(), redisops.LockKey(name)).Err(); err != nil { // A's lease ran out
		t.Fatal(err)
	}
	b := mustAcquire(t, ops, name, "B", lease)
	if b.Token <= a.Token+1 {
		t.Fatalf("B's token %d; want above %d, the token kept for A's local handoff", b.Token, a.Token+1)
	}
}

// TestNonIntegerCounter: with the expiring counter, a counter that holds a string that is not a
// number counts as gone: the acquisitions of every family take a token from the clock and hold the
// lock, as they did before INCRBY, and change nothing else.
func TestNonIntegerCounter(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	ctx := t.Context()
	before := time.Now().UnixMicro()
	for _, tc := range []struct {
		name string
		run  func(name string) (redisops.Acquired, error)
	}{
		{"plain", func(n string) (redisops.Acquired, error) { return ops.Acquire(ctx, n, "A", time.Minute, 0) }},
		{"fair", func(n string) (redisops.Acquired, error) {
			return ops.FairAcquire(ctx, n, "A", time.Minute, time.Minute, 0, false)
		}},
		{"write", func(n string) (redisops.Acquired, error) { return ops.WriteAcquire(ctx, n, "A", time.Minute, 0, 0) }},
	} {
		name := t.Name() + ":" + tc.name
		if err := c.Set(ctx, redisops.TokenKey(name), "not-a-number", 0).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := tc.run(name)
		if err != nil || !got.OK || got.Token < before {
			t.Errorf("%s acquisition over a counter holding no number: %+v, %v; want a hold with a token from the clock", tc.name, got, err)
		}
		if n, err := c.HLen(ctx, name).Result(); err != nil || n == 0 {
			t.Errorf("%s: the lock hash has %d fields, %v; want the hold", tc.name, n, err)
		}
	}
	// A fair attempt refused over such a counter answers its refusal, with the clock as its watermark;
	// a RedLock raise over it sets it.
	name := t.Name() + ":fair"
	if err := c.Set(ctx, redisops.TokenKey(name), "not-a-number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := ops.FairAcquire(ctx, name, "B", time.Minute, time.Minute, 0, true); err != nil || got.OK || got.Watermark < before {
		t.Errorf("fair attempt refused over a counter holding no number: %+v, %v; want a refusal with the clock as watermark", got, err)
	}
	name = t.Name() + ":raise"
	if err := c.Set(ctx, redisops.TokenKey(name), "not-a-number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := ops.RaiseToken(ctx, name, 5); err != nil || got < before {
		t.Errorf("RaiseToken over a counter holding no number: %d, %v; want the counter set from the clock", got, err)
	}
}

// TestRaiseAfterCounterExpiredStaysAboveTheClock: a raise that finds the expiring counter gone (a late
// copy of a release that hands off with a proposed token, or a late RaiseToken), after tokens were
// issued from the clock, sets the counter from the clock: the next token is above all of them.
func TestRaiseAfterCounterExpiredStaysAboveTheClock(t *testing.T) {
	t.Parallel()
	ops, c := setupExpiringTokens(t)
	ctx := t.Context()
	name := t.Name()
	lockKey, counterKey := redisops.LockKey(name), redisops.TokenKey(name)
	a := mustAcquire(t, ops, name, "A", lease)
	expire := func() { // A's hold (or C's) and the counter ran out
		t.Helper()
		if err := c.Del(ctx, lockKey, counterKey).Err(); err != nil {
			t.Fatal(err)
		}
	}
	expire()
	clockToken := mustAcquire(t, ops, name, "C", lease).Token // taken from the clock
	if _, err := ops.Release(ctx, name, "C", "c1", lease, nil); err != nil {
		t.Fatal(err)
	}
	expire()
	// A's release, with the token it proposed for B, arrives late: A holds nothing.
	if _, err := ops.Release(ctx, name, "A", "a1", lease, &redisops.Handoff{Owner: "B", Lease: lease, Token: a.Token + 1}); !errors.Is(err, redisops.ErrNotHeld) {
		t.Fatalf("late release: %v, want ErrNotHeld", err)
	}
	if d := mustAcquire(t, ops, name, "D", lease).Token; d <= clockToken {
		t.Fatalf("after a late raiseTo: token %d, not above %d issued before", d, clockToken)
	}
	if _, err := ops.Release(ctx, name, "D", "d1", lease, nil); err != nil {
		t.Fatal(err)
	}
	last := mustAcquire(t, ops, name, "E", lease).Token
	if _, err := ops.Release(ctx, name, "E", "e1", lease, nil); err != nil {
		t.Fatal(err)
	}
	expire()
	if _, err := ops.RaiseToken(ctx, name, a.Token); err != nil { // a late RedLock raise, below them all
		t.Fatal(err)
	}
	if f := mustAcquire(t, ops, name, "F", lease).Token; f <= last {
		t.Fatalf("after a late RaiseToken: token %d, not above %d issued before", f, last)
	}
}
