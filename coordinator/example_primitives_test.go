package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

func ExampleSemaphore() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	uploads := c.Semaphore("uploads")
	ok, err := uploads.TrySetPermits(ctx, 2) // only if none are set yet
	fmt.Println("permits set:", ok, err)
	if err := uploads.Acquire(ctx, 2); err != nil { // waits until 2 permits are available
		log.Fatal(err)
	}
	ok, err = uploads.TryAcquire(ctx, 1, coordinator.Wait(100*time.Millisecond))
	fmt.Println("a third permit:", ok, err)
	// Permits belong to nobody: any process may release them. A release wakes the waiters.
	if err := uploads.Release(ctx, 1); err != nil {
		log.Fatal(err)
	}
	ok, err = uploads.TryAcquire(ctx, 1)
	fmt.Println("after a release:", ok, err)
	if err := uploads.Release(ctx, 2); err != nil {
		log.Fatal(err)
	}
	n, err := uploads.AvailablePermits(ctx)
	fmt.Println("available:", n, err)
	// Output:
	// permits set: true <nil>
	// a third permit: false <nil>
	// after a release: true <nil>
	// available: 2 <nil>
}

func ExamplePermitSemaphore() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	exports := c.PermitSemaphore("exports")
	if _, err := exports.TrySetPermits(ctx, 1); err != nil {
		log.Fatal(err)
	}
	// Without a Lease, the watchdog renews the permit until it is released (or the coordinator
	// closes, or its process dies: it then comes back within one watchdog timeout).
	p, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("permit id:", len(p.ID()), "hex characters")
	other, err := exports.TryAcquire(ctx)
	fmt.Println("another permit:", other, err)
	// Any process may release a permit by its id (or the holder calls p.Release).
	if err := c.PermitSemaphore("exports").Release(ctx, p.ID()); err != nil {
		log.Fatal(err)
	}
	<-p.Done()
	fmt.Println("released again:", errors.Is(p.Release(ctx), coordinator.ErrNotHeld))
	n, err := exports.AvailablePermits(ctx)
	fmt.Println("available:", n, err)
	// Output:
	// permit id: 32 hex characters
	// another permit: <nil> <nil>
	// released again: true
	// available: 1 <nil>
}

func ExamplePermit() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	exports := c.PermitSemaphore("exports")
	if _, err := exports.TrySetPermits(ctx, 1); err != nil {
		log.Fatal(err)
	}
	// With a Lease, the permit is not renewed: it comes back when the lease runs out.
	p, err := exports.Acquire(ctx, coordinator.Lease(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("expires within the lease:", time.Until(p.Expires()) <= 200*time.Millisecond)
	select {
	case <-p.Done(): // closed when the permit ends: released, expired, or lost
		fmt.Println("lease ran out")
	case <-time.After(5 * time.Second):
		fmt.Println("still held?")
	}
	// Done closes a little before the lease ends in Redis (a margin for clock drift); a waiter gets
	// the permit once it has.
	next, err := exports.TryAcquire(ctx, coordinator.Wait(5*time.Second))
	fmt.Println("next permit:", next != nil, err)
	// Output:
	// expires within the lease: true
	// lease ran out
	// next permit: true <nil>
}

func ExampleCountDownLatch() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	shards := c.CountDownLatch("shards")
	ok, err := shards.TrySetCount(ctx, 2)
	fmt.Println("count set:", ok, err)
	done := make(chan error)
	go func() { done <- c.CountDownLatch("shards").Await(ctx) }() // in another process, as well
	for range 2 {
		if err := shards.CountDown(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("awaited:", <-done) // woken when the count reaches zero
	n, err := shards.Count(ctx)
	fmt.Println("count:", n, err)
	// Output:
	// count set: true <nil>
	// awaited: <nil>
	// count: 0 <nil>
}
