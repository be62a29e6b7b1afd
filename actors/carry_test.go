package actors

import (
	"testing"
	"time"
)

// carried posts a command (what, with post) on a ticket whose carry is open, once the actor is idle,
// and checks that its call is handed to the caller and not made (the model has seen callsBefore calls)
// before the caller runs it, and that running it settles the answer on the caller's goroutine. It
// returns the ticket.
func (c *core) carried(t *testing.T, what string, callsBefore int, post func(*Ticket)) *Ticket {
	t.Helper()
	c.waitIdle()
	tk := NewTicket()
	tk.OpenCarry()
	post(tk)
	run := tk.CloseCarry()
	if run == nil {
		t.Fatalf("the %s's call was not handed to its caller", what)
	}
	if calls := c.model.callLog(); len(calls) != callsBefore || !pending(tk) {
		t.Fatalf("before the caller ran the %s: calls %q, answered %v", what, calls, !pending(tk))
	}
	run()
	if pending(tk) {
		t.Fatalf("the carried %s's answer was not settled on the caller's goroutine", what)
	}
	return tk
}

// TestCoreCallerCarriesItsCall: a caller that opened its ticket's carry and posts to an idle lock
// actor gets the Redis call of its command handed over, and runs it on its own goroutine: the call is
// not made before the caller runs it, and once it has run, the answer is there, settled on the same
// goroutine. Both a first acquisition and a release go so.
func TestCoreCallerCarriesItsCall(t *testing.T) {
	model := newModelLock()
	model.asyncCalls = true
	c := newCoreMailbox(t, model, 30*time.Second, true)
	// A first command makes sure the actor has started and gone idle: a command that finds it busy
	// waits in its mailbox, and its call goes on another goroutine.
	granted(t, c.outcome(c.acquire("warm", false, nil), "warm-up"), "warm-up", 1)
	c.outcome(c.release("warm", nil), "warm-up release")
	model.mu.Lock()
	model.calls = nil
	model.mu.Unlock()

	tk := c.carried(t, "acquisition", 0, func(tk *Ticket) { c.acquire("a", false, tk) })
	granted(t, c.outcome(tk, "carried acquisition"), "carried acquisition", 1)

	tk = c.carried(t, "release", 1, func(tk *Ticket) { c.release("a", tk) })
	if o := c.outcome(tk, "carried release"); o.Err != nil || o.HoldCount != 0 {
		t.Fatalf("carried release: %+v", o)
	}
}

// TestCoreCallerWithoutCarryIsNotHanded: a ticket whose carry was not opened (a caller that can give
// up, whose context can end) never gets a call handed over: the actor makes it on another goroutine.
func TestCoreCallerWithoutCarryIsNotHanded(t *testing.T) {
	model := newModelLock()
	model.asyncCalls = true
	c := newCoreMailbox(t, model, 30*time.Second, true)
	tk := c.acquire("a", false, nil)
	granted(t, c.outcome(tk, "acquisition"), "acquisition", 1)
	if run := tk.CloseCarry(); run != nil {
		t.Fatal("a call was handed to a caller that did not open its carry")
	}
}

// TestCoreActorRunsHandedCallItMustWaitFor: a call handed to a caller that has not run it yet is run
// by the actor itself when it must have every call settled (a flush, before a call it waits for):
// the actor never waits for a call that nobody makes, and the caller then finds nothing left to run.
// The actor is driven by hand, with the answers of its calls caught by a stand-in for its PID.
func TestCoreActorRunsHandedCallItMustWaitFor(t *testing.T) {
	model := newModelLock()
	model.asyncCalls = true
	a, inbox := newHandDriven(t, familyPlain, nil)
	a.proto = model
	tk := NewTicket()
	tk.OpenCarry()
	a.attemptAsync(&Acquire{Name: a.name, Kind: KindPlain, Owner: "a", Lease: time.Minute, Started: time.Now(), Ticket: tk}, false)
	if len(model.callLog()) != 0 {
		t.Fatal("the call was made before anyone ran it")
	}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		a.flush()
	}()
	select {
	case <-flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("the actor waited for a call handed to a caller that had not run it")
	}
	granted(t, tk.Outcome(), "acquisition settled by the flush", 1)
	if run := tk.CloseCarry(); run != nil {
		t.Fatal("the caller was left a call the actor had run")
	}
	select {
	case <-inbox: // the call's own answer, which finds it settled
	case <-time.After(10 * time.Second):
		t.Fatal("the call run by the actor sent no answer")
	}
}

// TestCoreCarriedAnswerSettlesInlineOnlyWhenLight: the answer of a call that a caller ran on its own
// goroutine is settled there only when its settlement waits on nothing (the caller's Lock or Unlock
// returns only after it): not with a stashed message to replay, nor with waiters to try after a
// release that did not hand the lock off; a grant to the next local waiter is fine. The answer of a
// call run on a goroutine of the actor's is always settled where it came.
func TestCoreCarriedAnswerSettlesInlineOnlyWhenLight(t *testing.T) {
	a, _ := newHandDriven(t, familyPlain, nil)
	a.proto = newModelLock()
	s := a.solo()
	b := &s.batch
	done := batchDone{b}
	if !a.inlineSafe(done) {
		t.Fatal("the answer of a call run on the actor's goroutine is not settled where it came")
	}
	b.carrier = NewTicket()
	if !a.inlineSafe(done) {
		t.Fatal("a carried answer with nothing else to do is not settled on the caller's goroutine")
	}
	a.stash = append(a.stash, &Acquire{Name: a.name, Kind: KindPlain, Owner: "b", Ticket: NewTicket()})
	if a.inlineSafe(done) {
		t.Fatal("a carried answer with a stashed message is settled on the caller's goroutine")
	}
	a.stash = nil
	a.queue = append(a.queue, &Acquire{Name: a.name, Kind: KindPlain, Owner: "w", Wait: true, Ticket: NewTicket()})
	s.rel = &Release{Name: a.name, Kind: KindPlain, Owner: "a", Ticket: b.carrier}
	s.released.HandedOff = true
	if !a.inlineSafe(done) {
		t.Fatal("a carried release that handed the lock to the next waiter is not settled on the caller's goroutine")
	}
	s.released.HandedOff = false
	if a.inlineSafe(done) {
		t.Fatal("a carried release that left waiters to try is settled on the caller's goroutine")
	}
}
