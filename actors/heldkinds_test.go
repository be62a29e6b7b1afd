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
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// sinkFunc is an EventSink that calls its function on every event.
type sinkFunc func(messages.Event)

func (f sinkFunc) Publish(ev messages.Event) { f(ev) }

// guardianSetup configures testGuardian; the zero value is a guardian with no events, no injected
// failures, a discarded log and a direct connection to Redis.
type guardianSetup struct {
	events EventSink
	inject func(actor string, msg any)
	hooks  []redis.Hook
	logger *slog.Logger
	// proxy, when set, is given the server's address and returns the address the client dials.
	proxy func(upstream string) string
	// idle is the lock actors' idle timeout; 0 means a minute.
	idle time.Duration
}

// testGuardian starts a redis-server and a guardian for it, set up as cfg says. It returns the
// guardian's PID, the env and the root context to send with.
func testGuardian(t *testing.T, cfg guardianSetup) (*actor.PID, *Env, *actor.RootContext) {
	t.Helper()
	srv := redistest.Start(t)
	addr := srv.Addr()
	if cfg.proxy != nil {
		addr = cfg.proxy(addr)
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = client.Close() })
	for _, h := range cfg.hooks {
		client.AddHook(h)
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	logger := cfg.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	failures := &Failures{Logger: logger, Inject: cfg.inject}
	var requests atomic.Uint64
	idle := cfg.idle
	if idle == 0 {
		idle = time.Minute
	}
	env := &Env{
		Ops:                redisops.NewFor(client, redisops.DeploymentSingle),
		Events:             cfg.events,
		CoordinatorID:      "test",
		Bridge:             system.Root.Spawn(NewBridgeProps(client, redisops.DeploymentSingle, ctx, logger, nil, failures)),
		WatchdogTimeout:    30 * time.Second,
		IdleTimeout:        idle,
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
	gate, inject := gateFirstAcquire("a")
	guardian, env, root := testGuardian(t, guardianSetup{events: events, inject: inject.hook})
	owners := []string{"a", "b", "c"}
	tickets := make([]*Ticket, len(owners))
	msgs := make([]any, len(owners))
	for i, owner := range owners {
		tickets[i] = NewTicket()
		msgs[i] = &Acquire{Name: name, Kind: KindRead, Owner: owner, Lease: 30 * time.Second,
			Watchdog: true, Ticket: tickets[i]}
	}
	inject.sendHeld(t, root, guardian, msgs)
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
	gate, inject := gateFirstAcquire("a")
	guardian, env, root := testGuardian(t, guardianSetup{inject: inject.hook})
	if res, err := env.Ops.WriteAcquire(t.Context(), name, "writer", 30*time.Second, 0, 0); err != nil || !res.OK {
		t.Fatalf("WriteAcquire by another owner = %+v, %v", res, err)
	}
	owners := []string{"a", "b", "c"}
	tickets := make([]*Ticket, len(owners))
	msgs := make([]any, len(owners))
	for i, owner := range owners {
		tickets[i] = NewTicket()
		m := &Acquire{Name: name, Kind: KindRead, Owner: owner, Lease: 30 * time.Second, Watchdog: true, Ticket: tickets[i]}
		if owner == "a" {
			m.Span = panicSpan{}
		}
		msgs[i] = m
	}
	inject.sendHeld(t, root, guardian, msgs)
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

// holdHook is a go-redis hook that holds back the first command for which match is true until release
// is closed; held is closed when it has reached the hook.
type holdHook struct {
	match   func(args []any) bool
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd.Args()) && h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.release
		}
		return next(ctx, cmd)
	}
}

// TestFairLeaveKeepsReservation: a fair waiter whose caller left gives its place in the Redis queue up
// with a call that takes a while, and meanwhile another process's release hands it the lock in Redis.
// Until that leave has run, the owner's fair reservation stands: a plain Acquire of the same owner is
// refused with ErrKindMismatch, rather than re-entering the fair hold that the leave is about to give
// back. Once the leave is done, the reservation is freed.
func TestFairLeaveKeepsReservation(t *testing.T) {
	name := t.Name()
	const window = 10 * time.Second
	waiting := make(chan struct{}, 1)
	events := sinkFunc(func(ev messages.Event) {
		if ev.Type == messages.EventWaitStarted && ev.Owner == "o" {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})
	// The leave is fair_cancel.lua for owner o, unclaimed: EVALSHA, its SHA, 4 keys, 6 arguments.
	hook := &holdHook{held: make(chan struct{}), release: make(chan struct{}),
		match: func(args []any) bool {
			return len(args) == 13 && args[7] == "o" && args[12] == "1"
		}}
	guardian, env, root := testGuardian(t, guardianSetup{events: events, hooks: []redis.Hook{hook}})
	released := false
	t.Cleanup(func() { // before the guardian stops
		if !released {
			close(hook.release)
		}
	})
	if res, err := env.Ops.FairAcquire(t.Context(), name, "x", 30*time.Second, window, 0, false); err != nil || !res.OK {
		t.Fatalf("FairAcquire by another process = %+v, %v", res, err)
	}
	wait := NewTicket()
	// A lease shorter than the wait window lets the release hand the lock to the registered waiter.
	root.Send(guardian, &Acquire{Name: name, Kind: KindFair, Owner: "o", Lease: window / 2, Wait: true,
		WaitWindow: window, Ticket: wait})
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the fair waiter did not start waiting")
	}
	hook.armed.Store(true)
	if !wait.Abandon() {
		t.Fatalf("the fair wait was answered: %+v", <-wait.Result())
	}
	root.Send(guardian, &Abandon{Name: name, Kind: KindFair, Ticket: wait})
	select {
	case <-hook.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the fair waiter did not leave the queue")
	}
	rel, err := env.Ops.FairRelease(t.Context(), name, "x", "release-x", 30*time.Second, nil)
	if err != nil || rel.Next != "o" || !rel.Registered {
		t.Fatalf("FairRelease by the other process = %+v, %v; want the lock handed to o", rel, err)
	}
	plain := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "o", Lease: 30 * time.Second, Ticket: plain})
	if o := outcome(t, plain, 5*time.Second, "plain acquire during the fair leave"); o.Reason != messages.ReasonKindMismatch {
		t.Errorf("plain acquire of o while its fair leave runs = %+v, want ReasonKindMismatch", o)
	}
	close(hook.release)
	released = true
	// A command after the Abandon in the fair actor's mailbox is answered once the leave is done.
	probe := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindFair, Owner: "z", Lease: 30 * time.Second, WaitWindow: window, Ticket: probe})
	outcome(t, probe, 5*time.Second, "fair acquire after the leave")
	if env.Held.otherFamily(name, "o", KindPlain) {
		t.Errorf("o keeps its fair reservation on %s after the leave", name)
	}
}

// warnHandler signals on warned each warning whose message is msg.
type warnHandler struct {
	msg    string
	warned chan struct{}
}

func (h *warnHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *warnHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *warnHandler) WithGroup(string) slog.Handler            { return h }
func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && r.Message == h.msg {
		select {
		case h.warned <- struct{}{}:
		default:
		}
	}
	return nil
}

// TestFairLeaveRetryKeepsReservation: a fair waiter whose caller left cannot give its place in the
// Redis queue up (the connection to Redis is cut), and the leave is retried. While it is, the owner's
// fair reservation stands: a plain Acquire of the same owner is refused with ErrKindMismatch (without
// the reservation it would go to Redis). When the leave finally succeeds, the reservation is freed.
func TestFairLeaveRetryKeepsReservation(t *testing.T) {
	name := t.Name()
	const window = 20 * time.Second
	waiting := make(chan struct{}, 1)
	events := sinkFunc(func(ev messages.Event) {
		if ev.Type == messages.EventWaitStarted && ev.Owner == "o" {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})
	warn := &warnHandler{msg: "leaving the fair queue failed; retrying", warned: make(chan struct{}, 1)}
	var enabled atomic.Bool
	retried := make(chan struct{}, 1)
	inject := func(actor string, msg any) {
		if _, ok := msg.(leaveRetry); ok && enabled.Load() {
			select {
			case retried <- struct{}{}:
			default:
			}
		}
	}
	var px *redistest.Proxy
	guardian, env, root := testGuardian(t, guardianSetup{events: events, inject: inject, logger: slog.New(warn),
		proxy: func(upstream string) string { px = redistest.NewProxy(t, upstream); return px.Addr() }})
	if res, err := env.Ops.FairAcquire(t.Context(), name, "x", 30*time.Second, window, 0, false); err != nil || !res.OK {
		t.Fatalf("FairAcquire by another process = %+v, %v", res, err)
	}
	wait := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindFair, Owner: "o", Lease: 30 * time.Second, Watchdog: true,
		Wait: true, WaitWindow: window, Ticket: wait})
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the fair waiter did not start waiting")
	}
	px.Disable()
	if !wait.Abandon() {
		t.Fatalf("the fair wait was answered: %+v", <-wait.Result())
	}
	root.Send(guardian, &Abandon{Name: name, Kind: KindFair, Ticket: wait})
	select {
	case <-warn.warned:
	case <-time.After(10 * time.Second):
		t.Fatal("the leave did not fail")
	}
	plain := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "o", Lease: 30 * time.Second, Ticket: plain})
	if o := outcome(t, plain, 10*time.Second, "plain acquire while the leave is retried"); o.Reason != messages.ReasonKindMismatch {
		t.Errorf("plain acquire of o while its fair leave is retried = %+v, want ReasonKindMismatch", o)
	}
	px.Enable()
	enabled.Store(true)
	// A retry may still meet a connection that the cut broke; the leave is retried until it succeeds.
	deadline := time.After(15 * time.Second)
	for freed := false; !freed; {
		select {
		case <-retried:
		case <-deadline:
			t.Fatal("the leave was not retried after the connection came back")
		}
		// A command after the retry in the fair actor's mailbox is answered once the retry is done.
		probe := NewTicket()
		root.Send(guardian, &Acquire{Name: name, Kind: KindFair, Owner: "z", Lease: 30 * time.Second, WaitWindow: window, Ticket: probe})
		outcome(t, probe, 10*time.Second, "fair acquire after the retried leave")
		freed = !env.Held.otherFamily(name, "o", KindPlain)
	}
}

// heldAcquire holds the lock actor's handling of the first Acquire of one owner until a gate closes,
// so that the commands sent meanwhile wait in its mailbox behind it.
type heldAcquire struct {
	owner   string
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

// gateFirstAcquire returns the gate to close and the hold of owner's first Acquire.
func gateFirstAcquire(owner string) (chan struct{}, *heldAcquire) {
	h := &heldAcquire{owner: owner, gate: make(chan struct{}), entered: make(chan struct{})}
	return h.gate, h
}

// hook is the guardianSetup.inject of h.
func (h *heldAcquire) hook(actor string, msg any) {
	if m, ok := msg.(*Acquire); ok && actor == "lock actor" && m.Owner == h.owner {
		h.once.Do(func() {
			close(h.entered)
			<-h.gate
		})
	}
}

// sendHeld sends msgs[0], the held Acquire, from a goroutine of its own (the actor's turn may run on
// the sending goroutine: inlineMailbox), waits until the actor holds it, and sends the others, which
// wait in the mailbox behind it.
func (h *heldAcquire) sendHeld(t *testing.T, root *actor.RootContext, guardian *actor.PID, msgs []any) {
	t.Helper()
	go root.Send(guardian, msgs[0])
	select {
	case <-h.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock actor did not take the first Acquire")
	}
	for _, m := range msgs[1:] {
		root.Send(guardian, m)
	}
}

// TestHeldKindsHeldBefore: the holds older than the cutoff, oldest first, and never a pending-only
// record; Snapshot lists holds and waiters with their times.
func TestHeldKindsHeldBefore(t *testing.T) {
	var h HeldKinds
	base := time.Unix(1000, 0)
	h.add("a", "o1", KindPlain, base.Add(time.Second))
	h.add("b", "o2", KindRead, base)
	h.add("b", "o2", KindWrite, base.Add(5*time.Second)) // a second kind keeps the first time
	h.add("z", "o4", KindPlain, base.Add(time.Hour))     // too young
	h.reserve("c", "o3", KindFair, base)                 // waiting only
	got := h.HeldBefore(base.Add(3*time.Second), nil)
	want := []HeldEntry{{"b", "o2", base}, {"a", "o1", base.Add(time.Second)}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("HeldBefore = %v, want %v", got, want)
	}
	if again := h.HeldBefore(base.Add(3*time.Second), got); &again[0] != &got[0] {
		t.Fatal("HeldBefore did not reuse the slice it was given")
	}
	snap := h.Snapshot()
	if len(snap) != 4 || snap[2].Name != "c" || snap[2].Waiting[KindFair] != 1 || !snap[2].WaitingSince.Equal(base) || len(snap[2].Held) != 0 {
		t.Fatalf("Snapshot = %+v", snap)
	}
	h.remove("a", "o1", KindPlain)
	h.remove("z", "o4", KindPlain)
	h.unreserve("c", "o3", KindFair)
	if snap := h.Snapshot(); len(snap) != 1 || snap[0].Name != "b" || len(snap[0].Held) != 2 {
		t.Fatalf("Snapshot after the ends = %+v", snap)
	}
}

// TestHeldKindsShards: records of names spread over every shard come back whole and in order, and
// concurrent acquisitions and releases on shared names (under -race) leave nothing behind.
func TestHeldKindsShards(t *testing.T) {
	var h HeldKinds
	base := time.Unix(1000, 0)
	const names = 200
	shards := map[*heldShard]bool{}
	for i := range names {
		name := "n" + strconv.Itoa(names-1-i) // added in reverse order
		shards[h.shard(name)] = true
		h.add(name, "o", KindPlain, base.Add(time.Duration(i)*time.Second))
	}
	if len(shards) < 2 {
		t.Fatalf("%d names on %d shard(s), want them spread", names, len(shards))
	}
	snap := h.Snapshot()
	if len(snap) != names {
		t.Fatalf("Snapshot has %d records, want %d", len(snap), names)
	}
	for i := 1; i < len(snap); i++ {
		if snap[i-1].Name >= snap[i].Name {
			t.Fatalf("Snapshot out of order at %d: %q then %q", i, snap[i-1].Name, snap[i].Name)
		}
	}
	held := h.HeldBefore(base.Add(time.Hour), nil)
	if len(held) != names {
		t.Fatalf("HeldBefore has %d entries, want %d", len(held), names)
	}
	for i := 1; i < len(held); i++ {
		if !held[i-1].Since.Before(held[i].Since) {
			t.Fatalf("HeldBefore out of order at %d: %v then %v", i, held[i-1].Since, held[i].Since)
		}
	}
	for i := range names {
		h.remove("n"+strconv.Itoa(i), "o", KindPlain)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	readers := make(chan struct{})
	go func() { // reads every shard while the records change (a read without its shard's lock races)
		defer close(readers)
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.Snapshot()
			h.HeldBefore(time.Now(), nil)
		}
	}()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				name, owner := "c"+strconv.Itoa(i%16), "o"+strconv.Itoa(g)
				if !h.reserve(name, owner, KindPlain, time.Time{}) {
					t.Errorf("reserve %s for %s refused", name, owner)
					return
				}
				h.add(name, owner, KindPlain, time.Now())
				h.unreserve(name, owner, KindPlain)
				if !h.otherFamily(name, owner, KindRead) {
					t.Errorf("a plain hold of %s on %s is not another family than a read", owner, name)
					return
				}
				h.remove(name, owner, KindPlain)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-readers
	if snap := h.Snapshot(); len(snap) != 0 {
		t.Fatalf("%d records left, want none: %+v", len(snap), snap)
	}
}
