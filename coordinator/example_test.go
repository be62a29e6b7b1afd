package coordinator_test

// The examples start their own Redis with miniredis (github.com/alicebob/miniredis/v2), an in-process
// server, so that each one runs as it is. In a program, pass a client of your Redis deployment instead:
// redis.NewClient(&redis.Options{Addr: "localhost:6379"}), or a Sentinel or Cluster client.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	c, err := coordinator.New(client) // one per process and Redis deployment
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	m := c.Mutex("orders:42")
	if err := m.Lock(ctx); err != nil { // waits until held, or ctx ends
		log.Fatal(err)
	}
	fmt.Println("fencing token issued:", m.Token() > 0)
	select {
	case <-m.Done():
		fmt.Println("the lock was lost")
	default:
		fmt.Println("still held: write the order")
	}
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// fencing token issued: true
	// still held: write the order
}

func ExampleNew() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	c, err := coordinator.New(client,
		coordinator.WithWatchdogTimeout(10*time.Second),       // the lease of locks taken without one
		coordinator.WithStopReleaseTimeout(time.Second),       // how long Close may spend on Redis
		coordinator.WithLogger(slog.New(slog.DiscardHandler)), // lost locks, failed renewals, Redis errors
		coordinator.WithoutTelemetry(),                        // no spans or metrics
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("coordinator id:", len(c.ID()), "characters")

	// An invalid option, or no client, makes New fail at once.
	_, err = coordinator.New(client, coordinator.WithWatchdogTimeout(time.Millisecond))
	fmt.Println(errors.Is(err, coordinator.ErrInvalidOption))
	_, err = coordinator.New(nil)
	fmt.Println(errors.Is(err, coordinator.ErrNilClient))
	// Output:
	// coordinator id: 36 characters
	// true
	// true
}

func ExampleCoordinator_Close() {
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

	ctx := context.Background()
	m := c.Mutex("reports:daily")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Close releases the locks still held, closes their Done channels, and stops every actor and
	// goroutine of the coordinator. It does not close the client.
	if err := c.Close(); err != nil {
		log.Fatal(err)
	}
	<-m.Done()
	fmt.Println("lock in Redis:", mr.Exists("reports:daily"))
	fmt.Println("after Close:", errors.Is(m.Lock(ctx), coordinator.ErrClosed))
	// Output:
	// lock in Redis: false
	// after Close: true
}

func ExampleMutex_Lock() {
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
	m := c.Mutex("orders:42")
	// A handle is one owner: a second Lock re-enters, and each Lock needs its own Unlock.
	for range 2 {
		if err := m.Lock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	n, _ := m.HoldCount(ctx)
	fmt.Println("holds:", n)

	// Another handle is another owner: it waits until the lock is free or its ctx ends.
	waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = c.Mutex("orders:42").Lock(waitCtx)
	fmt.Println(errors.Is(err, coordinator.ErrNotObtained), errors.Is(err, context.DeadlineExceeded))

	for range 2 {
		if err := m.Unlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("third unlock:", errors.Is(m.Unlock(ctx), coordinator.ErrNotHeld))
	// Output:
	// holds: 2
	// true true
	// third unlock: true
}

func ExampleMutex_TryLock() {
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
	holder, other := c.Mutex("reports:daily"), c.Mutex("reports:daily")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Without options, one attempt.
	ok, err := other.TryLock(ctx)
	fmt.Println("one attempt:", ok, err)
	// Redisson's tryLock(waitTime, leaseTime): wait up to 100ms, then hold for at most 10s, with no
	// watchdog.
	ok, err = other.TryLock(ctx, coordinator.Wait(100*time.Millisecond), coordinator.Lease(10*time.Second))
	fmt.Println("waited while held:", ok, err)
	if err := holder.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	ok, err = other.TryLock(ctx, coordinator.Lease(10*time.Second)) // one attempt, with a lease
	fmt.Println("after the release:", ok, err)
	ttl, _ := other.TTL(ctx)
	fmt.Println("lease at most 10s:", ttl > 0 && ttl <= 10*time.Second)
	if err := other.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// one attempt: false <nil>
	// waited while held: false <nil>
	// after the release: true <nil>
	// lease at most 10s: true
}

func ExampleMutex_Done() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	mr.ClockTTL(true) // miniredis expires keys on the wall clock, as Redis does, only when told to
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	m := c.Mutex("reports:daily", coordinator.WithLease(200*time.Millisecond))
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-m.Done(): // closed when the hold ends: released, lost, or its lease ran out
		fmt.Println("hold ended: the lease ran out")
	case <-time.After(5 * time.Second):
		fmt.Println("still held?")
	}
	fmt.Println("unlock:", errors.Is(m.Unlock(ctx), coordinator.ErrNotHeld))
	locked, _ := m.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// hold ended: the lease ran out
	// unlock: true
	// locked: false
}

func ExampleMutex_Token() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	// With persistent fencing tokens a lock's tokens count 1, 2, 3, ... as Redisson's RFencedLock's
	// do; by default they are larger numbers that still increase with every acquisition.
	c, err := coordinator.New(client, coordinator.WithPersistentFencingTokens())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	for _, writer := range []string{"a", "b"} {
		m := c.Mutex("ledger")
		if err := m.Lock(ctx); err != nil {
			log.Fatal(err)
		}
		// Storage that rejects a token lower than the highest it has seen is safe from a holder
		// that paused past its lease.
		fmt.Println(writer, "writes with token", m.Token())
		if err := m.Unlock(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println("token after unlock:", m.Token())
	}
	// Output:
	// a writes with token 1
	// token after unlock: 0
	// b writes with token 2
	// token after unlock: 0
}

func ExampleMutex_ForceUnlock() {
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
	holder := c.Mutex("jobs:stuck")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Any handle frees the lock, whoever holds it, and wakes its waiters.
	freed, err := c.Mutex("jobs:stuck").ForceUnlock(ctx)
	fmt.Println("was held:", freed, err)
	<-holder.Done() // the holder learns that its hold is gone
	fmt.Println("holder's unlock:", errors.Is(holder.Unlock(ctx), coordinator.ErrNotHeld))
	freed, err = c.Mutex("jobs:stuck").ForceUnlock(ctx)
	fmt.Println("was held:", freed, err)
	// Output:
	// was held: true <nil>
	// holder's unlock: true
	// was held: false <nil>
}

func ExampleMutex_Err() {
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

	// The constructor does no I/O and returns no error: an invalid option is the handle's
	// construction error, reported at once by Err and by every call.
	m := c.Mutex("orders:42", coordinator.WithLease(time.Millisecond))
	fmt.Println("invalid lease:", errors.Is(m.Err(), coordinator.ErrInvalidLease))
	fmt.Println("Lock returns it:", m.Lock(context.Background()) == m.Err())
	fmt.Println("empty name:", errors.Is(c.Mutex("").Err(), coordinator.ErrEmptyName))
	fmt.Println("valid handle:", c.Mutex("orders:42", coordinator.WithLease(time.Second)).Err())
	// Output:
	// invalid lease: true
	// Lock returns it: true
	// empty name: true
	// valid handle: <nil>
}

func ExampleWithOwner() {
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
	// Two handles with the same owner id are one owner, in one process or in several: one takes
	// the lock, the other releases it.
	taker := c.Mutex("orders:42", coordinator.WithOwner("order-service:job-7"))
	if err := taker.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	releaser := c.Mutex("orders:42", coordinator.WithOwner("order-service:job-7"))
	held, _ := releaser.IsHeld(ctx)
	fmt.Println("held by the same owner:", held)
	fmt.Println("unlock:", releaser.Unlock(ctx))
	locked, _ := taker.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// held by the same owner: true
	// unlock: <nil>
	// locked: false
}

func ExampleUnlockError() {
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
	m := c.Mutex("orders:42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	mr.SetError("ERR server busy") // miniredis fails every command from now on, as a failing Redis would
	err = m.Unlock(ctx)
	var ue *coordinator.UnlockError
	if errors.As(err, &ue) {
		// Whether the release took effect is unknown. The hold is no longer renewed: it runs out by
		// ue.Expires (within the watchdog timeout, 30s by default) at the latest.
		fmt.Println("unlock failed:", ue.Err)
		fmt.Println("runs out within the watchdog timeout:", time.Until(ue.Expires) <= coordinator.DefaultWatchdogTimeout)
	}
	mr.SetError("")
	// Unlock again retries the same release, safely.
	fmt.Println("retried unlock:", m.Unlock(ctx))
	locked, _ := m.IsLocked(ctx)
	fmt.Println("locked:", locked)
	// Output:
	// unlock failed: lockwarden: release "orders:42": ERR server busy
	// runs out within the watchdog timeout: true
	// retried unlock: <nil>
	// locked: false
}
