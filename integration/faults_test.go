package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// faultProxiedClient returns a client that reaches srv through a new proxy, with short timeouts and no
// retries, so that a partition shows up as fast errors rather than long stalls.
func faultProxiedClient(t *testing.T, srv *redistest.Server) (*redistest.Proxy, *redis.Client) {
	t.Helper()
	px := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{
		Addr:          px.Addr(),
		DialTimeout:   200 * time.Millisecond,
		ReadTimeout:   200 * time.Millisecond,
		WriteTimeout:  200 * time.Millisecond,
		MaxRetries:    -1, // go-redis: -1 means no retries (0 means the default, 3)
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = client.Close() })
	// Heal any partition the test left, before the client and the proxy close.
	t.Cleanup(func() { px.Unstall(); px.Enable() })
	return px, client
}

// faultWaitPing waits until client can reach Redis again after a fault.
func faultWaitPing(t *testing.T, client *redis.Client, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		if err = client.Ping(t.Context()).Err(); err == nil {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("the client did not reach Redis within %v after the fault ended: %v", within, err)
		case <-tick.C:
		}
	}
}

// faultWaitSubscribed waits until at least count connections are subscribed to the unlock channel of
// name.
func faultWaitSubscribed(t *testing.T, client *redis.Client, name string, count int64) {
	t.Helper()
	ch := redisops.ChannelName(name)
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := client.PubSubNumSub(t.Context(), ch).Result()
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB %s: %v", ch, err)
		}
		if n[ch] >= count {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s has %d subscribers after 5s, want %d", ch, n[ch], count)
		case <-tick.C:
		}
	}
}

// TestFaultCrashedHolderFreesLock: a holder that can no longer reach Redis (a crashed or partitioned
// process) stops renewing, so another coordinator gets the lock within about one watchdog timeout, and
// the cut-off holder is told it lost the lock.
func TestFaultCrashedHolderFreesLock(t *testing.T) {
	const timeout = time.Second
	for _, tc := range []struct {
		name         string
		cut, restore func(px *redistest.Proxy)
	}{
		{"stall", (*redistest.Proxy).Stall, (*redistest.Proxy).Unstall},
		{"disable", (*redistest.Proxy).Disable, (*redistest.Proxy).Enable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			srv := redistest.Start(t)
			px, clientA := faultProxiedClient(t, srv)
			cA := newCoordinator(t, clientA, coordinator.WithWatchdogTimeout(timeout))
			clientB := srv.Client(t)
			cB := newCoordinator(t, clientB, coordinator.WithWatchdogTimeout(timeout))
			name := t.Name()

			a, b := cA.Mutex(name), cB.Mutex(name)
			mustLock(t, a)
			doneA := a.Done()
			if ok, err := b.TryLock(ctx); ok || err != nil {
				t.Fatalf("TryLock by B while A holds = %v, %v; want false, nil", ok, err)
			}

			cut := time.Now()
			tc.cut(px)
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			errc := lockAsync(lctx, b)

			if err := semRecv(t, errc, 6*time.Second, "B's Lock"); err != nil {
				t.Fatalf("B Lock after A was cut off: %v", err)
			}
			if got := time.Since(cut); got < timeout/2 || got > 3*timeout {
				t.Fatalf("B got the lock %v after A was cut off; want about the watchdog timeout, %v", got, timeout)
			}
			if fields := semHGetAll(t, clientB, name); !maps.Equal(fields, map[string]string{b.Owner(): "1"}) {
				t.Fatalf("HGETALL after B's Lock = %v, want only B", fields)
			}
			semClosedBy(t, doneA, cut.Add(2*timeout), "A's Done closing within 2s of the cut")

			tc.restore(px)
			faultWaitPing(t, clientA, 3*time.Second)
			if err := a.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
				t.Fatalf("A Unlock after losing the lock = %v, want ErrNotHeld", err)
			}
			if tok := a.Token(); tok != 0 {
				t.Fatalf("A Token after losing the lock = %d, want 0", tok)
			}
			if !semIsHeld(t, b) {
				t.Fatal("A's Unlock took B's lock")
			}
			closed := make(chan struct{})
			go func() { _ = cA.Close(); close(closed) }()
			waitFor(t, closed, time.Second, "A's coordinator Close")
			mustUnlock(t, b)
		})
	}
}

// TestFaultCloseDuringPartition: Close on a coordinator that cannot reach Redis returns within about its
// stop release timeout, and closes the Done channels of its holds.
func TestFaultCloseDuringPartition(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	px, clientA := faultProxiedClient(t, srv)
	cA := newCoordinator(t, clientA, coordinator.WithWatchdogTimeout(5*time.Second),
		coordinator.WithStopReleaseTimeout(500*time.Millisecond))
	client := srv.Client(t)
	name := t.Name()
	a := cA.Mutex(name)
	mustLock(t, a)
	done := a.Done()
	waiter := cA.Mutex(name)
	errc := lockAsync(ctx, waiter)

	px.Stall()
	start := time.Now()
	closed := make(chan struct{})
	go func() { _ = cA.Close(); close(closed) }()
	waitFor(t, closed, 2*time.Second, "Close during a partition")
	t.Logf("Close took %v", time.Since(start))
	waitFor(t, done, time.Second, "the holder's Done closing at Close")
	if err := semRecv(t, errc, time.Second, "the waiter's Lock"); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("waiter Lock at Close = %v, want ErrClosed", err)
	}
	// The release could not reach Redis: the lock stays until its lease runs out.
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{a.Owner(): "1"}) {
		t.Fatalf("HGETALL after Close during a partition = %v, want A's hold still there", fields)
	}
}

// TestFaultRedisRestart: Redis dies with holders and waiters, and comes back empty. Every holder is told
// it lost its lock; every waiter either gets a lock (the keys are gone) or returns by its deadline; and
// no lock is granted to two owners.
func TestFaultRedisRestart(t *testing.T) {
	const (
		timeout = time.Second
		names   = 3
		wait    = 4 * time.Second
	)
	for _, tc := range []struct {
		name   string
		outage time.Duration
	}{{"instant restart", 0}, {"outage longer than the watchdog timeout", 1500 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			srv := redistest.Start(t)
			clientA, clientB := srv.Client(t), srv.Client(t)
			cA := newCoordinator(t, clientA, coordinator.WithWatchdogTimeout(timeout))
			cB := newCoordinator(t, clientB, coordinator.WithWatchdogTimeout(timeout))

			type waiter struct {
				m        *coordinator.Mutex
				deadline time.Time
				result   <-chan faultWin
			}
			var holders []*coordinator.Mutex
			var holderDone []<-chan struct{}
			var waiters [names][]waiter
			for i := range names {
				name := fmt.Sprintf("%s:%d", t.Name(), i)
				h := cA.Mutex(name)
				mustLock(t, h)
				holders = append(holders, h)
				holderDone = append(holderDone, h.Done())
				// One waiter in the holder's coordinator, queued behind it locally, and one in another
				// coordinator, waiting for the unlock notice.
				for _, c := range []*coordinator.Coordinator{cA, cB} {
					m := c.Mutex(name)
					deadline := time.Now().Add(wait)
					wctx, cancel := context.WithDeadline(ctx, deadline)
					t.Cleanup(cancel)
					waiters[i] = append(waiters[i], waiter{m, deadline, faultLockAsync(wctx, m)})
				}
			}
			// Both coordinators subscribe to the unlock channel of a name they wait for.
			for i := range names {
				faultWaitSubscribed(t, clientA, fmt.Sprintf("%s:%d", t.Name(), i), 2)
			}
			for i := range names {
				for j, w := range waiters[i] {
					select {
					case r := <-w.result:
						t.Fatalf("waiter %d/%d returned while the lock was held: %v", i, j, r.err)
					default:
					}
				}
			}

			srv.Kill()
			if tc.outage > 0 {
				down := time.NewTimer(tc.outage)
				<-down.C
			}
			srv.Restart(t)
			restarted := time.Now()

			for i, done := range holderDone {
				semClosedBy(t, done, restarted.Add(2*timeout), fmt.Sprintf("holder %d's Done closing within 2s of the restart", i))
			}

			for i := range names {
				name := fmt.Sprintf("%s:%d", t.Name(), i)
				var got []faultWin
				for j, w := range waiters[i] {
					r := semRecv(t, w.result, time.Until(w.deadline.Add(time.Second)), fmt.Sprintf("waiter %d/%d (deadline + 1s)", i, j))
					switch {
					case r.err == nil:
						got = append(got, r)
					case errors.Is(r.err, coordinator.ErrNotObtained) && errors.Is(r.err, context.DeadlineExceeded):
					default:
						t.Errorf("waiter %d/%d Lock = %v; want nil or ErrNotObtained+DeadlineExceeded", i, j, r.err)
					}
				}
				faultCheckWinners(t, clientA, name, got)
			}
			for i, h := range holders {
				if err := h.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
					t.Errorf("holder %d Unlock after the restart = %v, want ErrNotHeld", i, err)
				}
			}
		})
	}
}

// faultWin is what a waiter's Lock returned, with the token and Done channel of the hold it got.
type faultWin struct {
	m     *coordinator.Mutex
	err   error
	token int64
	done  <-chan struct{}
}

// faultLockAsync runs m.Lock(ctx) on a goroutine and sends its result, with the hold's token and Done
// channel read right after Lock returned.
func faultLockAsync(ctx context.Context, m *coordinator.Mutex) <-chan faultWin {
	ch := make(chan faultWin, 1)
	go func() {
		err := m.Lock(ctx)
		ch <- faultWin{m: m, err: err, token: m.Token(), done: m.Done()}
	}()
	return ch
}

// faultCheckWinners checks the waiters that got the lock name after Redis came back empty: at least one
// did, and they held it one after another. A hold can be lost again after the restart (its renewals
// may fail while go-redis still backs off from the dial errors of the outage), and then another waiter
// may take the lock; so every winner but the last, in token order, must have been told it lost the
// lock (Done closed), and the last either still holds it alone or was told it lost it too.
func faultCheckWinners(t *testing.T, client redis.Cmdable, name string, got []faultWin) {
	t.Helper()
	if len(got) == 0 {
		t.Errorf("%s: no waiter got the lock after the restart, want at least one", name)
		return
	}
	slices.SortFunc(got, func(a, b faultWin) int { return cmp.Compare(a.token, b.token) })
	for i, w := range got[:len(got)-1] {
		if w.token <= 0 || w.token >= got[i+1].token {
			t.Errorf("%s: winner tokens %d then %d, want positive and increasing", name, w.token, got[i+1].token)
		}
		select {
		case <-w.done:
			t.Logf("%s: winner %s (token %d) lost the lock before the next winner took it", name, w.m.Owner(), w.token)
		case <-time.After(200 * time.Millisecond):
			t.Errorf("%s: %s (token %d) still holds while %s (token %d) got the lock too", name,
				w.m.Owner(), w.token, got[i+1].m.Owner(), got[i+1].token)
		}
	}
	last := got[len(got)-1]
	select {
	case <-last.done:
		t.Logf("%s: the last winner %s lost the lock too", name, last.m.Owner())
		return
	default:
	}
	held := semIsHeld(t, last.m)
	fields := semHGetAll(t, client, name)
	if held && maps.Equal(fields, map[string]string{last.m.Owner(): "1"}) {
		return
	}
	select { // it may have lost the lock just now; then Done closes by the end of its lease estimate
	case <-last.done:
		t.Logf("%s: the last winner %s lost the lock too", name, last.m.Owner())
	case <-time.After(200 * time.Millisecond):
		t.Errorf("%s: the last winner %s: IsHeld = %v, HGETALL = %v, want it to hold the lock alone", name,
			last.m.Owner(), held, fields)
	}
}

// faultDefaultProxiedClient returns a client that honours context deadlines (ContextTimeoutEnabled),
// with retries and a 10 s read timeout, and reaches srv through a new proxy.
func faultDefaultProxiedClient(t *testing.T, srv *redistest.Server) (*redistest.Proxy, *redis.Client) {
	t.Helper()
	px := redistest.NewProxy(t, srv.Addr())
	// A ReadTimeout far above the deadlines under test, so that a call blocked until it (the failure the
	// tests look for) is told apart from a slow machine with a wide margin.
	client := redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: true,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = client.Close() })
	t.Cleanup(func() { px.Unstall(); px.Enable() })
	return px, client
}

// TestFaultDoneClosesByLeaseEndWithDefaultClient: Done is how a holder learns it must stop working on
// the protected resource. When its Redis connection stalls, the hold ends in Redis one watchdog timeout
// after the last renewal and another process takes the lock; Done must close by then (give or take),
// whatever the client's timeouts, not when a blocked Redis call finally times out.
func TestFaultDoneClosesByLeaseEnd(t *testing.T) {
	const timeout = time.Second
	srv := redistest.Start(t)
	px, clientA := faultDefaultProxiedClient(t, srv)
	defer px.Unstall() // before the cleanups: lets a blocked call of A's actor finish
	cA := newCoordinator(t, clientA, coordinator.WithWatchdogTimeout(timeout))
	_, cB := semOther(t, srv, coordinator.WithWatchdogTimeout(timeout))
	a, b := cA.Mutex(t.Name()), cB.Mutex(t.Name())
	mustLock(t, a)
	doneA := a.Done()

	cut := time.Now()
	px.Stall()
	lctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := b.Lock(lctx); err != nil {
		t.Fatalf("B Lock after A was cut off: %v", err)
	}
	bGot := time.Since(cut)
	semClosedBy(t, doneA, cut.Add(2*timeout), fmt.Sprintf(
		"B holds the lock since %v after the cut; A's Done closing by %v after it", bGot, 2*timeout))
}

// TestFaultCloseBoundedWithDefaultClient: Close during a partition returns within about
// WithStopReleaseTimeout, as documented, with the default go-redis client options: both when the lock
// actor is idle (Close only has to release the hold) and when it is blocked in a renewal (Close says it
// aborts the Redis calls in flight).
func TestFaultCloseBoundedWithContextTimeouts(t *testing.T) {
	const stopRelease = 500 * time.Millisecond
	for _, tc := range []struct {
		name     string
		watchdog time.Duration
		inFlight bool
	}{{"idle actor", 5 * time.Second, false}, {"renewal in flight", 300 * time.Millisecond, true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			px, clientA := faultDefaultProxiedClient(t, srv)
			defer px.Unstall() // before the cleanups: lets a Close still blocked in a Redis call finish
			cA := newCoordinator(t, clientA, coordinator.WithWatchdogTimeout(tc.watchdog),
				coordinator.WithStopReleaseTimeout(stopRelease))
			a := cA.Mutex(t.Name())
			mustLock(t, a)
			done := a.Done()

			px.Stall()
			if tc.inFlight {
				// Renewals go every 100ms, so once the lease has run out, one has been stuck for a
				// while.
				waitFor(t, done, 2*time.Second, "Done closing once the lease ran out")
			}
			start := time.Now()
			closed := make(chan struct{})
			go func() { _ = cA.Close(); close(closed) }()
			// With ContextTimeoutEnabled, go-redis honours the deadlines of the actors' calls: the
			// releases at stop are bounded by the stop release timeout, and a renewal in flight by
			// the hold's expiry, which has passed here.
			select {
			case <-closed:
			case <-time.After(stopRelease + 5*time.Second):
				t.Fatalf("Close during a partition has not returned %v after it started, with WithStopReleaseTimeout(%v): "+
					"a Redis call of the lock actor is blocked until go-redis' ReadTimeout, since go-redis ignores "+
					"context cancellation, and context deadlines unless ContextTimeoutEnabled",
					time.Since(start), stopRelease)
			}
			waitFor(t, done, time.Second, "the holder's Done closing at Close")
		})
	}
}
