package integration

import (
	"context"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// TestSentinelPrimitives runs a semaphore and a latch through Sentinel clients across a forced
// failover: permits taken before it (acknowledged by the replica: replica sync is on by default) are
// still taken on the new master, and waiters are woken there by the notices.
func TestSentinelPrimitives(t *testing.T) {
	t.Parallel()
	rs := redistest.StartReplicaSet(t, 1)
	s := redistest.StartSentinels(t, rs, 3)
	c1 := newCoordinator(t, s.FailoverClient(t))
	c2 := newCoordinator(t, s.FailoverClient(t))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	name := t.Name()
	sem := c1.Semaphore(name + ":sem")
	if ok, err := sem.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	latch := c1.CountDownLatch(name + ":latch")
	if ok, err := latch.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	// The count and the latch reach the replica before the failover.
	if n, err := rs.Master.Client(t).Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT = %d, %v", n, err)
	}

	next := s.Failover(t)
	if next == rs.Master {
		t.Fatalf("the failover kept the master %s", next.Addr())
	}
	// The first call after a failover may meet a client that still learns the new master: an
	// operation that fails on a connection error (or READONLY) is sent again for up to 5 s.
	avail, err := c2.Semaphore(name + ":sem").AvailablePermits(ctx)
	if err != nil || avail != 0 {
		t.Fatalf("AvailablePermits on the new master = %d, %v; want 0 (both taken before the failover)", avail, err)
	}
	acquired := make(chan error, 1)
	go func() { acquired <- c2.Semaphore(name+":sem").Acquire(ctx, 1) }()
	awaited := make(chan error, 1)
	go func() { awaited <- c2.CountDownLatch(name + ":latch").Await(ctx) }()
	if ok, err := c2.Semaphore(name+":sem").TryAcquire(ctx, 1); ok || err != nil {
		t.Fatalf("TryAcquire with no permit left = %v, %v", ok, err)
	}
	start := time.Now()
	if err := sem.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := latch.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := semRecv(t, acquired, 20*time.Second, "semaphore waiter"); err != nil {
		t.Fatal(err)
	}
	if err := semRecv(t, awaited, 20*time.Second, "latch awaiter"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > sentinelRecoverWithin {
		t.Errorf("woken %v after the release and the count-down on the new master, want within %v", d, sentinelRecoverWithin)
	}
}
