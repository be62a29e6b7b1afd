// Command quickstart shows two owners contending on one lockwarden lock: a waiter woken by the unlock
// notice, re-entry, fencing tokens, and a lease that runs out when its holder "crashes".
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis, whose clock follows real time so that leases expire on time).
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/internal/devredis"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	redisServer, err := devredis.Open(ctx)
	if err != nil {
		return err
	}
	defer redisServer.Close()
	fmt.Println("redis:", redisServer)

	// Two coordinators stand for two processes; each has its own view of the lock.
	alicesProcess, err := coordinator.New(redisServer.Client())
	if err != nil {
		return err
	}
	defer alicesProcess.Close()
	bobsProcess, err := coordinator.New(redisServer.Client())
	if err != nil {
		return err
	}
	defer bobsProcess.Close()

	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	const name = "quickstart:printer"
	alice := alicesProcess.Mutex(name)
	bob := bobsProcess.Mutex(name)

	// 1. Alice takes the lock; the watchdog renews it while she holds it.
	if err := alice.Lock(ctx); err != nil {
		return err
	}
	say("alice locked %q (fencing token %d)", name, alice.Token())

	// 2. Re-entry: the same handle locks again and must unlock twice.
	if err := alice.Lock(ctx); err != nil {
		return err
	}
	n, _ := alice.HoldCount(ctx)
	say("alice re-entered: hold count %d", n)

	// 3. Bob's single attempt fails; then he waits.
	ok, err := bob.TryLock(ctx)
	if err != nil {
		return err
	}
	say("bob TryLock: %v (alice holds it)", ok)
	bobHasIt := make(chan error, 1)
	waitStart := time.Now()
	go func() { bobHasIt <- bob.Lock(ctx) }()

	time.Sleep(300 * time.Millisecond) // Alice's work.
	for range 2 {
		if err := alice.Unlock(ctx); err != nil {
			return err
		}
	}
	say("alice unlocked twice; Redis published the unlock notice")
	if err := <-bobHasIt; err != nil {
		return err
	}
	say("bob locked after waiting %v (fencing token %d): woken by the notice, not by the 30s lease",
		time.Since(waitStart).Round(time.Millisecond), bob.Token())
	if err := bob.Unlock(ctx); err != nil {
		return err
	}

	// 4. A fixed lease: Carol takes the lock for 1s and never unlocks, as if her process had hung.
	carol := alicesProcess.Mutex(name, coordinator.WithLease(time.Second))
	if err := carol.Lock(ctx); err != nil {
		return err
	}
	say("carol locked with a 1s lease and stopped responding")
	waitStart = time.Now()
	if err := bob.Lock(ctx); err != nil {
		return err
	}
	say("bob locked after %v: carol's lease ran out", time.Since(waitStart).Round(10*time.Millisecond))
	select {
	case <-carol.Done():
		say("carol's Done channel is closed: she knows her hold is gone")
	case <-time.After(time.Second):
		return errors.New("carol was never told that her hold was lost")
	}
	if err := carol.Unlock(ctx); errors.Is(err, coordinator.ErrNotHeld) {
		say("carol's late Unlock: %v", err)
	}
	if err := bob.Unlock(ctx); err != nil {
		return err
	}
	locked, _ := bob.IsLocked(ctx)
	say("lock free again: IsLocked=%v", locked)
	if os.Getenv("REDIS_ADDR") == "" {
		say("done; the embedded Redis goes away with the program")
	}
	return nil
}
