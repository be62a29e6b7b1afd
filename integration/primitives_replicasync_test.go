package integration

import (
	"context"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
)

// TestReplicaSyncPrimitives: with replica sync on, a semaphore's and a permit semaphore's acquisitions
// are followed by WAIT; with the replica paused they fail with ErrNotSynced after about the sync
// timeout, and the permits they took are given back.
func TestReplicaSyncPrimitives(t *testing.T) {
	replica, client, waits := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name := "replicasync:primitives:" + t.Name()
	s, ps := c.Semaphore(name+":sem"), c.PermitSemaphore(name+":permits")
	if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if ok, err := ps.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	before := waits.n.Load()
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p, err := ps.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := waits.n.Load() - before; n < 2 {
		t.Fatalf("%d WAITs for two acquisitions, want 2", n)
	}
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}

	replica.Pause()
	t.Cleanup(replica.Resume)
	expectNotSynced(t, "Semaphore.Acquire", func() error { return s.Acquire(ctx, 2) })
	expectNotSynced(t, "PermitSemaphore.Acquire", func() error { _, err := ps.Acquire(ctx); return err })
	if v := client.Get(ctx, name+":sem").Val(); v != "2" {
		t.Errorf("semaphore count after the unacknowledged acquisition = %q, want 2 (given back)", v)
	}
	if n, err := ps.AvailablePermits(ctx); n != 2 || err != nil {
		t.Errorf("permit semaphore available after the unacknowledged acquisition = %d, %v; want 2", n, err)
	}
	replica.Resume()
	if err := s.Acquire(ctx, 2); err != nil {
		t.Fatalf("Acquire once the replica is back: %v", err)
	}
}
