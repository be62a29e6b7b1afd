package integration

import (
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// TestClusterPrimitives runs a semaphore, a permit semaphore and a latch on each master of a 3-master
// Cluster, across two coordinators: their keys share the name's slot, the scripts publish with
// SPUBLISH and the waiters, subscribed with SSUBSCRIBE, are woken by the notices.
func TestClusterPrimitives(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	c1 := newCoordinator(t, cc)
	c2 := newCoordinator(t, cl.Client(t))
	ctx := t.Context()
	sems, permits, latches := clusterNames(t, cl, t.Name()+":sem"), clusterNames(t, cl, t.Name()+":permits"),
		clusterNames(t, cl, t.Name()+":latch")
	for i, node := range cl.Nodes() {
		sem, perm, latch := sems[i], permits[i], latches[i]
		s1, s2 := c1.Semaphore(sem), c2.Semaphore(sem)
		if ok, err := s1.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetPermits = %v, %v", ok, err)
		}
		if err := s1.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { got <- s2.Acquire(ctx, 1) }()
		clusterWaitSubscribed(t, cc, redisops.SemaphoreChannel(sem))
		if err := s1.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := semRecv(t, got, 5*time.Second, "semaphore waiter"); err != nil {
			t.Fatal(err)
		}
		if err := s2.Release(ctx, 1); err != nil {
			t.Fatal(err)
		}

		ps := c1.PermitSemaphore(perm)
		if ok, err := ps.TrySetPermits(ctx, 1); !ok || err != nil {
			t.Fatalf("permits TrySetPermits = %v, %v", ok, err)
		}
		p, err := ps.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pwait := make(chan error, 1)
		go func() {
			p2, err := c2.PermitSemaphore(perm).Acquire(ctx)
			if err == nil {
				err = p2.Release(ctx)
			}
			pwait <- err
		}()
		clusterWaitSubscribed(t, cc, redisops.SemaphoreChannel(perm))
		// Every key of the name is on its master: the hash-tagged zset and the retry latches too.
		keys := clusterScanKeys(t, cl, node, "*"+perm+"*")
		if len(keys) < 2 {
			t.Fatalf("keys of %s on its node: %v; want the count and the zset of the permits", perm, keys)
		}
		clusterScanKeys(t, cl, node, "*"+sem+"*")
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := semRecv(t, pwait, 5*time.Second, "permit waiter"); err != nil {
			t.Fatal(err)
		}

		l := c1.CountDownLatch(latch)
		if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount = %v, %v", ok, err)
		}
		awaited := make(chan error, 1)
		go func() { awaited <- c2.CountDownLatch(latch).Await(ctx) }()
		clusterWaitSubscribed(t, cc, redisops.LatchChannel(latch))
		if err := l.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := semRecv(t, awaited, 5*time.Second, "latch awaiter"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClusterTaggedLatch: a latch whose name has a hash tag, whose channel (Redisson's, braces around
// the whole name) is in another slot than its key: the count-down's zero notice, published by the
// client after the script, wakes an awaiter of another coordinator well before the poll (10 s).
func TestClusterTaggedLatch(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	c1 := newCoordinator(t, cc)
	c2 := newCoordinator(t, cl.Client(t))
	ctx := t.Context()
	name := t.Name() + ":{jobs}"
	if redisops.Slot(name) == redisops.Slot(redisops.LatchChannel(name)) {
		t.Fatalf("%q: its channel is in its own slot; the test needs another", name)
	}
	if ok, err := c1.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	awaited := make(chan error, 1)
	go func() { awaited <- c2.CountDownLatch(name).Await(ctx) }()
	clusterWaitSubscribed(t, cc, redisops.LatchChannel(name))
	start := time.Now()
	if err := c1.CountDownLatch(name).CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := semRecv(t, awaited, 5*time.Second, "latch awaiter"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the awaiter returned %v after the count-down: not woken by the notice", d)
	}
}
