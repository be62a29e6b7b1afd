// Command redlock shows lockwarden's RedLock over five independent Redis masters: the lock is taken
// when a majority of them grant it, survives two of the five going down, and is refused, quickly,
// when three are down. The group's fencing token keeps increasing from holder to holder even when
// their majorities differ.
//
// It needs no setup: it starts five embedded Redis servers (redis-server if it is on PATH, else
// miniredis, whose clock follows real time).
//
//	go run ./examples/redlock
package main

import (
	"context"
	"fmt"
	"log"
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

	const nodes = 5
	var servers []*devredis.Instance
	var coords []*coordinator.Coordinator
	for range nodes {
		srv, err := devredis.OpenEmbedded(ctx)
		if err != nil {
			return err
		}
		defer srv.Close()
		c, err := coordinator.New(srv.Client())
		if err != nil {
			return err
		}
		defer c.Close()
		servers = append(servers, srv)
		coords = append(coords, c)
	}
	fmt.Printf("%d independent masters, e.g. %s\n", nodes, servers[0])

	// One RedLock handle is one owner: a handle on the same name on every master.
	newRedLock := func() *coordinator.Group {
		members := make([]*coordinator.Mutex, nodes)
		for i, c := range coords {
			members[i] = c.Mutex("redlock:report")
		}
		return coords[0].RedLock(members, coordinator.WithNodeTimeout(50*time.Millisecond))
	}

	first := newRedLock()
	// Constructors do no I/O and return no error; an invalid option or member is reported at once
	// by Err (and by every call on the group).
	if err := first.Err(); err != nil {
		return err
	}
	const lease = 10 * time.Second
	if ok, err := first.TryLock(ctx, coordinator.Lease(lease)); err != nil || !ok {
		return fmt.Errorf("first TryLock = %v, %v", ok, err)
	}
	fmt.Printf("holder 1: got the lock on all 5 nodes, token %d, valid for %v\n",
		first.Token(), time.Until(first.ValidUntil()).Round(time.Second))
	second := newRedLock()
	ok, err := second.TryLock(ctx)
	fmt.Printf("holder 2 while holder 1 holds: TryLock = %v, %v\n", ok, err)
	if err := first.Unlock(ctx); err != nil {
		return err
	}
	fmt.Println("holder 1: released on every node")

	// Two masters go down: 3 of 5 is still a majority.
	servers[3].Close()
	servers[4].Close()
	fmt.Println("masters 4 and 5 are down")
	if err := second.Lock(ctx); err != nil {
		return err
	}
	fmt.Printf("holder 2: got the lock on 3 of 5 nodes, token %d (higher than holder 1's)\n", second.Token())
	if err := second.Unlock(ctx); err != nil {
		return err
	}

	// A third master goes down: no majority any more.
	servers[2].Close()
	fmt.Println("master 3 is down too")
	third := newRedLock()
	start := time.Now()
	ok, err = third.TryLock(ctx, coordinator.Wait(300*time.Millisecond))
	fmt.Printf("holder 3 with 2 of 5 masters: TryLock(Wait 300ms) = %v, %v, after %v\n",
		ok, err, time.Since(start).Round(100*time.Millisecond))
	return nil
}
