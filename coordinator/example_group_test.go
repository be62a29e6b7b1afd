package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

func ExampleCoordinator_MultiLock() {
	// Two independent servers, a coordinator on each.
	var coords []*coordinator.Coordinator
	for range 2 {
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
		coords = append(coords, c)
	}

	ctx := context.Background()
	from, to := coords[0].Mutex("accounts:1"), coords[1].Mutex("accounts:2")
	transfer := coords[0].MultiLock([]*coordinator.Mutex{from, to})
	if err := transfer.Lock(ctx); err != nil { // both, or neither
		log.Fatal(err)
	}
	fmt.Println("members' tokens:", len(transfer.Tokens()))
	fromHeld, _ := from.IsHeld(ctx)
	toHeld, _ := to.IsHeld(ctx)
	fmt.Println("held:", fromHeld, toHeld)
	if err := transfer.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fromHeld, _ = from.IsHeld(ctx)
	toHeld, _ = to.IsHeld(ctx)
	fmt.Println("held:", fromHeld, toHeld)
	<-transfer.Done() // closed once the group holds nothing
	// Output:
	// members' tokens: 2
	// held: true true
	// held: false false
}

func ExampleCoordinator_RedLock() {
	// The same lock on three independent masters, a coordinator on each.
	var coords []*coordinator.Coordinator
	var nodes []*coordinator.Mutex
	for range 3 {
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
		coords = append(coords, c)
		nodes = append(nodes, c.Mutex("reports:daily"))
	}

	ctx := context.Background()
	// Held when a majority of the nodes is. A node that has not answered within the node timeout
	// does not count (by default a tenth of the lease, at most 500ms).
	lock := coords[0].RedLock(nodes, coordinator.WithNodeTimeout(500*time.Millisecond))
	ok, err := lock.TryLock(ctx, coordinator.Lease(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked:", ok, "fencing token issued:", lock.Token() > 0)
	// Valid for the lease, less the time the acquisition took and a clock drift allowance.
	valid := time.Until(lock.ValidUntil())
	fmt.Println("valid for less than the lease:", valid > 0 && valid < 10*time.Second)

	other := coords[1].RedLock([]*coordinator.Mutex{
		coords[0].Mutex("reports:daily"), coords[1].Mutex("reports:daily"), coords[2].Mutex("reports:daily"),
	})
	ok, err = other.TryLock(ctx)
	fmt.Println("another owner:", ok, err)
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// locked: true fencing token issued: true
	// valid for less than the lease: true
	// another owner: false <nil>
}

func ExampleGroup() {
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
	g := c.MultiLock([]*coordinator.Mutex{c.Mutex("stock:A"), c.Mutex("stock:B")})
	if err := g.Err(); err != nil { // the construction error: invalid options or members
		log.Fatal(err)
	}
	// A group is one owner, and reentrant: each Lock needs its own Unlock.
	for range 2 {
		if err := g.Lock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	done := g.Done() // closed when the hold ends: released, or lost with any member
	if err := g.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
		fmt.Println("released after one unlock")
	default:
		fmt.Println("still held after one unlock")
	}
	if err := g.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	<-done
	fmt.Println("released after two")
	fmt.Println("third unlock:", errors.Is(g.Unlock(ctx), coordinator.ErrNotHeld))
	// Output:
	// still held after one unlock
	// released after two
	// third unlock: true
}

func ExampleGroupError() {
	var servers []*miniredis.Miniredis
	var coords []*coordinator.Coordinator
	for range 2 {
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
		servers = append(servers, mr)
		coords = append(coords, c)
	}
	transfer := coords[0].MultiLock([]*coordinator.Mutex{
		coords[0].Mutex("accounts:1"), coords[1].Mutex("accounts:2"),
	})
	servers[1].SetError("ERR server busy") // miniredis fails every command, as a failing Redis would

	ok, err := transfer.TryLock(context.Background())
	fmt.Println("locked:", ok, errors.Is(err, coordinator.ErrNotObtained))
	var ge *coordinator.GroupError
	if errors.As(err, &ge) {
		fmt.Printf("taken %d, needed %d\n", ge.Taken, ge.Quorum)
		for _, m := range ge.Members { // the members not taken, and why
			fmt.Printf("member %d (%s): %v\n", m.Index, m.Name, m.Err)
		}
	}
	// Output:
	// locked: false true
	// taken 1, needed 2
	// member 1 (accounts:2): lockwarden: acquire "accounts:2": ERR server busy
}
