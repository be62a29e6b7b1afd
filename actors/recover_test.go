package actors

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/messages"
)

// gateHook holds the script calls sent while it is armed until gate closes, and reports the first of
// them on entered.
type gateHook struct {
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
	armed   atomic.Bool
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold(cmd)
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.hold(cmds...)
		return next(ctx, cmds)
	}
}

// sendHeld sends cmd to the guardian with a new ticket, which it returns once the command's script
// call is held at the gate; the calls after it pass.
func (h *gateHook) sendHeld(t *testing.T, root *actor.RootContext, guardian *actor.PID, cmd *Acquire) *Ticket {
	t.Helper()
	h.armed.Store(true)
	cmd.Ticket = NewTicket()
	root.Send(guardian, cmd)
	select {
	case <-h.entered:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s's call did not reach Redis within 5s", cmd.Owner)
	}
	h.armed.Store(false)
	return cmd.Ticket
}

// hold holds a script call (EVALSHA or EVAL, sent alone or in a pipeline) at the gate while the hook
// is armed. Other commands pass: a new connection's handshake (CLIENT SETINFO) is a pipeline of its
// own, made by whichever call needs the connection, so gating it would hold some call, not the one
// armed for.
func (h *gateHook) hold(cmds ...redis.Cmder) {
	if !h.armed.Load() {
		return
	}
	for _, c := range cmds {
		if name := c.Name(); name == "evalsha" || name == "eval" {
			h.once.Do(func() { close(h.entered) })
			<-h.gate
			return
		}
	}
}

// TestPanicInSettleReplaysTheStash: the lock actor panics while it settles a reentrant lock's call
// (here the event of the grant panics) while another owner's acquisition waits in the stash. The
// caller of the call gets ErrActorFailed, and the stashed acquisition is replayed and answered rather
// than waiting forever for a call that is no longer in flight.
func TestPanicInSettleReplaysTheStash(t *testing.T) {
	name := t.Name()
	var fired atomic.Bool
	events := sinkFunc(func(ev messages.Event) {
		if ev.Type == messages.EventAcquired && ev.Owner == "a" && fired.CompareAndSwap(false, true) {
			panic("injected failure")
		}
	})
	h := &gateHook{gate: make(chan struct{}), entered: make(chan struct{})}
	reached := make(chan struct{})
	inject := func(actor string, msg any) {
		if m, ok := msg.(*Acquire); ok && actor == "lock actor" && m.Owner == "b" {
			close(reached)
		}
	}
	guardian, _, root := testGuardian(t, guardianSetup{events: events, inject: inject, hooks: []redis.Hook{h}})
	ta := h.sendHeld(t, root, guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "a", Lease: 30 * time.Second, Watchdog: true})
	// b comes while a's call is in flight, and waits in the stash.
	tb := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "b", Lease: 30 * time.Second, Ticket: tb})
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		t.Fatal("b's acquisition did not reach the lock actor within 5s")
	}
	close(h.gate)
	// a is answered before the event of its grant, whose panic comes after.
	if o := outcome(t, ta, 5*time.Second, "a"); o.Reason != messages.ReasonNone && !errors.Is(o.Err, ErrActorFailed) {
		t.Fatalf("a: %+v, want held, or ErrActorFailed", o)
	}
	// a holds the lock, in Redis if not for the actor: b is refused.
	if o := outcome(t, tb, 5*time.Second, "b (stashed while a's call was in flight)"); o.Reason != messages.ReasonNotObtained {
		t.Fatalf("b: %+v, want not obtained", o)
	}
}

// TestPanicOnBatchDoneSettlesTheCall: the lock actor panics on the answer of a call (batchDone)
// before handling it. The call is settled all the same: its caller gets the lock, and the name serves
// the next commands.
func TestPanicOnBatchDoneSettlesTheCall(t *testing.T) {
	name := t.Name()
	var fired atomic.Bool
	inject := func(actor string, msg any) {
		if _, ok := msg.(batchDone); ok && actor == "lock actor" && fired.CompareAndSwap(false, true) {
			panic("injected")
		}
	}
	guardian, _, root := testGuardian(t, guardianSetup{inject: inject})
	if o := lockOnce(t, root, guardian, name, "a"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("a: %+v, want held once", o)
	}
	if !fired.Load() {
		t.Fatal("no batchDone reached the lock actor")
	}
	if o := unlockOnce(t, root, guardian, name, "a"); o.Reason != messages.ReasonNone {
		t.Fatalf("release of a: %+v", o)
	}
	if o := lockOnce(t, root, guardian, name, "b"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("b: %+v, want held once", o)
	}
}

// TestPooledActorDropsStaleMessages: an actor idle in the guardian's pool drops a notice, a
// subscription confirmation or a timer tick of the name it served before, rather than panicking on
// them, and serves the next name it is bound to.
func TestPooledActorDropsStaleMessages(t *testing.T) {
	a := newTestLockActor(t, &fakeProtocol{}, 30*time.Second)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(system.Shutdown)
	a.root, a.self = system.Root, actor.NewPID("test", "lock")
	a.env.Bridge = actor.NewPID("test", "bridge")
	ch := "redisson_lock__channel:{" + a.name + "}"
	a.subs[ch] = struct{}{}
	a.recycle()
	for _, msg := range []any{
		&messages.Notice{Channel: ch, Payload: "0"},
		&messages.Subscribed{Channel: ch},
		retryTick{}, watchdogTick{}, expiryTick{}, idleTick{}, keepAliveTick{}, intentTick{},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%T to a pooled actor panicked: %v", msg, r)
				}
			}()
			a.Receive(msgContext{msg: msg})
		}()
	}
	a.Receive(msgContext{msg: &bind{name: "next", key: RouteKey(KindPlain, "next"), family: familyPlain, binding: 1}})
	if a.name != "next" || a.proto == nil {
		t.Fatalf("after bind: name %q, strategy %v", a.name, a.proto)
	}
}
