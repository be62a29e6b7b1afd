package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// leakEventually polls cond every few milliseconds until it reports true, and fails the test if it has
// not within the deadline or if it returns an error.
func leakEventually(t *testing.T, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s did not happen within %v", what, within)
		case <-tick.C:
		}
	}
}

// leakWaitSubscribed waits until count connections are subscribed to the unlock channel of name.
func leakWaitSubscribed(t *testing.T, client redis.Cmdable, name string, count int64) {
	t.Helper()
	ch := redisops.ChannelName(name)
	leakEventually(t, 5*time.Second, "subscription to "+ch, func() (bool, error) {
		n, err := client.PubSubNumSub(t.Context(), ch).Result()
		return n[ch] == count, err
	})
}

// leakWaitRenewal waits until the watchdog renews the lock name: its PTTL goes up.
func leakWaitRenewal(t *testing.T, client redis.Cmdable, name string) {
	t.Helper()
	last := time.Duration(-1)
	leakEventually(t, 5*time.Second, "a watchdog renewal of "+name, func() (bool, error) {
		ttl, err := client.PTTL(t.Context(), name).Result()
		if err != nil || ttl <= 0 {
			return false, err
		}
		renewed := last > 0 && ttl > last
		last = ttl
		return renewed, nil
	})
}

// leakExpectBlocked checks that none of the Lock calls returned within a short window.
func leakExpectBlocked(t *testing.T, errcs []<-chan error) {
	t.Helper()
	window := time.After(100 * time.Millisecond)
	for i, errc := range errcs {
		select {
		case err := <-errc:
			t.Fatalf("waiter %d returned while the lock was held: %v", i, err)
		case <-window:
			return
		}
	}
}

// TestCloseLeavesNoGoroutines: a coordinator that did real work (locks with waiters, the watchdog,
// pub/sub subscriptions, handoffs, an idle actor stopping) leaves no goroutine behind once Close returns
// and its go-redis client is closed. Not parallel: goleak compares against the goroutines at its start.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	srv := redistest.Start(t) // its process-watching goroutines live until the test's cleanup
	ignore := goleak.IgnoreCurrent()

	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() }) // in case the test fails before closing it itself
	// Renewals every 500ms: often enough to see one, and rare enough that no renewal tick is in flight
	// when the watchdog is cancelled below (see TestConcurrentWatchdogStartStop for why that matters).
	c, err := coordinator.New(client,
		coordinator.WithWatchdogTimeout(1500*time.Millisecond),
		coordinator.WithIdleTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	name := "lockwarden:leak:" + t.Name()
	holder := c.Mutex(name)
	mustLock(t, holder)
	// Waiters queue in the actor, which subscribes to the unlock channel.
	type got struct {
		i   int
		err error
	}
	waiters := make([]*coordinator.Mutex, 4)
	gotc := make(chan got, len(waiters))
	for i := range waiters {
		waiters[i] = c.Mutex(name)
		go func() { gotc <- got{i, waiters[i].Lock(ctx)} }()
	}
	leakWaitSubscribed(t, client, name, 1)
	select {
	case g := <-gotc:
		t.Fatalf("waiter %d returned while the lock was held: %v", g.i, g.err)
	case <-time.After(100 * time.Millisecond):
	}
	leakWaitRenewal(t, client, name)

	// Pass the lock along the queue: each waiter gets it in turn, by handoff, and releases it.
	mustUnlock(t, holder)
	for range waiters {
		select {
		case g := <-gotc:
			if g.err != nil {
				t.Fatalf("waiter %d: Lock: %v", g.i, g.err)
			}
			mustUnlock(t, waiters[g.i])
		case <-time.After(5 * time.Second):
			t.Fatal("a waiter did not get the lock within 5s of the previous release")
		}
	}

	// A name that is locked and released, so that its actor goes idle and stops on its own.
	idleName := name + ":idle"
	idle := c.Mutex(idleName)
	mustLock(t, idle)
	mustUnlock(t, idle)

	// At Close: one watchdog hold with its watchdog armed, one leased re-entrant hold, and waiters.
	mustLock(t, holder)
	leased := c.Mutex(name+":leased", coordinator.WithLease(time.Minute))
	mustLock(t, leased)
	mustLock(t, leased)
	blocked := []<-chan error{lockAsync(ctx, c.Mutex(name)), lockAsync(ctx, c.Mutex(name))}
	leakExpectBlocked(t, blocked)
	leakWaitSubscribed(t, client, name, 1)

	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(start))
	for i, errc := range blocked {
		select {
		case err := <-errc:
			if !errors.Is(err, coordinator.ErrClosed) {
				t.Fatalf("blocked waiter %d: Lock = %v, want ErrClosed", i, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("blocked waiter %d did not return after Close", i)
		}
	}
	if err := client.Close(); err != nil {
		t.Fatalf("closing the client: %v", err)
	}
	goleak.VerifyNone(t, ignore)
}

// TestCloseWithBlockedWaiters: Close with Lock calls blocked returns promptly, the blocked calls return
// ErrClosed, the locks held through the coordinator are released in Redis (their keys are gone, and a
// waiter of another coordinator gets the lock at once rather than after a lease), their Done channels
// close, and every later call returns ErrClosed.
func TestCloseWithBlockedWaiters(t *testing.T) {
	srv, client, c := setup(t)
	other := newCoordinator(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	base := "lockwarden:close:" + t.Name()
	watched := c.Mutex(base + ":watchdog") // held without a lease: the watchdog renews it
	leased := c.Mutex(base+":leased", coordinator.WithLease(time.Minute))
	reentered := c.Mutex(base + ":reentered")
	mustLock(t, watched)
	mustLock(t, leased)
	mustLock(t, reentered)
	mustLock(t, reentered)
	done := map[string]<-chan struct{}{
		watched.Name(): watched.Done(), leased.Name(): leased.Done(), reentered.Name(): reentered.Done(),
	}

	var blocked []<-chan error
	for range 6 {
		blocked = append(blocked, lockAsync(ctx, c.Mutex(watched.Name())))
	}
	for range 2 {
		blocked = append(blocked, lockAsync(ctx, c.Mutex(leased.Name())))
	}
	// A waiter in another coordinator, woken by the unlock notice of the release at Close.
	outsider := other.Mutex(reentered.Name())
	outsiderErr := lockAsync(ctx, outsider)
	// Each coordinator's bridge subscribes once per channel.
	leakWaitSubscribed(t, client, watched.Name(), 1)
	leakWaitSubscribed(t, client, leased.Name(), 1)
	leakWaitSubscribed(t, client, reentered.Name(), 1)
	leakExpectBlocked(t, append(blocked[:len(blocked):len(blocked)], outsiderErr))

	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closeTook := time.Since(start)
	if closeTook > 3*time.Second {
		t.Errorf("Close took %v, want < 3s", closeTook)
	}
	deadline := time.NewTimer(3*time.Second - closeTook)
	defer deadline.Stop()
	for i, errc := range blocked {
		select {
		case err := <-errc:
			if !errors.Is(err, coordinator.ErrClosed) {
				t.Errorf("blocked waiter %d: Lock = %v, want an error matching ErrClosed", i, err)
			}
		case <-deadline.C:
			select {
			case err := <-errc:
				if !errors.Is(err, coordinator.ErrClosed) {
					t.Errorf("blocked waiter %d: Lock = %v, want an error matching ErrClosed", i, err)
				}
			default:
				t.Fatalf("blocked waiter %d still blocked %v after Close started", i, time.Since(start))
			}
		}
	}
	t.Logf("Close took %v; every waiter returned within %v", closeTook, time.Since(start))

	// The held locks were released by Close, not left to expire.
	for _, name := range []string{watched.Name(), leased.Name()} {
		n, err := client.Exists(t.Context(), name).Result()
		if err != nil || n != 0 {
			ttl, _ := client.PTTL(t.Context(), name).Result()
			t.Errorf("lock %s still in Redis after Close (EXISTS = %d, %v; PTTL %v)", name, n, err, ttl)
		}
	}
	select {
	case err := <-outsiderErr:
		if err != nil {
			t.Fatalf("waiter of the other coordinator: Lock: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("waiter of the other coordinator did not get %s within 3s of Close", reentered.Name())
	}
	fields, err := client.HGetAll(t.Context(), reentered.Name()).Result()
	if err != nil || len(fields) != 1 || fields[outsider.Owner()] != "1" {
		t.Errorf("HGETALL %s = %v, %v; want only {%s: 1} (the closed coordinator's two holds released)",
			reentered.Name(), fields, err, outsider.Owner())
	}
	mustUnlock(t, outsider)

	for name, ch := range done {
		select {
		case <-ch:
		default:
			t.Errorf("Done of %s not closed after Close", name)
		}
	}

	// Every later call returns ErrClosed.
	if err := watched.Unlock(ctx); !errors.Is(err, coordinator.ErrClosed) {
		t.Errorf("Unlock after Close = %v, want ErrClosed", err)
	}
	if err := c.Mutex(watched.Name()).Lock(ctx); !errors.Is(err, coordinator.ErrClosed) {
		t.Errorf("Lock after Close = %v, want ErrClosed", err)
	}
	if ok, err := c.Mutex(watched.Name()).TryLock(ctx); ok || !errors.Is(err, coordinator.ErrClosed) {
		t.Errorf("TryLock after Close = %v, %v; want false, ErrClosed", ok, err)
	}
	if _, err := reentered.HoldCount(ctx); !errors.Is(err, coordinator.ErrClosed) {
		t.Errorf("HoldCount after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}
