package actors

import (
	"sync"
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
	h.armed.Store(true)
	ta := NewTicket()
	root.Send(guardian, &Acquire{Name: name, Kind: KindPlain, Owner: "a", Lease: 30 * time.Second, Watchdog: true, Ticket: ta})
	select {
	case <-h.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("a's call did not reach Redis within 5s")
	}
	h.armed.Store(false)
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
