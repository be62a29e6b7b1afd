package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// newActorSystem returns a quiet actor system, shut down at cleanup (after the coordinators on it close,
// since cleanups run last-registered first).
func newActorSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }),
		actor.WithDeadLetterRequestLogging(false),
		actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
	)
	t.Cleanup(system.Shutdown)
	return system
}

// setupActorAPI starts a redis-server and returns a client, an application's actor system and a
// coordinator whose actors run in it.
func setupActorAPI(t *testing.T) (*redis.Client, *actor.ActorSystem, *coordinator.Coordinator) {
	t.Helper()
	srv := redistest.Start(t)
	client := srv.Client(t)
	system := newActorSystem(t)
	return client, system, newCoordinator(t, client, coordinator.WithActorSystem(system))
}

// apiClient is an application actor that talks to a coordinator's gateway: the test tells it what to
// Request, and it hands every message it receives to the test.
type apiClient struct {
	gateway *actor.PID
	replies chan any
}

// request tells an apiClient to Request msg from the gateway, as itself (so it is the owner).
type request struct{ msg any }

// crash makes an apiClient panic.
type crash struct{}

func (a *apiClient) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case request:
		ctx.Request(a.gateway, m.msg)
	case crash:
		panic("apiClient: crash requested")
	case actor.SystemMessage, actor.AutoReceiveMessage, *actor.Stopped:
	default:
		select {
		case a.replies <- m:
		default: // the test reads every reply it expects; more would be a bug it reports elsewhere
		}
	}
}

// testActor is the test's handle on an apiClient.
type testActor struct {
	name    string
	system  *actor.ActorSystem
	pid     *actor.PID
	replies chan any
}

func newClientProps(gateway *actor.PID, replies chan any) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &apiClient{gateway: gateway, replies: replies} })
}

// spawnClient spawns an apiClient at the root of system.
func spawnClient(t *testing.T, system *actor.ActorSystem, gateway *actor.PID, name string) *testActor {
	t.Helper()
	replies := make(chan any, 64)
	pid := system.Root.Spawn(newClientProps(gateway, replies))
	t.Cleanup(func() { system.Root.Stop(pid) })
	return &testActor{name: name, system: system, pid: pid, replies: replies}
}

// supervisor spawns one child and stops it, rather than restarting it, when it fails.
type supervisor struct {
	child    *actor.Props
	children chan *actor.PID
}

func (s *supervisor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		s.children <- ctx.Spawn(s.child)
	}
}

// spawnSupervisedClient spawns an apiClient as the child of a supervisor that stops it when it panics.
func spawnSupervisedClient(t *testing.T, system *actor.ActorSystem, gateway *actor.PID, name string) *testActor {
	t.Helper()
	replies := make(chan any, 64)
	children := make(chan *actor.PID, 1)
	stopOnFailure := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	parent := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{child: newClientProps(gateway, replies), children: children}
	}, actor.WithSupervisor(stopOnFailure)))
	t.Cleanup(func() { system.Root.Stop(parent) })
	select {
	case pid := <-children:
		return &testActor{name: name, system: system, pid: pid, replies: replies}
	case <-time.After(5 * time.Second):
		t.Fatal("the supervisor did not spawn its child within 5s")
		return nil
	}
}

// send makes the actor Request msg from the gateway.
func (a *testActor) send(msg any) { a.system.Root.Send(a.pid, request{msg}) }

// next waits for the actor's next reply.
func (a *testActor) next(t *testing.T, within time.Duration) any {
	t.Helper()
	select {
	case r := <-a.replies:
		return r
	case <-time.After(within):
		t.Fatalf("%s got no reply within %v", a.name, within)
		return nil
	}
}

// ask makes the actor Request msg and returns the reply.
func (a *testActor) ask(t *testing.T, msg any) any {
	t.Helper()
	a.send(msg)
	return a.next(t, 5*time.Second)
}

// expectNoReply checks that the actor gets no reply for a short window.
func (a *testActor) expectNoReply(t *testing.T) {
	t.Helper()
	select {
	case r := <-a.replies:
		t.Fatalf("%s got %#v, want no reply yet", a.name, r)
	case <-time.After(100 * time.Millisecond):
	}
}

// stop stops the actor and waits until it has stopped; it returns when the stop was asked for.
func (a *testActor) stop(t *testing.T) time.Time {
	t.Helper()
	start := time.Now()
	if err := a.system.Root.StopFuture(a.pid).Wait(); err != nil {
		t.Fatalf("stopping %s: %v", a.name, err)
	}
	return start
}

func mustAcquired(t *testing.T, who string, r any) *messages.Acquired {
	t.Helper()
	a, ok := r.(*messages.Acquired)
	if !ok {
		t.Fatalf("%s got %#v, want *messages.Acquired", who, r)
	}
	return a
}

func mustError(t *testing.T, r any, want error) {
	t.Helper()
	e, ok := r.(*messages.Error)
	if !ok {
		t.Fatalf("got %#v, want *messages.Error matching %v", r, want)
	}
	if !errors.Is(e.Err, want) || !errors.Is(e, want) {
		t.Fatalf("got error %v, want one matching %v", e.Err, want)
	}
}

// subscribeUnlocks subscribes to the unlock channels of names and returns the channel of their notices.
func subscribeUnlocks(t *testing.T, client *redis.Client, names ...string) <-chan *redis.Message {
	t.Helper()
	channels := make([]string, len(names))
	for i, n := range names {
		channels[i] = redisops.ChannelName(n)
	}
	ps := client.Subscribe(t.Context(), channels...)
	t.Cleanup(func() { _ = ps.Close() })
	for range channels {
		if _, err := ps.Receive(t.Context()); err != nil { // the subscription confirmations
			t.Fatalf("subscribing to %v: %v", channels, err)
		}
	}
	return ps.Channel()
}

// TestActorAPICompeteAndStop: two actors compete for one lock by message; the holder (which re-entered)
// is stopped, the gateway releases both its holds, and the lock goes to the waiting actor.
func TestActorAPICompeteAndStop(t *testing.T) {
	t.Parallel()
	client, system, c := setupActorAPI(t)
	name := "lockwarden:actorapi:" + t.Name()
	alice := spawnClient(t, system, c.PID(), "alice")
	bob := spawnClient(t, system, c.PID(), "bob")

	first := mustAcquired(t, "alice", alice.ask(t, &messages.Acquire{Name: name}))
	again := mustAcquired(t, "alice", alice.ask(t, &messages.Acquire{Name: name}))
	if again.HoldCount != 2 || again.Owner != first.Owner || !again.Watchdog {
		t.Fatalf("alice's re-entry = %+v, want hold count 2, owner %q, watchdog", again, first.Owner)
	}
	if r := bob.ask(t, &messages.Acquire{Name: name}); func() bool { n, ok := r.(*messages.NotObtained); return !ok || n.Reason != messages.ReasonNotObtained }() {
		t.Fatalf("bob's single attempt got %#v, want NotObtained", r)
	}
	bob.send(&messages.Acquire{Name: name, Wait: messages.WaitForever})
	bob.expectNoReply(t)

	events := c.Subscribe(coordinator.OfType(messages.EventReleased), 8)
	defer events.Close()
	stopped := alice.stop(t)
	got := mustAcquired(t, "bob", bob.next(t, 5*time.Second))
	took := time.Since(stopped)
	t.Logf("bob got the lock %v after alice was stopped", took)
	if took > time.Second {
		t.Errorf("bob got the lock %v after alice stopped, want < 1s", took)
	}
	if got.Token <= again.Token || got.HoldCount != 1 || got.Owner == first.Owner {
		t.Errorf("bob's hold = %+v, want a token > %d, hold count 1, an owner other than %q", got, again.Token, first.Owner)
	}
	fields, err := client.HGetAll(t.Context(), name).Result()
	if err != nil || len(fields) != 1 || fields[got.Owner] != "1" {
		t.Errorf("HGETALL %s = %v, %v; want only {%s: 1}", name, fields, err, got.Owner)
	}
	// The Released events say why: alice's two holds went because alice stopped.
	for want := int64(1); want >= 0; want-- {
		ev := evNext(t, events)
		if ev.Owner != first.Owner || ev.HoldCount != want || ev.Reason != messages.ReleaseCauseOwnerStopped {
			t.Errorf("Released event = %+v, want owner %s, holds left %d, reason %q", ev, first.Owner, want, messages.ReleaseCauseOwnerStopped)
		}
	}
	if r, ok := bob.ask(t, &messages.Release{Name: name}).(*messages.Released); !ok || r.HoldCount != 0 {
		t.Errorf("bob's release got %#v, want Released with hold count 0", r)
	}
}

// TestActorAPIOwnerCrash: the holder panics under a supervisor that stops it; its hold is released and
// the waiting actor gets the lock.
func TestActorAPIOwnerCrash(t *testing.T) {
	t.Parallel()
	_, system, c := setupActorAPI(t)
	name := "lockwarden:actorapi:" + t.Name()
	worker := spawnSupervisedClient(t, system, c.PID(), "worker")
	waiter := spawnClient(t, system, c.PID(), "waiter")

	held := mustAcquired(t, "worker", worker.ask(t, &messages.Acquire{Name: name, Lease: time.Minute}))
	waiter.send(&messages.Acquire{Name: name, Wait: 30 * time.Second})
	waiter.expectNoReply(t)

	crashed := time.Now()
	system.Root.Send(worker.pid, crash{})
	got := mustAcquired(t, "waiter", waiter.next(t, 5*time.Second))
	took := time.Since(crashed)
	t.Logf("the waiter got the lock %v after the holder crashed (its lease had a minute left)", took)
	if took > time.Second {
		t.Errorf("the waiter got the lock %v after the crash, want < 1s", took)
	}
	if got.Token <= held.Token {
		t.Errorf("the waiter's token %d is not above the crashed holder's %d", got.Token, held.Token)
	}
}

// TestActorAPIDeathWatchLatency: every hold of an owner that stops (two locks, one re-entered) is
// released within about 100 ms, measured from the stop to the unlock notices in Redis.
func TestActorAPIDeathWatchLatency(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	system := newActorSystem(t)
	logged := make(chan map[string]string, 8)
	c := newCoordinator(t, client, coordinator.WithActorSystem(system),
		coordinator.WithLogger(slog.New(&releaseLog{records: logged})))
	base := "lockwarden:actorapi:" + t.Name()
	names := []string{base + ":a", base + ":b"}
	owner := spawnClient(t, system, c.PID(), "owner")
	for _, n := range names {
		mustAcquired(t, "owner", owner.ask(t, &messages.Acquire{Name: n}))
	}
	if a := mustAcquired(t, "owner", owner.ask(t, &messages.Acquire{Name: names[0]})); a.HoldCount != 2 {
		t.Fatalf("re-entry hold count = %d, want 2", a.HoldCount)
	}
	notices := subscribeUnlocks(t, client, names...)

	stopped := owner.stop(t)
	freed := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for len(freed) < len(names) {
		select {
		case msg := <-notices:
			freed[msg.Channel] = true
		case <-deadline:
			t.Fatalf("only %d of %d locks were released within 5s of the owner stopping", len(freed), len(names))
		}
	}
	took := time.Since(stopped)
	t.Logf("death watch: every hold released %v after the owner was stopped", took)
	if took > time.Second {
		t.Errorf("the holds were released %v after the owner stopped, want about 100ms (< 1s)", took)
	}
	for _, n := range names {
		if exists, err := client.Exists(t.Context(), n).Result(); err != nil || exists != 0 {
			t.Errorf("EXISTS %s = %d, %v; want 0", n, exists, err)
		}
	}
	// Each release is logged with its cause and the number of holds released.
	wantHolds := map[string]string{names[0]: "2", names[1]: "1"}
	for range names {
		select {
		case rec := <-logged:
			if rec["cause"] != messages.ReleaseCauseOwnerStopped || wantHolds[rec["lock"]] != rec["holds"] {
				t.Errorf("log record %v, want cause %q and holds %v", rec, messages.ReleaseCauseOwnerStopped, wantHolds)
			}
			delete(wantHolds, rec["lock"])
		case <-time.After(5 * time.Second):
			t.Fatalf("no log record of the release of %v", wantHolds)
		}
	}
}

// releaseLog is a slog handler that passes the attributes of every record with a cause to records.
type releaseLog struct{ records chan<- map[string]string }

func (*releaseLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *releaseLog) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h *releaseLog) WithGroup(string) slog.Handler          { return h }
func (h *releaseLog) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if _, ok := attrs["cause"]; ok {
		h.records <- attrs
	}
	return nil
}

// TestActorAPIWaitCancelledByOwnerStop: an actor whose Acquire waits stops; its wait ends, and it does
// not get the lock when the holder releases it.
func TestActorAPIWaitCancelledByOwnerStop(t *testing.T) {
	t.Parallel()
	client, system, c := setupActorAPI(t)
	name := "lockwarden:actorapi:" + t.Name()
	// The holder is another process, so the waiter's lock actor waits on Redis' unlock notice.
	holder := newCoordinator(t, client).Mutex(name)
	mustLock(t, holder)
	waiter := spawnClient(t, system, c.PID(), "waiter")
	waiter.send(&messages.Acquire{Name: name, Wait: messages.WaitForever})
	// The lock actor subscribes to the unlock channel while it has a waiter, and unsubscribes once the
	// waiter has left its queue.
	leakWaitSubscribed(t, client, name, 1)
	waiter.stop(t)
	leakWaitSubscribed(t, client, name, 0)

	mustUnlock(t, holder)
	if exists, err := client.Exists(t.Context(), name).Result(); err != nil || exists != 0 {
		fields, _ := client.HGetAll(t.Context(), name).Result()
		t.Fatalf("after the holder's unlock, EXISTS %s = %d, %v (%v); want 0: the stopped waiter got it", name, exists, err, fields)
	}
	if ok, err := c.Mutex(name).TryLock(t.Context()); !ok || err != nil {
		t.Fatalf("TryLock after the waiter stopped = %v, %v; want true", ok, err)
	}
}

// TestActorAPIBadInput: invalid messages get an Error reply with the matching sentinel error, never a
// panic, and leave the lock of another owner alone.
func TestActorAPIBadInput(t *testing.T) {
	t.Parallel()
	client, system, c := setupActorAPI(t)
	name := "lockwarden:actorapi:" + t.Name()
	holder := spawnClient(t, system, c.PID(), "holder")
	held := mustAcquired(t, "holder", holder.ask(t, &messages.Acquire{Name: name}))
	probe := spawnClient(t, system, c.PID(), "probe")

	for _, tc := range []struct {
		what string
		msg  any
		want error
	}{
		{"acquire, empty name", &messages.Acquire{}, coordinator.ErrEmptyName},
		{"acquire, unknown kind", &messages.Acquire{Name: name, Kind: 9}, coordinator.ErrInvalidKind},
		{"acquire, negative wait", &messages.Acquire{Name: name, Wait: -time.Second}, coordinator.ErrInvalidWait},
		{"acquire, negative lease", &messages.Acquire{Name: name, Lease: -time.Second}, coordinator.ErrInvalidLease},
		{"acquire, huge wait", &messages.Acquire{Name: name, Wait: coordinator.MaxDuration + 1}, coordinator.ErrInvalidWait},
		{"acquire, huge lease", &messages.Acquire{Name: name, Lease: math.MaxInt64}, coordinator.ErrInvalidLease},
		{"acquire, nil", (*messages.Acquire)(nil), coordinator.ErrInvalidMessage},
		{"release, empty name", &messages.Release{Kind: messages.KindFair}, coordinator.ErrEmptyName},
		{"release, unknown kind", messages.Release{Name: name, Kind: 200}, coordinator.ErrInvalidKind},
		{"release, nil", (*messages.Release)(nil), coordinator.ErrInvalidMessage},
		{"force unlock, empty name", &messages.ForceUnlock{}, coordinator.ErrEmptyName},
		{"force unlock, unknown kind", &messages.ForceUnlock{Name: name, Kind: 4}, coordinator.ErrInvalidKind},
		{"force unlock, nil", (*messages.ForceUnlock)(nil), coordinator.ErrInvalidMessage},
		{"status, empty name", &messages.Status{}, coordinator.ErrEmptyName},
		{"status, nil", (*messages.Status)(nil), coordinator.ErrInvalidMessage},
		{"primitive, nil", (*messages.Primitive)(nil), coordinator.ErrInvalidMessage},
		{"unknown message", struct{ X int }{1}, coordinator.ErrInvalidMessage},
		{"a string", "acquire please", coordinator.ErrInvalidMessage},
	} {
		t.Run(tc.what, func(t *testing.T) { mustError(t, probe.ask(t, tc.msg), tc.want) })
	}

	// A future is no owner: an Acquire from RequestFuture needs an explicit Owner.
	r, err := system.Root.RequestFuture(c.PID(), &messages.Acquire{Name: name + ":future"}, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("RequestFuture: %v", err)
	}
	mustError(t, r, coordinator.ErrNoOwner)

	// Releasing what one does not hold is an answer, not an error.
	if r, ok := probe.ask(t, &messages.Release{Name: name}).(*messages.NotHeld); !ok || r.Name != name {
		t.Fatalf("release by a non-holder got %#v, want NotHeld", r)
	}
	// A bounded wait runs out.
	start := time.Now()
	if r, ok := probe.ask(t, &messages.Acquire{Name: name, Wait: 150 * time.Millisecond}).(*messages.NotObtained); !ok || r.Reason != messages.ReasonNotObtained {
		t.Fatalf("bounded wait got %#v, want NotObtained", r)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("bounded wait answered after %v, want >= 150ms", waited)
	}
	// The holder's hold is untouched.
	if fields, err := client.HGetAll(t.Context(), name).Result(); err != nil || len(fields) != 1 || fields[held.Owner] != "1" {
		t.Fatalf("HGETALL %s = %v, %v; want only {%s: 1}", name, fields, err, held.Owner)
	}
	st, ok := holder.ask(t, &messages.Status{Name: name}).(*messages.StatusReply)
	if !ok || !st.Locked || !st.Held || st.HoldCount != 1 || st.TTL <= 0 || st.Owner != held.Owner {
		t.Fatalf("holder's status = %#v, want locked, held once, a TTL, owner %q", st, held.Owner)
	}
}

// TestActorAPIExplicitOwner: an explicit Owner id carries a hold across actors and messages, and is not
// tied to the life of the actor that took it. ForceUnlock frees it.
func TestActorAPIExplicitOwner(t *testing.T) {
	t.Parallel()
	client, system, c := setupActorAPI(t)
	name := "lockwarden:actorapi:" + t.Name()
	owner := "job:" + t.Name()
	taker := spawnClient(t, system, c.PID(), "taker")
	finisher := spawnClient(t, system, c.PID(), "finisher")

	a := mustAcquired(t, "taker", taker.ask(t, &messages.Acquire{Name: name, Owner: owner, Lease: time.Minute}))
	if a.Owner != owner || a.Watchdog || a.Lease != time.Minute {
		t.Fatalf("acquired %+v, want owner %q and a fixed lease of 1m", a, owner)
	}
	if st, ok := finisher.ask(t, &messages.Status{Name: name, Owner: owner}).(*messages.StatusReply); !ok || !st.Held || st.HoldCount != 1 {
		t.Fatalf("finisher's status for %q = %#v, want held once", owner, st)
	}
	if st, ok := finisher.ask(t, &messages.Status{Name: name}).(*messages.StatusReply); !ok || !st.Locked || st.Held {
		t.Fatalf("finisher's own status = %#v, want locked but not held", st)
	}
	if r := mustAcquired(t, "finisher", finisher.ask(t, &messages.Acquire{Name: name, Owner: owner})); r.HoldCount != 2 {
		t.Fatalf("re-entry by the finisher: hold count %d, want 2", r.HoldCount)
	}
	taker.stop(t)
	// Not watched: the holds outlive the actor that took them. (A wrong release would have happened
	// right away, before the next message's answer.)
	if st, ok := finisher.ask(t, &messages.Status{Name: name, Owner: owner}).(*messages.StatusReply); !ok || st.HoldCount != 2 {
		t.Fatalf("status after the taker stopped = %#v, want hold count 2", st)
	}
	for want := int64(1); want >= 0; want-- {
		if r, ok := finisher.ask(t, &messages.Release{Name: name, Owner: owner}).(*messages.Released); !ok || r.HoldCount != want || r.Owner != owner {
			t.Fatalf("release got %#v, want Released with %d left", r, want)
		}
	}
	if _, ok := finisher.ask(t, &messages.Release{Name: name, Owner: owner}).(*messages.NotHeld); !ok {
		t.Fatal("a third release did not get NotHeld")
	}

	mustAcquired(t, "taker again", finisher.ask(t, &messages.Acquire{Name: name, Owner: owner, Kind: messages.KindFair}))
	if r, ok := finisher.ask(t, &messages.ForceUnlock{Name: name, Kind: messages.KindFair}).(*messages.ForceUnlocked); !ok || !r.Deleted {
		t.Fatalf("force unlock got %#v, want Deleted", r)
	}
	if exists, err := client.Exists(t.Context(), name).Result(); err != nil || exists != 0 {
		t.Fatalf("EXISTS %s after ForceUnlock = %d, %v; want 0", name, exists, err)
	}
}

// appEcho is an actor of the application that answers every string it gets.
type appEcho struct{}

func (appEcho) Receive(ctx actor.Context) {
	if s, ok := ctx.Message().(string); ok {
		ctx.Respond("echo: " + s)
	}
}

// TestActorAPIWithActorSystem: a coordinator in the application's actor system. Close answers a
// waiting request with ErrClosed, releases the holds, leaves the application's system running (its
// actor still answers), and leaks no goroutine. Not parallel: goleak compares against the goroutines
// at its start.
func TestActorAPIWithActorSystem(t *testing.T) {
	srv := redistest.Start(t)
	system := newActorSystem(t)
	echo := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return appEcho{} }))
	ignore := goleak.IgnoreCurrent()

	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	if _, err := coordinator.New(client, coordinator.WithActorSystem(nil)); !errors.Is(err, coordinator.ErrInvalidOption) {
		t.Fatalf("New with a nil actor system = %v, want ErrInvalidOption", err)
	}
	c, err := coordinator.New(client, coordinator.WithActorSystem(system))
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if c.PID().Address != system.Address() {
		t.Fatalf("gateway PID %v is not in the application's system (%s)", c.PID(), system.Address())
	}
	name := "lockwarden:actorapi:" + t.Name()
	holder := spawnClient(t, system, c.PID(), "holder")
	waiter := spawnClient(t, system, c.PID(), "waiter")
	mustAcquired(t, "holder", holder.ask(t, &messages.Acquire{Name: name}))
	waiter.send(&messages.Acquire{Name: name, Wait: messages.WaitForever})
	waiter.expectNoReply(t)

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mustError(t, waiter.next(t, 5*time.Second), coordinator.ErrClosed)
	if exists, err := client.Exists(t.Context(), name).Result(); err != nil || exists != 0 {
		t.Errorf("EXISTS %s after Close = %d, %v; want 0 (released at Close)", name, exists, err)
	}
	r, err := system.Root.RequestFuture(echo, "still there?", 5*time.Second).Result()
	if err != nil || r != "echo: still there?" {
		t.Fatalf("the application's actor after Close answered %v, %v; want its echo", r, err)
	}
	for _, a := range []*testActor{holder, waiter} {
		a.stop(t)
	}
	if err := client.Close(); err != nil {
		t.Fatalf("closing the client: %v", err)
	}
	goleak.VerifyNone(t, ignore)
}

// TestActorAPIReleaseWrongKind: a Release of another kind than the one the sender holds is refused with
// ErrKindMismatch, and Redis is untouched: the fair lock's hash and its queue stay, the hold goes on,
// and the Release of the right kind frees it for the fair waiter.
func TestActorAPIReleaseWrongKind(t *testing.T) {
	t.Parallel()
	client, system, c := setupActorAPI(t)
	name := "lockwarden:actorapi:" + t.Name()
	holder := spawnClient(t, system, c.PID(), "holder")
	mustAcquired(t, "holder", holder.ask(t, &messages.Acquire{Name: name, Kind: messages.KindFair}))
	// A fair waiter of another coordinator, so that the queue is in Redis.
	other := newCoordinator(t, client)
	waiter := other.FairMutex(name)
	errc := lockAsync(t.Context(), waiter)
	groupEventually(t, 2*time.Second, "the waiter in the fair queue", func() bool {
		n, _ := client.LLen(t.Context(), "redisson_lock_queue:{"+name+"}").Result()
		return n == 1
	})
	before, err := client.HGetAll(t.Context(), name).Result()
	if err != nil || len(before) != 1 {
		t.Fatalf("HGETALL %s = %v, %v; want the holder's field", name, before, err)
	}

	for _, kind := range []messages.Kind{messages.KindPlain, messages.KindRead, messages.KindWrite} {
		mustError(t, holder.ask(t, &messages.Release{Name: name, Kind: kind}), coordinator.ErrKindMismatch)
		after, err := client.HGetAll(t.Context(), name).Result()
		if err != nil || !maps.Equal(after, before) {
			t.Fatalf("after a Release of kind %v: HGETALL %s = %v, %v; want %v", kind, name, after, err, before)
		}
		if n, _ := client.LLen(t.Context(), "redisson_lock_queue:{"+name+"}").Result(); n != 1 {
			t.Fatalf("after a Release of kind %v: fair queue length %d, want 1", kind, n)
		}
	}
	// An Acquire of another kind is refused the same way, waiting or not.
	for _, wait := range []time.Duration{0, messages.WaitForever} {
		mustError(t, holder.ask(t, &messages.Acquire{Name: name, Kind: messages.KindPlain, Wait: wait}), coordinator.ErrKindMismatch)
		if after, err := client.HGetAll(t.Context(), name).Result(); err != nil || !maps.Equal(after, before) {
			t.Fatalf("after an Acquire of kind plain: HGETALL %s = %v, %v; want %v", name, after, err, before)
		}
	}
	select {
	case err := <-errc:
		t.Fatalf("the fair waiter got the lock (%v) while the holder holds it", err)
	default:
	}
	if r, ok := holder.ask(t, &messages.Release{Name: name, Kind: messages.KindFair}).(*messages.Released); !ok || r.HoldCount != 0 {
		t.Fatalf("fair release got %#v, want Released with 0 left", r)
	}
	if err := semRecv(t, errc, 2*time.Second, "the fair waiter's Lock"); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, waiter)
}

// TestKindMismatchSameOwner: one owner id used for two kinds of lock on one name (WithOwner) cannot
// release or take one kind's hold through the other: in one coordinator and across coordinators, the
// call fails with ErrKindMismatch and Redis is untouched. Other owners are not affected.
func TestKindMismatchSameOwner(t *testing.T) {
	t.Parallel()
	srv, client, c := setup(t)
	c2 := newCoordinator(t, srv.Client(t))
	owner := "job:" + t.Name()
	unchanged := func(name string, before map[string]string, what string) {
		t.Helper()
		after, err := client.HGetAll(t.Context(), name).Result()
		if err != nil || !maps.Equal(after, before) {
			t.Fatalf("after %s: HGETALL %s = %v, %v; want %v", what, name, after, err, before)
		}
	}
	hash := func(name string) map[string]string {
		t.Helper()
		h, err := client.HGetAll(t.Context(), name).Result()
		if err != nil || len(h) == 0 {
			t.Fatalf("HGETALL %s = %v, %v; want the lock", name, h, err)
		}
		return h
	}

	// A fair hold, then the plain lock of the same owner and name.
	fairName := t.Name() + ":fair"
	fair := c.FairMutex(fairName, coordinator.WithOwner(owner))
	mustLock(t, fair)
	before := hash(fairName)
	plain := c.Mutex(fairName, coordinator.WithOwner(owner))
	if err := plain.Unlock(t.Context()); !errors.Is(err, coordinator.ErrKindMismatch) {
		t.Fatalf("plain Unlock of a fair hold = %v, want ErrKindMismatch", err)
	}
	unchanged(fairName, before, "the plain Unlock")
	if ok, err := plain.TryLock(t.Context()); ok || !errors.Is(err, coordinator.ErrKindMismatch) {
		t.Fatalf("plain TryLock over the owner's fair hold = %v, %v; want ErrKindMismatch", ok, err)
	}
	unchanged(fairName, before, "the plain TryLock")
	if err := c.RWMutex(fairName, coordinator.WithOwner(owner)).RUnlock(t.Context()); !errors.Is(err, coordinator.ErrKindMismatch) {
		t.Fatalf("RUnlock of a fair hold = %v, want ErrKindMismatch", err)
	}
	unchanged(fairName, before, "the RUnlock")
	// Either side of a read-write lock of the owner, here and in another coordinator.
	for _, co := range []*coordinator.Coordinator{c, c2} {
		for _, side := range []*coordinator.Mutex{co.RWMutex(fairName, coordinator.WithOwner(owner)).Read(), co.RWMutex(fairName, coordinator.WithOwner(owner)).Write()} {
			if ok, err := side.TryLock(t.Context()); ok || !errors.Is(err, coordinator.ErrKindMismatch) {
				t.Fatalf("read-write TryLock over the owner's fair hold (same coordinator: %v) = %v, %v; want ErrKindMismatch", co == c, ok, err)
			}
			unchanged(fairName, before, "a read-write TryLock")
		}
	}
	mustUnlock(t, fair)

	// Read holds of the owner and of another reader, then plain and fair calls of the owner, here
	// and in another coordinator (which only Redis can tell).
	rwName := t.Name() + ":rw"
	mine := c.RWMutex(rwName, coordinator.WithOwner(owner))
	if err := mine.RLock(t.Context()); err != nil {
		t.Fatal(err)
	}
	theirs := c.RWMutex(rwName)
	if err := theirs.RLock(t.Context()); err != nil {
		t.Fatal(err)
	}
	before = hash(rwName)
	for _, co := range []*coordinator.Coordinator{c, c2} {
		for _, m := range []*coordinator.Mutex{co.Mutex(rwName, coordinator.WithOwner(owner)), co.FairMutex(rwName, coordinator.WithOwner(owner))} {
			if err := m.Unlock(t.Context()); !errors.Is(err, coordinator.ErrKindMismatch) {
				t.Fatalf("Unlock of a read hold through another kind (same coordinator: %v) = %v, want ErrKindMismatch", co == c, err)
			}
			unchanged(rwName, before, "an Unlock of another kind")
			if ok, err := m.TryLock(t.Context()); ok || !errors.Is(err, coordinator.ErrKindMismatch) {
				t.Fatalf("TryLock over a read hold through another kind (same coordinator: %v) = %v, %v; want ErrKindMismatch", co == c, ok, err)
			}
			unchanged(rwName, before, "a TryLock of another kind")
		}
	}
	// Another owner's plain TryLock is kept out, as before.
	if ok, err := c2.Mutex(rwName).TryLock(t.Context()); ok || err != nil {
		t.Fatalf("another owner's TryLock over read holds = %v, %v; want false, nil", ok, err)
	}
	if err := mine.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := theirs.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestKindMismatchConcurrentSameOwner: one owner id that asks for a fair and a plain lock of one free
// name at once gets one of them, and ErrKindMismatch for the other, every time: the kind is reserved
// when the call arrives, not when Redis grants it (a plain and a fair hold look alike in Redis, and the
// second script would take the first one's hold for its own). The same through the message API.
func TestKindMismatchConcurrentSameOwner(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	owner := "job:" + t.Name()
	type answer struct {
		m   *coordinator.Mutex
		ok  bool
		err error
	}
	for i := range 50 {
		name := fmt.Sprintf("%s:%d", t.Name(), i)
		fair := c.FairMutex(name, coordinator.WithOwner(owner))
		plain := c.Mutex(name, coordinator.WithOwner(owner))
		start := make(chan struct{})
		answers := make(chan answer, 2)
		for _, m := range []*coordinator.Mutex{fair, plain} {
			go func() {
				<-start
				ok, err := m.TryLock(t.Context())
				answers <- answer{m, ok, err}
			}()
		}
		close(start)
		a, b := semRecv(t, answers, 5*time.Second, "a TryLock"), semRecv(t, answers, 5*time.Second, "a TryLock")
		if a.ok == b.ok {
			t.Fatalf("run %d: TryLock of a fair and a plain lock of one owner at once = (%v, %v) and (%v, %v); want one granted and one ErrKindMismatch",
				i, a.ok, a.err, b.ok, b.err)
		}
		if !a.ok {
			a, b = b, a
		}
		if a.err != nil || !errors.Is(b.err, coordinator.ErrKindMismatch) {
			t.Fatalf("run %d: the granted TryLock = %v, the other %v; want nil and ErrKindMismatch", i, a.err, b.err)
		}
		if h, err := client.HGetAll(t.Context(), name).Result(); err != nil || len(h) != 1 || h[owner] != "1" {
			t.Fatalf("run %d: HGETALL %s = %v, %v; want the owner's one hold", i, name, h, err)
		}
		mustUnlock(t, a.m)
		if n, err := client.Exists(t.Context(), name).Result(); err != nil || n != 0 {
			t.Fatalf("run %d: after the Unlock, EXISTS %s = %d, %v; want 0", i, name, n, err)
		}
	}

	// An actor of the message API that sends a fair and a plain Acquire of one name together.
	system := newActorSystem(t)
	ca := newCoordinator(t, client, coordinator.WithActorSystem(system))
	holder := spawnClient(t, system, ca.PID(), "holder")
	for i := range 20 {
		name := fmt.Sprintf("%s:actor:%d", t.Name(), i)
		holder.send(&messages.Acquire{Name: name, Kind: messages.KindFair})
		holder.send(&messages.Acquire{Name: name, Kind: messages.KindPlain})
		granted := 0
		var kind messages.Kind
		for range 2 {
			switch r := holder.next(t, 5*time.Second).(type) {
			case *messages.Acquired:
				granted++
				kind = r.Kind
			case *messages.Error:
				if !errors.Is(r, coordinator.ErrKindMismatch) {
					t.Fatalf("run %d: got error %v, want ErrKindMismatch", i, r.Err)
				}
			default:
				t.Fatalf("run %d: got %#v, want Acquired or an Error", i, r)
			}
		}
		if granted != 1 {
			t.Fatalf("run %d: %d of a fair and a plain Acquire of one actor granted, want 1", i, granted)
		}
		if r, ok := holder.ask(t, &messages.Release{Name: name, Kind: kind}).(*messages.Released); !ok || r.HoldCount != 0 {
			t.Fatalf("run %d: release got %#v, want Released with 0 left", i, r)
		}
		if n, err := client.Exists(t.Context(), name).Result(); err != nil || n != 0 {
			t.Fatalf("run %d: after the Release, EXISTS %s = %d, %v; want 0", i, name, n, err)
		}
	}
}

// TestKindMismatchReservationFreed: a call of one kind that ends without a hold (refused, its wait ran
// out, its context ended) leaves nothing reserved: the same owner's call of another kind gets the lock
// once it is free.
func TestKindMismatchReservationFreed(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	owner := "job:" + t.Name()
	for _, first := range []string{"fair", "plain"} {
		for _, how := range []string{"refused", "wait ran out", "ctx ended"} {
			name := t.Name() + ":" + first + ":" + how
			sub := c.Subscribe(coordinator.ForLock(name), 64)
			other := c.Mutex(name)
			mustLock(t, other)
			fair := c.FairMutex(name, coordinator.WithOwner(owner))
			plain := c.Mutex(name, coordinator.WithOwner(owner))
			m, then := fair, plain
			if first == "plain" {
				m, then = plain, fair
			}
			var ok bool
			var err error
			switch how {
			case "refused":
				ok, err = m.TryLock(t.Context())
			case "wait ran out":
				ok, err = m.TryLock(t.Context(), coordinator.Wait(50*time.Millisecond))
			case "ctx ended":
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
				err = m.Lock(ctx)
				cancel()
				if err == nil {
					ok = true
				} else if errors.Is(err, context.DeadlineExceeded) {
					err = nil
				}
			}
			if ok || err != nil {
				t.Fatalf("%s %s: %s call = %v, %v; want not obtained", first, how, first, ok, err)
			}
			mustUnlock(t, other)
			if how != "refused" {
				// A plain waiter's caller is not kept waiting while its lock actor takes the waiter
				// out of the queue: that is when the kind is free again, and the event says so.
				waitLeft(t, sub, owner)
			}
			ok, err = then.TryLock(t.Context())
			if err == nil && !ok {
				err = errors.New("not obtained")
			}
			if err != nil {
				t.Fatalf("%s %s: then the other kind's call = %v; want the lock", first, how, err)
			}
			mustUnlock(t, then)
			sub.Close()
			if n, err := client.Exists(t.Context(), name).Result(); err != nil || n != 0 {
				t.Fatalf("%s %s: after the Unlock, EXISTS %s = %d, %v; want 0", first, how, name, n, err)
			}
		}
	}
}

// waitLeft waits for the event that owner's waiter left the queue.
func waitLeft(t *testing.T, sub *coordinator.Subscription, owner string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-sub.Events():
			if ev.Type == messages.EventWaitTimedOut && ev.Owner == owner {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event of %s within 5s", messages.EventWaitTimedOut, owner)
		}
	}
}

// TestKindMismatchForceUnlock: a ForceUnlock of a plain or fair lock does not delete a read-write lock
// of the same name, nor a read-write ForceUnlock a plain lock, in any coordinator: ErrKindMismatch, and
// Redis is untouched.
func TestKindMismatchForceUnlock(t *testing.T) {
	t.Parallel()
	srv, client, c := setup(t)
	c2 := newCoordinator(t, srv.Client(t))
	hash := func(name string) map[string]string {
		t.Helper()
		h, err := client.HGetAll(t.Context(), name).Result()
		if err != nil || len(h) == 0 {
			t.Fatalf("HGETALL %s = %v, %v; want the lock", name, h, err)
		}
		return h
	}
	check := func(m *coordinator.Mutex, what string) {
		t.Helper()
		before := hash(m.Name())
		if deleted, err := m.ForceUnlock(t.Context()); deleted || !errors.Is(err, coordinator.ErrKindMismatch) {
			t.Fatalf("%s ForceUnlock = %v, %v; want ErrKindMismatch", what, deleted, err)
		}
		if after := hash(m.Name()); !maps.Equal(after, before) {
			t.Fatalf("after the %s ForceUnlock: HGETALL %s = %v, want %v", what, m.Name(), after, before)
		}
	}
	rwName, plainName := t.Name()+":rw", t.Name()+":plain"
	reader := c.RWMutex(rwName)
	if err := reader.RLock(t.Context()); err != nil {
		t.Fatal(err)
	}
	plain := c.Mutex(plainName)
	mustLock(t, plain)
	for _, co := range []*coordinator.Coordinator{c, c2} {
		check(co.Mutex(rwName), "plain")
		check(co.FairMutex(rwName), "fair")
		check(co.RWMutex(plainName).Read(), "read")
		check(co.RWMutex(plainName).Write(), "write")
	}
	if err := reader.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, plain)
}
