package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
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

// fairQueue returns the owners queued for the fair lock name, head first.
func fairQueue(t *testing.T, client redis.Cmdable, name string) []string {
	t.Helper()
	q, err := client.LRange(t.Context(), redisops.FairQueueKey(name), 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", redisops.FairQueueKey(name), err)
	}
	return q
}

// fairExpectQueue fails the test unless the queue LIST of name holds exactly owners, in order, and the
// timeout ZSET holds the same owners.
func fairExpectQueue(t *testing.T, client redis.Cmdable, name string, owners ...string) {
	t.Helper()
	ctx := t.Context()
	q := fairQueue(t, client, name)
	if !slices.Equal(q, owners) && (len(q) > 0 || len(owners) > 0) {
		t.Fatalf("LRANGE %s = %q, want %q", redisops.FairQueueKey(name), q, owners)
	}
	n, err := client.ZCard(ctx, redisops.FairTimeoutKey(name)).Result()
	if err != nil || n != int64(len(owners)) {
		zs, _ := client.ZRangeWithScores(ctx, redisops.FairTimeoutKey(name), 0, -1).Result()
		t.Fatalf("ZCARD %s = %d, %v; want %d (members %v)", redisops.FairTimeoutKey(name), n, err, len(owners), zs)
	}
	for _, o := range owners {
		if _, err := client.ZScore(ctx, redisops.FairTimeoutKey(name), o).Result(); err != nil {
			t.Fatalf("ZSCORE %s %s: %v; want a score for every queued owner", redisops.FairTimeoutKey(name), o, err)
		}
	}
}

// fairWaitQueued waits until owner has a place in the queue of the fair lock name.
func fairWaitQueued(t *testing.T, client redis.Cmdable, name, owner string) {
	t.Helper()
	leakEventually(t, 5*time.Second, owner+" queued for "+name, func() (bool, error) {
		q, err := client.LRange(t.Context(), redisops.FairQueueKey(name), 0, -1).Result()
		return slices.Contains(q, owner), err
	})
}

// fairState describes the Redis state of the fair lock name, for failure messages.
func fairState(t *testing.T, client redis.Cmdable, name string) string {
	t.Helper()
	ctx := t.Context()
	fields, _ := client.HGetAll(ctx, name).Result()
	pttl, _ := client.PTTL(ctx, name).Result()
	q, _ := client.LRange(ctx, redisops.FairQueueKey(name), 0, -1).Result()
	zs, _ := client.ZRangeWithScores(ctx, redisops.FairTimeoutKey(name), 0, -1).Result()
	now, _ := client.Time(ctx).Result()
	scores := make([]string, 0, len(zs))
	for _, z := range zs {
		scores = append(scores, fmt.Sprintf("%v:%+dms", z.Member, int64(z.Score)-now.UnixMilli()))
	}
	return fmt.Sprintf("lock %v (PTTL %v), queue %q, timeouts relative to now %v", fields, pttl, q, scores)
}

// fairSnapshot reads, atomically, the server's clock, the PTTL of the lock name and the timeout score of
// owner (ok false when owner has none).
func fairSnapshot(t *testing.T, client *redis.Client, name, owner string) (now time.Time, pttl time.Duration, score time.Time, ok bool) {
	t.Helper()
	ctx := t.Context()
	var timeCmd *redis.TimeCmd
	var pttlCmd *redis.DurationCmd
	var scoreCmd *redis.FloatCmd
	_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		timeCmd = p.Time(ctx)
		pttlCmd = p.PTTL(ctx, name)
		scoreCmd = p.ZScore(ctx, redisops.FairTimeoutKey(name), owner)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("TIME, PTTL, ZSCORE: %v", err)
	}
	s, err := scoreCmd.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("ZSCORE %s %s: %v", redisops.FairTimeoutKey(name), owner, err)
	}
	return timeCmd.Val(), pttlCmd.Val(), time.UnixMilli(int64(s)), err == nil
}

// TestFairRedisLayout checks the key names of the fair lock, shared with Redisson's RFairLock.
func TestFairRedisLayout(t *testing.T) {
	name := "fair"
	if got, want := redisops.FairQueueKey(name), "redisson_lock_queue:{fair}"; got != want {
		t.Errorf("FairQueueKey = %q, want %q", got, want)
	}
	if got, want := redisops.FairTimeoutKey(name), "redisson_lock_timeout:{fair}"; got != want {
		t.Errorf("FairTimeoutKey = %q, want %q", got, want)
	}
	if got, want := redisops.FairChannelName(name, "o"), "redisson_lock__channel:{fair}:o"; got != want {
		t.Errorf("FairChannelName = %q, want %q", got, want)
	}
}

// TestFairOrderAcrossCoordinators: owners on three coordinators (three processes, as far as lockwarden
// can tell) that start waiting 100 ms apart get the fair lock in the order they started, although
// nobody unlocks: each hold just runs out its 1 s lease, which publishes nothing, so every waiter must
// notice the expiry by itself. Fencing tokens increase in the same order.
func TestFairOrderAcrossCoordinators(t *testing.T) {
	t.Parallel()
	const (
		owners  = 8
		lease   = time.Second
		spacing = 100 * time.Millisecond
		// slack allows for the delay between an acquisition in Redis and the return of Lock.
		slack = 200 * time.Millisecond
		// late is how long after the previous lease ran out the next owner may take to get the lock.
		late = 1500 * time.Millisecond
	)
	srv, client, c0 := setup(t)
	_, c1 := semOther(t, srv)
	_, c2 := semOther(t, srv)
	cs := []*coordinator.Coordinator{c0, c1, c2}
	name := t.Name()

	type acquisition struct {
		i     int
		token int64
		at    time.Time
		err   error
	}
	acqs := make(chan acquisition, owners)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	for i := range owners {
		m := cs[i%len(cs)].FairMutex(name, coordinator.WithLease(lease))
		go func() {
			// The starts are spaced deliberately: their order is the order under test. All of them
			// happen while owner 0 holds its lease.
			time.Sleep(time.Until(start.Add(time.Duration(i) * spacing)))
			err := m.Lock(ctx)
			acqs <- acquisition{i: i, token: m.Token(), at: time.Now(), err: err}
		}()
	}

	var got []acquisition
	for k := range owners {
		within := 2 * time.Second
		if k > 0 {
			within = time.Until(got[k-1].at.Add(lease + late))
		}
		timer := time.NewTimer(within)
		select {
		case a := <-acqs:
			timer.Stop()
			got = append(got, a)
		case <-timer.C:
			var order []string
			for _, a := range got {
				order = append(order, fmt.Sprintf("%d@%v", a.i, a.at.Sub(start).Round(time.Millisecond)))
			}
			t.Fatalf("acquisition %d did not happen within %v after the previous one (owner@time so far %v): "+
				"the previous hold expired %v after it was taken, but no waiter took the lock; %s",
				k, lease+late, order, lease, fairState(t, client, name))
		}
		a := got[k]
		if a.err != nil {
			t.Fatalf("owner %d Lock: %v", a.i, a.err)
		}
		if a.i != k {
			t.Fatalf("acquisition %d went to owner %d, which started %v after the test; want owner %d (started %v)",
				k, a.i, time.Duration(a.i)*spacing, k, time.Duration(k)*spacing)
		}
		if a.token <= 0 || (k > 0 && a.token <= got[k-1].token) {
			t.Fatalf("owner %d got token %d after owner %d's %d; want a strictly increasing positive token",
				a.i, a.token, k-1, got[max(k-1, 0)].token)
		}
		if k > 0 {
			if gap := a.at.Sub(got[k-1].at); gap < lease-slack {
				t.Fatalf("owner %d got the lock %v after owner %d, whose %v lease had not run out", a.i, gap, k-1, lease)
			}
		}
	}
	t.Logf("acquisitions at %v after the first start", func() []time.Duration {
		var ds []time.Duration
		for _, a := range got {
			ds = append(ds, a.at.Sub(start).Round(time.Millisecond))
		}
		return ds
	}())
}

// TestFairOrderManyGoroutines: many goroutines on two coordinators, started 50 ms apart and alternating
// coordinators while the first holder keeps the lock, get the lock strictly in the order they started,
// each holding it for a second and unlocking.
func TestFairOrderManyGoroutines(t *testing.T) {
	t.Parallel()
	// At least 8 waiters, so that the order means something on small machines.
	n := max(8, 2*runtime.NumCPU())
	spacing := min(50*time.Millisecond, 4*time.Second/time.Duration(n))
	// Each holds for a second: every waiter's place must outlast several holders' turns.
	const hold = time.Second
	srv, client, c0 := setup(t)
	_, c1 := semOther(t, srv)
	cs := []*coordinator.Coordinator{c0, c1}
	name := t.Name()
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(n)*hold+20*time.Second)
	defer cancel()

	first := c0.FairMutex(name)
	mustLock(t, first)

	var (
		mu     sync.Mutex
		order  []int
		tokens []int64
	)
	errs := make(chan error, n)
	owners := make([]string, 0, n)
	start := time.Now()
	for i := 1; i < n; i++ {
		m := cs[i%len(cs)].FairMutex(name)
		owners = append(owners, m.Owner())
		go func() {
			// Deliberately spaced starts: their order is the order under test.
			time.Sleep(time.Until(start.Add(time.Duration(i-1) * spacing)))
			if err := m.Lock(ctx); err != nil {
				errs <- fmt.Errorf("waiter %d Lock: %w", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			tokens = append(tokens, m.Token())
			mu.Unlock()
			time.Sleep(hold) // holding the lock for a while is the point
			if err := m.Unlock(ctx); err != nil {
				errs <- fmt.Errorf("waiter %d Unlock: %w", i, err)
				return
			}
			errs <- nil
		}()
	}
	// Every waiter has its place in Redis, in the order it started, before the first holder unlocks.
	leakEventually(t, 10*time.Second, "every waiter queued", func() (bool, error) {
		l, err := client.LLen(ctx, redisops.FairQueueKey(name)).Result()
		return l == int64(n-1), err
	})
	fairExpectQueue(t, client, name, owners...)
	mustUnlock(t, first)

	for range n - 1 {
		if err := semRecv(t, errs, hold+10*time.Second, "a waiter"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := make([]int, 0, n-1)
	for i := 1; i < n; i++ {
		want = append(want, i)
	}
	if !slices.Equal(order, want) {
		t.Fatalf("acquisition order %v, want the start order %v", order, want)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens %v do not strictly increase in acquisition order", tokens)
		}
	}
	fairExpectQueue(t, client, name)
	if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after every waiter unlocked = %d, %v; want 0", name, n, err)
	}
}

// TestFairTimedOutWaitLeavesNoTrace: TryLock with Wait that runs out returns only once its waiter has
// left the Redis queue, so nothing is left in the queue or the timeout set, and a TryLock without Wait
// from another coordinator gets the lock as soon as the holder unlocks.
func TestFairTimedOutWaitLeavesNoTrace(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	_, cC := semOther(t, srv)
	ctx := t.Context()
	name := t.Name()
	holder := cA.FairMutex(name)
	mustLock(t, holder)

	// Three waiters at once: one behind the holder in its own coordinator, two in another.
	waiters := []*coordinator.Mutex{cA.FairMutex(name), cB.FairMutex(name), cB.FairMutex(name)}
	start := time.Now()
	var results []<-chan semTry
	for _, w := range waiters {
		results = append(results, semTryAsync(ctx, w, coordinator.Wait(wait)))
	}
	for i, res := range results {
		r := semRecv(t, res, 5*time.Second, fmt.Sprintf("waiter %d TryLock(Wait %v)", i, wait))
		if r.ok || r.err != nil {
			t.Fatalf("waiter %d TryLock(Wait %v) on a held lock = %v, %v; want false, nil", i, wait, r.ok, r.err)
		}
	}
	if elapsed := time.Since(start); elapsed < wait-20*time.Millisecond || elapsed > 3*time.Second {
		t.Fatalf("the timed-out TryLocks returned after %v; want about %v", elapsed, wait)
	}
	// Nothing left: no place in the queue, no score.
	for _, key := range []string{redisops.FairQueueKey(name), redisops.FairTimeoutKey(name)} {
		if n, err := client.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Fatalf("EXISTS %s after the timed-out waits = %d, %v; want 0 (%s)", key, n, err, fairState(t, client, name))
		}
	}
	fairExpectQueue(t, client, name)

	mustUnlock(t, holder)
	next := cC.FairMutex(name)
	if ok, err := next.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock without Wait from another coordinator after the unlock = %v, %v; want true, nil (%s)",
			ok, err, fairState(t, client, name))
	}
	for i, w := range waiters {
		if n := holdCount(t, w); n != 0 {
			t.Fatalf("timed-out waiter %d has hold count %d", i, n)
		}
	}
	mustUnlock(t, next)
}

// TestFairDefaultWaitWindow: without WithFairWaitWindow a waiter's place lasts 5 minutes past the
// lock's expiry (Redisson's default), and a TryLock with Wait uses its wait instead.
func TestFairDefaultWaitWindow(t *testing.T) {
	t.Parallel()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	name := t.Name()
	holder := cA.FairMutex(name)
	mustLock(t, holder)

	for _, tc := range []struct {
		what   string
		lock   func(ctx context.Context, m *coordinator.Mutex) error
		window time.Duration
	}{
		{"Lock", func(ctx context.Context, m *coordinator.Mutex) error { return m.Lock(ctx) }, coordinator.DefaultFairWaitWindow},
		{"TryLock(Wait 1m)", func(ctx context.Context, m *coordinator.Mutex) error {
			_, err := m.TryLock(ctx, coordinator.Wait(time.Minute))
			return err
		}, time.Minute},
	} {
		ctx, cancel := context.WithCancel(t.Context())
		waiter := cB.FairMutex(name)
		done := make(chan error, 1)
		go func() { done <- tc.lock(ctx, waiter) }()
		fairWaitQueued(t, client, name, waiter.Owner())
		// The waiter keeps its place alive: its deadline is one window from now, whatever the lease.
		now, _, score, ok := fairSnapshot(t, client, name, waiter.Owner())
		if want := now.Add(tc.window); !ok || score.Sub(want).Abs() > time.Second {
			t.Errorf("%s: waiter's timeout %v from now, want %v (%s)", tc.what, score.Sub(now), tc.window, fairState(t, client, name))
		}
		cancel()
		if err := semRecv(t, done, 5*time.Second, tc.what+" giving up"); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s after cancel: %v, want context.Canceled", tc.what, err)
		}
		// The call returns at once; its lock actor takes the place out of the queue after it.
		leakEventually(t, 5*time.Second, tc.what+" out of the queue", func() (bool, error) {
			n, err := client.LLen(t.Context(), redisops.FairQueueKey(name)).Result()
			return n == 0, err
		})
	}
	mustUnlock(t, holder)
}

// TestFairDeadWaiterPurged: a waiter whose process died (its connection cut, so it never tries again
// nor leaves) keeps its place only until its wait window has passed; then the next waiter, in another
// process, gets the lock, and the dead waiter's place is purged.
func TestFairDeadWaiterPurged(t *testing.T) {
	t.Parallel()
	const (
		watchdog = time.Second
		window   = 300 * time.Millisecond
	)
	ctx := t.Context()
	srv := redistest.Start(t)
	client := srv.Client(t)
	cA := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	pxB, clientB := faultProxiedClient(t, srv)
	cB := newCoordinator(t, clientB, coordinator.WithFairWaitWindow(window))
	_, cC := semOther(t, srv)
	name := t.Name()

	a := cA.FairMutex(name)
	mustLock(t, a)
	b := cB.FairMutex(name)
	lockAsync(ctx, b) // never returns before the cleanup closes cB
	fairWaitQueued(t, client, name, b.Owner())
	// B's place lapses one window after the holder's lease at the time B queued, at most the watchdog
	// timeout: by the Redis clock, which is this host's.
	_, _, scoreB, ok := fairSnapshot(t, client, name, b.Owner())
	if !ok {
		t.Fatalf("B is queued but has no timeout score: %s", fairState(t, client, name))
	}
	pxB.Disable() // B's process is dead, as far as Redis can tell

	c := cC.FairMutex(name)
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	errc := lockAsync(lctx, c)
	fairWaitQueued(t, client, name, c.Owner())
	fairExpectQueue(t, client, name, b.Owner(), c.Owner())

	mustUnlock(t, a) // the unlock notice goes to B, which is dead
	unlocked := time.Now()
	// Free, or taken by C already, the lock is not for a TryLock without Wait while waiters are
	// queued, and such a TryLock does not queue.
	if ok, err := cA.FairMutex(name).TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock without Wait with waiters queued = %v, %v; want false, nil (%s)", ok, err, fairState(t, client, name))
	}
	if q := fairQueue(t, client, name); len(q) > 2 {
		t.Fatalf("a TryLock without Wait queued: %q", q)
	}
	if err := semRecv(t, errc, 8*time.Second, "C's Lock behind a dead waiter"); err != nil {
		t.Fatalf("C Lock: %v", err)
	}
	got := time.Now()
	if d := got.Sub(unlocked); d > watchdog+window+time.Second {
		t.Fatalf("C got the lock %v after the unlock; want within the dead waiter's window, %v, plus the holder's lease at the time it queued (at most %v), plus 1s",
			d, window, watchdog)
	}
	// The dead waiter kept its place while its window lasted: fairness includes waiters that are slow
	// to try again.
	if got.Before(scoreB.Add(-100 * time.Millisecond)) {
		t.Fatalf("C got the lock %v before B's place lapsed", scoreB.Sub(got))
	}
	t.Logf("C got the lock %v after the unlock, %v after B's place lapsed", got.Sub(unlocked), got.Sub(scoreB))
	if q := fairQueue(t, client, name); slices.Contains(q, b.Owner()) {
		t.Fatalf("the dead waiter is still queued: %q", q)
	}
	if _, err := client.ZScore(ctx, redisops.FairTimeoutKey(name), b.Owner()).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("ZSCORE of the dead waiter = %v; want none", err)
	}
	fairExpectQueue(t, client, name)
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{c.Owner(): "1"}) {
		t.Fatalf("HGETALL after C's Lock = %v, want only C", fields)
	}
	mustUnlock(t, c)
}

// TestFairScoresBounded: waiters that time out give their windows back, and a dead waiter's window is
// counted once: after 50 timed-out waiters around a dead one, the scores of the dead waiter and of a
// fresh waiter are what a queue with only them would give (Redisson checks this "timeout drift").
func TestFairScoresBounded(t *testing.T) {
	t.Parallel()
	const (
		lease      = 10 * time.Second // longer than the test: the holder stays put
		batch      = 25
		waitBefore = time.Second // the waiters queued ahead of the dead one
		waitAfter  = 300 * time.Millisecond
		windowDead = 300 * time.Millisecond
		waitFresh  = 2 * time.Second
		margin     = 250 * time.Millisecond
	)
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	pxK, clientK := faultProxiedClient(t, srv)
	cK := newCoordinator(t, clientK, coordinator.WithFairWaitWindow(windowDead))
	cs := []*coordinator.Coordinator{cA, cB}
	name := t.Name()

	holder := cA.FairMutex(name)
	if ok, err := holder.TryLock(ctx, coordinator.Lease(lease)); !ok || err != nil {
		t.Fatalf("holder TryLock(Lease %v) = %v, %v", lease, ok, err)
	}

	var results []<-chan semTry
	startBatch := func(wait time.Duration) {
		for i := range batch {
			results = append(results, semTryAsync(ctx, cs[i%len(cs)].FairMutex(name), coordinator.Wait(wait)))
		}
	}
	// 25 waiters queue, then the one that dies behind them, then 25 more behind it.
	startBatch(waitBefore)
	leakEventually(t, 5*time.Second, "the first waiters queued", func() (bool, error) {
		l, err := client.LLen(ctx, redisops.FairQueueKey(name)).Result()
		return l == batch, err
	})
	dead := cK.FairMutex(name)
	lockAsync(ctx, dead) // returns at the cleanup
	fairWaitQueued(t, client, name, dead.Owner())
	if q := fairQueue(t, client, name); len(q) < batch+1 || q[batch] != dead.Owner() {
		t.Fatalf("the dead waiter is not queued behind the first %d: %s", batch, fairState(t, client, name))
	}
	pxK.Disable()
	startBatch(waitAfter)
	for i, res := range results {
		if r := semRecv(t, res, 5*time.Second, fmt.Sprintf("waiter %d", i)); r.ok || r.err != nil {
			t.Fatalf("waiter %d TryLock(Wait) = %v, %v; want false, nil", i, r.ok, r.err)
		}
	}
	// The dead waiter's place lapses one window after it died, whatever the holder's lease and the
	// waiters that queued ahead of it and left: it is purged, or about to be.
	if q := fairQueue(t, client, name); len(q) > 1 || (len(q) == 1 && q[0] != dead.Owner()) {
		t.Fatalf("after the others left, the queue is %q; want at most the dead waiter", q)
	}
	now, _, score, ok := fairSnapshot(t, client, name, dead.Owner())
	if got := score.Sub(now); ok && got > windowDead {
		t.Fatalf("the dead waiter's score is now%+v; want at most one window (%v) from now: %s",
			got, windowDead, fairState(t, client, name))
	}

	// A fresh waiter queues behind the dead one: one window of its own from now, not one per waiter
	// that came before, nor the holder's lease.
	fresh := cB.FairMutex(name)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := semTryAsync(fctx, fresh, coordinator.Wait(waitFresh))
	fairWaitQueued(t, client, name, fresh.Owner())
	now, _, score, ok = fairSnapshot(t, client, name, fresh.Owner())
	if !ok {
		t.Fatalf("the fresh waiter has no score: %s", fairState(t, client, name))
	}
	if got := score.Sub(now); got > waitFresh+margin || got < waitFresh-margin {
		t.Fatalf("the fresh waiter's score is now%+v; want now + its window (%v), give or take %v: %s",
			got, waitFresh, margin, fairState(t, client, name))
	}
	cancel()
	if r := semRecv(t, res, 5*time.Second, "the fresh waiter's TryLock after its ctx was cancelled"); r.ok || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("fresh TryLock with a cancelled ctx = %v, %v; want false, context.Canceled", r.ok, r.err)
	}
	// TryLock does not wait on a cancelled ctx for its waiter to leave the queue, but the waiter
	// leaves right after; the dead waiter, whose window has passed, is purged by then.
	leakEventually(t, time.Second, "the cancelled waiter leaving the queue", func() (bool, error) {
		l, err := client.LLen(ctx, redisops.FairQueueKey(name)).Result()
		return l == 0, err
	})
	fairExpectQueue(t, client, name)
	if !semIsHeld(t, holder) {
		t.Fatal("the holder lost the lock")
	}
	mustUnlock(t, holder)
}

// TestFairReentryAndForceUnlock covers hold counts through re-entry, Unlock without a hold, and
// ForceUnlock, which wakes the waiter at the head of the queue, and only it.
func TestFairReentryAndForceUnlock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	_, cC := semOther(t, srv)
	name := t.Name()

	m := cA.FairMutex(name)
	if err := m.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock of a never-locked fair lock = %v, want ErrNotHeld", err)
	}
	var tokens []int64
	mustLock(t, m)
	tokens = append(tokens, m.Token())
	mustLock(t, m)
	tokens = append(tokens, m.Token())
	if ok, err := m.TryLock(ctx); !ok || err != nil { // a re-entry never queues
		t.Fatalf("re-entrant TryLock = %v, %v; want true, nil", ok, err)
	}
	tokens = append(tokens, m.Token())
	if n := holdCount(t, m); n != 3 {
		t.Fatalf("HoldCount after three acquisitions = %d, want 3", n)
	}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{m.Owner(): "3"}) {
		t.Fatalf("HGETALL = %v, want {%s: 3}", fields, m.Owner())
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i-1] <= 0 || tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens through re-entry %v; want strictly increasing positive values", tokens)
		}
	}
	other := cB.FairMutex(name)
	if err := other.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock by another owner = %v, want ErrNotHeld", err)
	}
	for want := 2; want >= 0; want-- {
		mustUnlock(t, m)
		if n := holdCount(t, m); n != want {
			t.Fatalf("HoldCount after an Unlock = %d, want %d", n, want)
		}
	}
	if err := m.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock after the last hold = %v, want ErrNotHeld", err)
	}
	if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after the last Unlock = %d, %v", name, n, err)
	}
	fairExpectQueue(t, client, name)

	// ForceUnlock wakes the head waiter (in another coordinator), not the one behind it, and not after
	// a window: with the default 5 minute window, nothing but the notice can wake it in time.
	holder := cA.FairMutex(name)
	mustLock(t, holder)
	done := holder.Done()
	head, second := cB.FairMutex(name), cC.FairMutex(name)
	headErr := lockAsync(ctx, head)
	fairWaitQueued(t, client, name, head.Owner())
	secondErr := lockAsync(ctx, second)
	fairWaitQueued(t, client, name, second.Owner())
	fairExpectQueue(t, client, name, head.Owner(), second.Owner())

	deleted, err := cA.FairMutex(name).ForceUnlock(ctx)
	if err != nil || !deleted {
		t.Fatalf("ForceUnlock of a held fair lock = %v, %v; want true, nil", deleted, err)
	}
	forced := time.Now()
	waitFor(t, done, time.Second, "the holder's Done closing after ForceUnlock")
	if err := semRecv(t, headErr, 5*time.Second, "the head waiter's Lock after ForceUnlock"); err != nil {
		t.Fatalf("head waiter Lock: %v", err)
	}
	if d := time.Since(forced); d > time.Second {
		t.Fatalf("the head waiter got the lock %v after ForceUnlock; want the notice to wake it at once", d)
	}
	select {
	case err := <-secondErr:
		t.Fatalf("the second waiter's Lock returned while the head waiter holds the lock: %v", err)
	default:
	}
	if err := holder.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock by the force-unlocked holder = %v, want ErrNotHeld", err)
	}
	if !semIsHeld(t, head) {
		t.Fatal("the force-unlocked holder's Unlock took the head waiter's lock")
	}
	fairExpectQueue(t, client, name, second.Owner())
	mustUnlock(t, head)
	if err := semRecv(t, secondErr, 2*time.Second, "the second waiter's Lock after the head unlocked"); err != nil {
		t.Fatalf("second waiter Lock: %v", err)
	}
	fairExpectQueue(t, client, name)
	mustUnlock(t, second)
	deleted, err = m.ForceUnlock(ctx)
	if err != nil || deleted {
		t.Fatalf("ForceUnlock of a free fair lock = %v, %v; want false, nil", deleted, err)
	}
}

// TestFairMixedWithPlainMutex: as in Redisson, a fair lock and a plain lock of the same name are the same
// lock hash N, so they exclude each other whichever holds it. Also as in Redisson, the plain lock ignores
// the fair queue (a plain Lock may overtake fair waiters: a race, not tested here), and a fair unlock
// notifies only the head of the fair queue, not the plain channel: a plain waiter behind a fair holder
// wakes by its retry timer, at most the fair holder's lease after the unlock.
func TestFairMixedWithPlainMutex(t *testing.T) {
	t.Parallel()
	const timeout = time.Second // the fair holder's lease, renewed by the watchdog
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv, coordinator.WithWatchdogTimeout(timeout))
	name := t.Name()

	plain, fair := cA.Mutex(name), cB.FairMutex(name)
	mustLock(t, plain)
	if ok, err := fair.TryLock(ctx); ok || err != nil {
		t.Fatalf("fair TryLock while a plain Lock holds the name = %v, %v; want false, nil", ok, err)
	}
	if ok, err := fair.TryLock(ctx, coordinator.Wait(200*time.Millisecond)); ok || err != nil {
		t.Fatalf("fair TryLock(Wait 200ms) while a plain Lock holds the name = %v, %v; want false, nil", ok, err)
	}
	fairExpectQueue(t, client, name)
	if !semIsLocked(t, fair) || semIsHeld(t, fair) {
		t.Fatal("the fair handle does not see the plain hold as a hold of another owner")
	}
	// The same in one coordinator.
	if ok, err := cA.FairMutex(name).TryLock(ctx); ok || err != nil {
		t.Fatalf("fair TryLock in the plain holder's coordinator = %v, %v; want false, nil", ok, err)
	}
	mustUnlock(t, plain)

	if ok, err := fair.TryLock(ctx); !ok || err != nil {
		t.Fatalf("fair TryLock after the plain Unlock = %v, %v; want true, nil", ok, err)
	}
	for _, p := range []*coordinator.Mutex{plain, cB.Mutex(name)} {
		if ok, err := p.TryLock(ctx); ok || err != nil {
			t.Fatalf("plain TryLock while a fair lock holds the name = %v, %v; want false, nil", ok, err)
		}
	}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{fair.Owner(): "1"}) {
		t.Fatalf("HGETALL = %v, want only the fair owner", fields)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	errc := lockAsync(lctx, plain)
	rwExpectBlocked(t, []<-chan error{errc}, "the plain Lock")
	mustUnlock(t, fair)
	unlocked := time.Now()
	if err := semRecv(t, errc, 6*time.Second, "plain Lock after the fair Unlock"); err != nil {
		t.Fatalf("plain Lock after the fair Unlock: %v", err)
	}
	if d := time.Since(unlocked); d > timeout+time.Second {
		t.Fatalf("the plain waiter got the lock %v after the fair Unlock; want at most the fair holder's lease, %v, plus 1s", d, timeout)
	}
	mustUnlock(t, plain)
}

// TestFairBadInput: invalid handles, Unlock without a hold and calls after Close fail as for a plain
// Mutex, and change nothing in Redis.
func TestFairBadInput(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	ctx := t.Context()
	other := c.FairMutex(t.Name())
	mustLock(t, other)
	for _, tc := range []struct {
		name string
		m    *coordinator.Mutex
		want error
	}{
		{"empty name", c.FairMutex(""), coordinator.ErrEmptyName},
		{"negative lease", c.FairMutex(t.Name(), coordinator.WithLease(-1)), coordinator.ErrInvalidLease},
		{"zero lease", c.FairMutex(t.Name(), coordinator.WithLease(0)), coordinator.ErrInvalidLease},
		{"empty owner", c.FairMutex(t.Name(), coordinator.WithOwner("")), coordinator.ErrEmptyOwner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			badExpectAll(t, client, ctx, tc.m, tc.want)
		})
	}
	if !semIsHeld(t, other) || holdCount(t, other) != 1 {
		t.Fatal("calls on invalid handles touched the lock of another owner")
	}
	mustUnlock(t, other)

	m := c.FairMutex(t.Name() + ":unheld")
	before := badDump(t, client)
	if err := m.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock without a hold = %v, want ErrNotHeld", err)
	}
	badUnchanged(t, client, before, "Unlock without a hold")

	held := c.FairMutex(t.Name() + ":held")
	mustLock(t, held)
	done := held.Done()
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	waitFor(t, done, time.Second, "Done of a fair hold dropped by Close")
	if n, err := client.Exists(ctx, t.Name()+":held").Result(); err != nil || n != 0 {
		t.Fatalf("a fair lock held at Close was not released: EXISTS = %d, %v", n, err)
	}
	for _, h := range []*coordinator.Mutex{m, held, c.FairMutex(t.Name() + ":after")} {
		badExpectAll(t, client, ctx, h, coordinator.ErrClosed)
	}
}

// fairSubscribeCalls returns how many SUBSCRIBE commands the server has run.
func fairSubscribeCalls(t *testing.T, client *redis.Client) int64 {
	t.Helper()
	info, err := client.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_subscribe:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// TestFairWaiterKeepsItsChannel: an owner that waits for a fair lock again right after its last turn
// finds its channel still subscribed: five turns cost one SUBSCRIBE, not five.
func TestFairWaiterKeepsItsChannel(t *testing.T) {
	_, client, c := setup(t)
	a, b := c.FairMutex(t.Name()), c.FairMutex(t.Name())
	before := fairSubscribeCalls(t, client)
	for turn := range 5 {
		mustLock(t, a)
		errc := lockAsync(t.Context(), b)
		fairWaitQueued(t, client, t.Name(), b.Owner())
		mustUnlock(t, a)
		if err := semRecv(t, errc, 2*time.Second, fmt.Sprintf("turn %d: b's Lock", turn)); err != nil {
			t.Fatal(err)
		}
		mustUnlock(t, b)
	}
	if n := fairSubscribeCalls(t, client) - before; n > 1 {
		t.Errorf("SUBSCRIBE calls for 5 turns of one waiter = %d, want 1", n)
	}
}

// scriptCounter is a go-redis hook that counts the script calls (EVALSHA and EVAL) a client sends (n),
// and those whose reply has come back (answered).
type scriptCounter struct{ n, answered atomic.Int64 }

func isScript(cmd redis.Cmder) bool {
	name := cmd.Name()
	return name == "evalsha" || name == "eval"
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd) {
			return next(ctx, cmd)
		}
		h.n.Add(1)
		defer h.answered.Add(1)
		return next(ctx, cmd)
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scripts := int64(0)
		for _, cmd := range cmds {
			if isScript(cmd) {
				scripts++
			}
		}
		h.n.Add(scripts)
		defer h.answered.Add(scripts)
		return next(ctx, cmds)
	}
}

// fairWaitSubscribed waits until someone listens on owner's channel of the fair lock name.
func fairWaitSubscribed(t *testing.T, client *redis.Client, name, owner string) {
	t.Helper()
	ch := redisops.FairChannelName(name, owner)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := client.PubSubNumSub(t.Context(), ch).Result()
		if err == nil && n[ch] > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody subscribed to %s within 5s (%v)", ch, err)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not a wait for an event
	}
}

// fairExpectFree fails the test unless the lock name is free in Redis.
func fairExpectFree(t *testing.T, client redis.Cmdable, name string) {
	t.Helper()
	if n, err := client.Exists(t.Context(), name).Result(); err != nil || n != 0 {
		t.Errorf("lock %s still there: %d, %v (%s)", name, n, err, fairState(t, client, name))
	}
}

// TestFairHandoffAcrossCoordinators: the release of a fair lock in one process gives the lock straight
// to the waiter at the head of the queue in another, which returns from Lock without a Redis call of
// its own, with the next fencing token; the releasing coordinator reports the handoff.
func TestFairHandoffAcrossCoordinators(t *testing.T) {
	t.Parallel()
	srv, client, cA := setup(t)
	clientB := srv.Client(t)
	scripts := &scriptCounter{}
	clientB.AddHook(scripts)
	cB := newCoordinator(t, clientB)
	name := t.Name()
	events := cA.Subscribe(coordinator.OfType(messages.EventHandedOff), 8)
	defer events.Close()

	a := cA.FairMutex(name)
	mustLock(t, a)
	tokenA := a.Token()
	b := cB.FairMutex(name)
	start := scripts.answered.Load()
	errc := lockAsync(t.Context(), b)
	fairWaitQueued(t, client, name, b.Owner())
	fairWaitSubscribed(t, client, name, b.Owner())
	// B's waiter makes a second attempt once its actor learns that the subscription is in place (so
	// that a release whose notice came before it listened is not missed), later than Redis shows the
	// subscription. Run after A's unlock, that attempt would find the lock handed to B and take it
	// under a token of its own: wait until both of B's attempts have been answered.
	leakEventually(t, 5*time.Second, "B's attempts on queuing and once subscribed", func() (bool, error) {
		return scripts.answered.Load()-start >= 2, nil
	})
	before := scripts.n.Load()

	mustUnlock(t, a)
	if err := semRecv(t, errc, 5*time.Second, "B's Lock after A's unlock"); err != nil {
		t.Fatalf("B's Lock: %v", err)
	}
	if n := scripts.n.Load() - before; n != 0 {
		t.Errorf("B's coordinator ran %d scripts between A's unlock and B's Lock returning, want 0 (a handoff)", n)
	}
	if got := b.Token(); got <= tokenA {
		t.Errorf("B's token: got %d, want above A's %d", got, tokenA)
	}
	ev := semRecv(t, events.Events(), 5*time.Second, "the handed-off event")
	if ev.Owner != b.Owner() || ev.From != a.Owner() || ev.Token != b.Token() || ev.Name != name {
		t.Errorf("handed-off event: got %+v, want %s from %s with token %d", ev, b.Owner(), a.Owner(), b.Token())
	}
	if got, err := client.HGetAll(t.Context(), name).Result(); err != nil || len(got) != 1 || got[b.Owner()] != "1" {
		t.Errorf("lock hash after the handoff: got %v, %v; want B once", got, err)
	}
	if n, err := client.Exists(t.Context(), redisops.FairHandoffKey(name)).Result(); err != nil || n != 0 {
		t.Errorf("handoff registrations left: %d, %v", n, err)
	}
	if ttl, err := b.TTL(t.Context()); err != nil || ttl < 25*time.Second {
		t.Errorf("B's lease: got %v, %v; want about the 30s watchdog timeout", ttl, err)
	}
	mustUnlock(t, b)
	fairExpectFree(t, client, name)
}

// TestFairHandoffRacingGiveUp: a waiter whose TryLock wait runs out just as the release hands it the
// lock leaves nothing behind: whichever comes first, the lock ends up free, nothing is queued, and a
// TryLock without wait succeeds at once.
func TestFairHandoffRacingGiveUp(t *testing.T) {
	t.Parallel()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	_, cC := semOther(t, srv)
	name := t.Name()
	const wait = 30 * time.Millisecond
	got := 0
	for i := range 40 {
		a := cA.FairMutex(name)
		mustLock(t, a)
		b := cB.FairMutex(name)
		type result struct {
			ok  bool
			err error
		}
		res := make(chan result, 1)
		go func() {
			ok, err := b.TryLock(t.Context(), coordinator.Wait(wait))
			res <- result{ok, err}
		}()
		// B is in the queue for its 30 ms wait at most; on a loaded machine its attempt can come so late
		// that it gives up before a look at the queue finds it there. Such a round has no race to set, and
		// goes on as one where B gave up.
		leakEventually(t, 5*time.Second, b.Owner()+" queued for "+name+", or its TryLock over", func() (bool, error) {
			if len(res) > 0 {
				return true, nil
			}
			q, err := client.LRange(t.Context(), redisops.FairQueueKey(name), 0, -1).Result()
			return slices.Contains(q, b.Owner()), err
		})
		// Unlock around the moment B gives up: from 4 ms before to 4 ms after.
		time.Sleep(wait - 8*time.Millisecond + time.Duration(i%9)*time.Millisecond) // sets the race, waits for nothing
		mustUnlock(t, a)
		r := semRecv(t, res, 5*time.Second, "B's TryLock")
		if r.err != nil {
			t.Fatalf("round %d: B's TryLock: %v", i, r.err)
		}
		if r.ok {
			got++
			mustUnlock(t, b)
		}
		c := cC.FairMutex(name)
		if ok, err := c.TryLock(t.Context()); !ok || err != nil {
			t.Fatalf("round %d (B got it: %v): TryLock without wait = %v, %v; want the free lock (%s)",
				i, r.ok, ok, err, fairState(t, client, name))
		}
		mustUnlock(t, c)
		fairExpectQueue(t, client, name)
	}
	t.Logf("B got the lock in %d of 40 rounds", got)
}

// TestFairHandoffToAnOwnerWaitingTwice: two goroutines wait through one handle (one owner) while another
// owner of the same coordinator holds the lock, with local handoffs off, so that the release hands the
// lock to the registered owner (and also tells it on its channel). One call gets the hold and the other
// re-enters at once: a hold count of 2, and nothing lost.
func TestFairHandoffToAnOwnerWaitingTwice(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t, coordinator.WithMaxHandoffs(0))
	name := t.Name()
	lost := c.Subscribe(coordinator.OfType(messages.EventLost), 8)
	defer lost.Close()
	h, x := c.FairMutex(name), c.FairMutex(name)
	mustLock(t, h)
	first, second := lockAsync(t.Context(), x), lockAsync(t.Context(), x)
	fairWaitQueued(t, client, name, x.Owner())
	fairWaitSubscribed(t, client, name, x.Owner())
	mustUnlock(t, h)
	for i, errc := range []<-chan error{first, second} {
		if err := semRecv(t, errc, 5*time.Second, fmt.Sprintf("call %d of the waiting owner", i+1)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if n := holdCount(t, x); n != 2 {
		t.Errorf("hold count: got %d, want 2", n)
	}
	select {
	case <-x.Done():
		t.Error("Done closed: the hold was lost")
	default:
	}
	select {
	case ev := <-lost.Events():
		t.Errorf("lost event: %+v", ev)
	default:
	}
	mustUnlock(t, x)
	mustUnlock(t, x)
	fairExpectFree(t, client, name)
}

// fairScene is a fair lock held by h through one coordinator while x, through another, waits for it: x's
// Lock is queued in Redis and its channel subscribed. waiting receives x's Lock result.
type fairScene struct {
	client      *redis.Client
	name        string
	holderCoord *coordinator.Coordinator
	h, x        *coordinator.Mutex
	waiting     <-chan error
}

// newFairScene starts a server and sets up a fairScene on it, named after the test.
func newFairScene(t *testing.T) fairScene {
	t.Helper()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	s := fairScene{client: client, name: t.Name(), holderCoord: cA}
	s.h = cA.FairMutex(s.name)
	mustLock(t, s.h)
	s.x = cB.FairMutex(s.name)
	s.waiting = lockAsync(t.Context(), s.x)
	fairWaitQueued(t, client, s.name, s.x.Owner())
	fairWaitSubscribed(t, client, s.name, s.x.Owner())
	return s
}

// TestFairGrantNoticeOfAnotherWait: a grant notice that names no current wait of the owner (a stale
// notice of an earlier wait, or a stray message) does not make the waiter a holder: it looks in Redis
// and keeps waiting while another owner holds the lock.
func TestFairGrantNoticeOfAnotherWait(t *testing.T) {
	t.Parallel()
	sc := newFairScene(t)
	client, name, h, x, errc := sc.client, sc.name, sc.h, sc.x, sc.waiting
	channel := redisops.FairChannelName(name, x.Owner())
	for _, id := range []string{"stale:r1", x.Owner() + ":r1", "r999"} {
		if err := client.Publish(t.Context(), channel, redisops.FairGrantPrefix+"1:"+id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errc:
		t.Fatalf("Lock returned %v on a grant notice of another wait, while %s holds the lock (%s)", err, h.Owner(), fairState(t, client, name))
	case <-time.After(500 * time.Millisecond): // a bound on what must not happen
	}
	mustUnlock(t, h)
	if err := semRecv(t, errc, 5*time.Second, "x's Lock after the unlock"); err != nil {
		t.Fatalf("x's Lock: %v", err)
	}
	mustUnlock(t, x)
	fairExpectFree(t, client, name)
}

// TestFairHandoffAfterAnotherCallGaveUp: one handle waits through Lock (watchdog lease) and through a
// TryLock with a 1 s lease that gives up. The registration in Redis is the owner's, last written by the
// TryLock, so the release hands the lock over with the TryLock's lease and names its wait; the Lock call
// that still waits takes the hold with its own lease, and nobody else gets in while it holds.
func TestFairHandoffAfterAnotherCallGaveUp(t *testing.T) {
	t.Parallel()
	sc := newFairScene(t)
	client, name, h, x, errc := sc.client, sc.name, sc.h, sc.x, sc.waiting
	if ok, err := x.TryLock(t.Context(), coordinator.Wait(300*time.Millisecond), coordinator.Lease(time.Second)); ok || err != nil {
		t.Fatalf("TryLock while h holds = %v, %v; want false, nil", ok, err)
	}
	mustUnlock(t, h)
	if err := semRecv(t, errc, 5*time.Second, "x's Lock after the unlock"); err != nil {
		t.Fatalf("x's Lock: %v", err)
	}
	if ttl, err := client.PTTL(t.Context(), name).Result(); err != nil || ttl < 20*time.Second {
		t.Errorf("lease of x's hold: got %v, %v; want about the 30s watchdog timeout, not the TryLock's 1s", ttl, err)
	}
	if ok, err := sc.holderCoord.FairMutex(name).TryLock(t.Context(), coordinator.Wait(1500*time.Millisecond)); ok || err != nil {
		t.Errorf("another owner's TryLock(Wait 1.5s) while x holds = %v, %v; want false, nil", ok, err)
	}
	select {
	case <-x.Done():
		t.Error("x's Done closed: the hold was lost")
	default:
	}
	mustUnlock(t, x)
}

// TestFairCallArrivingAfterAMissedGrant: a release handed the lock to an owner whose process missed the
// notice (simulated in Redis), and a second call of that owner arrives: its first attempt finds the
// hold, and the owner's call that waited since before re-enters at once instead of sleeping until its
// fallback timer (the old holder's 30s lease).
func TestFairCallArrivingAfterAMissedGrant(t *testing.T) {
	t.Parallel()
	sc := newFairScene(t)
	client, name, x, waiting := sc.client, sc.name, sc.x, sc.waiting
	// The handoff as fair_release.lua makes it, without its notice.
	pipe := client.TxPipeline()
	pipe.Del(t.Context(), name)
	pipe.HSet(t.Context(), name, x.Owner(), 1)
	pipe.PExpire(t.Context(), name, 30*time.Second)
	pipe.LRem(t.Context(), redisops.FairQueueKey(name), 0, x.Owner())
	pipe.ZRem(t.Context(), redisops.FairTimeoutKey(name), x.Owner())
	pipe.HDel(t.Context(), redisops.FairHandoffKey(name), x.Owner())
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := semRecv(t, lockAsync(t.Context(), x), 5*time.Second, "the second call's Lock"); err != nil {
		t.Fatalf("second call: %v", err)
	}
	if err := semRecv(t, waiting, 2*time.Second, "the waiting call's re-entry"); err != nil {
		t.Fatalf("waiting call: %v", err)
	}
	if n := holdCount(t, x); n != 2 {
		t.Errorf("hold count: got %d, want 2", n)
	}
	mustUnlock(t, x)
	mustUnlock(t, x)
	fairExpectFree(t, client, name)
}

// fairGapRecorder records, for one lock name, when nobody holds it between a release and the next
// acquisition.
type fairGapRecorder struct {
	mu     sync.Mutex
	held   int
	freed  time.Time // when held last dropped to 0
	gaps   []fairGap
	maxRun int
}

type fairGap struct {
	from time.Time
	d    time.Duration
}

func (r *fairGapRecorder) acquired() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.held == 0 && !r.freed.IsZero() {
		r.gaps = append(r.gaps, fairGap{from: r.freed, d: now.Sub(r.freed)})
	}
	r.held++
	r.maxRun = max(r.maxRun, r.held)
}

func (r *fairGapRecorder) released() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held--
	if r.held == 0 {
		r.freed = time.Now()
	}
}

// longest returns the longest gap that started at or after since, and when it started.
func (r *fairGapRecorder) longest(since time.Time) fairGap {
	r.mu.Lock()
	defer r.mu.Unlock()
	var worst fairGap
	for _, g := range r.gaps {
		if !g.from.Before(since) && g.d > worst.d {
			worst = g
		}
	}
	// A gap still open counts too.
	if r.held == 0 && !r.freed.Before(since) {
		if d := time.Since(r.freed); d > worst.d {
			worst = fairGap{from: r.freed, d: d}
		}
	}
	return worst
}

// TestFairNoStallAfterPause: many goroutines of several coordinators take turns on one fair lock while
// Redis is paused (SIGSTOP) for a few seconds. Once Redis is back and the coordinators have recovered,
// the lock never stays free for long while goroutines wait for it: every release is followed by the
// next acquisition within about a second.
func TestFairNoStallAfterPause(t *testing.T) {
	const (
		coords     = 8
		goroutines = 16
		pause      = 5 * time.Second
		settle     = 3 * time.Second // recovery after Resume: timeouts of calls sent during the pause
		after      = 10 * time.Second
		maxGap     = 1500 * time.Millisecond
		watchdog   = 1500 * time.Millisecond
		window     = 2 * time.Second // shorter than the pause: every place lapses during it
	)
	srv := redistest.Start(t)
	name := t.Name()
	var cs []*coordinator.Coordinator
	for range coords {
		_, c := semOther(t, srv, coordinator.WithWatchdogTimeout(watchdog), coordinator.WithFairWaitWindow(window))
		cs = append(cs, c)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	rec := &fairGapRecorder{}
	var wg sync.WaitGroup
	var turns atomic.Int64
	for i := range coords * goroutines {
		m := cs[i%coords].FairMutex(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				err := m.Lock(lctx)
				cancel()
				if err != nil {
					continue
				}
				rec.acquired()
				turns.Add(1)
				time.Sleep(time.Millisecond) // the critical section
				done := m.Done()
				rec.released()
				// An Unlock that fails (Redis paused) is retried as a user would, until it works or
				// the hold is gone.
				for {
					err := m.Unlock(context.Background())
					if err == nil || errors.Is(err, coordinator.ErrNotHeld) {
						break
					}
					select {
					case <-done:
					case <-time.After(100 * time.Millisecond):
						continue
					}
					break
				}
			}
		}()
	}
	leakEventually(t, 10*time.Second, "turns before the pause", func() (bool, error) { return turns.Load() > 100, nil })
	srv.Pause()
	time.Sleep(pause) // the fault itself lasts this long
	srv.Resume()
	resumed := time.Now()
	time.Sleep(settle + after) // the run under observation
	worst := rec.longest(resumed.Add(settle))
	stop()
	wg.Wait()
	before := turns.Load()
	t.Logf("%d turns; longest free gap from %v after Resume: %v", before, worst.from.Sub(resumed), worst.d)
	rec.mu.Lock()
	for _, g := range rec.gaps {
		if g.d > 200*time.Millisecond {
			t.Logf("gap of %v from %v after Resume", g.d, g.from.Sub(resumed))
		}
	}
	rec.mu.Unlock()
	if worst.d > maxGap {
		t.Fatalf("the lock stayed free for %v, from %v after Resume, while goroutines waited; want at most %v",
			worst.d, worst.from.Sub(resumed), maxGap)
	}
}

// TestFairDeadWaitersDoNotAddUp: waiters of a process that died (its connection cut, so it neither
// refreshes its places nor leaves) hold up a live waiter behind them for about one wait window after
// they died or after the holder's release, whichever is later: not one window per dead waiter, and not
// the holder's lease on top.
func TestFairDeadWaitersDoNotAddUp(t *testing.T) {
	t.Parallel()
	const (
		window = 2 * time.Second
		margin = time.Second
	)
	for _, dead := range []int{1, 4, 8} {
		t.Run(strconv.Itoa(dead), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := redistest.Start(t)
			client := srv.Client(t)
			// The holder's watchdog lease is much longer than the window.
			cA := newCoordinator(t, client, coordinator.WithWatchdogTimeout(30*time.Second), coordinator.WithFairWaitWindow(window))
			pxK, clientK := faultProxiedClient(t, srv)
			cK := newCoordinator(t, clientK, coordinator.WithFairWaitWindow(window))
			_, cL := semOther(t, srv, coordinator.WithFairWaitWindow(window))
			name := t.Name()

			holder := cA.FairMutex(name)
			mustLock(t, holder)
			var owners []string
			for range dead {
				k := cK.FairMutex(name)
				lockAsync(ctx, k) // returns at the cleanup
				fairWaitQueued(t, client, name, k.Owner())
				owners = append(owners, k.Owner())
			}
			live := cL.FairMutex(name)
			lctx, cancel := context.WithTimeout(ctx, time.Duration(dead+2)*window+5*time.Second)
			defer cancel()
			errc := lockAsync(lctx, live)
			fairWaitQueued(t, client, name, live.Owner())
			fairExpectQueue(t, client, name, append(owners, live.Owner())...)
			pxK.Disable() // the waiters' process is dead, as far as Redis can tell
			died := time.Now()

			time.Sleep(window / 4) // the holder works on a while after they died
			mustUnlock(t, holder)
			released := time.Now()
			if err := semRecv(t, errc, time.Duration(dead+2)*window+10*time.Second, "the live waiter's Lock"); err != nil {
				t.Fatalf("live Lock: %v (%s)", err, fairState(t, client, name))
			}
			got := time.Now()
			from := released
			if died.After(from) {
				from = died
			}
			if d := got.Sub(from); d > window+margin {
				t.Fatalf("with %d dead waiters ahead, the live waiter got the lock %v after the release; want within one window (%v) + %v",
					dead, got.Sub(released), window, margin)
			}
			t.Logf("%d dead waiters: the live waiter got the lock %v after the release, %v after they died",
				dead, got.Sub(released), got.Sub(died))
			fairExpectQueue(t, client, name)
			mustUnlock(t, live)
		})
	}
}

// TestFairGrantToAGoneWaitIsGivenBack: a wait whose call already left can still be registered for a
// handoff in Redis (its attempt, held up by a Redis pause, ran after its leave). A release then hands it
// the lock; its process, told so, gives the hold back at once and the next waiter gets the lock, rather
// than everyone waiting for the gone wait's lease to run out.
func TestFairGrantToAGoneWaitIsGivenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, client, cA := setup(t)
	_, cB := semOther(t, srv)
	_, cC := semOther(t, srv)
	name := t.Name()
	holder := cA.FairMutex(name)
	mustLock(t, holder)

	x := cB.FairMutex(name)
	xctx, cancel := context.WithCancel(ctx)
	res := semTryAsync(xctx, x, coordinator.Wait(time.Minute))
	fairWaitQueued(t, client, name, x.Owner())
	fairWaitSubscribed(t, client, name, x.Owner())
	cancel()
	semRecv(t, res, 5*time.Second, "x's TryLock after its ctx was cancelled")
	leakEventually(t, time.Second, "x out of the queue", func() (bool, error) {
		q, err := client.LRange(ctx, redisops.FairQueueKey(name), 0, -1).Result()
		return len(q) == 0, err
	})
	// x's late attempt, as fair_acquire.lua runs it, with the watchdog lease.
	if got, err := redisops.New(client).FairWait(ctx, name, x.Owner(), 30*time.Second, time.Minute, 0, "gone-wait"); err != nil || got.OK {
		t.Fatalf("FairWait of the gone wait = %+v, %v; want queued", got, err)
	}
	live := cC.FairMutex(name)
	errc := lockAsync(ctx, live)
	fairWaitQueued(t, client, name, live.Owner())
	mustUnlock(t, holder)
	released := time.Now()
	if err := semRecv(t, errc, 10*time.Second, "the live waiter's Lock"); err != nil {
		t.Fatalf("live Lock: %v", err)
	}
	if d := time.Since(released); d > 2*time.Second {
		t.Fatalf("the live waiter got the lock %v after the release; want within 2s, not after the gone wait's lease", d)
	}
	mustUnlock(t, live)
}

// TestFairLeaveRetriedAfterAFault: a waiter that gives up while its connection to Redis is cut cannot
// leave the queue at once; it tries again with backoff, and leaves once Redis is reachable, well within
// its wait window.
func TestFairLeaveRetriedAfterAFault(t *testing.T) {
	t.Parallel()
	const window = 30 * time.Second
	ctx := t.Context()
	srv, client, cA := setup(t)
	pxK, clientK := faultProxiedClient(t, srv)
	cK := newCoordinator(t, clientK, coordinator.WithFairWaitWindow(window))
	name := t.Name()
	holder := cA.FairMutex(name)
	mustLock(t, holder)

	k := cK.FairMutex(name)
	kctx, cancel := context.WithCancel(ctx)
	res := lockAsync(kctx, k)
	fairWaitQueued(t, client, name, k.Owner())
	pxK.Disable() // the leave that follows the cancel fails
	cancel()
	if err := semRecv(t, res, 5*time.Second, "k's Lock after its ctx was cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("k's Lock = %v, want context.Canceled", err)
	}
	// The leave is tried at once, and fails while the proxy refuses connections.
	time.Sleep(500 * time.Millisecond) // the fault lasts this long
	if q := fairQueue(t, client, name); !slices.Contains(q, k.Owner()) {
		t.Fatalf("k left the queue while its connection was cut: %q", q)
	}
	pxK.Enable()
	healed := time.Now()
	leakEventually(t, 5*time.Second, "k's retried leave", func() (bool, error) {
		q, err := client.LRange(ctx, redisops.FairQueueKey(name), 0, -1).Result()
		return len(q) == 0, err
	})
	t.Logf("k left the queue %v after the fault ended", time.Since(healed))
	fairExpectQueue(t, client, name)
	mustUnlock(t, holder)
}

// TestFairStaleGrantNoticeOfTheCurrentWait: a grant notice for the waiter's current wait, but older
// than an attempt of the waiter that Redis refused (a notice held up on a stalled connection or behind
// a busy actor, whose hold lapsed and went to others meanwhile), does not make the waiter a holder.
// Its token is not above the watermark of that refusal. Before, the waiter took it as a grant counted
// from its latest attempt, and entered while another owner held the lock.
func TestFairStaleGrantNoticeOfTheCurrentWait(t *testing.T) {
	t.Parallel()
	sc := newFairScene(t)
	client, name, h, x, errc := sc.client, sc.name, sc.h, sc.x, sc.waiting
	reg, err := client.HGet(t.Context(), redisops.FairHandoffKey(name), x.Owner()).Result()
	if err != nil {
		t.Fatalf("x's handoff registration: %v", err)
	}
	parts := strings.SplitN(reg, ":", 3) // lease:window:wait id (the id has colons of its own)
	if len(parts) != 3 {
		t.Fatalf("x's handoff registration %q: want lease:window:wait id", reg)
	}
	waitID := parts[2]
	// h's own token: issued before x's refused attempts ran.
	stale := h.Token()
	channel := redisops.FairChannelName(name, x.Owner())
	if err := client.Publish(t.Context(), channel, fmt.Sprintf("%s%d:%s", redisops.FairGrantPrefix, stale, waitID)).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Fatalf("Lock returned %v on a stale grant notice of its own wait, while %s holds the lock (%s)", err, h.Owner(), fairState(t, client, name))
	case <-time.After(500 * time.Millisecond): // a bound on what must not happen
	}
	mustUnlock(t, h)
	if err := semRecv(t, errc, 5*time.Second, "x's Lock after the unlock"); err != nil {
		t.Fatalf("x's Lock: %v", err)
	}
	if x.Token() <= stale {
		t.Errorf("x's token %d is not above h's %d", x.Token(), stale)
	}
	mustUnlock(t, x)
	fairExpectFree(t, client, name)
}
