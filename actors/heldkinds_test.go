package actors

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// sinkFunc is an EventSink that calls its function on every event.
type sinkFunc func(messages.Event)

func (f sinkFunc) Publish(ev messages.Event) { f(ev) }

// testGuardian starts a redis-server and a guardian whose lock actors publish to events (nil: none)
// and run inject before every message (nil: nothing). It returns the guardian's PID, the env and the
// root context to send with.
func testGuardian(t *testing.T, events EventSink, inject func(string, any)) (*actor.PID, *Env, *actor.RootContext) {
	t.Helper()
	srv := redistest.Start(t)
	client := srv.Client(t)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.DiscardHandler)
	failures := &Failures{Logger: logger, Inject: inject}
	var requests atomic.Uint64
	env := &Env{
		Ops:                redisops.NewFor(client, redisops.DeploymentSingle),
		Events:             events,
		CoordinatorID:      "test",
		Bridge:             system.Root.Spawn(NewBridgeProps(client, redisops.DeploymentSingle, ctx, logger, nil, failures)),
		WatchdogTimeout:    30 * time.Second,
		IdleTimeout:        time.Minute,
		MaxHandoffs:        8,
		StopReleaseTimeout: 2 * time.Second,
		Failures:           failures,
		Context:            ctx,
		Logger:             logger,
		NewRequestID:       func() string { return "test:r" + strconv.FormatUint(requests.Add(1), 10) },
		Held:               &HeldKinds{},
		NewBackOff:         DefaultBackOff,
	}
	guardian := system.Root.Spawn(NewGuardianProps(env))
	t.Cleanup(func() {
		_ = system.Root.StopFuture(guardian).Wait()
		_ = system.Root.StopFuture(env.Bridge).Wait()
		cancel()
		system.Shutdown()
	})
	return guardian, env, system.Root
}

// outcome waits for the outcome of t, or fails the test after within.
func outcome(t *testing.T, ticket *Ticket, within time.Duration, what string) Outcome {
	t.Helper()
	select {
	case o := <-ticket.Result():
		return o
	case <-time.After(within):
		t.Fatalf("%s: no answer within %v", what, within)
		return Outcome{}
	}
}

// TestBatchSettlePanicSettlesTheRest: the lock actor panics while it settles a read batch (here the
// event of the first grant panics). The batch's other calls are settled all the same: their callers
// get an answer rather than waiting forever, and the kinds they reserved are freed when they end, so
// the owners can use the name as a plain lock afterwards.
func TestBatchSettlePanicSettlesTheRest(t *testing.T) {
	name := t.Name()
	var fired atomic.Bool
	events := sinkFunc(func(ev messages.Event) {
		if ev.Type == messages.EventAcquired && ev.Owner == "a" && fired.CompareAndSwap(false, true) {
			panic("injected failure")
		}
	})
	// The lock actor holds its first Acquire until all three are in its mailbox, so that they join
	// one batch.
	gate := make(chan struct{})
	var once sync.Once
	inject := func(actor string, msg any) {
		if m, ok := msg.(*Acquire); ok && actor == "lock actor" && m.Owner == "a" {
			once.Do(func() { <-gate })
		}
	}
	guardian, env, root := testGuardian(t, events, inject)
	owners := []string{"a", "b", "c"}
	tickets := make([]*Ticket, len(owners))
	for i, owner := range owners {
		tickets[i] = NewTicket()
		root.Send(guardian, &Acquire{Name: name, Kind: KindRead, Owner: owner, Lease: 30 * time.Second,
			Watchdog: true, Ticket: tickets[i]})
	}
	close(gate)
	for i, owner := range owners {
		o := outcome(t, tickets[i], 5*time.Second, "read acquire of "+owner)
		if owner != "a" && (o.Reason != messages.ReasonNone || o.HoldCount != 1) {
			t.Errorf("read acquire of %s = %+v, want granted", owner, o)
		}
	}
	if !fired.Load() {
		t.Fatal("the injected panic did not fire")
	}
	for _, owner := range owners {
		rel := NewTicket()
		root.Send(guardian, &Release{Name: name, Kind: KindRead, Owner: owner, Ticket: rel})
		if o := outcome(t, rel, 5*time.Second, "release of "+owner); o.Reason != messages.ReasonNone && !errors.Is(o.Err, ErrActorFailed) {
			t.Errorf("release of %s = %+v", owner, o)
		}
		if env.Held.otherFamily(name, owner, KindPlain) {
			t.Errorf("owner %s still has a read reservation or hold on %s after its release", owner, name)
		}
	}
}

// panicSpan is a recording span whose events panic.
type panicSpan struct{ noop.Span }

func (panicSpan) IsRecording() bool { return true }
func (panicSpan) AddEvent(string, ...trace.EventOption) {
	panic("injected failure")
}

// TestBatchSettlePanicBeforeAnswer: the settlement of a batched read acquire panics before its caller
// was answered (recording the refused attempt on the caller's span). That caller gets ErrActorFailed,
// the batch's other callers get their answers (not obtained: another owner holds the write lock), and
// every reservation is freed.
func TestBatchSettlePanicBeforeAnswer(t *testing.T) {
	name := t.Name()
	gate := make(chan struct{})
	var once sync.Once
	inject := func(actor string, msg any) {
		if m, ok := msg.(*Acquire); ok && actor == "lock actor" && m.Owner == "a" {
			once.Do(func() { <-gate })
		}
	}
	guardian, env, root := testGuardian(t, nil, inject)
	if res, err := env.Ops.WriteAcquire(t.Context(), name, "writer", 30*time.Second, 0, 0); err != nil || !res.OK {
		t.Fatalf("WriteAcquire by another owner = %+v, %v", res, err)
	}
	owners := []string{"a", "b", "c"}
	tickets := make([]*Ticket, len(owners))
	for i, owner := range owners {
		tickets[i] = NewTicket()
		m := &Acquire{Name: name, Kind: KindRead, Owner: owner, Lease: 30 * time.Second, Watchdog: true, Ticket: tickets[i]}
		if owner == "a" {
			m.Span = panicSpan{}
		}
		root.Send(guardian, m)
	}
	close(gate)
	for i, owner := range owners {
		o := outcome(t, tickets[i], 5*time.Second, "read acquire of "+owner)
		want := messages.ReasonNotObtained
		if owner == "a" {
			want = messages.ReasonRedis
			if !errors.Is(o.Err, ErrActorFailed) {
				t.Errorf("read acquire of a: err = %v, want ErrActorFailed", o.Err)
			}
		}
		if o.Reason != want {
			t.Errorf("read acquire of %s = %+v, want reason %v", owner, o, want)
		}
		if env.Held.otherFamily(name, owner, KindPlain) {
			t.Errorf("owner %s keeps a read reservation on %s after its answer", owner, name)
		}
	}
}
