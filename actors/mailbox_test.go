package actors

import (
	"testing"
	"time"
)

// TestInlineSafeSkipsEndedHold: an acquisition whose owner's hold of that kind has ended (Done
// closed) does not run on the posting goroutine: the actor gives that hold back first, a call it
// waits for.
func TestInlineSafeSkipsEndedHold(t *testing.T) {
	a := newTestLockActor(t, &fakeProtocol{asyncCalls: true}, 30*time.Second)
	m := &Acquire{Name: a.name, Kind: KindPlain, Owner: "a", Lease: time.Minute, Ticket: NewTicket()}
	if !a.inlineSafe(m) {
		t.Fatal("a first acquisition on a reentrant lock is not inline-safe")
	}
	_, h := addHold(a, "a", time.Minute, true, false)
	if !a.inlineSafe(m) {
		t.Fatal("a re-entry of a live hold is not inline-safe")
	}
	h.end()
	if a.inlineSafe(m) {
		t.Fatal("a re-entry of an ended hold is inline-safe")
	}
}
