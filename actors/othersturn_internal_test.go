package actors

import (
	"context"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// TestOthersTurnAfterRunOfHandoffs: a release that ends a run of local handoffs, and that Redis does
// not hand off because other clients listen on the lock's channel, lets the other processes' waiters
// go first: on the unlock notice of that release, the local head waits othersTurnDelay before it
// tries, where after any other notice it tries within noticeJitter. A release refused a handoff before
// the run is spent (it was not asked to give way) leaves the next notice as usual, and so does a notice
// that comes after othersTurnWindow; any notice ends the turn, also one that a local holder makes the
// actor ignore.
func TestOthersTurnAfterRunOfHandoffs(t *testing.T) {
	const maxHandoffs = 8
	unlock := &messages.Notice{Payload: redisops.UnlockMessage}
	// afterRelease returns an actor whose holder released its only hold after handoffs local
	// handoffs in a row, with the head waiter as the handoff candidate, and Redis answered rel.
	afterRelease := func(t *testing.T, handoffs int, rel redisops.Released) *lockActor {
		t.Helper()
		a := newTestLockActor(t, &fakeProtocol{}, 30*time.Second)
		a.env.MaxHandoffs = maxHandoffs
		k, h := addHold(a, "a", time.Minute, false, false)
		next := &Acquire{Name: a.name, Kind: KindPlain, Owner: "b", Lease: time.Minute, Wait: true, Ticket: NewTicket()}
		a.queue = append(a.queue, next)
		a.handoffs = handoffs
		m := &Release{Name: a.name, Kind: KindPlain, Owner: k.owner, Ticket: NewTicket()}
		a.settleRelease(m, h, time.Minute, next, "req-a", time.Now(), rel, nil)
		if o := m.Ticket.Outcome(); o.Reason != messages.ReasonNone || a.holds[k] != nil {
			t.Fatalf("the release was not settled as done: %+v", o)
		}
		return a
	}
	freed := redisops.Released{} // freed, not handed off: other clients listen
	// notice hands the actor an unlock notice and reports whether it armed the retry at least
	// othersTurnDelay off (the others' turn), failing the test when it armed the retry anywhere else
	// than that or within noticeJitter.
	notice := func(t *testing.T, a *lockActor) (othersTurn bool) {
		t.Helper()
		a.retry.stop()
		before := time.Now()
		plainStrategy{}.notice(a, unlock)
		after := time.Now()
		switch at := a.retry.at; {
		case at.IsZero():
			t.Fatal("the notice armed no retry")
		case !at.Before(before.Add(othersTurnDelay)):
			return true
		case at.After(after.Add(noticeJitter)):
			t.Fatalf("the notice armed the retry %v off, neither within %v nor %v off", at.Sub(before), noticeJitter, othersTurnDelay)
		}
		return false
	}

	t.Run("the run is spent", func(t *testing.T) {
		a := afterRelease(t, maxHandoffs, freed)
		if !notice(t, a) {
			t.Fatal("the head tries at once on the notice of the release that gave way")
		}
		if notice(t, a) {
			t.Fatal("the head still gives way on the next notice")
		}
	})
	t.Run("the run is not spent", func(t *testing.T) {
		a := afterRelease(t, maxHandoffs-1, freed)
		if notice(t, a) {
			t.Fatal("the head gives way after a release that was not asked to")
		}
	})
	t.Run("the handoff was given back", func(t *testing.T) {
		// Redis handed the lock off, and it was given back because replicas did not acknowledge
		// it: the waiter it was for fails, and the lock is free for anyone.
		a := afterRelease(t, maxHandoffs, redisops.Released{NotSynced: redisops.ErrNotSynced})
		if notice(t, a) {
			t.Fatal("the head gives way after a handoff that replicas did not acknowledge")
		}
	})
	t.Run("the queue empties", func(t *testing.T) {
		a := afterRelease(t, maxHandoffs, freed)
		a.queue = nil // the waiter gave up before the notice came
		a.afterMessage()
		if !a.othersTurnSince.IsZero() {
			t.Fatal("an actor with no waiter still means to give way")
		}
	})
	t.Run("the notice comes late", func(t *testing.T) {
		a := afterRelease(t, maxHandoffs, freed)
		a.othersTurnSince = a.othersTurnSince.Add(-othersTurnWindow) // its notice was lost
		if notice(t, a) {
			t.Fatal("the head gives way on a notice that came after the window")
		}
	})
	t.Run("the notice finds a local holder", func(t *testing.T) {
		a := afterRelease(t, maxHandoffs, freed)
		k, _ := addHold(a, "c", time.Minute, false, false) // took the lock before the notice came
		a.proto = holdingProtocol{a.proto.(*fakeProtocol)}
		a.retry.stop()
		plainStrategy{}.notice(a, unlock)
		if a.retry.armed() {
			t.Fatal("a notice armed a retry while a local owner holds the lock")
		}
		a.drop(k)
		a.proto = a.proto.(holdingProtocol).fakeProtocol
		if notice(t, a) {
			t.Fatal("the head gives way on a later notice")
		}
	})
	t.Run("the actor is recycled", func(t *testing.T) {
		a := afterRelease(t, maxHandoffs, freed)
		a.queue = nil
		a.recycle()
		if !a.othersTurnSince.IsZero() {
			t.Fatal("a recycled actor still lets other processes go first")
		}
	})
}

// holdingProtocol is a fakeProtocol whose Redis counts every hold the actor asks about as held.
type holdingProtocol struct{ *fakeProtocol }

func (holdingProtocol) holdCount(context.Context, holdKey) (int64, error) { return 1, nil }
