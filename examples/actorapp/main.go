// Command actorapp shows lockwarden's actor message API: three worker actors of an application compete
// for one lock by message, the first holder crashes while it holds the lock, its supervisor stops it,
// and the coordinator, which watches the owners of its locks, releases the lock at once so that it
// moves on to the next worker (no waiting for a lease to run out).
//
// It needs no setup: without REDIS_ADDR it starts an embedded Redis (redis-server if it is on PATH,
// else miniredis).
//
//	go run ./examples/actorapp
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/internal/devredis"
	"github.com/lockwarden/lockwarden/messages"
)

const lockName = "actorapp:printer"

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// event is what the workers report to main.
type event struct {
	worker string
	what   string // "acquired" or "released"
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

	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Printf("%6.0fms  %s\n", float64(time.Since(start).Microseconds())/1000, fmt.Sprintf(format, args...))
	}

	// The application's actor system, kept quiet; the coordinator spawns its actors in it.
	quiet := slog.New(slog.DiscardHandler)
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterRequestLogging(false),
	)
	defer system.Shutdown()
	// The coordinator's log shows the death-watch release.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	locks, err := coordinator.New(redisServer.Client(), coordinator.WithActorSystem(system), coordinator.WithLogger(logger))
	if err != nil {
		return err
	}
	defer locks.Close()

	events := make(chan event, 16)
	// The supervisor stops a worker that panics instead of restarting it.
	stopOnPanic := actor.NewOneForOneStrategy(0, 0, func(reason any) actor.Directive {
		say("supervisor: a worker failed (%v); stopping it", reason)
		return actor.StopDirective
	})
	supervisor := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &team{} },
		actor.WithSupervisor(stopOnPanic)))
	hire := func(name string, crashes bool) {
		system.Root.Send(supervisor, &worker{name: name, crashes: crashes, locks: locks.PID(), say: say, events: events})
	}

	// 1. worker-1 takes the lock (a watchdog hold: it never expires while its owner lives).
	hire("worker-1", true)
	if err := await(ctx, events, event{"worker-1", "acquired"}); err != nil {
		return err
	}
	// 2. Two more workers ask for it and wait.
	hire("worker-2", false)
	hire("worker-3", false)

	// 3. worker-1 crashes while it holds the lock; the lock moves on to the waiters, one at a time.
	// The workers report from their own goroutines, so the next holder's "acquired" may reach us
	// before the previous one's "released": the order is checked per worker, and the fencing tokens
	// show the order of the holds.
	held := map[string]string{}
	for range 4 {
		got, err := next(ctx, events)
		if err != nil {
			return err
		}
		switch {
		case got.worker == "worker-1":
			return fmt.Errorf("got %s %s after it crashed", got.worker, got.what)
		case got.what == "acquired" && held[got.worker] == "",
			got.what == "released" && held[got.worker] == "acquired":
			held[got.worker] = got.what
		default:
			return fmt.Errorf("got %s %s after %q", got.worker, got.what, held[got.worker])
		}
	}

	// 4. The lock is free.
	r, err := system.Root.RequestFuture(locks.PID(), &messages.Status{Name: lockName}, 5*time.Second).Result()
	if err != nil {
		return err
	}
	if st, ok := r.(*messages.StatusReply); ok {
		say("status of %q: locked=%v ttl=%v", lockName, st.Locked, st.TTL)
	}
	return nil
}

// next returns the next event.
func next(ctx context.Context, events <-chan event) (event, error) {
	select {
	case got := <-events:
		return got, nil
	case <-ctx.Done():
		return event{}, fmt.Errorf("waiting for the workers: %w", ctx.Err())
	}
}

// await waits for the next event and checks that it is want.
func await(ctx context.Context, events <-chan event, want event) error {
	got, err := next(ctx, events)
	if err == nil && got != want {
		err = fmt.Errorf("got %s %s, want %s %s", got.worker, got.what, want.worker, want.what)
	}
	return err
}

// team is the supervisor: it spawns the workers it is sent as its children.
type team struct{}

func (*team) Receive(ctx actor.Context) {
	if w, ok := ctx.Message().(*worker); ok {
		ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return w }), w.name)
	}
}

// worker asks for the lock when it starts, works for a while when it gets it, and releases it; a
// worker that crashes panics while it holds it.
type worker struct {
	name    string
	crashes bool
	locks   *actor.PID
	say     func(string, ...any)
	events  chan<- event
}

// workDone is the end of a worker's turn.
type workDone struct{}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.say("%s asks for %q", w.name, lockName)
		// No Owner: this actor owns the hold, so the hold ends when the actor does.
		ctx.Request(w.locks, &messages.Acquire{Name: lockName, Wait: messages.WaitForever})
	case *messages.Acquired:
		w.say("%s got the lock (fencing token %d, owner %s)", w.name, m.Token, m.Owner)
		w.events <- event{w.name, "acquired"}
		scheduler.NewTimerScheduler(ctx).SendOnce(300*time.Millisecond, ctx.Self(), workDone{})
	case workDone:
		if w.crashes {
			w.say("%s crashes while it holds the lock", w.name)
			panic(w.name + ": printer on fire")
		}
		ctx.Request(w.locks, &messages.Release{Name: lockName})
	case *messages.Released:
		w.say("%s released the lock", w.name)
		w.events <- event{w.name, "released"}
		ctx.Stop(ctx.Self())
	case *messages.Error:
		w.say("%s: %v", w.name, m)
	}
}
