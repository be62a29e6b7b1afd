package coordinator_test

import (
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/internal/devredis"
)

// TestValidOptions: handles made with valid options report no construction error, and their options
// take effect: a shared owner, a fixed lease, a call's wait and lease, a group's node timeout and max
// lease.
func TestValidOptions(t *testing.T) {
	ctx := t.Context()
	srv, err := devredis.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := coordinator.New(srv.Client(), coordinator.WithoutTelemetry(), coordinator.WithoutReplicaSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	name := "valid-options:" + t.Name()
	ttlNear := func(t *testing.T, m *coordinator.Mutex, want time.Duration) {
		t.Helper()
		ttl, err := m.TTL(ctx)
		if err != nil || ttl <= want-10*time.Second || ttl > want {
			t.Fatalf("TTL = %v, %v; want about %v", ttl, err, want)
		}
	}

	t.Run("Mutex", func(t *testing.T) {
		a := c.Mutex(name, coordinator.WithOwner(name+":owner"), coordinator.WithLease(time.Minute))
		b := c.Mutex(name, nil, coordinator.WithOwner(name+":owner"))
		if a.Err() != nil || b.Err() != nil {
			t.Fatalf("Err() = %v, %v; want nil", a.Err(), b.Err())
		}
		if err := a.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		ttlNear(t, a, time.Minute)
		if held, err := b.IsHeld(ctx); !held || err != nil {
			t.Fatalf("IsHeld of a handle with the same owner = %v, %v; want true", held, err)
		}
		if err := b.Unlock(ctx); err != nil {
			t.Fatalf("Unlock through the shared owner = %v", err)
		}
	})
	t.Run("FairMutex TryLock", func(t *testing.T) {
		m := c.FairMutex(name + ":fair")
		if m.Err() != nil {
			t.Fatal(m.Err())
		}
		if ok, err := m.TryLock(ctx, nil, coordinator.Wait(time.Second), coordinator.Lease(2*time.Minute)); !ok || err != nil {
			t.Fatalf("TryLock(Wait, Lease) = %v, %v; want true", ok, err)
		}
		ttlNear(t, m, 2*time.Minute)
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("RWMutex", func(t *testing.T) {
		rw := c.RWMutex(name+":rw", coordinator.WithLease(time.Minute))
		if rw.Err() != nil || rw.Read().Err() != nil || rw.Write().Err() != nil {
			t.Fatalf("Err() = %v; want nil", rw.Err())
		}
		if err := rw.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		ttlNear(t, rw.Write(), time.Minute)
		if err := rw.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("groups", func(t *testing.T) {
		multi := c.MultiLock([]*coordinator.Mutex{c.Mutex(name + ":m1"), c.Mutex(name + ":m2")}, coordinator.WithNodeTimeout(time.Second))
		red := c.RedLock([]*coordinator.Mutex{c.Mutex(name + ":r")}, nil, coordinator.WithNodeTimeout(time.Second), coordinator.WithMaxLease(time.Minute))
		for _, g := range []*coordinator.Group{multi, red} {
			if g.Err() != nil {
				t.Fatalf("Err() = %v; want nil", g.Err())
			}
			if ok, err := g.TryLock(ctx, coordinator.Wait(time.Second), coordinator.Lease(time.Minute)); !ok || err != nil {
				t.Fatalf("TryLock(Wait, Lease) = %v, %v; want true", ok, err)
			}
			ttlNear(t, g.Members()[0], time.Minute)
			if err := g.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
