// Command rwlock shows lockwarden's read-write lock: readers share it, a writer waits for them and
// then excludes everyone, its unlock lets every waiting reader in at once, a writer may downgrade to a
// reader, and a reader that asks to upgrade gets an error instead of a deadlock.
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis, whose clock follows real time).
//
//	go run ./examples/rwlock
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

	readersProcess, err := coordinator.New(redisServer.Client())
	if err != nil {
		return err
	}
	defer readersProcess.Close()
	writersProcess, err := coordinator.New(redisServer.Client())
	if err != nil {
		return err
	}
	defer writersProcess.Close()

	const name = "rwlock:catalog"
	start := time.Now()
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	// 1. Three readers hold the lock at once.
	readers := make([]*coordinator.RWMutex, 3)
	for i := range readers {
		readers[i] = readersProcess.RWMutex(name)
		if err := readers[i].RLock(ctx); err != nil {
			return err
		}
	}
	mode, _ := redisServer.Client().HGet(ctx, name, "mode").Result()
	say("3 readers hold %q (mode %q)", name, mode)

	// 2. A writer waits until the last reader leaves.
	writer := writersProcess.RWMutex(name)
	written := make(chan error, 1)
	go func() { written <- writer.Lock(ctx) }()
	for i, r := range readers {
		time.Sleep(100 * time.Millisecond)
		if err := r.RUnlock(ctx); err != nil {
			return err
		}
		say("reader %d unlocked", i)
	}
	if err := <-written; err != nil {
		return err
	}
	say("writer holds it (fencing token %d)", writer.Write().Token())

	// 3. Readers that wait behind the writer all get in when it unlocks.
	var wg sync.WaitGroup
	readErrs := make(chan error, len(readers))
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := readers[i].RLock(ctx); err != nil {
				readErrs <- fmt.Errorf("reader %d: %w", i, err)
				return
			}
			say("reader %d got in", i)
		}()
	}
	time.Sleep(100 * time.Millisecond)
	// 4. Downgrade: the writer takes a read hold before it lets go of the write hold.
	if err := writer.RLock(ctx); err != nil {
		return err
	}
	if err := writer.Unlock(ctx); err != nil {
		return err
	}
	say("writer downgraded to a reader and unlocked the write side")
	wg.Wait()
	close(readErrs)
	for err := range readErrs {
		return err
	}

	// 5. Upgrade is refused: the writer, now only a reader, may not take the write side.
	if err := writer.Lock(ctx); errors.Is(err, coordinator.ErrUpgrade) {
		say("upgrade refused: %v", err)
	} else if err != nil {
		return err
	} else {
		return errors.New("upgrade was not refused")
	}
	for _, r := range append(readers, writer) {
		if err := r.RUnlock(ctx); err != nil {
			return err
		}
	}
	locked, err := writer.Read().IsLocked(ctx)
	if err != nil {
		return err
	}
	say("all readers left; read side locked: %v", locked)
	return nil
}
