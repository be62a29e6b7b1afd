package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

func ExampleMutex_Do() {
	ctx := context.Background()
	server, err := miniredis.Run() // an embedded Redis, for the example
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	client := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.Mutex("example:invoice:7")
	errPrinter := errors.New("printer out of paper")
	err = m.Do(ctx, func(ctx context.Context) error {
		// The work the lock protects. ctx ends if the lock is lost meanwhile, and then
		// context.Cause(ctx) matches coordinator.ErrLockLost.
		held, _ := m.IsHeld(ctx)
		fmt.Println("held inside Do:", held)
		return errPrinter
	})
	fmt.Println("Do returned the function's error:", errors.Is(err, errPrinter))
	fmt.Println("lost while held:", errors.Is(err, coordinator.ErrLockLost))
	held, _ := m.IsHeld(ctx)
	fmt.Println("held after Do:", held)
	// Output:
	// held inside Do: true
	// Do returned the function's error: true
	// lost while held: false
	// held after Do: false
}
