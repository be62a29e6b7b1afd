// Command latch shows lockwarden's count-down latch (Redisson's RCountDownLatch): services in two
// processes wait with Await until three schema migrations are done, and are woken together by the
// notice Redis publishes when the migrations process counts the latch down to zero.
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis, whose clock follows real time).
//
//	go run ./examples/latch
package main

import (
	"context"
	"errors"
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

	// Two coordinators stand for two processes: the services, and the migrations runner.
	servicesProcess, err := coordinator.New(redisServer.Client())
	if err != nil {
		return err
	}
	defer servicesProcess.Close()
	migrationsProcess, err := coordinator.New(redisServer.Client())
	if err != nil {
		return err
	}
	defer migrationsProcess.Close()

	const (
		name       = "latch:schema-migrations"
		migrations = 3
	)
	// A latch that reaches zero leaves nothing in Redis; delete it all the same should the program
	// stop before, in case REDIS_ADDR names a shared server.
	defer redisServer.Client().Del(context.Background(), name)

	start := time.Now()
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	// 1. The migrations runner sets the count; a second TrySetCount finds it set and changes nothing.
	ok, err := migrationsProcess.CountDownLatch(name).TrySetCount(ctx, migrations)
	if err != nil {
		return err
	}
	again, err := servicesProcess.CountDownLatch(name).TrySetCount(ctx, 10)
	if err != nil {
		return err
	}
	say("TrySetCount(%d): %v; a second TrySetCount(10): %v", migrations, ok, again)
	if !ok || again {
		return fmt.Errorf("TrySetCount: got %v and %v, want true and false", ok, again)
	}

	// 2. Three services wait: two in the services process, one in the migrations process.
	type awoken struct {
		service string
		at      time.Time
		err     error
	}
	woken := make(chan awoken, 3)
	for _, s := range []struct {
		service string
		process *coordinator.Coordinator
	}{{"api", servicesProcess}, {"search", servicesProcess}, {"reports", migrationsProcess}} {
		latch := s.process.CountDownLatch(name)
		go func() {
			err := latch.Await(ctx)
			woken <- awoken{s.service, time.Now(), err}
		}()
	}
	ready, err := servicesProcess.CountDownLatch(name).TryAwait(ctx, coordinator.Wait(100*time.Millisecond))
	if err != nil {
		return err
	}
	say("api, search and reports Await; TryAwait(wait 100ms): %v", ready)
	if ready {
		return errors.New("TryAwait reported the migrations done before any ran")
	}

	// 3. The migrations process runs the migrations and counts down after each.
	runner := migrationsProcess.CountDownLatch(name)
	var zeroAt time.Time
	for i := 1; i <= migrations; i++ {
		time.Sleep(150 * time.Millisecond) // the migration
		if i == migrations {
			zeroAt = time.Now()
		}
		if err := runner.CountDown(ctx); err != nil {
			return err
		}
		left, err := runner.Count(ctx)
		if err != nil {
			return err
		}
		say("migration %d done: CountDown, count %d", i, left)
	}

	// 4. Every service is woken by the zero notice on redisson_countdownlatch__channel__{name}.
	for range 3 {
		select {
		case w := <-woken:
			if w.err != nil {
				return fmt.Errorf("%s: %w", w.service, w.err)
			}
			after := w.at.Sub(zeroAt)
			say("%s woken %.1fms after the last CountDown", w.service, float64(after.Microseconds())/1000)
			if after < 0 || after > 2*time.Second {
				return fmt.Errorf("%s woken %v after the last CountDown, want after it and well under the 10s poll", w.service, after)
			}
		case <-time.After(5 * time.Second):
			return errors.New("a service was not woken when the count reached zero")
		}
	}

	// 5. At zero the key is gone; Await returns at once.
	exists, err := redisServer.Client().Exists(ctx, name).Result()
	if err != nil {
		return err
	}
	awaitStart := time.Now()
	if err := servicesProcess.CountDownLatch(name).Await(ctx); err != nil {
		return err
	}
	say("EXISTS %s: %d; a late Await returned after %.1fms", name, exists, float64(time.Since(awaitStart).Microseconds())/1000)
	if exists != 0 {
		return errors.New("the latch's key is still there at zero")
	}
	return nil
}
