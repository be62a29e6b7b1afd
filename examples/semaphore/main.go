// Command semaphore shows lockwarden's semaphore (Redisson's RSemaphore): eight workers spread over
// two processes share three permits, so never more than three run at once; then a waiter in one
// process is woken by the release notice that a release in the other process publishes.
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis, whose clock follows real time).
//
//	go run ./examples/semaphore
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
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

	// Two coordinators stand for two processes.
	var processes [2]*coordinator.Coordinator
	for i := range processes {
		c, err := coordinator.New(redisServer.Client())
		if err != nil {
			return err
		}
		defer c.Close()
		processes[i] = c
	}

	const (
		name    = "semaphore:render-slots"
		permits = 3
	)
	// The count stays in Redis when the program ends; delete it, in case REDIS_ADDR names a shared
	// server.
	defer redisServer.Client().Del(context.Background(), name)

	start := time.Now()
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	// 1. One process sets the permits; the other's attempt finds them set and changes nothing.
	ok, err := processes[0].Semaphore(name).TrySetPermits(ctx, permits)
	if err != nil {
		return err
	}
	again, err := processes[1].Semaphore(name).TrySetPermits(ctx, 10)
	if err != nil {
		return err
	}
	count, err := redisServer.Client().Get(ctx, name).Result()
	if err != nil {
		return err
	}
	say("process A TrySetPermits(%d): %v; process B TrySetPermits(10): %v; GET %s = %s", permits, ok, again, name, count)
	if !ok || again || count != fmt.Sprint(permits) {
		return fmt.Errorf("TrySetPermits: got %v, %v and a count of %s, want true, false and %d", ok, again, count, permits)
	}

	// 2. Eight workers, alternating processes, each renders one frame with a permit.
	var (
		wg           sync.WaitGroup
		errs         = make(chan error, 8)
		inside, most int
	)
	for i := range 8 {
		process := i % 2
		s := processes[process].Semaphore(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Acquire(ctx, 1); err != nil {
				errs <- err
				return
			}
			printMu.Lock()
			inside++
			most = max(most, inside)
			now := inside
			printMu.Unlock()
			say("worker %d (process %c) in: %d running", i, 'A'+process, now)
			time.Sleep(100 * time.Millisecond) // the work
			printMu.Lock()
			inside--
			printMu.Unlock()
			if err := s.Release(ctx, 1); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	available, err := processes[0].Semaphore(name).AvailablePermits(ctx)
	if err != nil {
		return err
	}
	say("all 8 workers done; at most %d ran at once; %d permits available", most, available)
	if most > permits || available != permits {
		return fmt.Errorf("%d workers ran at once and %d permits are left, want at most %d and %d", most, available, permits, permits)
	}

	// 3. Process A takes every permit. Process B's single attempt fails; then it waits.
	holder := processes[0].Semaphore(name)
	if err := holder.Acquire(ctx, permits); err != nil {
		return err
	}
	waiter := processes[1].Semaphore(name)
	ok, err = waiter.TryAcquire(ctx, 1)
	if err != nil {
		return err
	}
	say("process A took all %d permits; process B TryAcquire(1): %v", permits, ok)
	if ok {
		return fmt.Errorf("TryAcquire got a permit while none was available")
	}
	gotIt := make(chan error, 1)
	go func() { gotIt <- waiter.Acquire(ctx, 1) }()
	time.Sleep(300 * time.Millisecond) // process A's work

	// Any process may release permits: nothing ties them to the one that acquired them.
	released := time.Now()
	if err := holder.Release(ctx, 1); err != nil {
		return err
	}
	say("process A released 1 permit; Redis published the new count on redisson_sc:{%s}", name)
	if err := <-gotIt; err != nil {
		return err
	}
	woke := time.Since(released)
	say("process B's waiter got its permit %.1fms after the release: woken by the notice, not by its 10s poll",
		float64(woke.Microseconds())/1000)
	if woke > 2*time.Second {
		return fmt.Errorf("the waiter got its permit %v after the release, want well under its 10s poll", woke)
	}
	if err := holder.Release(ctx, permits-1); err != nil {
		return err
	}
	if err := waiter.Release(ctx, 1); err != nil {
		return err
	}
	available, err = holder.AvailablePermits(ctx)
	if err != nil {
		return err
	}
	say("every permit given back: %d available", available)
	if available != permits {
		return fmt.Errorf("%d permits available at the end, want %d", available, permits)
	}
	return nil
}
