package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

func ExampleCoordinator_FairMutex() {
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
	holder := c.FairMutex("printer")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Two waiters queue, one after the other (the wait-started event says when each one waits).
	waiting := c.Subscribe(coordinator.OfType(messages.EventWaitStarted), 0)
	defer waiting.Close()
	served := make(chan string, 2)
	var wg sync.WaitGroup
	for _, who := range []string{"first", "second"} {
		m := c.FairMutex("printer")
		wg.Go(func() {
			if err := m.Lock(ctx); err != nil {
				log.Fatal(err)
			}
			served <- who
			if err := m.Unlock(ctx); err != nil {
				log.Fatal(err)
			}
		})
		<-waiting.Events()
	}
	// They get the lock in the order they asked for it, whichever process they are in.
	if err := holder.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	fmt.Println(<-served)
	fmt.Println(<-served)
	// Output:
	// first
	// second
}

func ExampleRWMutex() {
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
	// Readers share the lock; a writer excludes everyone else.
	reader1, reader2, writer := c.RWMutex("catalog"), c.RWMutex("catalog"), c.RWMutex("catalog")
	if err := reader1.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	ok, err := reader2.TryRLock(ctx)
	fmt.Println("second reader:", ok, err)
	ok, err = writer.TryLock(ctx)
	fmt.Println("writer while read:", ok, err)
	for _, r := range []*coordinator.RWMutex{reader1, reader2} {
		if err := r.RUnlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := writer.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	ok, err = reader1.TryRLock(ctx)
	fmt.Println("reader while written:", ok, err)
	if err := writer.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// second reader: true <nil>
	// writer while read: false <nil>
	// reader while written: false <nil>
}

func ExampleRWMutex_Write() {
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
	rw := c.RWMutex("catalog")
	// Read and Write return the two sides as Mutex handles, for IsLocked, IsHeld, HoldCount, TTL,
	// Token, Done and ForceUnlock.
	mode := func() {
		write, _ := rw.Write().IsLocked(ctx)
		read, _ := rw.Read().IsLocked(ctx)
		fmt.Println("write mode:", write, "read mode:", read)
	}
	if err := rw.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("write hold has a fencing token:", rw.Write().Token() > 0)
	mode()

	// A writer may take read holds and then drop its write hold: a downgrade.
	if err := rw.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := rw.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	mode()

	// The other way round is refused: an owner of read holds would wait for itself forever.
	fmt.Println("upgrade:", errors.Is(rw.Lock(ctx), coordinator.ErrUpgrade))
	if err := rw.RUnlock(ctx); err != nil {
		log.Fatal(err)
	}
	mode()
	// Output:
	// write hold has a fencing token: true
	// write mode: true read mode: false
	// write mode: false read mode: true
	// upgrade: true
	// write mode: false read mode: false
}
