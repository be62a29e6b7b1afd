package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/internal/devredis"
)

func ExampleMutex_Lock() {
	ctx := context.Background()
	redisServer, err := devredis.Open(ctx) // REDIS_ADDR, else an embedded Redis
	if err != nil {
		log.Fatal(err)
	}
	defer redisServer.Close()

	c, err := coordinator.New(redisServer.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.Mutex("example:orders:42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	held, _ := m.IsHeld(ctx)
	fmt.Println("held:", held)
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	held, _ = m.IsHeld(ctx)
	fmt.Println("held:", held)
	// Output:
	// held: true
	// held: false
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	redisServer, err := devredis.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer redisServer.Close()
	c, err := coordinator.New(redisServer.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	holder := c.Mutex("example:report")
	other := c.Mutex("example:report")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Redisson's tryLock(waitTime, leaseTime): wait up to 100ms, and hold for at most 10s.
	ok, err := other.TryLock(ctx, coordinator.Wait(100*time.Millisecond), coordinator.Lease(10*time.Second))
	fmt.Println("obtained while held:", ok, err)
	_ = holder.Unlock(ctx)
	ok, err = other.TryLock(ctx, coordinator.Wait(100*time.Millisecond), coordinator.Lease(10*time.Second))
	fmt.Println("obtained after release:", ok, err)
	_ = other.Unlock(ctx)
	// Output:
	// obtained while held: false <nil>
	// obtained after release: true <nil>
}

func ExampleMutex_Done() {
	ctx := context.Background()
	redisServer, err := devredis.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer redisServer.Close()
	c, err := coordinator.New(redisServer.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.Mutex("example:lease", coordinator.WithLease(200*time.Millisecond))
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-m.Done():
		fmt.Println("hold ended: the lease ran out")
	case <-time.After(5 * time.Second):
		fmt.Println("still held?")
	}
	fmt.Println("unlock:", m.Unlock(ctx))
	// Output:
	// hold ended: the lease ran out
	// unlock: lockwarden: lock not held by this owner
}

func ExampleCoordinator_MultiLock() {
	ctx := context.Background()
	// Two independent servers, a coordinator on each.
	var coords []*coordinator.Coordinator
	for range 2 {
		srv, err := devredis.OpenEmbedded(ctx)
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		c, err := coordinator.New(srv.Client())
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		coords = append(coords, c)
	}
	from, to := coords[0].Mutex("example:account:1"), coords[1].Mutex("example:account:2")
	transfer := coords[0].MultiLock([]*coordinator.Mutex{from, to})
	if err := transfer.Lock(ctx); err != nil { // both, or neither
		log.Fatal(err)
	}
	fromHeld, _ := from.IsHeld(ctx)
	toHeld, _ := to.IsHeld(ctx)
	fmt.Println("held:", fromHeld, toHeld)
	if err := transfer.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fromHeld, _ = from.IsHeld(ctx)
	toHeld, _ = to.IsHeld(ctx)
	fmt.Println("held:", fromHeld, toHeld)
	// Output:
	// held: true true
	// held: false false
}

func ExampleCoordinator_RedLock() {
	ctx := context.Background()
	var coords []*coordinator.Coordinator
	var members []*coordinator.Mutex
	for range 3 {
		srv, err := devredis.OpenEmbedded(ctx) // independent masters
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		c, err := coordinator.New(srv.Client())
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		coords = append(coords, c)
		members = append(members, c.Mutex("example:redlock"))
	}
	lock := coords[0].RedLock(members)
	ok, err := lock.TryLock(ctx, coordinator.Lease(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked:", ok, "token issued:", lock.Token() > 0)
	fmt.Println("valid for about 9.9s:", time.Until(lock.ValidUntil()) > 9*time.Second)
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// locked: true token issued: true
	// valid for about 9.9s: true
}

func ExampleMutex_Err() {
	ctx := context.Background()
	redisServer, err := devredis.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer redisServer.Close()
	c, err := coordinator.New(redisServer.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The constructor does no I/O and returns no error: an invalid option is the handle's
	// construction error, reported at once by Err and by every call.
	m := c.Mutex("example:err", coordinator.WithLease(time.Millisecond))
	fmt.Println("invalid lease:", errors.Is(m.Err(), coordinator.ErrInvalidLease))
	fmt.Println("Lock returns it:", m.Lock(ctx) == m.Err())
	fmt.Println("valid handle:", c.Mutex("example:err", coordinator.WithLease(time.Second)).Err())
	// Output:
	// invalid lease: true
	// Lock returns it: true
	// valid handle: <nil>
}

func ExampleSemaphore() {
	ctx := context.Background()
	redisServer, err := devredis.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer redisServer.Close()
	c, err := coordinator.New(redisServer.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const name = "example:semaphore:uploads"
	defer redisServer.Client().Del(ctx, name) // the count stays in Redis otherwise
	s := c.Semaphore(name)
	ok, err := s.TrySetPermits(ctx, 2)
	fmt.Println("permits set:", ok, err)
	if err := s.Acquire(ctx, 2); err != nil { // waits until 2 permits are available
		log.Fatal(err)
	}
	ok, err = s.TryAcquire(ctx, 1, coordinator.Wait(100*time.Millisecond))
	fmt.Println("a third permit:", ok, err)
	if err := s.Release(ctx, 1); err != nil { // publishes the new count, which wakes a waiter
		log.Fatal(err)
	}
	ok, err = s.TryAcquire(ctx, 1)
	fmt.Println("after a release:", ok, err)
	if err := s.Release(ctx, 2); err != nil {
		log.Fatal(err)
	}
	n, err := s.AvailablePermits(ctx)
	fmt.Println("available:", n, err)
	// Output:
	// permits set: true <nil>
	// a third permit: false <nil>
	// after a release: true <nil>
	// available: 2 <nil>
}

func ExamplePermitSemaphore() {
	ctx := context.Background()
	redisServer, err := devredis.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer redisServer.Close()
	c, err := coordinator.New(redisServer.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const name = "example:permits:exports"
	defer redisServer.Client().Del(ctx, name, "{"+name+"}:timeout")
	s := c.PermitSemaphore(name)
	if _, err := s.TrySetPermits(ctx, 1); err != nil {
		log.Fatal(err)
	}
	// Without a Lease, the watchdog renews the permit until it is released (or the coordinator
	// closes, or its process dies: it then comes back within one watchdog timeout).
	p, err := s.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("permit id of", len(p.ID()), "hex characters; watchdog permit:", p.Expires().IsZero())
	other, err := s.TryAcquire(ctx)
	fmt.Println("another permit:", other, err)
	if err := s.Release(ctx, p.ID()); err != nil { // by id, as any process may; or p.Release(ctx)
		log.Fatal(err)
	}
	<-p.Done()
	fmt.Println("released again:", errors.Is(p.Release(ctx), coordinator.ErrNotHeld))

	// With a Lease, the permit is not renewed: it comes back when the lease runs out.
	leased, err := s.Acquire(ctx, coordinator.Lease(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-leased.Done():
		fmt.Println("lease ran out")
	case <-time.After(5 * time.Second):
		fmt.Println("still held?")
	}
	// Output:
	// permit id of 32 hex characters; watchdog permit: true
	// another permit: <nil> <nil>
	// released again: true
	// lease ran out
}

func ExampleCountDownLatch() {
	ctx := context.Background()
	redisServer, err := devredis.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer redisServer.Close()
	c, err := coordinator.New(redisServer.Client())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const name = "example:latch:shards"
	defer redisServer.Client().Del(ctx, name)
	latch := c.CountDownLatch(name)
	ok, err := latch.TrySetCount(ctx, 2)
	fmt.Println("count set:", ok, err)
	done := make(chan error)
	go func() { done <- c.CountDownLatch(name).Await(ctx) }() // another process, as well
	for range 2 {
		if err := latch.CountDown(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("awaited:", <-done) // woken by the zero notice
	n, err := latch.Count(ctx)
	fmt.Println("count:", n, err)
	// Output:
	// count set: true <nil>
	// awaited: <nil>
	// count: 0 <nil>
}
