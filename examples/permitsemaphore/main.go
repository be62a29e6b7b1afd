// Command permitsemaphore shows lockwarden's permit semaphore (Redisson's
// RPermitExpirableSemaphore): permits with ids, renewed by the watchdog while their holder lives; a
// holder that "crashes" and whose permit comes back within one watchdog timeout; a permit with a
// fixed lease that runs out; and a permit released by its id from another process.
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis, whose clock follows real time).
//
//	go run ./examples/permitsemaphore
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/internal/devredis"
	"github.com/lockwarden/lockwarden/messages"
)

// watchdog is the watchdog timeout of the demo's coordinators (the default is 30s): a permit taken
// without a lease is renewed every third of it, and comes back within it when its holder dies.
const watchdog = time.Second

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

	const name = "permits:export-workers"
	timeouts := "{" + name + "}:timeout" // the sorted set of the permits taken
	// The keys stay in Redis when the program ends; delete them, in case REDIS_ADDR names a shared
	// server.
	defer redisServer.Client().Del(context.Background(), name, timeouts)

	// Two coordinators stand for two API processes; a third, for a batch process that will crash,
	// has a Redis client of its own, so that the crash can cut it off.
	var api [2]*coordinator.Coordinator
	for i := range api {
		c, err := coordinator.New(redisServer.Client(), coordinator.WithWatchdogTimeout(watchdog))
		if err != nil {
			return err
		}
		defer c.Close()
		api[i] = c
	}
	o := redisServer.Client().(*redis.Client).Options()
	batchClient := redis.NewClient(&redis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password,
		DB: o.DB, TLSConfig: o.TLSConfig})
	defer batchClient.Close() // closed already by the crash, unless the program stops before
	batch, err := coordinator.New(batchClient, coordinator.WithWatchdogTimeout(watchdog))
	if err != nil {
		return err
	}
	defer batch.Close()

	start := time.Now()
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	if ok, err := api[0].PermitSemaphore(name).TrySetPermits(ctx, 2); err != nil || !ok {
		return fmt.Errorf("TrySetPermits: %v, %v", ok, err)
	}
	say("%q has 2 permits; watchdog timeout %v", name, watchdog)

	// 1. A watchdog permit: taken without a lease, renewed while its holder lives.
	renewals := api[0].Subscribe(coordinator.ForLock(name), 0)
	defer renewals.Close()
	first, err := api[0].PermitSemaphore(name).Acquire(ctx)
	if err != nil {
		return err
	}
	say("api-1 took permit %s (no lease: the watchdog renews it)", first.ID())
	renewed := 0
	for deadline := time.After(2 * watchdog); renewed < 4; {
		select {
		case ev := <-renewals.Events():
			if ev.Type == messages.EventRenewed && ev.Owner == first.ID() {
				renewed++
			}
		case <-first.Done():
			return errors.New("the watchdog permit ended while its holder lived")
		case <-deadline:
			return fmt.Errorf("%d renewals in %v, want 4", renewed, 2*watchdog)
		}
	}
	renewals.Close()
	say("api-1's permit renewed %d times: still held after more than one watchdog timeout", renewed)

	// 2. The batch process takes the second permit and crashes: it is cut off from Redis without
	// releasing anything, so nothing renews its permit any more.
	lost := batch.Subscribe(coordinator.ForLock(name), 0)
	defer lost.Close()
	crashed, err := batch.PermitSemaphore(name).Acquire(ctx)
	if err != nil {
		return err
	}
	say("batch took permit %s", crashed.ID())
	if err := batchClient.Close(); err != nil {
		return err
	}
	crashedAt := time.Now()
	say("batch crashed (its Redis client closed, nothing released); no permit is available")

	gotIt := make(chan *coordinator.Permit, 1)
	waitErr := make(chan error, 1)
	go func() {
		p, err := api[1].PermitSemaphore(name).Acquire(ctx)
		if err != nil {
			waitErr <- err
			return
		}
		gotIt <- p
	}()
	var second *coordinator.Permit
	select {
	case second = <-gotIt:
	case err := <-waitErr:
		return err
	}
	back := time.Since(crashedAt)
	say("api-2's waiter got permit %s %v after the crash: the batch permit came back", second.ID(),
		back.Round(10*time.Millisecond))
	if back > 2*watchdog {
		return fmt.Errorf("the crashed holder's permit came back after %v, want within about %v", back, watchdog)
	}
	// Had the batch process been cut off from Redis rather than dead, it would know: its permit's Done
	// closes when the permit's lease runs out before a renewal succeeds, and a lost event says so.
	select {
	case <-crashed.Done():
	case <-time.After(watchdog):
		return errors.New("the crashed holder's Done never closed")
	}
	for deadline, reported := time.After(time.Second), false; !reported; {
		select {
		case ev := <-lost.Events():
			if ev.Type == messages.EventLost && ev.Owner == crashed.ID() {
				say("batch's Done is closed; its coordinator reported %q: %s", ev.Type, ev.Reason)
				reported = true
			}
		case <-deadline:
			return errors.New("no lost event for the crashed holder's permit")
		}
	}

	// 3. Releasing by id: api-1's permit stands for a job; api-2 finishes the job and releases the
	// permit by the id it was handed, as a Redisson client could too.
	jobPermit := first.ID()
	if err := api[1].PermitSemaphore(name).Release(ctx, jobPermit); err != nil {
		return err
	}
	say("api-2 released permit %s by its id", jobPermit)
	err = api[1].PermitSemaphore(name).Release(ctx, jobPermit)
	say("releasing it again: %v", err)
	if !errors.Is(err, coordinator.ErrNotHeld) {
		return fmt.Errorf("a second release of %s: %v, want ErrNotHeld", jobPermit, err)
	}
	if err := api[1].PermitSemaphore(name).Release(ctx, "job-17"); !errors.Is(err, coordinator.ErrInvalidPermitID) {
		return fmt.Errorf("release of a malformed id: %v, want ErrInvalidPermitID", err)
	}
	// api-1 learns at its next renewal (every third of the watchdog timeout), which finds the permit
	// gone.
	select {
	case <-first.Done():
		say("api-1's Done closed: its next renewal found the permit gone")
	case <-time.After(watchdog):
		return errors.New("api-1 was never told that its permit was released elsewhere")
	}
	// 4. A fixed lease: the permit is not renewed and comes back when the lease runs out, as in
	// Redisson. api-2 still holds the other permit, so its next worker waits for this one.
	leased, err := api[0].PermitSemaphore(name).Acquire(ctx, coordinator.Lease(500*time.Millisecond))
	if err != nil {
		return err
	}
	say("api-1 took permit %s with a 500ms lease and stopped responding", leased.ID())
	waitStart := time.Now()
	third, err := api[1].PermitSemaphore(name).TryAcquire(ctx, coordinator.Wait(5*time.Second))
	if err != nil {
		return err
	}
	if third == nil {
		return errors.New("api-2's worker got no permit after the lease ran out")
	}
	say("api-2's worker got permit %s after %v: the lease ran out", third.ID(),
		time.Since(waitStart).Round(10*time.Millisecond))
	select {
	case <-leased.Done():
		say("api-1's Done channel is closed: it knows its permit is gone")
	case <-time.After(time.Second):
		return errors.New("api-1 was never told that its leased permit ran out")
	}
	err = leased.Release(ctx)
	say("api-1's late Release: %v", err)
	if !errors.Is(err, coordinator.ErrNotHeld) {
		return fmt.Errorf("release of an expired permit: %v, want ErrNotHeld", err)
	}
	for _, p := range []*coordinator.Permit{second, third} {
		if err := p.Release(ctx); err != nil {
			return err
		}
	}

	// Every permit is back, and no permit is left in the sorted set.
	available, err := api[0].PermitSemaphore(name).AvailablePermits(ctx)
	if err != nil {
		return err
	}
	taken, err := redisServer.Client().ZCard(ctx, timeouts).Result()
	if err != nil {
		return err
	}
	say("AvailablePermits: %d; ZCARD %s: %d", available, timeouts, taken)
	if available != 2 || taken != 0 {
		return fmt.Errorf("%d permits available and %d taken at the end, want 2 and 0", available, taken)
	}
	return nil
}
