package coordinator_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

func ExampleCoordinator_Subscribe() {
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

	// The events of one lock, with the default buffer. Events never block the locks: a
	// subscriber that falls behind misses events of its own (Subscription.Dropped).
	sub := c.Subscribe(coordinator.ForLock("orders:42"), 0)
	defer sub.Close()

	ctx := context.Background()
	for _, name := range []string{"orders:42", "orders:7"} {
		m := c.Mutex(name)
		if err := m.Lock(ctx); err != nil {
			log.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	for range 2 {
		ev := <-sub.Events() // in the order they happened, for each lock
		fmt.Printf("%s %s (%s): hold count %d\n", ev.Type, ev.Name, ev.Kind, ev.HoldCount)
	}
	fmt.Println("dropped:", sub.Dropped())
	// Output:
	// acquired orders:42 (plain): hold count 1
	// released orders:42 (plain): hold count 0
	// dropped: 0
}

func ExampleOfType() {
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

	// Who waited, and who gave up.
	sub := c.Subscribe(coordinator.OfType(messages.EventWaitStarted, messages.EventWaitTimedOut), 0)
	defer sub.Close()

	ctx := context.Background()
	holder, waiter := c.Mutex("orders:42"), c.Mutex("orders:42")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := waiter.TryLock(ctx, coordinator.Wait(100*time.Millisecond)); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ev := <-sub.Events()
		fmt.Println(ev.Type, ev.Owner == waiter.Owner())
	}
	// Output:
	// wait-started true
	// wait-timed-out true
}

func ExampleEventFilter() {
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

	// A filter is a function; filters combine as functions do. It runs on the goroutine that
	// serves every subscriber, so it must be quick.
	forLock := coordinator.ForLock("orders:42")
	lost := coordinator.OfType(messages.EventLost)
	sub := c.Subscribe(func(ev messages.Event) bool { return forLock(ev) && lost(ev) }, 16)
	defer sub.Close()

	ctx := context.Background()
	m := c.Mutex("orders:42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Mutex("orders:42").ForceUnlock(ctx); err != nil {
		log.Fatal(err)
	}
	ev := <-sub.Events()
	fmt.Println(ev.Type, ev.Owner == m.Owner(), ev.Reason)
	// Output:
	// lost true force-unlocked
}

func ExampleWithEventJournal() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	// Every lock event goes to the Redis Stream "locks:journal" too, trimmed to about 10000 entries.
	c, err := coordinator.New(client, coordinator.WithEventJournal("locks:journal", 10000))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	m := c.Mutex("orders:42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	c.Close() // writes the events still queued

	// Any process reads the journal: here from the start ("0"), one entry at a time, without
	// waiting (block 0); a reader that follows the journal passes a block to wait for new entries.
	after := "0"
	for {
		entries, err := coordinator.ReadJournal(ctx, client, "locks:journal", after, 1, 0)
		if err != nil {
			log.Fatal(err)
		}
		if len(entries) == 0 {
			break // nothing new
		}
		ev := entries[0].Event
		fmt.Println(ev.Type, ev.Name, ev.Owner == m.Owner())
		after = entries[0].ID // read on after it
	}
	// Output:
	// acquired orders:42 true
	// released orders:42 true
}

func ExampleParseJournalEntry() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	c, err := coordinator.New(client, coordinator.WithEventJournal("locks:journal", 0))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	m := c.Mutex("orders:42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	c.Close() // releases the lock and writes the events still queued

	// A consumer group reads the journal with XREADGROUP; ParseJournalEntry decodes each entry.
	if err := client.XGroupCreate(ctx, "locks:journal", "auditors", "0").Err(); err != nil {
		log.Fatal(err)
	}
	streams, err := client.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: "auditors", Consumer: "auditor-1", Streams: []string{"locks:journal", ">"}, Count: 10, Block: -1,
	}).Result()
	if err != nil {
		log.Fatal(err)
	}
	for _, msg := range streams[0].Messages {
		entry, err := coordinator.ParseJournalEntry(msg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %s %q\n", entry.Event.Type, entry.Event.Name, entry.Event.Reason)
		if err := client.XAck(ctx, "locks:journal", "auditors", msg.ID).Err(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// acquired orders:42 ""
	// released orders:42 "coordinator closed"
}
