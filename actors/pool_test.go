package actors

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockwarden/lockwarden/messages"
)

// TestRecycleForgetsTheName: an actor recycled into the guardian's pool keeps nothing of its name (its
// subscriptions, lost holds, timers, waiters), and once bound to another name serves that one.
func TestRecycleForgetsTheName(t *testing.T) {
	a := newTestLockActor(t, &fakeProtocol{}, 30*time.Second)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(system.Shutdown)
	a.root, a.self = system.Root, actor.NewPID("test", "lock")
	a.env.Bridge = actor.NewPID("test", "bridge")
	ts := NewTimers(func(*actor.PID, any) {})
	t.Cleanup(ts.Stop)
	a.timers = ts
	a.clock.init(ts, a.self)

	a.subs["redisson_lock__channel:{old}"] = struct{}{}
	a.recent = map[string]time.Time{"redisson_lock__channel:{old}": time.Now()}
	a.lost[holdKey{"x", KindPlain}] = 2
	a.routed, a.handoffs, a.failing, a.renewSoon = 7, 3, true, true
	a.idle.setAt(time.Now().Add(time.Hour))
	a.retry.setAt(time.Now().Add(time.Hour))
	a.clock.want(a.nextDeadline())
	if ts.len() != 1 {
		t.Fatalf("%d registrations, want 1", ts.len())
	}

	a.recycle()
	switch {
	case len(a.subs) != 0 || a.recent != nil:
		t.Fatalf("subscriptions kept: %v %v", a.subs, a.recent)
	case len(a.lost) != 0 || len(a.holds) != 0 || len(a.queue) != 0:
		t.Fatalf("lost %v holds %v queue %v kept", a.lost, a.holds, a.queue)
	case !a.nextDeadline().IsZero():
		t.Fatalf("a timer is still armed, next at %v", a.nextDeadline())
	case ts.len() != 0:
		t.Fatalf("%d registrations left with the timer service, want 0", ts.len())
	case a.routed != 0 || a.handoffs != 0 || a.failing || a.renewSoon:
		t.Fatalf("counters kept: routed %d handoffs %d failing %v renewSoon %v", a.routed, a.handoffs, a.failing, a.renewSoon)
	case a.name != "" || a.proto != nil:
		t.Fatalf("name %q or protocol kept", a.name)
	}

	a.rebind(&bind{name: "new", key: RouteKey(KindFair, "new"), family: familyFair, binding: 9})
	if a.name != "new" || a.family != familyFair || a.binding != 9 {
		t.Fatalf("bound to %q family %v binding %d, want new, fair, 9", a.name, a.family, a.binding)
	}
	if _, ok := a.proto.(fairStrategy); !ok {
		t.Fatalf("strategy %T, want fairStrategy", a.proto)
	}
}

// poolWatch records the recycle and bind messages the lock actors receive.
type poolWatch struct {
	mu       sync.Mutex
	recycled chan struct{}
	bound    []string
	// hold, when set, is called on the lock actor's goroutine before it handles a Wake.
	hold func()
}

func newPoolWatch() *poolWatch { return &poolWatch{recycled: make(chan struct{}, 16)} }

func (w *poolWatch) inject(name string, msg any) {
	if name != "lock actor" {
		return
	}
	switch m := msg.(type) {
	case recycle:
		w.recycled <- struct{}{}
	case *bind:
		w.mu.Lock()
		w.bound = append(w.bound, m.name)
		w.mu.Unlock()
	case Wake:
		w.mu.Lock()
		hold := w.hold
		w.mu.Unlock()
		if hold != nil {
			hold()
		}
	}
}

func (w *poolWatch) binds() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.bound...)
}

func lockOnce(t *testing.T, root *actor.RootContext, guardian *actor.PID, name, owner string) Outcome {
	t.Helper()
	tk := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindPlain, Owner: owner, Lease: 30 * time.Second, Watchdog: true, Ticket: tk})
	return outcome(t, tk, 5*time.Second, "acquire of "+name+" by "+owner)
}

func unlockOnce(t *testing.T, root *actor.RootContext, guardian *actor.PID, name, owner string) Outcome {
	t.Helper()
	tk := NewTicket()
	root.Send(guardian, &Release{Name: name, Kind: KindPlain, Owner: owner, Ticket: tk})
	return outcome(t, tk, 5*time.Second, "release of "+name+" by "+owner)
}

// TestIdleActorIsReused: the actor of a name that went idle is recycled, not stopped, and the next new
// name gets it; it serves the new name from scratch (a first hold, not a re-entry), and the old name,
// used again, gets a fresh hold too.
func TestIdleActorIsReused(t *testing.T) {
	w := newPoolWatch()
	guardian, _, root := testGuardian(t, guardianSetup{inject: w.inject, idle: 50 * time.Millisecond})
	first, second := t.Name()+":a", t.Name()+":b"
	if o := lockOnce(t, root, guardian, first, "x"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("lock of %s = %+v, want held once", first, o)
	}
	if o := unlockOnce(t, root, guardian, first, "x"); o.Reason != messages.ReasonNone {
		t.Fatalf("unlock of %s = %+v", first, o)
	}
	select {
	case <-w.recycled:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle actor was not recycled within 10s")
	}
	if o := lockOnce(t, root, guardian, second, "x"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("lock of %s = %+v, want held once", second, o)
	}
	if got := w.binds(); len(got) != 1 || got[0] != second {
		t.Fatalf("pooled actors bound to %v, want [%s]", got, second)
	}
	if o := unlockOnce(t, root, guardian, first, "x"); o.Reason != messages.ReasonNotHeld {
		t.Fatalf("unlock of %s after its actor was recycled = %+v, want not held", first, o)
	}
	if o := lockOnce(t, root, guardian, first, "x"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("lock of %s again = %+v, want held once", first, o)
	}
	for _, name := range []string{first, second} {
		if o := unlockOnce(t, root, guardian, name, "x"); o.Reason != messages.ReasonNone {
			t.Fatalf("unlock of %s = %+v", name, o)
		}
	}
}

// sendAtIdleReport runs send on the lock actor's goroutine at its first wake-up at or after the idle
// deadline (idle from now), the one that reports the actor idle, so that the command send sends is on
// its way while the report is; it returns send's ticket.
func sendAtIdleReport(t *testing.T, w *poolWatch, idle time.Duration, send func() *Ticket) *Ticket {
	t.Helper()
	idleAt := time.Now().Add(idle)
	sent := make(chan *Ticket, 1)
	var once sync.Once
	w.mu.Lock()
	w.hold = func() {
		if !time.Now().Before(idleAt) {
			once.Do(func() { sent <- send() })
		}
	}
	w.mu.Unlock()
	select {
	case tk := <-sent:
		return tk
	case <-time.After(10 * time.Second):
		t.Fatal("the idle wake-up did not come within 10s")
		return nil
	}
}

// TestCommandRacingRecycle: a command routed to an actor while it reports itself idle is not lost: the
// guardian sees that the actor has not received everything it was sent, keeps it bound, and the
// command is answered.
func TestCommandRacingRecycle(t *testing.T) {
	const idle = 50 * time.Millisecond
	w := newPoolWatch()
	guardian, _, root := testGuardian(t, guardianSetup{inject: w.inject, idle: idle})
	name := t.Name()
	lockOnce(t, root, guardian, name, "x")
	unlockOnce(t, root, guardian, name, "x")
	tk := sendAtIdleReport(t, w, idle, func() *Ticket {
		tk := NewTicket()
		root.Send(guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "y", Lease: 30 * time.Second, Watchdog: true, Ticket: tk})
		return tk
	})
	if o := outcome(t, tk, 5*time.Second, "acquire racing the recycle"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("acquire racing the recycle = %+v, want held once", o)
	}
	select {
	case <-w.recycled:
		t.Fatal("the actor was recycled while a command was on its way to it")
	default:
	}
	if o := unlockOnce(t, root, guardian, name, "y"); o.Reason != messages.ReasonNone {
		t.Fatalf("unlock = %+v", o)
	}
}

// locateRoute asks the guardian for the route of name's plain lock actor, sending cmd (which the
// guardian counts) to the actor as a handle does.
func locateRoute(t *testing.T, root *actor.RootContext, guardian *actor.PID, cmd Routed) *Route {
	t.Helper()
	loc := NewLocate(cmd)
	root.Send(guardian, loc)
	select {
	case <-loc.Located():
	case <-time.After(5 * time.Second):
		t.Fatal("the guardian did not answer a Locate within 5s")
	}
	root.Send(loc.PID(), cmd)
	return loc.Route()
}

// TestDirectCommandRacingRecycle: a command that a handle sends its actor itself, on the route it
// keeps, while the actor reports itself idle, is not lost: the guardian does not retire the route,
// the actor stays bound, and the command is answered. Once the actor has gone idle after it, the
// route is retired and refuses further commands.
func TestDirectCommandRacingRecycle(t *testing.T) {
	const idle = 50 * time.Millisecond
	w := newPoolWatch()
	guardian, _, root := testGuardian(t, guardianSetup{inject: w.inject, idle: idle})
	name := t.Name()
	tk := NewTicket()
	route := locateRoute(t, root, guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "x", Lease: 30 * time.Second, Watchdog: true, Ticket: tk})
	if o := outcome(t, tk, 5*time.Second, "acquire"); o.Reason != messages.ReasonNone {
		t.Fatalf("acquire = %+v", o)
	}
	pid, ok := route.Enter()
	if !ok {
		t.Fatal("the route of a held lock refused a command")
	}
	tk = NewTicket()
	root.Send(pid, &Release{Name: name, Kind: KindPlain, Owner: "x", Ticket: tk})
	if o := outcome(t, tk, 5*time.Second, "release"); o.Reason != messages.ReasonNone {
		t.Fatalf("release = %+v", o)
	}
	tk = sendAtIdleReport(t, w, idle, func() *Ticket {
		pid, ok := route.Enter()
		if !ok {
			return nil
		}
		tk := NewTicket()
		root.Send(pid, &Acquire{Name: name, Kind: KindPlain, Owner: "y", Lease: 30 * time.Second, Watchdog: true, Ticket: tk})
		return tk
	})
	if tk == nil {
		t.Fatal("the route was retired before the actor reported itself idle")
	}
	if o := outcome(t, tk, 5*time.Second, "acquire racing the recycle"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("acquire racing the recycle = %+v, want held once", o)
	}
	select {
	case <-w.recycled:
		t.Fatal("the actor was recycled while a command sent on its route was on its way to it")
	default:
	}
	pid, ok = route.Enter()
	if !ok {
		t.Fatal("the route of a held lock refused a command")
	}
	tk = NewTicket()
	root.Send(pid, &Release{Name: name, Kind: KindPlain, Owner: "y", Ticket: tk})
	if o := outcome(t, tk, 5*time.Second, "release"); o.Reason != messages.ReasonNone {
		t.Fatalf("release = %+v", o)
	}
	select {
	case <-w.recycled:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle actor was not recycled within 10s")
	}
	if _, ok := route.Enter(); ok {
		t.Fatal("the route of a recycled actor took a command")
	}
	// The guardian binds the name again, on a route of its own.
	tk = NewTicket()
	again := locateRoute(t, root, guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "x", Lease: 30 * time.Second, Watchdog: true, Ticket: tk})
	if again == route {
		t.Fatal("the guardian answered the retired route")
	}
	if o := outcome(t, tk, 5*time.Second, "acquire after the recycle"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("acquire after the recycle = %+v, want held once", o)
	}
	if o := unlockOnce(t, root, guardian, name, "x"); o.Reason != messages.ReasonNone {
		t.Fatalf("unlock = %+v", o)
	}
}

// TestRouteRetire: a route is retired only when every command sent on it was received, and then
// refuses commands.
func TestRouteRetire(t *testing.T) {
	r := &Route{pid: actor.NewPID("test", "lock")}
	r.count()
	if _, ok := r.Enter(); !ok {
		t.Fatal("a live route refused a command")
	}
	if r.retire(1) {
		t.Fatal("retired with 2 commands sent and 1 received")
	}
	if _, ok := r.Enter(); !ok {
		t.Fatal("a route that was not retired refused a command")
	}
	if !r.retire(3) {
		t.Fatal("not retired with every command received")
	}
	if pid, ok := r.Enter(); ok || pid != nil {
		t.Fatalf("a retired route took a command (%v)", pid)
	}
}
