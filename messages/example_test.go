package messages_test

// The examples start their own Redis with miniredis (github.com/alicebob/miniredis/v2), an in-process
// server, so that each one runs as it is. In a program, pass coordinator.New a client of your Redis
// deployment instead.

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

// The gateway actor of a coordinator (Coordinator.PID) answers the messages of this package. A
// future can send them too, with an explicit Owner.
func Example_messageAPI() {
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

	ask := func(msg any) any {
		reply, err := c.ActorSystem().Root.RequestFuture(c.PID(), msg, 5*time.Second).Result()
		if err != nil {
			log.Fatal(err) // no reply in time
		}
		return reply
	}
	show := func(reply any) {
		switch r := reply.(type) {
		case *messages.Acquired:
			fmt.Printf("Acquired %s: hold count %d, watchdog %v\n", r.Name, r.HoldCount, r.Watchdog)
		case *messages.NotObtained:
			fmt.Printf("NotObtained %s: reason %q\n", r.Name, r.Reason)
		case *messages.StatusReply:
			fmt.Printf("StatusReply %s: locked %v, held %v, hold count %d\n", r.Name, r.Locked, r.Held, r.HoldCount)
		case *messages.Released:
			fmt.Printf("Released %s: hold count %d\n", r.Name, r.HoldCount)
		case *messages.NotHeld:
			fmt.Printf("NotHeld %s\n", r.Name)
		case *messages.ForceUnlocked:
			fmt.Printf("ForceUnlocked %s: was held %v\n", r.Name, r.Deleted)
		case *messages.Error:
			fmt.Printf("Error: %v\n", r)
		}
	}

	show(ask(&messages.Acquire{Name: "orders:42", Owner: "job-7"}))
	show(ask(&messages.Acquire{Name: "orders:42", Owner: "job-8", Wait: 100 * time.Millisecond}))
	show(ask(&messages.Status{Name: "orders:42", Owner: "job-7"}))
	show(ask(&messages.Release{Name: "orders:42", Owner: "job-7"}))
	show(ask(&messages.Release{Name: "orders:42", Owner: "job-7"}))

	// A fixed lease, and a force unlock.
	show(ask(&messages.Acquire{Name: "orders:42", Owner: "job-8", Lease: 10 * time.Second}))
	show(ask(&messages.ForceUnlock{Name: "orders:42"}))

	// Invalid input gets an *Error, which matches the coordinator's sentinel errors.
	reply := ask(&messages.Acquire{Name: "", Owner: "job-7"})
	fmt.Println("empty name:", errors.Is(reply.(*messages.Error), coordinator.ErrEmptyName))
	// A message without an Owner is owned by the actor that sent it; a future is no actor.
	reply = ask(&messages.Acquire{Name: "orders:42"})
	fmt.Println("no owner:", errors.Is(reply.(*messages.Error), coordinator.ErrNoOwner))
	// Output:
	// Acquired orders:42: hold count 1, watchdog true
	// NotObtained orders:42: reason "not obtained"
	// StatusReply orders:42: locked true, held true, hold count 1
	// Released orders:42: hold count 0
	// NotHeld orders:42
	// Acquired orders:42: hold count 1, watchdog false
	// ForceUnlocked orders:42: was held true
	// empty name: true
	// no owner: true
}

// An actor that sends Acquire with Request and no Owner owns the hold: when the actor stops (or
// crashes and its supervisor stops it), the coordinator releases its holds at once.
func ExampleAcquire() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	// The application's actor system, kept quiet; the coordinator spawns its actors in it.
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
	)
	defer system.Shutdown()
	c, err := coordinator.New(client, coordinator.WithActorSystem(system))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	released := c.Subscribe(coordinator.OfType(messages.EventReleased), 0)
	defer released.Close()

	acquired := make(chan *messages.Acquired, 1)
	worker := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Request(c.PID(), &messages.Acquire{Name: "printer", Wait: messages.WaitForever})
		case *messages.Acquired:
			acquired <- m
		case *messages.Error:
			log.Print(m)
		}
	}))
	got := <-acquired
	fmt.Println("the worker holds", got.Name, "with token", got.Token > 0)

	if err := system.Root.StopFuture(worker).Wait(); err != nil {
		log.Fatal(err)
	}
	ev := <-released.Events()
	fmt.Printf("%s %s: %s\n", ev.Type, ev.Name, ev.Reason) // messages.ReleaseCauseOwnerStopped
	// Output:
	// the worker holds printer with token true
	// released printer: owner stopped
}

// Semaphores, permit semaphores and count-down latches are driven by Primitive messages, with the
// behaviour of the matching methods of the coordinator's handles.
func ExamplePrimitive() {
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

	ask := func(msg *messages.Primitive) *messages.PrimitiveReply {
		reply, err := c.ActorSystem().Root.RequestFuture(c.PID(), msg, 5*time.Second).Result()
		if err != nil {
			log.Fatal(err)
		}
		if e, ok := reply.(*messages.Error); ok {
			log.Fatal(e)
		}
		return reply.(*messages.PrimitiveReply)
	}

	// A semaphore.
	const uploads = "uploads"
	sem := func(op messages.PrimitiveOp, n int64) *messages.PrimitiveReply {
		return ask(&messages.Primitive{Name: uploads, Kind: messages.KindSemaphore, Op: op, N: n})
	}
	fmt.Println("set 2 permits:", sem(messages.OpTrySet, 2).OK)
	fmt.Println("take 2:", sem(messages.OpAcquire, 2).OK)
	fmt.Println("take 1 more:", sem(messages.OpAcquire, 1).OK) // Wait 0: one attempt
	sem(messages.OpRelease, 2)
	fmt.Println("available:", sem(messages.OpAvailable, 0).Value)

	// A permit semaphore: its permits have ids.
	ask(&messages.Primitive{Name: "exports", Kind: messages.KindPermitSemaphore, Op: messages.OpTrySet, N: 1})
	taken := ask(&messages.Primitive{Name: "exports", Kind: messages.KindPermitSemaphore, Op: messages.OpAcquire,
		N: 1, Lease: 10 * time.Second})
	fmt.Println("permits taken:", len(taken.PermitIDs))
	ask(&messages.Primitive{Name: "exports", Kind: messages.KindPermitSemaphore, Op: messages.OpRelease,
		ID: taken.PermitIDs[0]})

	// A count-down latch.
	latch := func(op messages.PrimitiveOp, n int64) *messages.PrimitiveReply {
		return ask(&messages.Primitive{Name: "shards", Kind: messages.KindLatch, Op: op, N: n})
	}
	latch(messages.OpTrySet, 1)
	fmt.Println("zero before:", latch(messages.OpAwait, 0).OK)
	latch(messages.OpCountDown, 0)
	fmt.Println("zero after:", latch(messages.OpAwait, 0).OK)
	// Output:
	// set 2 permits: true
	// take 2: true
	// take 1 more: false
	// available: 2
	// permits taken: 1
	// zero before: false
	// zero after: true
}

func ExampleKind() {
	for _, k := range []messages.Kind{messages.KindPlain, messages.KindFair, messages.KindRead, messages.KindWrite} {
		fmt.Println(k, k.LockKind()) // the Kind of a message, and the LockKind of its events
	}
	// Output:
	// plain plain
	// fair fair
	// read read
	// write write
}

func ExampleParseEventType() {
	t, ok := messages.ParseEventType("handed-off") // as EventType.String writes it, and the journal stores it
	fmt.Println(t == messages.EventHandedOff, ok)
	_, ok = messages.ParseEventType("exploded")
	fmt.Println(ok)
	// Output:
	// true true
	// false
}
