package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redissontest"
)

// TestRedissonSemaphoreShared: a client that speaks Redisson's RSemaphore protocol and a coordinator
// share one semaphore. The foreign client's release wakes the coordinator's waiter by its notice, and
// each side sees the permits the other took and gave back.
func TestRedissonSemaphoreShared(t *testing.T) {
	_, client, c := setup(t)
	name := "test:redisson:sem:" + t.Name()
	ctx := t.Context()
	java := redissontest.NewSemaphore(client, name)
	if ok, err := java.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("Redisson TrySetPermits = %v, %v", ok, err)
	}
	if ok, err := java.TryAcquire(ctx, 1); !ok || err != nil {
		t.Fatalf("Redisson TryAcquire = %v, %v", ok, err)
	}
	s := c.Semaphore(name)
	got := make(chan error, 1)
	go func() { got <- s.Acquire(ctx, 1) }()
	if ok, err := s.TryAcquire(ctx, 1); ok || err != nil {
		t.Fatalf("TryAcquire while Redisson holds the permit = %v, %v", ok, err)
	}
	if err := java.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > 2*time.Second {
			t.Fatalf("woken %v after Redisson's release: not by its notice", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by Redisson's release")
	}
	if n, err := java.AvailablePermits(ctx); n != 0 || err != nil {
		t.Fatalf("Redisson sees %d permits, %v; want 0 while lockwarden holds it", n, err)
	}
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := java.TryAcquire(ctx, 1); !ok || err != nil {
		t.Fatalf("Redisson TryAcquire after lockwarden's release = %v, %v", ok, err)
	}
}

// TestRedissonPermitSemaphoreShared: permits taken by a Redisson client and by a coordinator on one
// permit semaphore: each side releases the other's permit by id, an expired Redisson permit is
// reclaimed for a lockwarden waiter, and a lockwarden watchdog permit is seen by Redisson as taken.
func TestRedissonPermitSemaphoreShared(t *testing.T) {
	_, client, c := setup(t)
	name := "test:redisson:permits:" + t.Name()
	ctx := t.Context()
	java := redissontest.NewPermitSemaphore(client, name)
	if ok, err := java.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("Redisson TrySetPermits = %v, %v", ok, err)
	}
	ids, err := java.TryAcquire(ctx, 1, 300*time.Millisecond)
	if err != nil || len(ids) != 1 {
		t.Fatalf("Redisson TryAcquire = %v, %v", ids, err)
	}
	s := c.PermitSemaphore(name)
	mine, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := java.AvailablePermits(ctx); n != 0 || err != nil {
		t.Fatalf("Redisson sees %d available, %v; want 0", n, err)
	}
	// Redisson's permit expires after 300 ms: a lockwarden waiter gets it then.
	start := time.Now()
	second, err := s.TryAcquire(ctx, coordinator.Wait(5*time.Second))
	if err != nil || second == nil {
		t.Fatalf("TryAcquire after Redisson's lease = %v, %v", second, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the expired permit came back after %v", d)
	}
	// Redisson releases lockwarden's permit by its id, and lockwarden learns it at the next renewal
	// or release: here the release by lockwarden answers ErrNotHeld.
	if ok, err := java.Release(ctx, mine.ID()); !ok || err != nil {
		t.Fatalf("Redisson Release(lockwarden's id) = %v, %v", ok, err)
	}
	if err := mine.Release(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Release of a permit Redisson released = %v, want ErrNotHeld", err)
	}
	// And lockwarden releases a permit Redisson took.
	ids, err = java.TryAcquire(ctx, 1, time.Minute)
	if err != nil || len(ids) != 1 {
		t.Fatalf("Redisson TryAcquire = %v, %v", ids, err)
	}
	if err := s.Release(ctx, ids[0]); err != nil {
		t.Fatalf("lockwarden Release(Redisson's id) = %v", err)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := java.AvailablePermits(ctx); n != 2 || err != nil {
		t.Fatalf("Redisson sees %d available, %v; want 2", n, err)
	}
}

// TestRedissonLatchShared: a Redisson client sets and counts down a latch that coordinators await:
// its count-down to zero wakes them by the zero notice.
func TestRedissonLatchShared(t *testing.T) {
	_, client, c := setup(t)
	name := "test:redisson:latch:" + t.Name()
	ctx := t.Context()
	java := redissontest.NewCountDownLatch(client, name)
	if ok, err := java.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("Redisson TrySetCount = %v, %v", ok, err)
	}
	if n, err := c.CountDownLatch(name).Count(ctx); n != 2 || err != nil {
		t.Fatalf("Count = %d, %v; want 2", n, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.CountDownLatch(name).Await(ctx) }()
	if err := c.CountDownLatch(name).CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := java.GetCount(ctx); n != 1 || err != nil {
		t.Fatalf("Redisson GetCount = %d, %v; want 1", n, err)
	}
	if err := java.CountDown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the awaiter was not woken by Redisson's count-down")
	}
}
