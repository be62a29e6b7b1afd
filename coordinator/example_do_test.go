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

func ExampleMutex_Do() {
	ctx := context.Background()
	server, err := miniredis.Run() // an embedded Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	client := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.Mutex("example:invoice:7")
	errPrinter := errors.New("printer out of paper")
	err = m.Do(ctx, func(ctx context.Context) error {
		// The work the lock protects. ctx ends if the lock is lost meanwhile, and then
		// context.Cause(ctx) matches coordinator.ErrLockLost.
		held, _ := m.IsHeld(ctx)
		fmt.Println("held inside Do:", held)
		return errPrinter
	})
	fmt.Println("Do returned the function's error:", errors.Is(err, errPrinter))
	fmt.Println("lost while held:", errors.Is(err, coordinator.ErrLockLost))
	held, _ := m.IsHeld(ctx)
	fmt.Println("held after Do:", held)
	// Output:
	// held inside Do: true
	// Do returned the function's error: true
	// lost while held: false
	// held after Do: false
}

func ExampleMutex_Extend() {
	ctx := context.Background()
	server, err := miniredis.Run() // an embedded Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	client := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.Mutex("example:export", coordinator.WithLease(2*time.Second)) // no watchdog
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// The export takes longer than planned: keep the lock for 10s from now.
	fmt.Println("extended:", m.Extend(ctx, 10*time.Second))
	ttl, _ := m.TTL(ctx) // the embedded Redis's clock stands still: exactly the new lease
	fmt.Println("remaining lease:", ttl)
	_ = m.Unlock(ctx)

	w := c.Mutex("example:watchdog") // renewed by the watchdog for as long as it is held
	if err := w.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("watchdog hold:", errors.Is(w.Extend(ctx, 10*time.Second), coordinator.ErrWatchdogHold))
	_ = w.Unlock(ctx)
	// Output:
	// extended: <nil>
	// remaining lease: 10s
	// watchdog hold: true
}
