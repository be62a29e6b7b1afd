package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockwarden/lockwarden/messages"
)

// ErrActorFailed is the error a caller gets when the actor that handled its command panicked. The
// panic was recovered and the actor goes on (see [Recover]); the command may or may not have taken
// effect, as with a Redis call whose reply was lost.
var ErrActorFailed = errors.New("lockwarden: internal actor failure")

// Failures is where the coordinator's actors report a panic: its logger and its event sink. Inject,
// when not nil, runs before every message an actor handles and may panic; tests of this module use it
// to make an actor fail.
type Failures struct {
	// Logger gets one error record per recovered panic, with the panic's stack; nil logs nothing.
	Logger *slog.Logger
	// Events gets one [messages.EventActorFailed] per recovered panic; nil publishes nothing.
	Events EventSink
	// CoordinatorID is the Coordinator field of the events published to Events.
	CoordinatorID string
	// Inject, when not nil, is called with the actor's name and the message before the actor handles
	// each message; a panic in it is recovered as one of the actor's own.
	Inject func(actor string, msg any)
}

// recoverer is implemented by actors that must do more than carry on after a recovered panic: answer
// the caller of the command that failed, and put their timers and subscriptions back in line with
// their state.
type recoverer interface {
	recovered(ctx actor.ReceiverContext, msg any, err error)
}

// Recoverer is recoverer for an actor of another package that runs with [Recover]: Recovered answers
// the caller of the command msg whose handling panicked, sent by sender (nil when it had none), with
// err (which matches [ErrActorFailed]), and restores what the failed message may have left undone. It
// runs on the actor's goroutine.
type Recoverer interface {
	// Recovered answers sender about msg with err and restores the actor's invariants, as the type's
	// comment says. A panic in it is logged, and the actor goes on as it is.
	Recovered(ctx actor.ReceiverContext, sender *actor.PID, msg any, err error)
}

// Recover returns a props option that recovers a panic of the actor while it handles any message,
// including Started and Stopping, so that the actor keeps its state instead of being restarted
// empty by protoactor's default supervision (which would forget its holds, waiters and
// subscriptions). The panic is logged with its stack through f's logger and published as an
// [messages.EventActorFailed] event; then the actor, if it implements [Recoverer], answers the caller
// of the failed command with [ErrActorFailed] and restores what the failed message may have left
// undone. name says which actor it is in the log and the event; lock is the lock's name for an actor
// of one lock ("" otherwise).
func Recover(f *Failures, name, lock string) actor.PropsOption {
	return actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					recovered(f, name, lock, c.Actor(), c, env.Sender, env.Message, r)
				}
			}()
			if f != nil && f.Inject != nil {
				f.Inject(name, env.Message)
			}
			next(c, env)
		}
	})
}

// recovering gives an actor the recovery of [Recover] without a receiver middleware: protoactor wraps
// every message of an actor that has one in an envelope, an allocation per message on the hot path of
// the guardian and the lock actors.
type recovering struct {
	actor      actor.Actor
	f          *Failures
	name, lock string
}

// Receive implements actor.Actor.
func (r *recovering) Receive(ctx actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			recovered(r.f, r.name, r.lock, r.actor, ctx, ctx.Sender(), ctx.Message(), p)
		}
	}()
	if r.f != nil && r.f.Inject != nil {
		r.f.Inject(r.name, ctx.Message())
	}
	r.actor.Receive(ctx)
}

// recovered reports the panic r of actor a (named name, of the lock lock) on msg, and lets a restore
// its state (see Recover).
func recovered(f *Failures, name, lock string, a actor.Actor, c actor.ReceiverContext, sender *actor.PID, msg, r any) {
	err := fmt.Errorf("%w: %s panicked on %T: %v", ErrActorFailed, name, msg, r)
	if f != nil {
		if b, ok := a.(interface{ boundName() string }); ok {
			lock = b.boundName() // a pooled lock actor serves other names in turn
		}
		f.report(name, lock, err, debug.Stack())
	}
	switch rc := a.(type) {
	case recoverer:
		restore(f, name, func() { rc.recovered(c, msg, err) })
	case Recoverer:
		restore(f, name, func() { rc.Recovered(c, sender, msg, err) })
	}
}

// restore runs an actor's recovery; should it panic as well, that is logged and the actor goes on as
// it is, rather than failing in a loop.
func restore(f *Failures, name string, fn func()) {
	defer func() {
		if r := recover(); r != nil && f != nil && f.Logger != nil {
			f.Logger.Error("actor recovery panicked", "actor", name, "panic", fmt.Sprint(r))
		}
	}()
	fn()
}

// report logs a recovered panic and publishes it as an event.
func (f *Failures) report(name, lock string, err error, stack []byte) {
	if f.Logger != nil {
		f.Logger.Error("actor panicked; recovered, its state kept", "actor", name, "lock", lock, "err", err,
			"stack", string(stack))
	}
	if f.Events != nil {
		f.Events.Publish(messages.Event{Type: messages.EventActorFailed, Name: lock, Reason: err.Error(),
			Time: time.Now(), Coordinator: f.CoordinatorID})
	}
}

// answerClosed answers the caller of msg, a command that no actor will handle because the coordinator
// closes (a lock actor had not handled it when it stopped, or it reached the guardian once that was
// stopping), as for a coordinator that closed: an Abandon's Ack, when it asked for one.
func answerClosed(msg any) {
	if m, ok := msg.(*Abandon); ok {
		if m.Ack != nil {
			m.Ack.deliver(Outcome{})
		}
		return
	}
	if t := commandTicket(msg); t != nil {
		t.deliver(Outcome{Reason: messages.ReasonClosed})
	}
}

// commandTicket is the ticket on which the caller of the command msg waits for its outcome, or nil.
func commandTicket(msg any) *Ticket {
	switch m := msg.(type) {
	case *Acquire:
		return m.Ticket
	case *Release:
		return m.Ticket
	case *ForceUnlock:
		return m.Ticket
	case *Extend:
		return m.Ticket
	case *GroupAcquire:
		return m.Ticket
	case *GroupRelease:
		return m.Ticket
	case *Take:
		return m.Ticket
	case *Operate:
		return m.Ticket
	}
	return nil
}

// answerFailed answers the caller of msg, a command of a lock actor, with err, if it waits for an
// answer. The command may have been queued or half done: an acquisition that is granted later finds
// its ticket answered and is undone, as for a caller that left.
func answerFailed(msg any, err error) {
	o := Outcome{Reason: messages.ReasonRedis, Err: err}
	t := commandTicket(msg)
	switch m := msg.(type) {
	case *Locate:
		t = commandTicket(m.Cmd) // its caller waits on the command's ticket too (see Locate)
	case *Abandon:
		t, o = m.Ack, Outcome{}
	case *GroupAbandon:
		t, o = m.Ack, Outcome{Reason: messages.ReasonNotObtained}
	}
	if t != nil {
		t.deliver(o)
	}
}

// recovered implements recoverer: the caller of the failed command gets err, and so does the caller
// of the stashed command that was being replayed (see replay); a batch whose settlement the panic
// interrupted is settled to the end (the call that panicked gets err), and a call whose answer
// (batchDone) the panic came before is settled now; then the stash is replayed, once no call is in
// flight any more, and the subscriptions, timers (renewals, expiry, retries) and the queue are
// brought back in line with the state. A panic in any of these steps fails the command or call it
// hit, and the recovery goes on with the rest: a panic never leaves a caller unanswered, nor the
// stash waiting for a call that is not in flight.
// A failed stop cannot release what is left in Redis: its leases run out there; the waiters are told
// the coordinator closed and the holders' Done channels close.
func (a *lockActor) recovered(c actor.ReceiverContext, msg any, err error) {
	if m := a.early; m != nil {
		// The panic came between an early grant and the settling of its release: whether the
		// release took effect is unknown, and nothing will settle the grant any more.
		a.early = nil
		a.revokeEarly(m, "the lock actor failed while the release that handed the lock over was out")
	}
	a.failCommand(msg, err)
	a.failReplaying(err)
	// A panic while a batch was settled leaves the batch out of running with calls unsettled.
	a.headBusy, a.headWanted = 0, false
	a.settleRest(err)
	if m, ok := msg.(batchDone); ok {
		// The panic may have come before the answer was handled: the batch is still in running.
		a.guard(err, func() {
			if a.settleUpTo(m.batch) {
				a.send()
			}
		})
	}
	if _, stopping := msg.(*actor.Stopping); stopping {
		for _, m := range a.stash {
			answerClosed(m)
		}
		a.stash = nil
		for _, m := range a.queue {
			a.answer(m, Outcome{Reason: messages.ReasonClosed})
		}
		a.queue = nil
		for gone, cancel := range a.leaving {
			cancel()
			a.unreserve(gone)
		}
		clear(a.leaving)
		for k, h := range a.holds {
			a.env.Held.remove(a.name, k.owner, k.kind)
			h.deadline.Stop()
			h.end()
			h.settle()
		}
		return
	}
	if a.self == nil || a.proto == nil {
		return // Started failed, or the actor is idle in the pool: it has no state to restore
	}
	if a.batch != nil {
		// A pending batch whose flushBatch the panic consumed would otherwise wait for the next.
		a.guard(err, a.send)
	}
	if ctx, ok := c.(actor.Context); ok {
		for len(a.stash) > 0 && !a.batching() {
			a.guard(err, func() { a.replay(ctx) })
		}
	} else if !a.batching() {
		for _, m := range a.stash {
			a.failCommand(m, err)
		}
		a.stash = nil
	}
	// The queue's retry timer (armed when nobody local holds the lock) wakes the waiters.
	a.afterMessage()
	a.clock.want(a.nextDeadline())
}

// failCommand answers the caller of msg, a command whose handling failed, with err. An acquisition
// that nothing will be done for any more frees its kind; one that is queued or in a batch frees it
// when that ends.
func (a *lockActor) failCommand(msg any, err error) {
	if m, ok := msg.(*Acquire); ok && !slices.Contains(a.queue, m) && !a.batchTouches(holdKey{m.Owner, m.Kind}) {
		a.unreserve(m)
	}
	answerFailed(msg, err)
}

// failReplaying fails the stashed command that replay was handling when a panic interrupted it.
func (a *lockActor) failReplaying(err error) {
	if m := a.replaying; m != nil {
		a.replaying = nil
		a.failCommand(m, err)
	}
}

// guard runs fn, a step of the recovery from a panic; should fn panic too, that is logged, the
// command or call it hit is failed with err, and the settlements it interrupted are finished.
func (a *lockActor) guard(err error, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			a.log().Error("recovering from a panic panicked", "panic", fmt.Sprint(r))
			a.failReplaying(err)
			a.headBusy, a.headWanted = 0, false
			a.settleRest(err)
		}
	}()
	fn()
}

// recovered implements recoverer: the command the guardian failed to route gets err.
func (g *Guardian) recovered(_ actor.ReceiverContext, msg any, err error) { answerFailed(msg, err) }

// recovered implements recoverer: a group request that failed gets err.
func (g *groupActor) recovered(_ actor.ReceiverContext, msg any, err error) { answerFailed(msg, err) }

// recovered implements recoverer. A panic may have left a subscription half made, so the bridge
// records the subscriber table change the failed message asked for (a lock actor that sent it counts
// on it), then subscribes every channel it serves again, on new connections, and closes the old ones;
// the confirmations make the lock actors retry, as after a reconnect.
func (b *Bridge) recovered(_ actor.ReceiverContext, msg any, _ error) {
	if _, stopping := msg.(*actor.Stopping); stopping || b.self == nil {
		return
	}
	switch m := msg.(type) {
	case *messages.Subscribe:
		if b.subs[m.Channel] == nil {
			b.subs[m.Channel] = make(map[string]*actor.PID)
		}
		b.subs[m.Channel][m.Subscriber.String()] = m.Subscriber
		b.publishRoute(m.Channel)
	case *messages.Unsubscribe:
		if pids := b.subs[m.Channel]; pids != nil {
			delete(pids, m.Subscriber.String())
			if len(pids) == 0 {
				delete(b.subs, m.Channel)
			}
		}
		b.publishRoute(m.Channel)
	}
	b.resubscribeAll()
}
