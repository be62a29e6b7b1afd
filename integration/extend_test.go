package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// extendLease is the fixed lease the holds of the Extend tests are taken with, and extendTo the lease
// they are extended to.
const (
	extendLease = 300 * time.Millisecond
	extendTo    = 10 * time.Second
)

// extendCase is one kind of hold with a fixed lease: lock takes it on a new handle of c, and side
// returns the handle's side that holds it; keys are the Redis keys whose PTTL follows the hold's
// lease.
type extendCase struct {
	name string
	lock func(t *testing.T, c *coordinator.Coordinator, name string) *coordinator.Mutex
	// keys returns the keys whose PTTL is the hold's lease (the lock hash, and a read hold's own key).
	keys func(name string, m *coordinator.Mutex) []string
	// other returns a handle of another owner that the hold keeps out.
	other func(c *coordinator.Coordinator, name string) func(ctx context.Context) (bool, error)
}

func extendCases() []extendCase {
	hash := func(name string, _ *coordinator.Mutex) []string { return []string{name} }
	tryLock := func(c *coordinator.Coordinator, name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			m := c.Mutex(name)
			ok, err := m.TryLock(ctx)
			if ok {
				_ = m.Unlock(ctx)
			}
			return ok, err
		}
	}
	tryWrite := func(c *coordinator.Coordinator, name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			rw := c.RWMutex(name)
			ok, err := rw.TryLock(ctx)
			if ok {
				_ = rw.Unlock(ctx)
			}
			return ok, err
		}
	}
	return []extendCase{
		{"plain WithLease", func(t *testing.T, c *coordinator.Coordinator, name string) *coordinator.Mutex {
			m := c.Mutex(name, coordinator.WithLease(extendLease))
			mustLock(t, m)
			return m
		}, hash, tryLock},
		{"plain TryLock Lease", func(t *testing.T, c *coordinator.Coordinator, name string) *coordinator.Mutex {
			m := c.Mutex(name)
			if ok, err := m.TryLock(t.Context(), coordinator.Lease(extendLease)); !ok || err != nil {
				t.Fatalf("TryLock(Lease) = %v, %v", ok, err)
			}
			return m
		}, hash, tryLock},
		{"fair", func(t *testing.T, c *coordinator.Coordinator, name string) *coordinator.Mutex {
			m := c.FairMutex(name, coordinator.WithLease(extendLease))
			mustLock(t, m)
			return m
		}, hash, tryLock},
		{"write", func(t *testing.T, c *coordinator.Coordinator, name string) *coordinator.Mutex {
			rw := c.RWMutex(name, coordinator.WithLease(extendLease))
			if err := rw.Lock(t.Context()); err != nil {
				t.Fatalf("write Lock: %v", err)
			}
			return rw.Write()
		}, hash, tryWrite},
		{"read", func(t *testing.T, c *coordinator.Coordinator, name string) *coordinator.Mutex {
			rw := c.RWMutex(name, coordinator.WithLease(extendLease))
			// Two read holds: each has its own key, and Extend sets the lease of both.
			for range 2 {
				if err := rw.RLock(t.Context()); err != nil {
					t.Fatalf("RLock: %v", err)
				}
			}
			return rw.Read()
		}, func(name string, m *coordinator.Mutex) []string {
			return []string{name, redisops.ReadTimeoutKey(name, m.Owner(), 1), redisops.ReadTimeoutKey(name, m.Owner(), 2)}
		}, tryWrite},
	}
}

// extendPTTLs returns the PTTL of each of keys.
func extendPTTLs(t *testing.T, client redis.Cmdable, keys []string) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(keys))
	for i, k := range keys {
		d, err := client.PTTL(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		out[i] = d
	}
	return out
}

// TestExtendLeasedHold: a hold taken with a 300 ms lease and extended to 10 s is still held past the
// 300 ms, in Redis (PTTL follows the new lease) and for its holder (Done stays open, another owner is
// kept out), for every kind of lock; the extension is published as a renewal.
func TestExtendLeasedHold(t *testing.T) {
	for _, tc := range extendCases() {
		t.Run(tc.name, func(t *testing.T) {
			srv, client, c := setup(t)
			_, other := semOther(t, srv)
			name := t.Name()
			sub := c.Subscribe(coordinator.OfType(messages.EventRenewed), 8)
			defer sub.Close()
			taken := time.Now()
			m := tc.lock(t, c, name)
			done := m.Done()
			keys := tc.keys(name, m)
			for i, d := range extendPTTLs(t, client, keys) {
				if d <= 0 || d > extendLease {
					t.Fatalf("PTTL %s after taking a %v lease = %v", keys[i], extendLease, d)
				}
			}
			extended := time.Now()
			if err := m.Extend(t.Context(), extendTo); err != nil {
				t.Fatalf("Extend(%v) = %v", extendTo, err)
			}
			for i, d := range extendPTTLs(t, client, keys) {
				if d <= extendTo-time.Since(extended)-time.Second || d > extendTo {
					t.Fatalf("PTTL %s after Extend(%v) = %v", keys[i], extendTo, d)
				}
			}
			ev := semRecv(t, sub.Events(), 5*time.Second, "the renewed event of the extension")
			if ev.Name != name || ev.Owner != m.Owner() || ev.Reason != messages.RenewExtended {
				t.Fatalf("event %+v, want renewed of %s by %s, Reason %q", ev, name, m.Owner(), messages.RenewExtended)
			}

			// Past the former deadline (plus a margin for Redis' own expiry cycle), the hold is
			// still there.
			past := time.NewTimer(time.Until(taken.Add(extendLease + 200*time.Millisecond)))
			defer past.Stop()
			select {
			case <-done:
				t.Fatalf("Done closed %v after the hold was taken, with its lease extended to %v", time.Since(taken), extendTo)
			case <-past.C:
			}
			if !semIsHeld(t, m) {
				t.Fatal("IsHeld = false past the former lease")
			}
			for i, d := range extendPTTLs(t, client, keys) {
				if d <= extendTo-time.Since(extended)-time.Second {
					t.Fatalf("PTTL %s past the former lease = %v, want about %v", keys[i], d, extendTo-time.Since(extended))
				}
			}
			if ok, err := tc.other(other, name)(t.Context()); ok || err != nil {
				t.Fatalf("another owner's TryLock past the former lease = %v, %v; want false, nil", ok, err)
			}
			semNotClosed(t, done, "the extended hold's Done")
			for range holdCount(t, m) {
				mustUnlock(t, m)
			}
			doKeyGone(t, client, name, "after the last Unlock")
		})
	}
}

// TestExtendShorter: a lease extended to a shorter one ends sooner: Done closes by the new deadline,
// and Redis drops the hold then.
func TestExtendShorter(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	m := c.Mutex(name, coordinator.WithLease(extendTo))
	mustLock(t, m)
	done := m.Done()
	extended := time.Now()
	if err := m.Extend(t.Context(), extendLease); err != nil {
		t.Fatalf("Extend(%v) = %v", extendLease, err)
	}
	if d := client.PTTL(t.Context(), name).Val(); d <= 0 || d > extendLease {
		t.Fatalf("PTTL after Extend(%v) = %v", extendLease, d)
	}
	semClosedBy(t, done, extended.Add(extendLease+500*time.Millisecond), "Done at the shorter lease's end")
	if err := m.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock after the shorter lease ran out = %v, want ErrNotHeld", err)
	}
	doKeyGone(t, client, name, "after the shorter lease ran out")
}

// TestExtendNotHeld: Extend returns ErrNotHeld for a handle that never held the lock, after its lease
// ran out, after a force unlock and after its Unlock, and changes nothing in Redis.
func TestExtendNotHeld(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	m := c.Mutex(name, coordinator.WithLease(extendLease))
	if err := m.Extend(t.Context(), extendTo); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Extend of a lock never held = %v, want ErrNotHeld", err)
	}

	// Another owner's hold is not this owner's.
	holder := c.Mutex(name, coordinator.WithLease(extendTo))
	mustLock(t, holder)
	if err := m.Extend(t.Context(), extendLease); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Extend of a lock another owner holds = %v, want ErrNotHeld", err)
	}
	if d := client.PTTL(t.Context(), name).Val(); d <= extendTo-time.Second {
		t.Fatalf("PTTL of the other owner's hold after a foreign Extend = %v, want about %v", d, extendTo)
	}
	mustUnlock(t, holder)

	// The lease ran out.
	mustLock(t, m)
	waitFor(t, m.Done(), extendLease+time.Second, "Done at the end of the lease")
	if err := m.Extend(t.Context(), extendTo); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Extend after the lease ran out = %v, want ErrNotHeld", err)
	}
	// Done closes a drift allowance before Redis drops the key: what is left of the hold must not
	// have been extended.
	if d := client.PTTL(t.Context(), name).Val(); d > 50*time.Millisecond {
		t.Fatalf("PTTL after an Extend of a hold whose lease ran out = %v, want the hold gone or about to go", d)
	}

	// Force-unlocked.
	mustLock(t, m)
	if ok, err := c.Mutex(name).ForceUnlock(t.Context()); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	if err := m.Extend(t.Context(), extendTo); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Extend after a force unlock = %v, want ErrNotHeld", err)
	}
	doKeyGone(t, client, name, "after an Extend of a force-unlocked hold")

	// Released.
	mustLock(t, m)
	mustUnlock(t, m)
	if err := m.Extend(t.Context(), extendTo); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Extend after Unlock = %v, want ErrNotHeld", err)
	}
	doKeyGone(t, client, name, "after an Extend of a released hold")
}

// TestExtendInvalidLease: a lease below MinLease or above MaxDuration is refused with ErrInvalidLease,
// and the hold keeps its lease.
func TestExtendInvalidLease(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	m := c.Mutex(name, coordinator.WithLease(extendTo))
	mustLock(t, m)
	for _, d := range []time.Duration{0, -time.Second, coordinator.MinLease - 1, coordinator.MaxDuration + 1} {
		if err := m.Extend(t.Context(), d); !errors.Is(err, coordinator.ErrInvalidLease) {
			t.Fatalf("Extend(%v) = %v, want ErrInvalidLease", d, err)
		}
	}
	if d := client.PTTL(t.Context(), name).Val(); d <= extendTo-time.Second {
		t.Fatalf("PTTL after refused Extends = %v, want about %v", d, extendTo)
	}
	semNotClosed(t, m.Done(), "Done after refused Extends")
	mustUnlock(t, m)
}

// TestExtendWatchdogHold: a hold that the watchdog renews is not extended: ErrWatchdogHold, and the
// watchdog goes on renewing it.
func TestExtendWatchdogHold(t *testing.T) {
	const watchdog = time.Second
	_, client, c := setup(t, coordinator.WithWatchdogTimeout(watchdog))
	name := t.Name()
	m := c.Mutex(name)
	mustLock(t, m)
	done := m.Done()
	if err := m.Extend(t.Context(), extendTo); !errors.Is(err, coordinator.ErrWatchdogHold) {
		t.Fatalf("Extend of a watchdog hold = %v, want ErrWatchdogHold", err)
	}
	if d := client.PTTL(t.Context(), name).Val(); d <= 0 || d > watchdog {
		t.Fatalf("PTTL of the watchdog hold after Extend = %v, want at most the watchdog timeout %v", d, watchdog)
	}
	// Two watchdog timeouts later the hold is still held: the watchdog renews it.
	later := time.NewTimer(2 * watchdog)
	defer later.Stop()
	select {
	case <-done:
		t.Fatal("the watchdog hold was lost after a refused Extend")
	case <-later.C:
	}
	mustUnlock(t, m)
}

// TestExtendAfterClose: Extend on a handle of a closed coordinator returns ErrClosed.
func TestExtendAfterClose(t *testing.T) {
	_, _, c := setup(t)
	m := c.Mutex(t.Name(), coordinator.WithLease(extendTo))
	mustLock(t, m)
	_ = c.Close()
	if err := m.Extend(t.Context(), extendTo); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Extend after Close = %v, want ErrClosed", err)
	}
}
