// Command multilock shows lockwarden's MultiLock: a transfer between two accounts whose locks live on
// two independent Redis servers takes both locks at once, or neither. A second transfer that lists the
// same accounts in the opposite order waits its turn instead of deadlocking, and a MultiLock never
// holds a part of its locks while another owner holds the rest. A transfer that is refused keeps
// nothing and says which account stood in the way.
//
// It needs no setup: it starts two embedded Redis servers (redis-server if it is on PATH, else
// miniredis, whose clock follows real time).
//
//	go run ./examples/multilock
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

	// Two servers, a coordinator on each: account A's lock lives on the first, B's on the second.
	var coords []*coordinator.Coordinator
	for i := range 2 {
		srv, err := devredis.OpenEmbedded(ctx)
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Printf("redis %d: %s\n", i+1, srv)
		c, err := coordinator.New(srv.Client())
		if err != nil {
			return err
		}
		defer c.Close()
		coords = append(coords, c)
	}
	accountA := func() *coordinator.Mutex { return coords[0].Mutex("account:A") }
	accountB := func() *coordinator.Mutex { return coords[1].Mutex("account:B") }

	start := time.Now()
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	// Someone else holds account B for a moment.
	auditor := accountB()
	if err := auditor.Lock(ctx); err != nil {
		return err
	}
	say("auditor holds account B")

	transfer := func(name string, members []*coordinator.Mutex, wg *sync.WaitGroup) {
		defer wg.Done()
		group := coords[0].MultiLock(members)
		if ok, err := group.TryLock(ctx); err == nil && !ok {
			say("%s: not both accounts at once (TryLock false); waiting", name)
		}
		if err := group.Lock(ctx); err != nil {
			say("%s: %v", name, err)
			return
		}
		say("%s: holds both accounts, member tokens %v", name, group.Tokens())
		time.Sleep(100 * time.Millisecond) // move the money
		if err := group.Unlock(ctx); err != nil {
			say("%s: unlock: %v", name, err)
			return
		}
		say("%s: released both accounts", name)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go transfer("transfer A->B", []*coordinator.Mutex{accountA(), accountB()}, &wg)
	time.Sleep(50 * time.Millisecond)
	go transfer("transfer B->A", []*coordinator.Mutex{accountB(), accountA()}, &wg)

	time.Sleep(150 * time.Millisecond)
	say("auditor releases account B")
	if err := auditor.Unlock(ctx); err != nil {
		return err
	}
	wg.Wait()
	say("both transfers done, one after the other, without a deadlock")

	// A refused transfer keeps nothing, and says why.
	if err := auditor.Lock(ctx); err != nil {
		return err
	}
	say("auditor holds account B again")
	group := coords[0].MultiLock([]*coordinator.Mutex{accountA(), accountB()})
	if ok, err := group.TryLock(ctx, coordinator.Wait(200*time.Millisecond)); ok || err != nil {
		return fmt.Errorf("TryLock(Wait) with account B held = %v, %v; want false, nil", ok, err)
	}
	if locked, err := accountA().IsLocked(ctx); err != nil || locked {
		return fmt.Errorf("account A after the refused TryLock: locked %v, %v; want free", locked, err)
	}
	say("a transfer's TryLock(Wait 200ms): false, and account A is free: it kept nothing")
	waitCtx, cancelWait := context.WithTimeout(ctx, 200*time.Millisecond)
	err := group.Lock(waitCtx)
	cancelWait()
	var why *coordinator.GroupError
	if !errors.As(err, &why) || !errors.Is(err, coordinator.ErrHeldByOther) {
		return fmt.Errorf("the Lock with account B held = %v; want a *GroupError naming account B", err)
	}
	say("a transfer's Lock that gives up after 200ms: %v", why)
	return auditor.Unlock(ctx)
}
