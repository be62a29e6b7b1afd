package actors

import (
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// TestOthersTurnAfterRunOfHandoffs: a release that ends a run of local handoffs, and that Redis does
// not hand off because other clients listen on the lock's channel, lets the other processes' waiters
// go first: on the unlock notice of that release, the local head waits othersTurnDelay before it
// tries, where after any other notice it tries within noticeJitter. A release refused a handoff before
// the run is spent (it was not asked to give way) leaves the next notice as usual.
func TestOthersTurnAfterRunOfHandoffs(t *testing.T) {
	const maxHandoffs = 8
	unlock := &messages.Notice{Payload: redisops.UnlockMessage}
	// releaseFreeing settles the release of holder's only hold with the head waiter as the handoff
	// candidate, answered as freed without a handoff, after handoffs local handoffs in a row.
	releaseFreeing := func(t *testing.T, a *lockActor, holder string, handoffs int) {
		t.Helper()
		k, h := addHold(a, holder, time.Minute, false, false)
		next := &Acquire{Name: a.name, Kind: KindPlain, Owner: holder + "-next", Lease: time.Minute, Wait: true, Ticket: NewTicket()}
		a.queue = append(a.queue, next)
		a.handoffs = handoffs
		m := &Release{Name: a.name, Kind: KindPlain, Owner: k.owner, Ticket: NewTicket()}
		a.settleRelease(m, h, time.Minute, next, "req-"+holder, time.Now(), redisops.Released{}, nil)
		if o := m.Ticket.Outcome(); o.Reason != messages.ReasonNone || a.holds[k] != nil {
			t.Fatalf("the release was not settled as done: %+v", o)
		}
	}
	// retryIn returns how far off the retry the notice armed is.
	retryIn := func(t *testing.T, a *lockActor) time.Duration {
		t.Helper()
		before := time.Now()
		plainStrategy{}.notice(a, unlock)
		if a.retry.at.IsZero() {
			t.Fatal("the notice armed no retry")
		}
		return a.retry.at.Sub(before)
	}

	t.Run("the run is spent", func(t *testing.T) {
		a := newTestLockActor(t, &fakeProtocol{}, 30*time.Second)
		a.env.MaxHandoffs = maxHandoffs
		releaseFreeing(t, a, "a", maxHandoffs)
		if d := retryIn(t, a); d < othersTurnDelay-time.Millisecond/10 {
			t.Fatalf("the head tries %v after the notice of the release that gave way, want %v", d, othersTurnDelay)
		}
		a.retry.stop()
		if d := retryIn(t, a); d > noticeJitter {
			t.Fatalf("the head tries %v after the next notice, want within %v", d, noticeJitter)
		}
	})
	t.Run("the run is not spent", func(t *testing.T) {
		a := newTestLockActor(t, &fakeProtocol{}, 30*time.Second)
		a.env.MaxHandoffs = maxHandoffs
		releaseFreeing(t, a, "a", maxHandoffs-1)
		if d := retryIn(t, a); d > noticeJitter {
			t.Fatalf("the head tries %v after the notice, want within %v", d, noticeJitter)
		}
	})
	t.Run("the actor is recycled", func(t *testing.T) {
		a := newTestLockActor(t, &fakeProtocol{}, 30*time.Second)
		a.env.MaxHandoffs = maxHandoffs
		releaseFreeing(t, a, "a", maxHandoffs)
		a.queue = nil
		a.recycle()
		if a.othersTurn {
			t.Fatal("a recycled actor still lets other processes go first")
		}
	})
}
