package integration

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// semOther returns a second coordinator on srv, with its own client: another process, as far as
// lockwarden can tell.
func semOther(t *testing.T, srv *redistest.Server, opts ...coordinator.Option) (*redis.Client, *coordinator.Coordinator) {
	t.Helper()
	client := srv.Client(t)
	return client, newCoordinator(t, client, opts...)
}

// semRecv waits for the result of an asynchronous call and fails the test if none arrives in time.
func semRecv[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select { // a result that is already there wins over a deadline that already passed
	case v := <-ch:
		return v
	default:
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, within)
		panic("unreachable")
	}
}

// semClosedBy waits until ch is closed, and fails the test if that has not happened by deadline.
func semClosedBy(t *testing.T, ch <-chan struct{}, deadline time.Time, what string) {
	t.Helper()
	select {
	case <-ch:
		return
	default:
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("%s did not happen by its deadline", what)
	}
}

// semNotClosed fails the test if ch is closed.
func semNotClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s is closed", what)
	default:
	}
}

// semHGetAll returns the fields of the lock hash name.
func semHGetAll(t *testing.T, client redis.Cmdable, name string) map[string]string {
	t.Helper()
	fields, err := client.HGetAll(t.Context(), name).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", name, err)
	}
	return fields
}

func semIsHeld(t *testing.T, m *coordinator.Mutex) bool {
	t.Helper()
	held, err := m.IsHeld(t.Context())
	if err != nil {
		t.Fatalf("IsHeld: %v", err)
	}
	return held
}

func semIsLocked(t *testing.T, m *coordinator.Mutex) bool {
	t.Helper()
	locked, err := m.IsLocked(t.Context())
	if err != nil {
		t.Fatalf("IsLocked: %v", err)
	}
	return locked
}

type semTry struct {
	ok  bool
	err error
}

// semTryAsync starts m.TryLock(ctx, opts...) in a goroutine.
func semTryAsync(ctx context.Context, m *coordinator.Mutex, opts ...coordinator.TryOption) <-chan semTry {
	ch := make(chan semTry, 1)
	go func() {
		ok, err := m.TryLock(ctx, opts...)
		ch <- semTry{ok, err}
	}()
	return ch
}

// TestSemForeignUnlockAndForceUnlock: an owner that does not hold the lock cannot release it and
// leaves it untouched; ForceUnlock frees it whoever holds it, and the holder learns it lost the lock.
func TestSemForeignUnlockAndForceUnlock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote bool
	}{{"same coordinator", false}, {"other coordinator", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			// A short watchdog, so that a holder in another coordinator than the force unlock
			// learns about it from its next renewal.
			srv, client, c := setup(t, coordinator.WithWatchdogTimeout(time.Second))
			fc := c
			if tc.remote {
				_, fc = semOther(t, srv, coordinator.WithWatchdogTimeout(time.Second))
			}
			name := t.Name()
			holder, foreign := c.Mutex(name), fc.Mutex(name)
			mustLock(t, holder)
			done := holder.Done()
			before := semHGetAll(t, client, name)
			if want := map[string]string{holder.Owner(): "1"}; !maps.Equal(before, want) {
				t.Fatalf("HGETALL after Lock = %v, want %v", before, want)
			}

			if err := foreign.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
				t.Fatalf("foreign Unlock = %v, want ErrNotHeld", err)
			}
			if after := semHGetAll(t, client, name); !maps.Equal(before, after) {
				t.Fatalf("foreign Unlock changed the lock: HGETALL %v, then %v", before, after)
			}
			if !semIsLocked(t, foreign) || !semIsHeld(t, holder) || semIsHeld(t, foreign) {
				t.Fatal("after a foreign Unlock: want the lock locked, held by the holder and not by the foreigner")
			}
			semNotClosed(t, done, "the holder's Done after a foreign Unlock")

			deleted, err := foreign.ForceUnlock(ctx)
			if err != nil || !deleted {
				t.Fatalf("ForceUnlock of a held lock = %v, %v; want true, nil", deleted, err)
			}
			if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
				t.Fatalf("EXISTS %s after ForceUnlock = %d, %v; want 0", name, n, err)
			}
			waitFor(t, done, 2*time.Second, "the holder's Done closing after ForceUnlock")
			if err := holder.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
				t.Fatalf("holder Unlock after ForceUnlock = %v, want ErrNotHeld", err)
			}
			if tok := holder.Token(); tok != 0 {
				t.Fatalf("holder Token after ForceUnlock = %d, want 0", tok)
			}
			deleted, err = foreign.ForceUnlock(ctx)
			if err != nil || deleted {
				t.Fatalf("ForceUnlock of a free lock = %v, %v; want false, nil", deleted, err)
			}
			// The lock is usable again.
			if ok, err := foreign.TryLock(ctx); !ok || err != nil {
				t.Fatalf("TryLock after ForceUnlock = %v, %v; want true, nil", ok, err)
			}
			mustUnlock(t, foreign)
		})
	}
}

// TestSemLeaseExpiry: a hold with a fixed lease and no Unlock frees itself after the lease; an owner in
// another coordinator then gets it, and the expired holder sees Done close and Unlock fail.
func TestSemLeaseExpiry(t *testing.T) {
	const lease = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		lock func(ctx context.Context, c *coordinator.Coordinator, name string) (*coordinator.Mutex, error)
	}{
		{"WithLease", func(ctx context.Context, c *coordinator.Coordinator, name string) (*coordinator.Mutex, error) {
			m := c.Mutex(name, coordinator.WithLease(lease))
			return m, m.Lock(ctx)
		}},
		{"TryLock Lease", func(ctx context.Context, c *coordinator.Coordinator, name string) (*coordinator.Mutex, error) {
			m := c.Mutex(name)
			ok, err := m.TryLock(ctx, coordinator.Lease(lease))
			if err == nil && !ok {
				err = errors.New("TryLock on a free lock returned false")
			}
			return m, err
		}},
	} {
		for _, remote := range []bool{true, false} {
			t.Run(tc.name+"/remote="+strconv.FormatBool(remote), func(t *testing.T) {
				semLeaseExpiry(t, lease, remote, tc.lock)
			})
		}
	}
}

// semLeaseExpiry runs TestSemLeaseExpiry with the holder taken by lock and the second owner in another
// coordinator (remote) or the same one.
func semLeaseExpiry(t *testing.T, lease time.Duration, remote bool,
	lock func(ctx context.Context, c *coordinator.Coordinator, name string) (*coordinator.Mutex, error)) {
	ctx := t.Context()
	srv, client, c := setup(t)
	c2 := c
	if remote {
		_, c2 = semOther(t, srv)
	}
	name := t.Name()
	holder, err := lock(ctx, c, name)
	if err != nil {
		t.Fatalf("first acquisition: %v", err)
	}
	acquired := time.Now()
	done := holder.Done()
	if pttl, err := client.PTTL(ctx, name).Result(); err != nil || pttl <= 0 || pttl > lease {
		t.Fatalf("PTTL after acquiring with a %v lease = %v, %v", lease, pttl, err)
	}

	waiter := c2.Mutex(name)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := waiter.Lock(lctx); err != nil {
		t.Fatalf("second owner Lock: %v", err)
	}
	if got := time.Since(acquired); got < lease-100*time.Millisecond || got > 2*time.Second {
		t.Fatalf("second owner got the lock %v after the first acquisition; want about the lease, %v", got, lease)
	}
	waitFor(t, done, time.Second, "the expired holder's Done closing")
	if err := holder.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("expired holder Unlock = %v, want ErrNotHeld", err)
	}
	if tok := holder.Token(); tok != 0 {
		t.Fatalf("expired holder Token = %d, want 0", tok)
	}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{waiter.Owner(): "1"}) {
		t.Fatalf("HGETALL after the expiry and the new Lock = %v, want only %s", fields, waiter.Owner())
	}
	mustUnlock(t, waiter)
}

// TestSemWatchdogKeepsLock: a lock taken without a lease outlives its watchdog timeout several times
// over, because the watchdog renews it.
func TestSemWatchdogKeepsLock(t *testing.T) {
	const timeout = time.Second
	ctx := t.Context()
	srv, client, c := setup(t, coordinator.WithWatchdogTimeout(timeout))
	_, c2 := semOther(t, srv, coordinator.WithWatchdogTimeout(timeout))
	name := t.Name()
	m := c.Mutex(name)
	mustLock(t, m)
	done := m.Done()
	token := m.Token()

	// Holding the lock for a while is the point of the test.
	hold := time.NewTimer(3500 * time.Millisecond)
	defer hold.Stop()
	select {
	case <-done:
		t.Fatal("the lock was lost while the watchdog should have renewed it")
	case <-hold.C:
	}

	if ok, err := c2.Mutex(name).TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock by another coordinator after 3.5 watchdog timeouts = %v, %v; want false, nil", ok, err)
	}
	ttl, err := m.TTL(ctx)
	if err != nil || ttl <= 0 || ttl > timeout {
		t.Fatalf("TTL = %v, %v; want in (0, %v]", ttl, err, timeout)
	}
	if pttl, err := client.PTTL(ctx, name).Result(); err != nil || pttl <= 0 {
		t.Fatalf("PTTL %s = %v, %v; want positive", name, pttl, err)
	}
	if !semIsHeld(t, m) {
		t.Fatal("IsHeld = false after 3.5 watchdog timeouts")
	}
	semNotClosed(t, done, "Done of a renewed lock")
	if got := m.Token(); got != token {
		t.Fatalf("Token changed from %d to %d while the lock was only renewed", token, got)
	}
	mustUnlock(t, m)
	waitFor(t, done, time.Second, "Done closing after Unlock")
}

// TestSemWaiterWokenByNotice: a waiter gets the lock as soon as the holder releases it, through the
// unlock notice or the local handoff, not after the holder's 30 s watchdog lease.
func TestSemWaiterWokenByNotice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote bool
	}{{"other coordinator", true}, {"same coordinator", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, c := setup(t) // default watchdog: 30 s
			wc := c
			if tc.remote {
				_, wc = semOther(t, srv)
			}
			name := t.Name()
			holder, waiter := c.Mutex(name), wc.Mutex(name)
			mustLock(t, holder)

			start := time.Now()
			errc := lockAsync(t.Context(), waiter)
			hold := time.NewTimer(200 * time.Millisecond)
			defer hold.Stop()
			select {
			case err := <-errc:
				t.Fatalf("waiter Lock returned while the lock was held: %v", err)
			case <-hold.C:
			}
			mustUnlock(t, holder)
			if err := semRecv(t, errc, 5*time.Second, "waiter Lock"); err != nil {
				t.Fatalf("waiter Lock: %v", err)
			}
			if got := time.Since(start); got > time.Second {
				t.Fatalf("waiter got the lock %v after it started waiting; the release was at 200ms", got)
			}
			if !semIsHeld(t, waiter) {
				t.Fatal("waiter does not hold the lock after Lock returned nil")
			}
			mustUnlock(t, waiter)
		})
	}
}

// TestSemTryLockWait covers TryLock with and without Wait.
func TestSemTryLockWait(t *testing.T) {
	t.Run("wait runs out", func(t *testing.T) {
		srv, _, c := setup(t)
		_, c2 := semOther(t, srv)
		holder := c2.Mutex(t.Name())
		mustLock(t, holder)
		m := c.Mutex(t.Name())
		start := time.Now()
		ok, err := m.TryLock(t.Context(), coordinator.Wait(300*time.Millisecond))
		elapsed := time.Since(start)
		if ok || err != nil {
			t.Fatalf("TryLock(Wait 300ms) on a held lock = %v, %v; want false, nil", ok, err)
		}
		if elapsed < 280*time.Millisecond || elapsed >= time.Second {
			t.Fatalf("TryLock(Wait 300ms) returned after %v; want about 300ms", elapsed)
		}
		if n := holdCount(t, m); n != 0 {
			t.Fatalf("HoldCount after a failed TryLock = %d", n)
		}
		if !semIsHeld(t, holder) {
			t.Fatal("the holder lost the lock")
		}
	})

	t.Run("released during wait", func(t *testing.T) {
		for _, remote := range []bool{true, false} {
			t.Run("remote="+strconv.FormatBool(remote), func(t *testing.T) {
				srv, _, c := setup(t)
				hc := c
				if remote {
					_, hc = semOther(t, srv)
				}
				holder := hc.Mutex(t.Name())
				mustLock(t, holder)
				m := c.Mutex(t.Name())
				start := time.Now()
				res := semTryAsync(t.Context(), m, coordinator.Wait(2*time.Second))
				hold := time.NewTimer(100 * time.Millisecond)
				defer hold.Stop()
				select {
				case r := <-res:
					t.Fatalf("TryLock returned while the lock was held: %v, %v", r.ok, r.err)
				case <-hold.C:
				}
				mustUnlock(t, holder)
				r := semRecv(t, res, 5*time.Second, "TryLock(Wait 2s)")
				if !r.ok || r.err != nil {
					t.Fatalf("TryLock(Wait 2s) with a release at 100ms = %v, %v; want true, nil", r.ok, r.err)
				}
				if got := time.Since(start); got >= time.Second {
					t.Fatalf("TryLock got the lock %v after it started; the release was at 100ms", got)
				}
				if !semIsHeld(t, m) {
					t.Fatal("TryLock returned true but IsHeld is false")
				}
				mustUnlock(t, m)
			})
		}
	})

	t.Run("no wait", func(t *testing.T) {
		for _, remote := range []bool{true, false} {
			t.Run("remote="+strconv.FormatBool(remote), func(t *testing.T) {
				srv, _, c := setup(t)
				hc := c
				if remote {
					_, hc = semOther(t, srv)
				}
				holder := hc.Mutex(t.Name())
				mustLock(t, holder)
				m := c.Mutex(t.Name())
				start := time.Now()
				ok, err := m.TryLock(t.Context())
				if elapsed := time.Since(start); elapsed > 250*time.Millisecond {
					t.Fatalf("TryLock without Wait took %v; want an immediate answer", elapsed)
				}
				if ok || err != nil {
					t.Fatalf("TryLock without Wait on a held lock = %v, %v; want false, nil", ok, err)
				}
				if n := holdCount(t, m); n != 0 {
					t.Fatalf("HoldCount after a failed TryLock = %d", n)
				}
			})
		}
	})

	t.Run("parent cancelled", func(t *testing.T) {
		srv, _, c := setup(t)
		_, c2 := semOther(t, srv)
		holder := c2.Mutex(t.Name())
		mustLock(t, holder)
		m := c.Mutex(t.Name())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		res := semTryAsync(ctx, m, coordinator.Wait(5*time.Second))
		hold := time.NewTimer(100 * time.Millisecond)
		defer hold.Stop()
		select {
		case r := <-res:
			t.Fatalf("TryLock returned while the lock was held: %v, %v", r.ok, r.err)
		case <-hold.C:
		}
		cancel()
		cancelled := time.Now()
		r := semRecv(t, res, 5*time.Second, "TryLock after its ctx was cancelled")
		if got := time.Since(cancelled); got > 500*time.Millisecond {
			t.Fatalf("TryLock returned %v after its ctx was cancelled", got)
		}
		if r.ok || !errors.Is(r.err, coordinator.ErrNotObtained) || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("TryLock with a cancelled parent ctx = %v, %v; want false and ErrNotObtained+context.Canceled", r.ok, r.err)
		}
		if n := holdCount(t, m); n != 0 {
			t.Fatalf("HoldCount after a cancelled TryLock = %d", n)
		}
	})
}

// TestSemLockContextTimeout: Lock whose ctx ends while it waits fails with ErrNotObtained and the ctx's
// error, and leaves nothing held, even when the ctx ends just as the lock is released.
func TestSemLockContextTimeout(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		srv, _, c := setup(t)
		_, c2 := semOther(t, srv)
		holder := c2.Mutex(t.Name())
		mustLock(t, holder)
		m := c.Mutex(t.Name())
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := m.Lock(ctx)
		elapsed := time.Since(start)
		if !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with a timed-out ctx = %v; want ErrNotObtained and context.DeadlineExceeded", err)
		}
		if elapsed < 180*time.Millisecond || elapsed > time.Second {
			t.Fatalf("Lock with a 200ms ctx returned after %v", elapsed)
		}
		if n := holdCount(t, m); n != 0 {
			t.Fatalf("HoldCount after a timed-out Lock = %d, want 0", n)
		}
		if !semIsHeld(t, holder) {
			t.Fatal("the holder lost the lock")
		}
	})

	// The waiter's deadline and the holder's release coincide, give or take a few milliseconds either
	// way. Whatever the interleaving, the lock must end up held by the waiter with Lock returning nil,
	// or not held by it at all.
	for _, tc := range []struct {
		name   string
		remote bool
	}{{"race same coordinator", false}, {"race other coordinator", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, c := setup(t)
			wc := c
			if tc.remote {
				_, wc = semOther(t, srv)
			}
			_, c3 := semOther(t, srv)
			var won, lost, transient int
			for i := range 50 {
				name := t.Name() + ":" + strconv.Itoa(i)
				holder, waiter, third := c.Mutex(name), wc.Mutex(name), c3.Mutex(name)
				mustLock(t, holder)
				deadline := time.Now().Add(20 * time.Millisecond)
				ctx, cancel := context.WithDeadline(t.Context(), deadline)
				errc := lockAsync(ctx, waiter)
				// Sweep the release from 5ms before to 5ms after the waiter's deadline.
				offset := time.Duration(i%11-5) * time.Millisecond
				release := time.NewTimer(time.Until(deadline.Add(offset)))
				<-release.C
				mustUnlock(t, holder)
				lockErr := semRecv(t, errc, 5*time.Second, "waiter Lock")
				cancel()
				if err := lockErr; err == nil {
					won++
					if !semIsHeld(t, waiter) {
						t.Fatalf("iteration %d: Lock returned nil but the waiter does not hold the lock", i)
					}
					mustUnlock(t, waiter)
				} else {
					lost++
					if !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("iteration %d: waiter Lock = %v; want nil or ErrNotObtained+DeadlineExceeded", i, err)
					}
					// An acquisition that completed as the ctx ended is undone by the lock actor
					// right after Lock returned (Lock never waits past its ctx for it), so the waiter
					// may still show as holder for about one round trip; the checks below prove that
					// the undo happens and that the lock does not stay held.
					if semIsHeld(t, waiter) {
						transient++
					}
				}
				// The lock is free, or about to be: a third owner gets it without waiting for a lease.
				ok, err := third.TryLock(t.Context(), coordinator.Wait(2*time.Second))
				if !ok || err != nil {
					t.Fatalf("iteration %d: third owner TryLock(Wait 2s) = %v, %v; the lock stayed held (waiter Lock: %v)", i, ok, err, lockErr)
				}
				if n := holdCount(t, waiter); n != 0 {
					t.Fatalf("iteration %d: waiter HoldCount = %d after the third owner got the lock", i, n)
				}
				mustUnlock(t, third)
				if semIsLocked(t, third) {
					t.Fatalf("iteration %d: lock still locked after every owner released it", i)
				}
			}
			t.Logf("waiter won %d, lost %d (%d transiently held after a failed Lock)", won, lost, transient)
		})
	}
}

// TestSemLockTimeoutDuringAcquire makes the race of TestSemLockContextTimeout deterministic with network
// latency: the waiter's ctx ends while its acquire script, already run by Redis, is on its way back.
// Lock then fails, and the waiter must not hold the lock once Lock has returned.
func TestSemLockTimeoutDuringAcquire(t *testing.T) {
	const latency = 25 * time.Millisecond // each way, so a round trip takes 50ms
	srv := redistest.Start(t)
	client := srv.Client(t)
	px := redistest.NewProxy(t, srv.Addr())
	px.AddLatency(latency)
	slow := redis.NewClient(&redis.Options{Addr: px.Addr()})
	t.Cleanup(func() { _ = slow.Close() })
	cw := newCoordinator(t, slow)
	ch := newCoordinator(t, client)

	for i := range 5 {
		name := t.Name() + ":" + strconv.Itoa(i)
		holder, waiter := ch.Mutex(name), cw.Mutex(name)
		mustLock(t, holder)
		deadline := time.Now().Add(400 * time.Millisecond)
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		errc := lockAsync(ctx, waiter)
		faultWaitSubscribed(t, client, name, 1)

		// The notice reaches the waiter 25ms after the release, its acquire reaches Redis 25ms later,
		// 10ms before the deadline, and the answer would arrive 15ms after it.
		release := time.NewTimer(time.Until(deadline.Add(-2*latency - 10*time.Millisecond)))
		<-release.C
		mustUnlock(t, holder)
		lockErr := semRecv(t, errc, 5*time.Second, "waiter Lock")
		cancel()
		fields := semHGetAll(t, client, name) // through the direct client: no latency
		if lockErr == nil {
			t.Logf("iteration %d: Lock returned nil", i)
			if fields[waiter.Owner()] != "1" {
				t.Fatalf("iteration %d: Lock returned nil, but HGETALL = %v", i, fields)
			}
			mustUnlock(t, waiter)
			continue
		}
		if !errors.Is(lockErr, coordinator.ErrNotObtained) || !errors.Is(lockErr, context.DeadlineExceeded) {
			t.Fatalf("iteration %d: waiter Lock = %v; want nil or ErrNotObtained+DeadlineExceeded", i, lockErr)
		}
		if _, held := fields[waiter.Owner()]; held {
			// Lock does not wait past its ctx for the undo: the lock actor releases the
			// acquisition made for the abandoned call right after Lock returned.
			t.Logf("iteration %d: the undo of the abandoned acquisition is still in flight: HGETALL = %v", i, fields)
		}
		// Whatever happened, the lock is freed promptly, not after the 30s lease, and the waiter
		// holds nothing once a third owner has it.
		third := ch.Mutex(name)
		if ok, err := third.TryLock(t.Context(), coordinator.Wait(2*time.Second)); !ok || err != nil {
			t.Fatalf("iteration %d: third owner TryLock(Wait 2s) = %v, %v", i, ok, err)
		}
		if fields := semHGetAll(t, client, name); len(fields) != 1 || fields[third.Owner()] != "1" {
			t.Fatalf("iteration %d: after the third owner's acquisition HGETALL = %v; want only the third owner", i, fields)
		}
		mustUnlock(t, third)
	}
}

// TestSemRedisLayout checks the Redis layout shared with Redisson: the lock hash, the token counter, and
// the unlock notice.
func TestSemRedisLayout(t *testing.T) {
	ctx := t.Context()
	_, client, c := setup(t)
	name := t.Name()
	tokenKey := "redisson_lock_token:{" + name + "}"
	channel := "redisson_lock__channel:{" + name + "}"
	if tokenKey != redisops.TokenKey(name) || channel != redisops.ChannelName(name) {
		t.Fatalf("key names: %s, %s; redisops says %s, %s", tokenKey, channel, redisops.TokenKey(name), redisops.ChannelName(name))
	}

	sub := client.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.ReceiveTimeout(ctx, 2*time.Second); err != nil { // the subscription confirmation
		t.Fatalf("subscribing to %s: %v", channel, err)
	}
	// expectNoMessage checks that nothing was published on the channel for a short while.
	expectNoMessage := func(when string) {
		t.Helper()
		if msg, err := sub.ReceiveTimeout(ctx, 150*time.Millisecond); err == nil {
			t.Fatalf("%s: unexpected message on %s: %#v", when, channel, msg)
		}
	}
	// counter is the token counter's value less one: the default, expiring counter holds the value
	// above the last token issued, kept for a local handoff (see redisops.Ops.SetTokenExpiry).
	counter := func() int64 {
		t.Helper()
		n, err := client.Get(ctx, tokenKey).Int64()
		if err != nil {
			t.Fatalf("GET %s: %v", tokenKey, err)
		}
		return n - 1
	}

	m := c.Mutex(name)
	if tok := m.Token(); tok != 0 {
		t.Fatalf("Token before any Lock = %d", tok)
	}
	mustLock(t, m)
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{m.Owner(): "1"}) {
		t.Fatalf("HGETALL after Lock = %v, want {%s: 1}", fields, m.Owner())
	}
	if typ, _ := client.Type(ctx, name).Result(); typ != "hash" {
		t.Fatalf("TYPE %s = %q, want hash", name, typ)
	}
	if pttl, err := client.PTTL(ctx, name).Result(); err != nil || pttl <= 0 || pttl > coordinator.DefaultWatchdogTimeout {
		t.Fatalf("PTTL after Lock = %v, %v; want in (0, %v]", pttl, err, coordinator.DefaultWatchdogTimeout)
	}
	tok1 := m.Token()
	if c1 := counter(); tok1 <= 0 || c1 != tok1 {
		t.Fatalf("after the first Lock: Token %d, %s = %d; want equal (less one) and positive", tok1, tokenKey, c1)
	}

	// A re-entry is an acquisition too.
	mustLock(t, m)
	tok2 := m.Token()
	if c2 := counter(); tok2 <= tok1 || c2 != tok2 {
		t.Fatalf("after the re-entry: Token %d, %s = %d; want both the same, above %d", tok2, tokenKey, c2, tok1)
	}
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{m.Owner(): "2"}) {
		t.Fatalf("HGETALL after the re-entry = %v, want {%s: 2}", fields, m.Owner())
	}
	mustUnlock(t, m)
	expectNoMessage("after a partial unlock")
	if fields := semHGetAll(t, client, name); !maps.Equal(fields, map[string]string{m.Owner(): "1"}) {
		t.Fatalf("HGETALL after a partial unlock = %v, want {%s: 1}", fields, m.Owner())
	}
	if tok := m.Token(); tok != tok2 {
		t.Fatalf("Token after a partial unlock = %d, want %d", tok, tok2)
	}

	mustUnlock(t, m)
	msg, err := sub.ReceiveTimeout(ctx, 2*time.Second)
	if err != nil {
		t.Fatalf("no unlock notice on %s after the full unlock: %v", channel, err)
	}
	if pm, ok := msg.(*redis.Message); !ok || pm.Channel != channel || pm.Payload != "0" {
		t.Fatalf("unlock notice = %#v; want the message \"0\" on %s", msg, channel)
	}
	expectNoMessage("after the unlock notice")
	if n, err := client.Exists(ctx, name).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after the full unlock = %d, %v", name, n, err)
	}
	if tok := m.Token(); tok != 0 {
		t.Fatalf("Token after the release = %d, want 0", tok)
	}
	// The release of the last hold raises the counter by one: it marks the release done, so that a
	// retry of it answers "released" (redisops.Ops.ReleaseHeldFenced). No token is issued.
	if c3 := counter(); c3 != tok2+1 {
		t.Fatalf("%s after the release = %d (less one), want %d: one above", tokenKey, c3, tok2+1)
	}

	// Tokens keep increasing across acquisitions, by this handle and by others.
	last := tok2
	for i, h := range []*coordinator.Mutex{m, c.Mutex(name), m} {
		mustLock(t, h)
		tok := h.Token()
		if tok <= last || counter() != tok {
			t.Fatalf("acquisition %d: Token %d, counter %d; want > %d and equal", i, tok, counter(), last)
		}
		last = tok
		mustUnlock(t, h)
		if h.Token() != 0 {
			t.Fatalf("acquisition %d: Token after release = %d, want 0", i, h.Token())
		}
	}
}
