package actors

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/messages"
)

// TestStopWithStashedAbandon: a lock actor stops (the coordinator closes) while a reentrant lock's
// call is in flight and the stash holds an Abandon that asked for no acknowledgement (a group
// member's, or the gateway's for an owner actor that stopped) and another owner's acquisition. The
// stop answers the stashed acquisition as closed, and releases the hold that the call in flight
// obtained: its Done channel closes.
func TestStopWithStashedAbandon(t *testing.T) {
	name := t.Name()
	h := &gateHook{gate: make(chan struct{}), entered: make(chan struct{})}
	reached := make(chan struct{})
	var openGate sync.Once
	inject := func(who string, msg any) {
		if who != "lock actor" {
			return
		}
		switch m := msg.(type) {
		case *Acquire:
			if m.Owner == "b" {
				close(reached)
			}
		case *actor.Stopping:
			// The stop settles the call in flight first: let it through.
			openGate.Do(func() { close(h.gate) })
		}
	}
	guardian, _, root := testGuardian(t, guardianSetup{inject: inject, hooks: []redis.Hook{h}})
	t.Cleanup(func() { openGate.Do(func() { close(h.gate) }) })
	ta := h.sendHeld(t, root, guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "a", Lease: 30 * time.Second, Watchdog: true})
	// While a's call is in flight, an Abandon without Ack and b's acquisition wait in the stash.
	gone := NewTicket()
	gone.Abandon()
	root.Send(guardian, &Abandon{Name: name, Kind: KindPlain, Ticket: gone})
	tb := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "b", Lease: 30 * time.Second, Ticket: tb})
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		t.Fatal("b's acquisition did not reach the lock actor within 5s")
	}
	if err := root.StopFuture(guardian).Wait(); err != nil {
		t.Fatalf("stopping the guardian: %v", err)
	}
	select {
	case o := <-tb.Result():
		if o.Reason != messages.ReasonClosed {
			t.Errorf("b: %+v, want closed", o)
		}
	case <-time.After(5 * time.Second):
		t.Error("b, stashed when the actor stopped, was not answered within 5s")
	}
	o := outcome(t, ta, 5*time.Second, "a (in flight when the actor stopped)")
	if o.Reason != messages.ReasonNone {
		return // not granted: nothing to release
	}
	select {
	case <-o.Done:
	case <-time.After(5 * time.Second):
		t.Fatal("a's hold was not released when its actor stopped: Done still open")
	}
}

// TestCommandsWhileGuardianStops: commands that reach the guardian once it has begun to stop (their
// callers passed the coordinator's closed check just before Close) are answered as closed, and an
// Abandon's Ack is delivered. The guardian binds no actor to a new name while it stops: such an actor
// would take a lock in Redis after Close, and the guardian, which waits for every actor it has, would
// never stop.
func TestCommandsWhileGuardianStops(t *testing.T) {
	name := t.Name()
	var self atomic.Pointer[actor.PID]
	var root *actor.RootContext
	located := NewLocate(&Acquire{Name: name + ":located", Kind: KindPlain, Owner: "x", Lease: 30 * time.Second, Watchdog: true, Ticket: NewTicket()})
	routed := &Acquire{Name: name + ":routed", Kind: KindPlain, Owner: "x", Lease: 30 * time.Second, Watchdog: true, Ticket: NewTicket()}
	gone := NewTicket()
	gone.Abandon()
	abandon := &Abandon{Name: name + ":abandoned", Kind: KindFair, Ticket: gone, Ack: NewTicket()}
	seen := make(chan struct{})
	var sent, last sync.Once
	inject := func(who string, msg any) {
		switch {
		case who == "guardian" && msg == any(abandon):
			last.Do(func() { close(seen) })
		case who == "guardian":
			if _, ok := msg.(*actor.Stopping); ok {
				sent.Do(func() {
					root.Send(self.Load(), located)
					root.Send(self.Load(), routed)
					root.Send(self.Load(), abandon)
				})
			}
		case who == "lock actor":
			if _, ok := msg.(*actor.Stopping); ok {
				// The held lock's actor stops only once the guardian has the commands: until then
				// the guardian is stopping, waiting for it.
				select {
				case <-seen:
				case <-time.After(5 * time.Second):
				}
			}
		}
	}
	guardian, _, r := testGuardian(t, guardianSetup{inject: inject})
	root = r
	self.Store(guardian)
	if o := lockOnce(t, root, guardian, name+":held", "h"); o.Reason != messages.ReasonNone {
		t.Fatalf("acquire of the held lock = %+v", o)
	}
	if err := root.StopFuture(guardian).Wait(); err != nil {
		t.Fatalf("the guardian did not stop: %v", err)
	}
	select {
	case <-located.Located():
		t.Error("the stopping guardian located an actor")
	default:
	}
	if o := outcome(t, located.Cmd.(*Acquire).Ticket, 5*time.Second, "the located command"); o.Reason != messages.ReasonClosed {
		t.Errorf("located command: %+v, want closed", o)
	}
	if o := outcome(t, routed.Ticket, 5*time.Second, "the routed command"); o.Reason != messages.ReasonClosed {
		t.Errorf("routed command: %+v, want closed", o)
	}
	outcome(t, abandon.Ack, 5*time.Second, "the Abandon's Ack")
}
