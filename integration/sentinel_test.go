package integration

import (
	"context"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// sentinelWakeWithin is how soon a waiter must get a lock after its unlock: far below the 30 s
// watchdog lease, so only the unlock notice can explain it.
const sentinelWakeWithin = time.Second

// sentinelRecoverWithin is how soon a waiter must get a lock after its unlock when it started waiting
// right after a failover: its coordinator's pub/sub connection may still be on the old master, which the
// bridge notices (its probes stop coming back) and replaces within about 3 s; the subscription
// confirmations on the new connection then make the waiter try again. Still far below the lease.
const sentinelRecoverWithin = 5 * time.Second

// sentinelRound runs, on fresh names with the given suffix, what a coordinator on a Sentinel client
// must do: Lock and Unlock, TryLock refused while another coordinator holds, and a waiter in the other
// coordinator woken by the unlock notice within wakeWithin. It checks that the lock lives on master.
func sentinelRound(t *testing.T, c1, c2 *coordinator.Coordinator, master *redistest.Server, suffix string, wakeWithin time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	name := t.Name() + ":" + suffix
	holder, other := c1.Mutex(name), c2.Mutex(name)
	// The first call after a failover may meet a client that still learns the new master: Lock
	// retries until ctx ends.
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock %s: %v", name, err)
	}
	if n, err := master.Client(t).Exists(ctx, name).Result(); err != nil || n != 1 {
		t.Fatalf("the lock %s is not on the master %s: EXISTS %d, %v", name, master.Addr(), n, err)
	}
	if ok, err := other.TryLock(ctx); err != nil || ok {
		t.Fatalf("TryLock while another coordinator holds: got %v, %v; want false", ok, err)
	}
	errc := lockAsync(ctx, other)
	hold := time.NewTimer(200 * time.Millisecond)
	defer hold.Stop()
	select {
	case err := <-errc:
		t.Fatalf("waiter Lock returned while the lock was held: %v", err)
	case <-hold.C:
	}
	start := time.Now()
	mustUnlock(t, holder)
	if err := semRecv(t, errc, 10*time.Second, "waiter Lock"); err != nil {
		t.Fatalf("waiter Lock: %v", err)
	}
	if got := time.Since(start); got > wakeWithin {
		t.Errorf("the waiter got the lock %v after the unlock, want within %v", got, wakeWithin)
	} else {
		t.Logf("%s: the waiter got the lock %v after the unlock", suffix, got)
	}
	if ok, err := holder.TryLock(ctx); err != nil || ok {
		t.Fatalf("TryLock while the waiter holds: got %v, %v; want false", ok, err)
	}
	mustUnlock(t, other)
	if ok, err := holder.TryLock(ctx); err != nil || !ok {
		t.Fatalf("TryLock on the free lock: got %v, %v; want true", ok, err)
	}
	mustUnlock(t, holder)
}

// TestSentinel runs coordinators on redis.NewFailoverClient over a master, a replica and 3
// Sentinels, before and after a forced failover.
func TestSentinel(t *testing.T) {
	t.Parallel()
	rs := redistest.StartReplicaSet(t, 1)
	s := redistest.StartSentinels(t, rs, 3)
	c1 := newCoordinator(t, s.FailoverClient(t))
	c2 := newCoordinator(t, s.FailoverClient(t))

	sentinelRound(t, c1, c2, rs.Master, "before", sentinelWakeWithin)

	next := s.Failover(t)
	if next == rs.Master {
		t.Fatalf("the failover kept the master %s", next.Addr())
	}
	// The first waiter after the failover may have subscribed on the old master.
	sentinelRound(t, c1, c2, next, "after", sentinelRecoverWithin)
	// By now both coordinators listen on the new master.
	sentinelRound(t, c1, c2, next, "after again", sentinelWakeWithin)
}
