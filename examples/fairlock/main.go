// Command fairlock shows lockwarden's fair lock: five workers spread over two processes ask for one
// lock a moment apart, and get it in exactly the order they asked, across both processes. Then a
// worker whose TryLock wait runs out leaves the queue without a trace.
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis, whose clock follows real time).
//
//	go run ./examples/fairlock
package main

import (
	"context"
	"fmt"
	"log"
	"slices"
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

	const name = "fairlock:ledger"
	start := time.Now()
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	// The first worker holds the lock while the others line up, 50 ms apart, alternating processes.
	first := processes[0].FairMutex(name)
	if err := first.Lock(ctx); err != nil {
		return err
	}
	say("worker 0 (process A) holds %q", name)

	var (
		wg    sync.WaitGroup
		errs  = make(chan error, 4)
		order []int // the workers, in the order they got the lock
	)
	for i := 1; i <= 4; i++ {
		process := i % 2
		m := processes[process].FairMutex(name)
		say("worker %d (process %c) asks", i, 'A'+process)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				errs <- err
				return
			}
			say("worker %d (process %c) got it, token %d", i, 'A'+process, m.Token())
			printMu.Lock()
			order = append(order, i)
			printMu.Unlock()
			time.Sleep(100 * time.Millisecond) // the critical section
			if err := m.Unlock(ctx); err != nil {
				errs <- err
			}
		}()
		time.Sleep(50 * time.Millisecond) // the next worker asks a moment later
	}
	if err := first.Unlock(ctx); err != nil {
		return err
	}
	say("worker 0 unlocked: the queue moves in arrival order")
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	if !slices.Equal(order, []int{1, 2, 3, 4}) {
		return fmt.Errorf("the workers got the lock in the order %v, not in arrival order", order)
	}

	// A TryLock whose wait runs out leaves the queue: nothing of it is left behind.
	if err := first.Lock(ctx); err != nil {
		return err
	}
	late := processes[1].FairMutex(name)
	ok, err := late.TryLock(ctx, coordinator.Wait(200*time.Millisecond))
	if err != nil {
		return err
	}
	queued, err := redisServer.Client().LLen(ctx, "redisson_lock_queue:{"+name+"}").Result()
	if err != nil {
		return err
	}
	say("late TryLock(wait 200ms): %v; waiters left in the Redis queue: %d", ok, queued)
	if ok || queued != 0 {
		return fmt.Errorf("late TryLock: got %v with %d waiters left in the queue, want false and 0", ok, queued)
	}
	return first.Unlock(ctx)
}
