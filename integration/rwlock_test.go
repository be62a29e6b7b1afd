package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

func rwMustRLock(t *testing.T, rw *coordinator.RWMutex) {
	t.Helper()
	if err := rw.RLock(t.Context()); err != nil {
		t.Fatalf("RLock(%s): %v", rw.Name(), err)
	}
}

func rwMustRUnlock(t *testing.T, rw *coordinator.RWMutex) {
	t.Helper()
	if err := rw.RUnlock(t.Context()); err != nil {
		t.Fatalf("RUnlock(%s): %v", rw.Name(), err)
	}
}

func rwMustLock(t *testing.T, rw *coordinator.RWMutex) {
	t.Helper()
	if err := rw.Lock(t.Context()); err != nil {
		t.Fatalf("Lock(%s): %v", rw.Name(), err)
	}
}

func rwMustUnlock(t *testing.T, rw *coordinator.RWMutex) {
	t.Helper()
	if err := rw.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock(%s): %v", rw.Name(), err)
	}
}

// rwAsync starts f(ctx) in a goroutine and returns the channel that receives its error.
func rwAsync(ctx context.Context, f func(context.Context) error) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- f(ctx) }()
	return errc
}

// rwExpectBlocked checks that none of the calls returned within a short window.
func rwExpectBlocked(t *testing.T, errcs []<-chan error, what string) {
	t.Helper()
	window := time.NewTimer(100 * time.Millisecond)
	defer window.Stop()
	<-window.C // a deliberate observation window
	for i, errc := range errcs {
		select {
		case err := <-errc:
			t.Fatalf("%s %d returned while it should wait: %v", what, i, err)
		default:
		}
	}
}

// rwWaitSubscribed waits until at least count connections are subscribed to the channel of the
// read-write lock name.
func rwWaitSubscribed(t *testing.T, client redis.Cmdable, name string, count int64) {
	t.Helper()
	ch := redisops.RWChannelName(name)
	leakEventually(t, 5*time.Second, fmt.Sprintf("%d subscriptions to %s", count, ch), func() (bool, error) {
		n, err := client.PubSubNumSub(t.Context(), ch).Result()
		return n[ch] >= count, err
	})
}

// rwHoldCounts returns the read and write hold counts of rw's owner.
func rwHoldCounts(t *testing.T, rw *coordinator.RWMutex) (reads, writes int) {
	t.Helper()
	return holdCount(t, rw.Read()), holdCount(t, rw.Write())
}

// rwExpectMode fails the test unless Read().IsLocked and Write().IsLocked, seen through rw, match mode
// ("" for a free lock), and the hash's mode field is mode.
func rwExpectMode(t *testing.T, client redis.Cmdable, rw *coordinator.RWMutex, mode string) {
	t.Helper()
	r, w := semIsLocked(t, rw.Read()), semIsLocked(t, rw.Write())
	if r != (mode == "read") || w != (mode == "write") {
		t.Fatalf("Read().IsLocked = %v, Write().IsLocked = %v; want the lock in mode %q", r, w, mode)
	}
	got, err := client.HGet(t.Context(), rw.Name(), "mode").Result()
	if errors.Is(err, redis.Nil) {
		got, err = "", nil
	}
	if err != nil || got != mode {
		t.Fatalf("HGET %s mode = %q, %v; want %q", rw.Name(), got, err, mode)
	}
}

// rwLeftKeys returns the keys of the database other than release latches (short-lived answers of
// releases, kept for retries), fencing token counters and the process registry: what is left of locks.
func rwLeftKeys(t *testing.T, client redis.Cmdable) []string {
	t.Helper()
	var left []string
	for _, k := range dataKeys(t, client) {
		if !strings.HasPrefix(k, "redisson_unlock_latch:") && !strings.HasPrefix(k, "redisson_lock_token:") {
			left = append(left, k)
		}
	}
	return left
}

// rwState describes the Redis state of the read-write lock name, for failure messages.
func rwState(t *testing.T, client redis.Cmdable, name string) string {
	t.Helper()
	ctx := t.Context()
	fields, _ := client.HGetAll(ctx, name).Result()
	pttl, _ := client.PTTL(ctx, name).Result()
	keys, _ := client.Keys(ctx, "{"+name+"}:*").Result()
	return fmt.Sprintf("lock %v (PTTL %v), timeout keys %v", fields, pttl, keys)
}

// TestRWRedisLayout checks the layout shared with Redisson's RReadWriteLock: the hash with its mode
// field, the per-hold read timeout keys and the notices on redisson_rwlock:{N}.
func TestRWRedisLayout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, client, c := setup(t)
	name := t.Name()
	channel := "redisson_rwlock:{" + name + "}"
	if got := redisops.RWChannelName(name); got != channel {
		t.Fatalf("RWChannelName = %q, want %q", got, channel)
	}
	sub := client.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.ReceiveTimeout(ctx, 2*time.Second); err != nil {
		t.Fatalf("subscribing to %s: %v", channel, err)
	}
	expectMessage := func(payload, when string) {
		t.Helper()
		msg, err := sub.ReceiveTimeout(ctx, 2*time.Second)
		if err != nil {
			t.Fatalf("%s: no notice on %s: %v", when, channel, err)
		}
		if pm, ok := msg.(*redis.Message); !ok || pm.Payload != payload {
			t.Fatalf("%s: notice %#v; want %q on %s", when, msg, payload, channel)
		}
	}

	rw := c.RWMutex(name)
	owner := rw.Owner()
	rwMustRLock(t, rw)
	rwMustRLock(t, rw)
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{"mode": "read", owner: "2"}) {
		t.Fatalf("HGETALL after two RLocks = %v, want {mode: read, %s: 2}", fields, owner)
	}
	for k := int64(1); k <= 2; k++ {
		key := redisops.ReadTimeoutKey(name, owner, k)
		if want := fmt.Sprintf("{%s}:%s:rwlock_timeout:%d", name, owner, k); key != want {
			t.Fatalf("ReadTimeoutKey = %q, want %q", key, want)
		}
		if pttl, err := client.PTTL(ctx, key).Result(); err != nil || pttl <= 0 {
			t.Fatalf("PTTL %s = %v, %v; want positive", key, pttl, err)
		}
	}
	rwMustRUnlock(t, rw)
	if n, err := client.Exists(ctx, redisops.ReadTimeoutKey(name, owner, 2)).Result(); err != nil || n != 0 {
		t.Fatalf("the timeout key of the released read hold still exists: %d, %v", n, err)
	}
	rwMustRUnlock(t, rw)
	expectMessage(redisops.UnlockMessage, "the last read unlock")
	if left := rwLeftKeys(t, client); len(left) != 0 {
		t.Fatalf("keys left after the last read unlock: %v", left)
	}

	rwMustLock(t, rw)
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{"mode": "write", owner + ":write": "1"}) {
		t.Fatalf("HGETALL after Lock = %v, want {mode: write, %s:write: 1}", fields, owner)
	}
	if redisops.WriteField(owner) != owner+":write" {
		t.Fatalf("WriteField = %q", redisops.WriteField(owner))
	}
	rwMustUnlock(t, rw)
	expectMessage(redisops.ReadUnlockMessage, "the write unlock")
	if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after the write unlock = %d, %v", name, n, err)
	}
}

// TestRWReadersShareWriterWaits: 20 readers on two coordinators hold the lock at once; a writer can't
// get it while any of them holds, and gets it as soon as the last one unlocks.
func TestRWReadersShareWriterWaits(t *testing.T) {
	t.Parallel()
	const readers = 20
	for _, tc := range []struct {
		name     string
		writerOn int
	}{{"writer beside half the readers", 0}, {"writer in a third coordinator", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv, client, c0 := setup(t)
			_, c1 := semOther(t, srv)
			_, c2 := semOther(t, srv)
			cs := []*coordinator.Coordinator{c0, c1, c2}
			name := t.Name()

			rs := make([]*coordinator.RWMutex, readers)
			want := map[string]string{"mode": "read"}
			for i := range rs {
				rs[i] = cs[i%2].RWMutex(name)
				rwMustRLock(t, rs[i])
				want[rs[i].Owner()] = "1"
			}
			if fields := semHGetAll(t, client, name); !maps.Equal(fields, want) {
				t.Fatalf("HGETALL with %d readers = %v, want %v", readers, fields, want)
			}
			for i, r := range rs {
				if reads, writes := rwHoldCounts(t, r); reads != 1 || writes != 0 {
					t.Fatalf("reader %d hold counts: read %d, write %d; want 1, 0", i, reads, writes)
				}
			}

			writer := cs[tc.writerOn].RWMutex(name)
			rwExpectMode(t, client, writer, "read")
			if ok, err := writer.TryLock(ctx); ok || err != nil {
				t.Fatalf("writer TryLock with %d readers = %v, %v; want false, nil", readers, ok, err)
			}
			start := time.Now()
			if ok, err := writer.TryLock(ctx, coordinator.Wait(300*time.Millisecond)); ok || err != nil {
				t.Fatalf("writer TryLock(Wait 300ms) with %d readers = %v, %v; want false, nil", readers, ok, err)
			}
			if elapsed := time.Since(start); elapsed < 280*time.Millisecond || elapsed > 2*time.Second {
				t.Fatalf("writer TryLock(Wait 300ms) returned after %v", elapsed)
			}
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			errc := rwAsync(lctx, writer.Lock)
			rwExpectBlocked(t, []<-chan error{errc}, "the writer's Lock")

			// The last reader to leave is beside the writer in the first case, remote in the second.
			for i := readers - 1; i >= 0; i-- {
				select {
				case err := <-errc:
					t.Fatalf("the writer's Lock returned while %d readers hold: %v", i+1, err)
				default:
				}
				rwMustRUnlock(t, rs[i])
			}
			last := time.Now()
			if err := semRecv(t, errc, 5*time.Second, "the writer's Lock after the last reader left"); err != nil {
				t.Fatalf("writer Lock: %v", err)
			}
			if d := time.Since(last); d > 2*time.Second {
				t.Fatalf("the writer got the lock %v after the last reader left; want it woken at once", d)
			}
			rwExpectMode(t, client, writer, "write")
			if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{"mode": "write", writer.Owner() + ":write": "1"}) {
				t.Fatalf("HGETALL after the writer's Lock = %v", fields)
			}
			if tok := writer.Write().Token(); tok <= 0 {
				t.Fatalf("writer Token = %d, want positive", tok)
			}
			rwMustUnlock(t, writer)
			if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
				t.Fatalf("EXISTS %s after the writer's Unlock = %d, %v", name, n, err)
			}
		})
	}
}

// TestRWWriterBlocksReaders: while a writer holds the lock, readers in its coordinator and in others
// are refused.
func TestRWWriterBlocksReaders(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	name := t.Name()
	writer := cA.RWMutex(name)
	rwMustLock(t, writer)
	before := semHGetAll(t, client, name)
	readers := []*coordinator.RWMutex{cA.RWMutex(name), cB.RWMutex(name)}
	for i, r := range readers {
		if ok, err := r.TryRLock(ctx); ok || err != nil {
			t.Fatalf("reader %d TryRLock while written = %v, %v; want false, nil", i, ok, err)
		}
		if ok, err := r.TryRLock(ctx, coordinator.Wait(200*time.Millisecond)); ok || err != nil {
			t.Fatalf("reader %d TryRLock(Wait 200ms) while written = %v, %v; want false, nil", i, ok, err)
		}
		if ok, err := r.TryLock(ctx); ok || err != nil {
			t.Fatalf("other writer %d TryLock while written = %v, %v; want false, nil", i, ok, err)
		}
		rwExpectMode(t, client, r, "write")
		if semIsHeld(t, r.Read()) || semIsHeld(t, r.Write()) {
			t.Fatalf("reader %d holds a side of a lock written by another owner", i)
		}
		if ttl, err := r.Read().TTL(ctx); err != nil || ttl <= 0 {
			t.Fatalf("reader %d Read().TTL = %v, %v; want the writer's positive lease", i, ttl, err)
		}
	}
	if after := semHGetAll(t, client, name); !maps.Equal(before, after) {
		t.Fatalf("refused readers changed the lock: %v, then %v", before, after)
	}
	if !semIsHeld(t, writer.Write()) || semIsHeld(t, writer.Read()) {
		t.Fatal("the writer does not hold just the write side")
	}
	rwMustUnlock(t, writer)
	for i, r := range readers {
		if ok, err := r.TryRLock(ctx); !ok || err != nil {
			t.Fatalf("reader %d TryRLock after the write unlock = %v, %v; want true, nil", i, ok, err)
		}
	}
	for _, r := range readers {
		rwMustRUnlock(t, r)
	}
}

// TestRWWriteUnlockWakesAllReaders: 20 readers on two coordinators blocked behind a writer all get in
// within 1 s of the write unlock, which wakes every waiter at once.
func TestRWWriteUnlockWakesAllReaders(t *testing.T) {
	t.Parallel()
	const readers = 20
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	cs := []*coordinator.Coordinator{cA, cB}
	name := t.Name()
	writer := cA.RWMutex(name)
	rwMustLock(t, writer)

	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rs := make([]*coordinator.RWMutex, readers)
	errcs := make([]<-chan error, readers)
	for i := range rs {
		rs[i] = cs[i%2].RWMutex(name)
		errcs[i] = rwAsync(lctx, rs[i].RLock)
	}
	rwWaitSubscribed(t, client, name, 2) // both coordinators wait for the notice
	rwExpectBlocked(t, errcs, "reader")

	rwMustUnlock(t, writer)
	unlocked := time.Now()
	deadline := time.NewTimer(time.Second)
	defer deadline.Stop()
	for i, errc := range errcs {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("reader %d RLock: %v", i, err)
			}
		case <-deadline.C:
			t.Fatalf("reader %d (of %d) was not in within 1s of the write unlock: %s", i, readers, rwState(t, client, name))
		}
	}
	t.Logf("all %d readers in %v after the write unlock", readers, time.Since(unlocked))
	want := map[string]string{"mode": "read"}
	for _, r := range rs {
		want[r.Owner()] = "1"
	}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, want) {
		t.Fatalf("HGETALL with every reader in = %v, want %v", fields, want)
	}
	for _, r := range rs {
		rwMustRUnlock(t, r)
	}
	if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after every reader left = %d, %v", name, n, err)
	}
}

// TestRWDowngradeAndUpgrade: a writer may take read holds and keeps them after its write unlock (a
// downgrade); a reader that asks for the write side gets ErrUpgrade at once, and nothing changes.
func TestRWDowngradeAndUpgrade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)

	t.Run("downgrade", func(t *testing.T) {
		name := t.Name()
		rw, other := cA.RWMutex(name), cB.RWMutex(name)
		rwMustLock(t, rw)
		rwMustRLock(t, rw)
		if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{
			"mode": "write", rw.Owner() + ":write": "1", rw.Owner(): "1",
		}) {
			t.Fatalf("HGETALL after Lock and RLock = %v", fields)
		}
		if ok, err := other.TryRLock(ctx); ok || err != nil {
			t.Fatalf("another reader's TryRLock while write-locked = %v, %v; want false, nil", ok, err)
		}
		rwMustUnlock(t, rw)
		rwExpectMode(t, client, rw, "read")
		if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{"mode": "read", rw.Owner(): "1"}) {
			t.Fatalf("HGETALL after the downgrade = %v, want {mode: read, %s: 1}", fields, rw.Owner())
		}
		if reads, writes := rwHoldCounts(t, rw); reads != 1 || writes != 0 {
			t.Fatalf("hold counts after the downgrade: read %d, write %d; want 1, 0", reads, writes)
		}
		if tok := rw.Write().Token(); tok != 0 {
			t.Fatalf("Write().Token after the write unlock = %d, want 0", tok)
		}
		select {
		case <-rw.Read().Done():
			t.Fatal("the read hold's Done closed at the downgrade")
		default:
		}
		// Now a plain read lock: others read alongside, writers wait, and the owner may not upgrade back.
		if ok, err := other.TryRLock(ctx); !ok || err != nil {
			t.Fatalf("another reader's TryRLock after the downgrade = %v, %v; want true, nil", ok, err)
		}
		if ok, err := cB.RWMutex(name).TryLock(ctx); ok || err != nil {
			t.Fatalf("a writer's TryLock after the downgrade = %v, %v; want false, nil", ok, err)
		}
		if err := rw.Lock(ctx); !errors.Is(err, coordinator.ErrUpgrade) {
			t.Fatalf("Lock by the downgraded owner = %v, want ErrUpgrade", err)
		}
		rwMustRUnlock(t, rw)
		rwMustRUnlock(t, other)
		if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS %s after both readers left = %d, %v", name, n, err)
		}
	})

	t.Run("upgrade refused", func(t *testing.T) {
		name := t.Name()
		rw := cA.RWMutex(name)
		rwMustRLock(t, rw)
		done := rw.Read().Done()
		before := semHGetAll(t, client, name)
		for _, tc := range []struct {
			what string
			call func() error
		}{
			{"Lock", func() error { return rw.Lock(ctx) }},
			{"TryLock", func() error { return badFalse(rw.TryLock(ctx)) }},
			{"TryLock(Wait 5s)", func() error { return badFalse(rw.TryLock(ctx, coordinator.Wait(5*time.Second))) }},
			{"Write().Lock", func() error { return rw.Write().Lock(ctx) }},
		} {
			start := time.Now()
			err := tc.call()
			if !errors.Is(err, coordinator.ErrUpgrade) {
				t.Fatalf("%s by a reader = %v, want ErrUpgrade", tc.what, err)
			}
			if d := time.Since(start); d > 250*time.Millisecond {
				t.Fatalf("%s by a reader took %v to refuse; want at once", tc.what, d)
			}
		}
		if after := semHGetAll(t, client, name); !maps.Equal(before, after) {
			t.Fatalf("refused upgrades changed the lock: %v, then %v", before, after)
		}
		if reads, writes := rwHoldCounts(t, rw); reads != 1 || writes != 0 {
			t.Fatalf("hold counts after refused upgrades: read %d, write %d; want 1, 0", reads, writes)
		}
		semNotClosed(t, done, "the reader's Done after refused upgrades")
		rwExpectMode(t, client, rw, "read")
		rwMustRUnlock(t, rw)
		// Without read holds, the same handle may write.
		if ok, err := rw.TryLock(ctx); !ok || err != nil {
			t.Fatalf("TryLock after the read unlock = %v, %v; want true, nil", ok, err)
		}
		rwMustUnlock(t, rw)
	})
}

// TestRWReadLeasesExpireIndependently: each read hold has its own lease, and the lock's expiry follows
// the longest remaining one; when the long reader leaves, a writer gets in when the short reader's
// lease runs out, not the long one's.
func TestRWReadLeasesExpireIndependently(t *testing.T) {
	t.Parallel()
	const (
		short = 600 * time.Millisecond
		long  = 3 * time.Second
	)
	for _, tc := range []struct {
		name string
		// early makes the writer wait before the long reader unlocks; it is then in the long reader's
		// coordinator, whose unlock lets it try again. Otherwise it starts after, in a third one.
		early bool
	}{{"writer starts after the long reader left", false}, {"writer waits beside the long reader", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv, client, cA := setup(t)
			_, cB := semOther(t, srv)
			_, cC := semOther(t, srv)
			name := t.Name()
			a, b := cA.RWMutex(name), cB.RWMutex(name)
			writer := cC.RWMutex(name)
			if tc.early {
				writer = cB.RWMutex(name)
			}

			start := time.Now()
			if ok, err := a.TryRLock(ctx, coordinator.Lease(short)); !ok || err != nil {
				t.Fatalf("A TryRLock(Lease %v) = %v, %v", short, ok, err)
			}
			doneA := a.Read().Done()
			if ok, err := b.TryRLock(ctx, coordinator.Lease(long)); !ok || err != nil {
				t.Fatalf("B TryRLock(Lease %v) = %v, %v", long, ok, err)
			}
			if pttl, err := client.PTTL(ctx, name).Result(); err != nil || pttl <= short || pttl > long {
				t.Fatalf("PTTL with both readers = %v, %v; want the long reader's lease, (%v, %v]", pttl, err, short, long)
			}
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var errc <-chan error
			if tc.early {
				errc = rwAsync(lctx, writer.Lock)
				rwExpectBlocked(t, []<-chan error{errc}, "the writer's Lock")
			}
			rwMustRUnlock(t, b)
			if pttl, err := client.PTTL(ctx, name).Result(); err != nil || pttl <= 0 || pttl > short {
				t.Fatalf("PTTL after the long reader left = %v, %v; want the short reader's remaining lease, at most %v (%s)",
					pttl, err, short, rwState(t, client, name))
			}
			if !tc.early {
				errc = rwAsync(lctx, writer.Lock)
			}
			if err := semRecv(t, errc, 8*time.Second, "the writer's Lock"); err != nil {
				t.Fatalf("writer Lock: %v", err)
			}
			got := time.Since(start)
			if got < short-100*time.Millisecond || got >= 2*time.Second {
				t.Fatalf("the writer got the lock %v after the short reader's RLock; want about its %v lease, long before the long reader's %v",
					got, short, long)
			}
			t.Logf("the writer got the lock %v after the short reader's RLock", got)
			waitFor(t, doneA, time.Second, "the short reader's Done closing once its lease ran out")
			if err := a.RUnlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
				t.Fatalf("RUnlock of the expired short reader = %v, want ErrNotHeld", err)
			}
			rwExpectMode(t, client, writer, "write")
			rwMustUnlock(t, writer)
		})
	}
}

// TestRWWatchdogRenewsReadHolds: read holds taken without a lease live as long as their holder, past
// many watchdog timeouts: the watchdog renews each hold's timeout key and the lock's expiry.
func TestRWWatchdogRenewsReadHolds(t *testing.T) {
	t.Parallel()
	const timeout = 600 * time.Millisecond
	ctx := t.Context()
	_, client, c := setup(t, coordinator.WithWatchdogTimeout(timeout))
	name := t.Name()
	reader := c.RWMutex(name)
	rwMustRLock(t, reader)
	rwMustRLock(t, reader) // a re-entry: a second hold, with a key of its own
	taken := time.Now()
	keys := []string{
		fmt.Sprintf("{%s}:%s:rwlock_timeout:1", name, reader.Owner()),
		fmt.Sprintf("{%s}:%s:rwlock_timeout:2", name, reader.Owner()),
	}
	pttl := func(key string) time.Duration {
		d, err := client.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", key, err)
		}
		return d
	}
	// Until three timeouts have passed, the lock and both keys keep an expiry within one timeout, and
	// the keys' expiries are seen going up again (renewals).
	renewed := make(map[string]int)
	last := make(map[string]time.Duration)
	leakEventually(t, 10*timeout, "three watchdog timeouts", func() (bool, error) {
		for _, key := range append([]string{name}, keys...) {
			d := pttl(key)
			if d <= 0 || d > timeout {
				t.Fatalf("PTTL %s = %v %v after the RLocks, want in (0, %v] (%s)", key, d, time.Since(taken), timeout, rwState(t, client, name))
			}
			if d > last[key] && last[key] > 0 {
				renewed[key]++
			}
			last[key] = d
		}
		return time.Since(taken) > 3*timeout, nil
	})
	for _, key := range append([]string{name}, keys...) {
		if renewed[key] < 2 {
			t.Errorf("%s: %d renewals seen in three watchdog timeouts, want at least 2", key, renewed[key])
		}
	}
	semNotClosed(t, reader.Read().Done(), "the read side's Done")
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{"mode": "read", reader.Owner(): "2"}) {
		t.Fatalf("HGETALL = %v, want the reader's 2 holds", fields)
	}
	rwMustRUnlock(t, reader)
	rwMustRUnlock(t, reader)
	if n, err := client.Exists(ctx, append([]string{name}, keys...)...).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS after both RUnlocks = %d, %v; want 0", n, err)
	}
}

// TestRWDeadReaderFreesLock: a reader whose process can no longer reach Redis stops renewing its read
// hold, so a writer in another process gets the lock within about one watchdog timeout.
func TestRWDeadReaderFreesLock(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	ctx := t.Context()
	srv := redistest.Start(t)
	px, clientD := faultProxiedClient(t, srv)
	cD := newCoordinator(t, clientD, coordinator.WithWatchdogTimeout(timeout))
	client := srv.Client(t)
	cW := newCoordinator(t, client)
	name := t.Name()

	reader := cD.RWMutex(name)
	rwMustRLock(t, reader)
	done := reader.Read().Done()
	writer := cW.RWMutex(name)
	if ok, err := writer.TryLock(ctx); ok || err != nil {
		t.Fatalf("writer TryLock while read-locked = %v, %v; want false, nil", ok, err)
	}

	cut := time.Now()
	px.Disable()
	lctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	if err := writer.Lock(lctx); err != nil {
		t.Fatalf("writer Lock after the reader was cut off: %v (%s)", err, rwState(t, client, name))
	}
	got := time.Since(cut)
	// The hold's last renewal, at most a third of the timeout before the cut, set it to end one timeout
	// later; the writer tries again when the lock's PTTL, which it learnt when refused, runs out.
	if got < timeout/2 || got > timeout*3/2 {
		t.Fatalf("the writer got the lock %v after the reader was cut off; want about the watchdog timeout, %v", got, timeout)
	}
	t.Logf("the writer got the lock %v after the reader was cut off", got)
	semClosedBy(t, done, cut.Add(2*timeout), "the dead reader's Done closing within 2s of the cut")
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{"mode": "write", writer.Owner() + ":write": "1"}) {
		t.Fatalf("HGETALL after the writer's Lock = %v, want only the writer", fields)
	}
	if keys, err := client.Keys(ctx, "{"+name+"}:*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("read timeout keys left after the dead reader's hold expired: %v, %v", keys, err)
	}
	rwMustUnlock(t, writer)
}

// TestRWForceUnlockOneMode: force-unlocking a side frees the lock only when it is in that side's mode;
// the other mode's holders keep it.
func TestRWForceUnlockOneMode(t *testing.T) {
	t.Parallel()
	const timeout = time.Second // holders in another coordinator learn of the loss by their next renewal
	ctx := t.Context()
	srv, client, cA := setup(t, coordinator.WithWatchdogTimeout(timeout))
	_, cB := semOther(t, srv, coordinator.WithWatchdogTimeout(timeout))
	name := t.Name()
	forcer := cA.RWMutex(name)

	// Readers hold: the write side's ForceUnlock leaves them alone, the read side's frees the lock.
	readers := []*coordinator.RWMutex{cA.RWMutex(name), cB.RWMutex(name)}
	var dones []<-chan struct{}
	for _, r := range readers {
		rwMustRLock(t, r)
		dones = append(dones, r.Read().Done())
	}
	before := semHGetAll(t, client, name)
	if deleted, err := forcer.Write().ForceUnlock(ctx); deleted || err != nil {
		t.Fatalf("Write().ForceUnlock of a read-locked lock = %v, %v; want false, nil", deleted, err)
	}
	if after := semHGetAll(t, client, name); !maps.Equal(before, after) {
		t.Fatalf("Write().ForceUnlock changed a read-locked lock: %v, then %v", before, after)
	}
	for i, r := range readers {
		if n := holdCount(t, r.Read()); n != 1 {
			t.Fatalf("reader %d HoldCount after Write().ForceUnlock = %d, want 1", i, n)
		}
		semNotClosed(t, dones[i], fmt.Sprintf("reader %d's Done after Write().ForceUnlock", i))
	}
	if deleted, err := forcer.Read().ForceUnlock(ctx); !deleted || err != nil {
		t.Fatalf("Read().ForceUnlock of a read-locked lock = %v, %v; want true, nil", deleted, err)
	}
	forced := time.Now()
	if left := rwLeftKeys(t, client); len(left) != 0 {
		t.Fatalf("keys left after Read().ForceUnlock: %v", left)
	}
	semClosedBy(t, dones[0], forced.Add(time.Second), "the local reader's Done after Read().ForceUnlock")
	semClosedBy(t, dones[1], forced.Add(3*timeout), "the remote reader's Done after Read().ForceUnlock")
	for i, r := range readers {
		if err := r.RUnlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Fatalf("reader %d RUnlock after Read().ForceUnlock = %v, want ErrNotHeld", i, err)
		}
	}

	// A writer holds: the read side's ForceUnlock leaves it alone, the write side's frees the lock.
	writer := cB.RWMutex(name)
	rwMustLock(t, writer)
	done := writer.Write().Done()
	before = semHGetAll(t, client, name)
	if deleted, err := forcer.Read().ForceUnlock(ctx); deleted || err != nil {
		t.Fatalf("Read().ForceUnlock of a write-locked lock = %v, %v; want false, nil", deleted, err)
	}
	if after := semHGetAll(t, client, name); !maps.Equal(before, after) {
		t.Fatalf("Read().ForceUnlock changed a write-locked lock: %v, then %v", before, after)
	}
	semNotClosed(t, done, "the writer's Done after Read().ForceUnlock")
	if deleted, err := forcer.Write().ForceUnlock(ctx); !deleted || err != nil {
		t.Fatalf("Write().ForceUnlock of a write-locked lock = %v, %v; want true, nil", deleted, err)
	}
	semClosedBy(t, done, time.Now().Add(3*timeout), "the remote writer's Done after Write().ForceUnlock")
	if err := writer.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("writer Unlock after Write().ForceUnlock = %v, want ErrNotHeld", err)
	}
	if deleted, err := forcer.Write().ForceUnlock(ctx); deleted || err != nil {
		t.Fatalf("Write().ForceUnlock of a free lock = %v, %v; want false, nil", deleted, err)
	}
	if left := rwLeftKeys(t, client); len(left) != 0 {
		t.Fatalf("keys left at the end: %v", left)
	}
}

// TestRWHoldCountsAndTokens: both sides are reentrant with their own hold counts; write holds get
// increasing fencing tokens, read holds none.
func TestRWHoldCountsAndTokens(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, client, c := setup(t)
	name := t.Name()
	rw := c.RWMutex(name)
	owner := rw.Owner()
	if rw.Read().Owner() != owner || rw.Write().Owner() != owner {
		t.Fatalf("the sides' owners %q, %q differ from the handle's %q", rw.Read().Owner(), rw.Write().Owner(), owner)
	}
	counts := func(reads, writes int) {
		t.Helper()
		if r, w := rwHoldCounts(t, rw); r != reads || w != writes {
			t.Fatalf("hold counts: read %d, write %d; want %d, %d (%s)", r, w, reads, writes, rwState(t, client, name))
		}
	}

	counts(0, 0)
	rwMustRLock(t, rw)
	if ok, err := rw.TryRLock(ctx); !ok || err != nil {
		t.Fatalf("re-entrant TryRLock = %v, %v", ok, err)
	}
	rwMustRLock(t, rw)
	counts(3, 0)
	if tok := rw.Read().Token(); tok != 0 {
		t.Fatalf("Read().Token = %d, want 0", tok)
	}
	if !semIsHeld(t, rw.Read()) || semIsHeld(t, rw.Write()) {
		t.Fatal("IsHeld: want the read side only")
	}
	for want := 2; want >= 0; want-- {
		rwMustRUnlock(t, rw)
		counts(want, 0)
	}
	if err := rw.RUnlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("RUnlock after the last read hold = %v, want ErrNotHeld", err)
	}

	var tokens []int64
	rwMustLock(t, rw)
	tokens = append(tokens, rw.Write().Token())
	if ok, err := rw.TryLock(ctx); !ok || err != nil {
		t.Fatalf("re-entrant TryLock = %v, %v", ok, err)
	}
	tokens = append(tokens, rw.Write().Token())
	rwMustRLock(t, rw) // a downgrade hold beside the write holds
	counts(1, 2)
	if tok := rw.Read().Token(); tok != 0 {
		t.Fatalf("Read().Token beside write holds = %d, want 0", tok)
	}
	if tokens[0] <= 0 || tokens[1] <= tokens[0] {
		t.Fatalf("write tokens through re-entry %v; want positive and increasing", tokens)
	}
	if tok := rw.Write().Token(); tok != tokens[1] {
		t.Fatalf("Write().Token after a read hold = %d, want %d", tok, tokens[1])
	}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{"mode": "write", owner + ":write": "2", owner: "1"}) {
		t.Fatalf("HGETALL = %v, want {mode: write, %s:write: 2, %s: 1}", fields, owner, owner)
	}
	rwMustUnlock(t, rw)
	counts(1, 1)
	if tok := rw.Write().Token(); tok != tokens[1] {
		t.Fatalf("Write().Token after a partial unlock = %d, want %d", tok, tokens[1])
	}
	rwMustUnlock(t, rw)
	counts(1, 0)
	if tok := rw.Write().Token(); tok != 0 {
		t.Fatalf("Write().Token after the last write unlock = %d, want 0", tok)
	}
	if err := rw.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock after the last write hold = %v, want ErrNotHeld", err)
	}
	rwMustRUnlock(t, rw)
	counts(0, 0)
	if left := rwLeftKeys(t, client); len(left) != 0 {
		t.Fatalf("keys left after every hold was released: %v", left)
	}

	// A later write hold, by another owner, gets a higher token.
	other := c.RWMutex(name)
	rwMustLock(t, other)
	if tok := other.Write().Token(); tok <= tokens[1] {
		t.Fatalf("token of a later writer = %d, want above %d", tok, tokens[1])
	}
	rwMustUnlock(t, other)
}

// rwCall is one call of an RWMutex, reduced to its error.
type rwCall struct {
	name string
	call func(ctx context.Context, rw *coordinator.RWMutex) error
}

var rwCalls = []rwCall{
	{"RLock", func(ctx context.Context, rw *coordinator.RWMutex) error { return rw.RLock(ctx) }},
	{"TryRLock", func(ctx context.Context, rw *coordinator.RWMutex) error { return badFalse(rw.TryRLock(ctx)) }},
	{"TryRLock(Wait)", func(ctx context.Context, rw *coordinator.RWMutex) error {
		return badFalse(rw.TryRLock(ctx, coordinator.Wait(time.Second)))
	}},
	{"RUnlock", func(ctx context.Context, rw *coordinator.RWMutex) error { return rw.RUnlock(ctx) }},
	{"Lock", func(ctx context.Context, rw *coordinator.RWMutex) error { return rw.Lock(ctx) }},
	{"TryLock", func(ctx context.Context, rw *coordinator.RWMutex) error { return badFalse(rw.TryLock(ctx)) }},
	{"TryLock(Wait)", func(ctx context.Context, rw *coordinator.RWMutex) error {
		return badFalse(rw.TryLock(ctx, coordinator.Wait(time.Second)))
	}},
	{"Unlock", func(ctx context.Context, rw *coordinator.RWMutex) error { return rw.Unlock(ctx) }},
}

// rwExpectAll checks that every call on rw and on both its sides fails with want and changes nothing.
func rwExpectAll(t *testing.T, client *redis.Client, ctx context.Context, rw *coordinator.RWMutex, want error) {
	t.Helper()
	before := badDump(t, client)
	for _, c := range rwCalls {
		if err := c.call(ctx, rw); !errors.Is(err, want) {
			t.Errorf("%s = %v, want %v", c.name, err, want)
		}
	}
	badUnchanged(t, client, before, "RWMutex calls failing with "+want.Error())
	badExpectAll(t, client, ctx, rw.Read(), want)
	badExpectAll(t, client, ctx, rw.Write(), want)
}

// TestRWBadInput: invalid handles, unlocks without a hold and calls after Close fail as for a Mutex,
// and change nothing in Redis.
func TestRWBadInput(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	ctx := t.Context()
	other := c.RWMutex(t.Name())
	rwMustLock(t, other)
	for _, tc := range []struct {
		name string
		rw   *coordinator.RWMutex
		want error
	}{
		{"empty name", c.RWMutex(""), coordinator.ErrEmptyName},
		{"negative lease", c.RWMutex(t.Name(), coordinator.WithLease(-1)), coordinator.ErrInvalidLease},
		{"zero lease", c.RWMutex(t.Name(), coordinator.WithLease(0)), coordinator.ErrInvalidLease},
		{"empty owner", c.RWMutex(t.Name(), coordinator.WithOwner("")), coordinator.ErrEmptyOwner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rwExpectAll(t, client, ctx, tc.rw, tc.want)
		})
	}
	if !semIsHeld(t, other.Write()) || holdCount(t, other.Write()) != 1 {
		t.Fatal("calls on invalid handles touched the lock of another owner")
	}
	rwMustUnlock(t, other)

	t.Run("unlock without a hold", func(t *testing.T) {
		name := t.Name()
		rw := c.RWMutex(name)
		before := badDump(t, client)
		if err := rw.RUnlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Fatalf("RUnlock without a hold = %v, want ErrNotHeld", err)
		}
		if err := rw.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Fatalf("Unlock without a hold = %v, want ErrNotHeld", err)
		}
		badUnchanged(t, client, before, "unlocks without a hold")

		// Holding one side does not make the other side's unlock valid.
		rwMustRLock(t, rw)
		before = badDump(t, client)
		if err := rw.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Fatalf("Unlock while holding only a read hold = %v, want ErrNotHeld", err)
		}
		badUnchanged(t, client, before, "Unlock while holding only a read hold")
		rwMustRUnlock(t, rw)
		rwMustLock(t, rw)
		before = badDump(t, client)
		if err := rw.RUnlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Fatalf("RUnlock while holding only the write lock = %v, want ErrNotHeld", err)
		}
		badUnchanged(t, client, before, "RUnlock while holding only the write lock")
		rwMustUnlock(t, rw)
		// Another owner's hold is not ours to release.
		rwMustRLock(t, rw)
		stranger := c.RWMutex(name)
		if err := stranger.RUnlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Fatalf("RUnlock by another owner = %v, want ErrNotHeld", err)
		}
		if n := holdCount(t, rw.Read()); n != 1 {
			t.Fatalf("reader HoldCount after another owner's RUnlock = %d, want 1", n)
		}
		rwMustRUnlock(t, rw)
	})

	t.Run("after Close", func(t *testing.T) {
		_, client, c := setup(t)
		name := t.Name()
		before := c.RWMutex(name)
		reader, writer := c.RWMutex(name+":read"), c.RWMutex(name+":write")
		rwMustRLock(t, reader)
		rwMustLock(t, writer)
		rdone, wdone := reader.Read().Done(), writer.Write().Done()
		if err := c.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		waitFor(t, rdone, time.Second, "Done of a read hold dropped by Close")
		waitFor(t, wdone, time.Second, "Done of a write hold dropped by Close")
		if left := rwLeftKeys(t, client); len(left) != 0 {
			t.Fatalf("holds not released at Close: keys %v left", left)
		}
		for _, rw := range []*coordinator.RWMutex{before, reader, writer, c.RWMutex(name + ":after")} {
			rwExpectAll(t, client, ctx, rw, coordinator.ErrClosed)
		}
	})
}

// TestRWDowngradeWithLocalWriterWaiting: the writer downgrades (RLock while it holds the write side)
// while another owner of the same coordinator waits for the write side. The read hold is a re-entry of
// the writer's hold and must not queue behind that waiter, which waits for the writer itself.
func TestRWDowngradeWithLocalWriterWaiting(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	name := t.Name()
	owner, other := c.RWMutex(name), c.RWMutex(name)
	rwMustLock(t, owner)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	otherLocked := rwAsync(ctx, other.Lock)
	rwExpectBlocked(t, []<-chan error{otherLocked}, "the other writer")

	rctx, rcancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer rcancel()
	if err := owner.RLock(rctx); err != nil {
		t.Fatalf("downgrade RLock with a local writer waiting: %v (%s)", err, rwState(t, client, name))
	}
	rwMustUnlock(t, owner)
	rwExpectMode(t, client, owner, "read")
	rwExpectBlocked(t, []<-chan error{otherLocked}, "the other writer while the downgraded reader holds")
	rwMustRUnlock(t, owner)
	select {
	case err := <-otherLocked:
		if err != nil {
			t.Fatalf("the other writer: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the other writer did not get the lock after the downgraded reader left (%s)", rwState(t, client, name))
	}
	rwMustUnlock(t, other)
}

// TestRWReadersUnderWritersGetOneHoldEach: 32 readers on 2 coordinators loop RLock+RUnlock while two
// writers come and go. A read release that frees the lock, settled in a batch, used to try the queue
// from inside the settlement, and the readers that an outer try was still trying got the lock twice:
// the second hold was given back with a wait-timed-out event for a reader that never gave up.
func TestRWReadersUnderWritersGetOneHoldEach(t *testing.T) {
	srv := redistest.Start(t)
	coords := []*coordinator.Coordinator{newCoordinator(t, srv.Client(t)), newCoordinator(t, srv.Client(t))}
	name := "rw:" + t.Name()
	var subs []*coordinator.Subscription
	for _, c := range coords {
		sub := c.Subscribe(coordinator.OfType(messages.EventWaitTimedOut), 1024)
		t.Cleanup(sub.Close)
		subs = append(subs, sub)
	}

	// Nobody gives up a wait but the writers' TryLocks: the loops end between calls, on stop.
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	loop := func(body func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := body(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 32 {
		rw := coords[i%2].RWMutex(name)
		loop(func() error {
			if err := rw.RLock(ctx); err != nil {
				return fmt.Errorf("RLock: %w", err)
			}
			if err := rw.RUnlock(ctx); err != nil {
				return fmt.Errorf("RUnlock: %w", err)
			}
			return nil
		})
	}
	// The writers give up often (short waits), and each unlock wakes every queued reader at once.
	const wantRounds = 1000
	var (
		rounds     atomic.Int64
		enough     = make(chan struct{})
		enoughOnce sync.Once
	)
	for i, wait := range []time.Duration{5 * time.Millisecond, 30 * time.Millisecond} {
		w := coords[1-i].RWMutex(name)
		loop(func() error {
			if rounds.Add(1) == wantRounds {
				enoughOnce.Do(func() { close(enough) })
			}
			ok, err := w.TryLock(ctx, coordinator.Wait(wait))
			if err != nil || !ok {
				return err
			}
			return w.Unlock(ctx)
		})
	}
	select {
	case <-enough:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the writers made %d rounds in 30 s, want %d", rounds.Load(), wantRounds)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, sub := range subs {
		for n := len(sub.Events()); n > 0; n-- {
			if ev := <-sub.Events(); ev.Kind == messages.LockRead {
				t.Errorf("a reader that never gave up: %+v", ev)
			}
		}
	}
}

// TestRWMixedWithPlainMutex pins down what one name used as both a read-write lock and a plain lock
// does, which is what Redisson's scripts do: a read or write hold keeps a plain Lock out (the lock hash
// exists), but a plain hold keeps neither side of the read-write lock out, because the read-write
// scripts look only at the hash's mode field, which a plain lock does not set. Hence the docs' "don't".
func TestRWMixedWithPlainMutex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	name := t.Name()
	rw, plain := cA.RWMutex(name), cB.Mutex(name)

	rwMustRLock(t, rw)
	if ok, err := plain.TryLock(ctx); ok || err != nil {
		t.Fatalf("plain TryLock while a read hold holds the name = %v, %v; want false, nil", ok, err)
	}
	rwMustRUnlock(t, rw)
	rwMustLock(t, rw)
	if ok, err := plain.TryLock(ctx); ok || err != nil {
		t.Fatalf("plain TryLock while a write hold holds the name = %v, %v; want false, nil", ok, err)
	}
	rwMustUnlock(t, rw)

	mustLock(t, plain)
	// The writer is in a coordinator of its own: the reader's knows of the read hold.
	_, cC := semOther(t, srv)
	reader, writer := cA.RWMutex(name), cC.RWMutex(name)
	if ok, err := reader.TryRLock(ctx); !ok || err != nil {
		t.Fatalf("TryRLock while a plain Lock holds the name = %v, %v; want true, nil (as in Redisson)", ok, err)
	}
	want := map[string]string{plain.Owner(): "1", "mode": "read", reader.Owner(): "1"}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, want) {
		t.Fatalf("HGETALL = %v, want %v", fields, want)
	}
	if err := client.HDel(ctx, name, "mode", reader.Owner()).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := writer.TryLock(ctx); !ok || err != nil {
		t.Fatalf("write TryLock while a plain Lock holds the name = %v, %v; want true, nil (as in Redisson)", ok, err)
	}
	want = map[string]string{plain.Owner(): "1", "mode": "write", writer.Owner() + ":write": "1"}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, want) {
		t.Fatalf("HGETALL = %v, want %v", fields, want)
	}
	// The holders' coordinators give up what is left when they close.
	if err := client.Del(ctx, name).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRWAbandonedWriterLetsReadersIn: a local writer waits behind a local reader and keeps a second
// reader out; when the writer's wait runs out, the second reader shares the lock with the first at
// once, instead of waiting for the first reader's unlock.
func TestRWAbandonedWriterLetsReadersIn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, _, c := setup(t)
	name := t.Name()
	first, writer, second := c.RWMutex(name), c.RWMutex(name), c.RWMutex(name)
	waits := c.Subscribe(coordinator.OfType(messages.EventWaitStarted), 16)
	defer waits.Close()
	waitStarted := func(owner string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case got := <-waits.Events():
				if got.Owner == owner {
					return
				}
			case <-deadline:
				t.Fatalf("%s did not start to wait within 5s", owner)
			}
		}
	}
	rwMustRLock(t, first)

	// The writer's wait is long enough for everything the actor does on a new waiter (subscribing the
	// channel, and the try that follows the confirmation) to be over when it runs out.
	wdone := make(chan error, 1)
	go func() {
		ok, err := writer.TryLock(ctx, coordinator.Wait(300*time.Millisecond))
		if ok {
			err = errors.New("the writer got the lock while a reader held it")
		}
		wdone <- err
	}()
	waitStarted(writer.Owner())
	rdone := make(chan error, 1)
	go func() { rdone <- second.RLock(ctx) }()
	waitStarted(second.Owner())

	if err := semRecv(t, wdone, 5*time.Second, "the writer's TryLock"); err != nil {
		t.Fatalf("writer TryLock(Wait 300ms): %v", err)
	}
	// The first reader keeps its hold, so nothing but the writer's leaving can let the second one in.
	if err := semRecv(t, rdone, 500*time.Millisecond, "the second reader's RLock after the writer left"); err != nil {
		t.Fatalf("second RLock: %v", err)
	}
	rwMustRUnlock(t, second)
	rwMustRUnlock(t, first)
}

// TestRWWriteReentryKeepsOuterLease: a write hold with a 10 s lease, re-entered with a 300 ms lease,
// keeps its 10 s in Redis and locally (the re-entry adds its lease, as Redisson's write lock does);
// neither the inner lease running out nor the inner Unlock cuts it short. The key's TTL used to become
// the inner lease, and another owner took the write lock right after it.
func TestRWWriteReentryKeepsOuterLease(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	outer, inner := 10*time.Second, 300*time.Millisecond
	rw, other := c.RWMutex(name), c.RWMutex(name)
	if ok, err := rw.TryLock(ctx, coordinator.Lease(outer)); !ok || err != nil {
		t.Fatalf("TryLock(Lease(%v)) = %v, %v", outer, ok, err)
	}
	if ok, err := rw.TryLock(ctx, coordinator.Lease(inner)); !ok || err != nil {
		t.Fatalf("re-entrant TryLock(Lease(%v)) = %v, %v", inner, ok, err)
	}
	if ttl := client.PTTL(ctx, name).Val(); ttl < outer-time.Second {
		t.Fatalf("PTTL after the re-entry: got %v, want about %v", ttl, outer+inner)
	}
	// Well past the inner lease, the hold stands, in Redis and locally.
	select {
	case <-rw.Write().Done():
		t.Fatal("Done closed when the inner lease ran out; the outer hold has about 10s left")
	case <-time.After(3 * inner):
	}
	if ok, err := other.TryLock(ctx); ok || err != nil {
		t.Fatalf("another owner's TryLock after the inner lease = %v, %v; want false, nil", ok, err)
	}
	// Dropping the inner hold leaves the outer one its time too.
	rwMustUnlock(t, rw)
	if ttl := client.PTTL(ctx, name).Val(); ttl < outer-2*time.Second {
		t.Fatalf("PTTL after the inner Unlock: got %v, want about %v", ttl, outer)
	}
	select {
	case <-rw.Write().Done():
		t.Fatal("Done closed after the inner Unlock; the outer hold has about 9s left")
	case <-time.After(3 * inner):
	}
	if ok, err := other.TryLock(ctx); ok || err != nil {
		t.Fatalf("another owner's TryLock after the inner Unlock = %v, %v; want false, nil", ok, err)
	}
	rwMustUnlock(t, rw)
	if ok, err := other.TryLock(ctx); !ok || err != nil {
		t.Fatalf("another owner's TryLock after the outer Unlock = %v, %v; want true, nil", ok, err)
	}
	rwMustUnlock(t, other)
}

// TestRWWriteReentriesDoNotPileUpTheLease: write re-entries add their lease to the time left (as
// Redisson's write lock does), but the watchdog's renewal sets the expiry back to one lease, so a writer
// that dies frees the lock within about one watchdog timeout, however often it re-entered.
func TestRWWriteReentriesDoNotPileUpTheLease(t *testing.T) {
	const watchdog = 3 * time.Second
	_, client, c := setup(t, coordinator.WithWatchdogTimeout(watchdog))
	name := "rw-write-reentries"
	sub := c.Subscribe(coordinator.ForLock(name), 256)
	w := c.RWMutex(name).Write()
	if err := w.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := w.Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := w.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	contractWaitEvent(t, sub, messages.EventRenewed, 2*watchdog)
	if ttl := client.PTTL(t.Context(), name).Val(); ttl > watchdog {
		t.Fatalf("PTTL after a renewal = %v, want at most the watchdog timeout %v", ttl, watchdog)
	}
	if err := w.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
