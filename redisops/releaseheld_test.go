package redisops_test

import (
	"context"
	"errors"
	"maps"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// releaseHeld calls ReleaseHeld for owner with the hold count held and request id req, and fails the
// test on an error. It checks Released.Latched (the answer is in the owner's latch exactly when the
// count is known and req sequences the release) and returns the answer without it.
func releaseHeld(t *testing.T, ops *redisops.Ops, name, owner, req string, held int64, next *redisops.Handoff) redisops.Released {
	t.Helper()
	got, err := ops.ReleaseHeld(t.Context(), name, owner, req, lease, held, next)
	if err != nil {
		t.Fatalf("ReleaseHeld(%q, %q, %q, held %d): %v", name, owner, req, held, err)
	}
	if want := held != redisops.UnknownHoldCount && sequenced(req); got.Latched != want {
		t.Errorf("ReleaseHeld(%q, %q, %q, held %d): Latched %v, want %v", name, owner, req, held, got.Latched, want)
	}
	got.Latched = false
	return got
}

// sequenced reports whether the request id req numbers the owner's releases: "<prefix>:r<n>", n of at
// most 15 digits once its leading zeros are dropped (see Ops.ReleaseHeld).
func sequenced(req string) bool {
	i := strings.LastIndex(req, ":r")
	if i < 0 || i+2 == len(req) {
		return false
	}
	for _, c := range req[i+2:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(strings.TrimLeft(req[i+2:], "0")) <= 15
}

// checkNoKey fails if key exists.
func checkNoKey(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	if n, err := c.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %q: got %d (err %v), want 0", key, n, err)
	}
}

// TestReleaseHeldRetry: with the hold count known, a release that runs twice (go-redis sends it again
// after a lost reply) answers the same both times and drops one hold; the answer is kept in the
// owner's latch, which each release overwrites, and no latch of the request is written.
func TestReleaseHeldRetry(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("holds remain", func(t *testing.T) {
		name := t.Name()
		for held := range int64(3) {
			if got, err := ops.Acquire(t.Context(), name, "A", lease, held); err != nil || !got.OK {
				t.Fatalf("Acquire with %d held: %+v, %v", held, got, err)
			}
		}
		for held := int64(3); held > 1; held-- {
			req := "q:r" + strconv.FormatInt(10-held, 10)
			for i := range 2 {
				if got, want := releaseHeld(t, ops, name, "A", req, held, nil), (redisops.Released{Remaining: held - 1}); got != want {
					t.Errorf("release of %d holds, attempt %d: got %+v, want %+v", held, i+1, got, want)
				}
			}
			checkHash(t, c, redisops.LockKey(name), map[string]string{"A": strconv.FormatInt(held-1, 10)})
			checkPTTL(t, c, redisops.LockKey(name), lease)
			checkNoKey(t, c, redisops.UnlockLatchKey(name, req))
			checkPTTL(t, c, redisops.UnlockLatchKey(name, "A"), redisops.DefaultLatchExpiry)
		}
	})

	t.Run("last hold", func(t *testing.T) {
		name := t.Name()
		ps := subscribe(t, c, redisops.ChannelName(name))
		mustAcquire(t, ops, name, "A", lease)
		for i := range 2 {
			if got := releaseHeld(t, ops, name, "A", "q:r1", 1, nil); got != (redisops.Released{}) {
				t.Errorf("attempt %d: got %+v, want %+v", i+1, got, redisops.Released{})
			}
		}
		checkGone(t, c, redisops.LockKey(name))
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "A"), redisops.DefaultLatchExpiry)
		checkNoKey(t, c, redisops.UnlockLatchKey(name, "q:r1"))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, ps, redisops.ChannelName(name))
	})

	t.Run("last hold, after re-acquisition by another owner", func(t *testing.T) {
		name := t.Name()
		mustAcquire(t, ops, name, "A", lease)
		releaseHeld(t, ops, name, "A", "q:r1", 1, nil)
		mustAcquire(t, ops, name, "B", lease)
		if got := releaseHeld(t, ops, name, "A", "q:r1", 1, nil); got != (redisops.Released{}) {
			t.Errorf("retry: got %+v, want %+v", got, redisops.Released{})
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
	})

	t.Run("handoff", func(t *testing.T) {
		name := t.Name()
		prev := mustAcquire(t, ops, name, "A", lease)
		next := &redisops.Handoff{Owner: "B", Lease: longLease}
		got := releaseHeld(t, ops, name, "A", "q:r1", 1, next)
		if want := (redisops.Released{HandedOff: true, Token: prev.Token + 1}); got != want {
			t.Fatalf("handoff: got %+v, want %+v", got, want)
		}
		if again := releaseHeld(t, ops, name, "A", "q:r1", 1, next); again != got {
			t.Errorf("retried handoff: got %+v, want %+v", again, got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		if tok, err := c.Get(t.Context(), redisops.TokenKey(name)).Int64(); err != nil || tok != prev.Token+1 {
			t.Errorf("token counter: got %d (err %v), want %d", tok, err, prev.Token+1)
		}
	})
}

// TestReleaseHeldLateCopy: a copy of a release that reaches Redis late (a retransmission on a
// connection go-redis gave up, after the retry of the release has run and the owner has gone on)
// changes nothing: not the hold the owner took since, nor one of its re-entries. Before releases were
// sequenced, a late copy of a release that left holds found the owner's count back where it expected
// it after a re-entry, and dropped a hold of the new one.
func TestReleaseHeldLateCopy(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	for _, held := range []int64{1, 2} {
		t.Run("held="+strconv.FormatInt(held, 10), func(t *testing.T) {
			name := t.Name()
			for h := range held {
				if got, err := ops.Acquire(t.Context(), name, "A", lease, h); err != nil || !got.OK {
					t.Fatalf("Acquire with %d held: %+v, %v", h, got, err)
				}
			}
			releaseHeld(t, ops, name, "A", "c:r7", held, nil) // the retry, which ran first
			// The owner takes its hold back (the lock again, or the re-entry).
			if got, err := ops.Acquire(t.Context(), name, "A", lease, held-1); err != nil || !got.OK {
				t.Fatalf("Acquire after the release: %+v, %v", got, err)
			}
			before := snapshot(t, c)
			if got := releaseHeld(t, ops, name, "A", "c:r7", held, nil); got != (redisops.Released{Remaining: held - 1}) {
				t.Errorf("late copy before any other release: got %+v, want the stored answer %+v", got, redisops.Released{Remaining: held - 1})
			}
			if after := snapshot(t, c); !maps.Equal(before, after) {
				t.Errorf("the late copy changed Redis:\nbefore %q\nafter  %q", before, after)
			}
			// Once a later release of the owner has run, and the owner has taken its hold back again,
			// a late copy of the older one is refused.
			releaseHeld(t, ops, name, "A", "c:r8", held, nil)
			if got, err := ops.Acquire(t.Context(), name, "A", lease, held-1); err != nil || !got.OK {
				t.Fatalf("Acquire after the second release: %+v, %v", got, err)
			}
			before = snapshot(t, c)
			if _, err := ops.ReleaseHeld(t.Context(), name, "A", "c:r7", lease, held, nil); !errors.Is(err, redisops.ErrStaleRelease) {
				t.Errorf("late copy after a later release: got error %v, want %v", err, redisops.ErrStaleRelease)
			}
			if after := snapshot(t, c); !maps.Equal(before, after) {
				t.Errorf("the stale copy changed Redis:\nbefore %q\nafter  %q", before, after)
			}
			checkHash(t, c, redisops.LockKey(name), map[string]string{"A": strconv.FormatInt(held, 10)})
		})
	}
}

// TestReleaseHeldLateCopyOfNotHeld: a release that found no hold stores that answer, so that a late
// copy of it, arriving once the owner holds the lock again, does not release the new hold.
func TestReleaseHeldLateCopyOfNotHeld(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	mustAcquire(t, ops, name, "A", lease)
	if ok, err := ops.ForceUnlock(t.Context(), name); !ok || err != nil {
		t.Fatalf("ForceUnlock: %v, %v", ok, err)
	}
	if _, err := ops.ReleaseHeld(t.Context(), name, "A", "c:r3", lease, 1, nil); !errors.Is(err, redisops.ErrNotHeld) {
		t.Fatalf("release of the lost hold: got error %v, want %v", err, redisops.ErrNotHeld)
	}
	mustAcquire(t, ops, name, "A", lease)
	if _, err := ops.ReleaseHeld(t.Context(), name, "A", "c:r3", lease, 1, nil); !errors.Is(err, redisops.ErrNotHeld) {
		t.Errorf("late copy: got error %v, want the stored %v", err, redisops.ErrNotHeld)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
}

// TestReleaseHeldWithoutSequence: a request id not of the form "<prefix>:r<n>" (a UUID, say, which
// may end in digits that are no sequence) is released as with an unknown count, through the request's
// own latch; so is one whose n has more digits than a Lua number holds exactly.
func TestReleaseHeldWithoutSequence(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	for _, req := range []string{"req", "0b9e3c5a-51f4-4c0e-9d62-3c7d8f2a1165", "q:r", "q:r12x", "q:r1234567890123456"} {
		name := t.Name() + "/" + req
		mustAcquire(t, ops, name, "A", lease)
		for i := range 2 {
			if got := releaseHeld(t, ops, name, "A", req, 1, nil); got != (redisops.Released{}) {
				t.Errorf("%s, attempt %d: got %+v, want %+v", req, i+1, got, redisops.Released{})
			}
		}
		checkGone(t, c, redisops.LockKey(name))
		checkPTTL(t, c, redisops.UnlockLatchKey(name, req), redisops.DefaultLatchExpiry)
		checkNoKey(t, c, redisops.UnlockLatchKey(name, "A"))
	}
}

// TestReleaseHeldLateCopyAfterLatch: once the owner's latch has expired (the owner released nothing
// for its life), a late copy of a release that left holds finds the owner's count one below what it
// expected, and drops nothing.
func TestReleaseHeldLateCopyAfterLatch(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	for h := range int64(2) {
		if got, err := ops.Acquire(t.Context(), name, "A", lease, h); err != nil || !got.OK {
			t.Fatalf("Acquire with %d held: %+v, %v", h, got, err)
		}
	}
	releaseHeld(t, ops, name, "A", "q:r5", 2, nil)
	if err := c.Del(t.Context(), redisops.UnlockLatchKey(name, "A")).Err(); err != nil { // as its expiry would
		t.Fatal(err)
	}
	if got := releaseHeld(t, ops, name, "A", "q:r5", 2, nil); got != (redisops.Released{Remaining: 1}) {
		t.Errorf("late copy: got %+v, want %+v", got, redisops.Released{Remaining: 1})
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"})
}

// TestReleaseHeldNotHeld: a release of a hold lost before it ran answers ErrNotHeld, and so does its
// retry, whatever count the caller knew.
func TestReleaseHeldNotHeld(t *testing.T) {
	t.Parallel()
	ops, _ := setup(t)
	for _, held := range []int64{1, 2} {
		name := t.Name() + string(rune('0'+held))
		for h := range held {
			if got, err := ops.Acquire(t.Context(), name, "A", lease, h); err != nil || !got.OK {
				t.Fatalf("Acquire with %d held: %+v, %v", h, got, err)
			}
		}
		if ok, err := ops.ForceUnlock(t.Context(), name); !ok || err != nil {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		for i := range 2 {
			if _, err := ops.ReleaseHeld(t.Context(), name, "A", "req", lease, held, nil); !errors.Is(err, redisops.ErrNotHeld) {
				t.Errorf("held %d, attempt %d: got error %v, want %v", held, i+1, err, redisops.ErrNotHeld)
			}
		}
	}
}

// TestReleaseHeldUnexpectedCount: a count in Redis other than the caller's is released one hold at a
// time, and a retry still drops only one hold, also when it finds the count the caller expected.
func TestReleaseHeldUnexpectedCount(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	// Redis counts more holds than the caller knows of (re-entries whose replies it lost).
	for _, tt := range []struct{ inRedis, held int64 }{{3, 1}, {2, 1}, {3, 2}, {4, 2}} {
		name := t.Name() + string(rune('0'+tt.inRedis)) + string(rune('0'+tt.held))
		for range tt.inRedis {
			mustAcquire(t, ops, name, "A", lease)
		}
		left := tt.inRedis - 1
		for i := range 2 {
			if got, want := releaseHeld(t, ops, name, "A", "q:r1", tt.held, nil), (redisops.Released{Remaining: left}); got != want {
				t.Errorf("%d in Redis, %d held, attempt %d: got %+v, want %+v", tt.inRedis, tt.held, i+1, got, want)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": string(rune('0' + left))})
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "A"), redisops.DefaultLatchExpiry)
	}
}

// TestReleaseHeldKindMismatch: a release of a plain hold by an owner that holds the name as a reader
// of a read-write lock is refused and changes nothing.
func TestReleaseHeldKindMismatch(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	if _, err := ops.ReadAcquire(t.Context(), name, "A", lease, 0); err != nil {
		t.Fatalf("ReadAcquire: %v", err)
	}
	before := snapshot(t, c)
	for _, held := range []int64{1, redisops.UnknownHoldCount} {
		if _, err := ops.ReleaseHeld(t.Context(), name, "A", "req", lease, held, nil); !errors.Is(err, redisops.ErrKindMismatch) {
			t.Errorf("held %d: got error %v, want %v", held, err, redisops.ErrKindMismatch)
		}
	}
	if after := snapshot(t, c); !maps.Equal(before, after) {
		t.Errorf("the refused release changed Redis:\nbefore %q\nafter  %q", before, after)
	}
}

// dialCounter is a go-redis hook that counts the connections the client dials.
type dialCounter struct{ n chan struct{} }

func (d dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case d.n <- struct{}{}:
		default:
		}
		return next(ctx, network, addr)
	}
}

func (dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// commandRuns returns how many calls of the command the server has run without failing (INFO
// commandstats), for a lower-case command name.
func commandRuns(t *testing.T, c *redis.Client, command string) int64 {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+command+":")
		if !ok {
			continue
		}
		fields := map[string]int64{}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			fields[k], _ = strconv.ParseInt(v, 10, 64)
		}
		return fields["calls"] - fields["failed_calls"]
	}
	return 0
}

// TestReleaseHeldRetriedByClient: a release whose reply is lost (the server is paused past the
// client's read timeout) is sent again by go-redis itself on a new connection; both runs take place
// once the server resumes, and the caller gets the first run's answer, with one hold dropped, and,
// for the last hold, "released" and one unlock notice, not ErrNotHeld.
func TestReleaseHeldRetriedByClient(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	direct := srv.Client(t)
	dials := dialCounter{n: make(chan struct{}, 64)}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 200 * time.Millisecond,
		MaxRetries: 20, MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond})
	client.AddHook(dials)
	t.Cleanup(func() { _ = client.Close() })
	ops := redisops.New(client)
	ops.SetTokenExpiry(0)
	// Loaded, so that every run is one EVALSHA (not a NOSCRIPT answer and an EVAL).
	for name, s := range redisops.Scripts() {
		if err := s.Load(t.Context(), direct).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD %s: %v", name, err)
		}
	}

	for _, held := range []int64{3, 1} {
		name := t.Name() + string(rune('0'+held))
		ps := subscribe(t, direct, redisops.ChannelName(name))
		for h := range held {
			if got, err := ops.Acquire(t.Context(), name, "A", lease, h); err != nil || !got.OK {
				t.Fatalf("Acquire with %d held: %+v, %v", h, got, err)
			}
		}
		for len(dials.n) > 0 {
			<-dials.n
		}
		before := commandRuns(t, direct, "evalsha")
		srv.Pause()
		type result struct {
			rel redisops.Released
			err error
		}
		done := make(chan result, 1)
		go func() {
			rel, err := ops.ReleaseHeld(t.Context(), name, "A", "q:r1", lease, held, nil)
			done <- result{rel, err}
		}()
		// The first attempt timed out and go-redis dialled a new connection to send it again.
		select {
		case <-dials.n:
		case <-time.After(10 * time.Second):
			srv.Resume()
			t.Fatal("go-redis did not dial again within 10s of the pause")
		}
		srv.Resume()
		var got result
		select {
		case got = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("ReleaseHeld did not return within 10s of the resume")
		}
		if got.err != nil {
			t.Fatalf("held %d: ReleaseHeld: %v", held, got.err)
		}
		if want := (redisops.Released{Remaining: held - 1, Latched: true}); got.rel != want {
			t.Errorf("held %d: ReleaseHeld: got %+v, want %+v", held, got.rel, want)
		}
		if runs := commandRuns(t, direct, "evalsha") - before; runs < 2 {
			t.Fatalf("held %d: the release ran %d times, want at least 2 (the lost one and the retry)", held, runs)
		}
		if held > 1 {
			checkHash(t, direct, redisops.LockKey(name), map[string]string{"A": "2"})
			continue
		}
		checkGone(t, direct, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, direct, ps, redisops.ChannelName(name))
	}
}
