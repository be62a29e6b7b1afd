// Command events prints the lock events of a coordinator as they happen, while a few owners contend
// for one lock: waiters queue and get the lock handed to them, a TryLock gives up, a fixed lease runs
// out, and a hold is force-unlocked. The same events go to a Redis Stream journal
// (coordinator.WithEventJournal), which the program reads back at the end as another process would.
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis, whose clock follows real time so that leases expire on time).
//
//	go run ./examples/events
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/internal/devredis"
	"github.com/lockwarden/lockwarden/messages"
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

	// Each run gets a journal of its own, in case REDIS_ADDR names a shared server.
	journal := fmt.Sprintf("events-example:journal:%d", time.Now().UnixNano())
	defer redisServer.Client().Del(context.Background(), journal)
	c, err := coordinator.New(redisServer.Client(), coordinator.WithEventJournal(journal, 1000))
	if err != nil {
		return err
	}
	defer c.Close()

	const name = "events:printer"
	start := time.Now()
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf("%6.0fms  %s\n", ms(time.Since(start)), fmt.Sprintf(format, args...))
	}

	// names maps owner ids to the handles' names, for printing.
	var names sync.Map
	handle := func(who string, opts ...coordinator.MutexOption) *coordinator.Mutex {
		m := c.Mutex(name, opts...)
		names.Store(m.Owner(), who)
		return m
	}
	ownerName := func(id string) string {
		if id == "" {
			return "-"
		}
		if who, ok := names.Load(id); ok {
			return fmt.Sprintf("%s (%s)", who, shortID(id))
		}
		return shortID(id)
	}

	// The consumer: every event of the lock, until the coordinator closes the channel.
	sub := c.Subscribe(coordinator.ForLock(name), 0)
	consumed := make(chan int)
	go func() {
		n := 0
		for ev := range sub.Events() {
			n++
			say("%s", strings.TrimSpace(fmt.Sprintf("  event %-14s %-18s %s", ev.Type, ownerName(ev.Owner), details(ev, ownerName))))
		}
		consumed <- n
	}()
	step := func(format string, args ...any) {
		time.Sleep(20 * time.Millisecond) // let the consumer print the events of the previous step
		say(format, args...)
	}

	// 1. Three owners compete: alice holds, bob and carol wait in line and get the lock in turn.
	step("alice, bob and carol compete for %q", name)
	var wg sync.WaitGroup
	for i, who := range []string{"alice", "bob", "carol"} {
		m := handle(who)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				say("%s: %v", who, err)
				return
			}
			time.Sleep(100 * time.Millisecond) // work
			if err := m.Unlock(ctx); err != nil {
				say("%s: %v", who, err)
			}
		}()
		if i == 0 {
			time.Sleep(20 * time.Millisecond) // alice first; then bob and carol queue behind her
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()

	// 2. A TryLock that waits 150ms for a lock held longer, and gives up.
	holder := handle("dave")
	if err := holder.Lock(ctx); err != nil {
		return err
	}
	step("erin tries for 150ms while dave holds the lock")
	ok, err := handle("erin").TryLock(ctx, coordinator.Wait(150*time.Millisecond))
	if err != nil {
		return err
	}
	say("erin TryLock: %v", ok)
	if err := holder.Unlock(ctx); err != nil {
		return err
	}

	// 3. A fixed lease of 300ms whose holder never unlocks: the lease runs out and the hold is lost.
	step("frank locks with a 300ms lease and never unlocks")
	frank := handle("frank", coordinator.WithLease(300*time.Millisecond))
	if err := frank.Lock(ctx); err != nil {
		return err
	}
	select {
	case <-frank.Done():
	case <-time.After(2 * time.Second):
		return errors.New("frank's lease never ran out")
	}
	say("frank's Done channel closed")

	// 4. A force unlock frees the lock from under its holder.
	step("grace locks; heidi force-unlocks the lock grace holds")
	grace := handle("grace")
	if err := grace.Lock(ctx); err != nil {
		return err
	}
	if _, err := handle("heidi").ForceUnlock(ctx); err != nil {
		return err
	}
	<-grace.Done()
	if err := grace.Unlock(ctx); errors.Is(err, coordinator.ErrNotHeld) {
		say("grace's Unlock: %v", err)
	}

	// Close delivers what is queued to the subscribers, closes their channels and flushes the journal.
	time.Sleep(20 * time.Millisecond)
	if err := c.Close(); err != nil {
		return err
	}
	n := <-consumed
	say("subscriber got %d events (%d dropped)", n, sub.Dropped())

	// Another process reads the journal from the start.
	var journaled []coordinator.JournalEntry
	for after := "0"; ; {
		entries, err := coordinator.ReadJournal(ctx, redisServer.Client(), journal, after, 100, 0)
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			break
		}
		journaled = append(journaled, entries...)
		after = entries[len(entries)-1].ID
	}
	counts := map[messages.EventType]int{}
	for _, e := range journaled {
		counts[e.Event.Type]++
	}
	var parts []string
	for t := messages.EventAcquired; t <= messages.EventHandedOff; t++ {
		if counts[t] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", t, counts[t]))
		}
	}
	say("journal %q has %d events (%d dropped): %s", journal, len(journaled), c.JournalDropped(), strings.Join(parts, ", "))
	return nil
}

// details describes the fields of ev that apply to its type.
func details(ev messages.Event, ownerName func(string) string) string {
	var b strings.Builder
	if ev.Token != 0 {
		fmt.Fprintf(&b, "token %d  ", ev.Token)
	}
	switch ev.Type {
	case messages.EventAcquired:
		if ev.Queued {
			fmt.Fprintf(&b, "waited %.0fms  ", ms(ev.Wait))
		}
	case messages.EventWaitTimedOut:
		fmt.Fprintf(&b, "waited %.0fms  ", ms(ev.Wait))
	case messages.EventReleased, messages.EventLost:
		fmt.Fprintf(&b, "held %.0fms  ", ms(ev.Held))
	case messages.EventHandedOff:
		fmt.Fprintf(&b, "from %s  ", ownerName(ev.From))
	}
	if ev.Reason != "" {
		fmt.Fprintf(&b, "(%s)", ev.Reason)
	}
	return strings.TrimSpace(b.String())
}

// shortID shortens an owner id "<coordinator UUID>:<n>" to its first 4 characters and n.
func shortID(id string) string {
	i := strings.LastIndexByte(id, ':')
	if i < 4 {
		return id
	}
	return id[:4] + "…" + id[i:]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
