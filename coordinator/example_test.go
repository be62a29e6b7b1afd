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
