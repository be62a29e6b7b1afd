package coordinator_test

import (
	"context"
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
