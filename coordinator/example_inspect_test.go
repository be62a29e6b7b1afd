package coordinator_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

func ExampleCoordinator_Inspect() {
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
	m := c.Mutex("orders:42")
	for range 2 { // held twice: a re-entry
		if err := m.Lock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Any process can ask, about any name, whoever took it: lockwarden, Redisson or another
	// client of Redisson's layout.
	in, err := c.Inspect(ctx, "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kind:", in.Kind)
	for _, h := range in.Holders {
		fmt.Println("held by this owner:", h.Owner == m.Owner(), "count:", h.Count)
		// The owner's process, from the registry each coordinator keeps itself in (written in
		// the background; nil until then, and for owners that are not lockwarden's).
		if h.Process != nil && h.Process.PID != os.Getpid() {
			log.Fatal("another process")
		}
	}
	fmt.Println("fencing token is the holder's:", in.Token == m.Token())
	fmt.Println("lease left:", in.Lease > 0)
	// Output:
	// kind: lock
	// held by this owner: true count: 2
	// fencing token is the holder's: true
	// lease left: true
}

func ExampleCoordinator_List() {
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
	for _, name := range []string{"orders:1", "orders:2", "invoices:1"} {
		if err := c.Mutex(name).Lock(ctx); err != nil {
			log.Fatal(err)
		}
	}
	names, err := c.List(ctx, "orders:*")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(names)
	// Output:
	// [orders:1 orders:2]
}

func ExampleCoordinator_Local() {
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

	rw := c.RWMutex("catalog")
	if err := rw.RLock(context.Background()); err != nil {
		log.Fatal(err)
	}
	// What this coordinator's owners hold and wait for, with no Redis call.
	for _, o := range c.Local() {
		fmt.Println(o.Name, o.Held, "held since set:", !o.HeldSince.IsZero())
	}
	// Output:
	// catalog [read] held since set: true
}
