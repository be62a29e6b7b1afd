package actors

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// extendOutcome sends the actor an Extend of k's hold to lease and returns its answer.
func extendOutcome(t *testing.T, a *lockActor, k holdKey, lease time.Duration) Outcome {
	t.Helper()
	tk := NewTicket()
	a.onExtend(&Extend{Name: a.name, Kind: k.kind, Owner: k.owner, Lease: lease, Ticket: tk})
	select {
	case o := <-tk.Result():
		return o
	default:
		t.Fatalf("Extend of %s got no answer", k.owner)
		return Outcome{}
	}
}

// TestExtendSettles: an Extend of a hold with a fixed lease moves the hold's validity and lease when
// Redis renews it; leaves a watchdog hold alone (ErrWatchdogHold, no call); loses a hold that Redis
// finds gone, and one whose validity ran out while the call was out, giving that one back once; and
// after a Redis error, or a renewal the replicas did not acknowledge (ErrNotSynced), keeps the hold
// with the validity it had, cut to the new lease's when shorter, marked to be given back when it runs
// out.
func TestExtendSettles(t *testing.T) {
	const watchdog = 3 * time.Second
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, watchdog)
	leased := func(owner string, validity time.Duration) (holdKey, *hold) {
		k, h := addHold(a, owner, validity, false, false)
		h.lease = validity
		return k, h
	}
	errConn := errors.New("connection reset")
	notSynced := fmt.Errorf("lockwarden: renew: %w: 0 of 1 replicas acknowledged", redisops.ErrRenewalNotSynced)
	ok, hOK := leased("ok", time.Second)
	longer, hLonger := leased("longer after an error", time.Second)
	shorter, hShorter := leased("shorter after an error", time.Second)
	unsynced, hUnsynced := leased("not synced", time.Second)
	gone, _ := leased("gone", time.Second)
	late, hLate := leased("late", 50*time.Millisecond)
	dog, _ := addHold(a, "watchdog", watchdog, true, false)
	calls := map[holdKey]int{}
	p.renewFn = func(k holdKey) error {
		calls[k]++
		switch k {
		case longer, shorter:
			return errConn
		case unsynced:
			return notSynced
		case gone:
			return redisops.ErrNotHeld
		case late:
			waitDone(t, hLate)
		}
		return nil
	}

	before := time.Now()
	if o := extendOutcome(t, a, ok, time.Minute); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("Extend = %+v, want success", o)
	}
	if hOK.lease != time.Minute || hOK.expires.Before(before.Add(time.Minute-DriftOf(time.Minute))) || hOK.ended() {
		t.Fatalf("the extended hold: lease %v, expires in %v; want a minute", hOK.lease, time.Until(hOK.expires))
	}

	wasLonger := hLonger.expires
	if o := extendOutcome(t, a, longer, time.Minute); o.Reason != messages.ReasonRedis || !errors.Is(o.Err, errConn) {
		t.Fatalf("Extend after a Redis error = %+v, want the error", o)
	}
	if !hLonger.expires.Equal(wasLonger) || hLonger.lease != time.Second || !hLonger.unacked {
		t.Fatalf("after a Redis error, a longer lease: expires moved by %v, lease %v, unacked %v; want the hold as it was, marked",
			hLonger.expires.Sub(wasLonger), hLonger.lease, hLonger.unacked)
	}
	if o := extendOutcome(t, a, shorter, 20*time.Millisecond); o.Reason != messages.ReasonRedis || !errors.Is(o.Err, errConn) {
		t.Fatalf("Extend after a Redis error = %+v, want the error", o)
	}
	if hShorter.expires.After(time.Now().Add(20*time.Millisecond)) || !hShorter.unacked {
		t.Fatalf("after a Redis error, a shorter lease: expires in %v, unacked %v; want at most 20ms, marked",
			time.Until(hShorter.expires), hShorter.unacked)
	}
	waitDone(t, hShorter) // its deadline moved too

	wasUnsynced := hUnsynced.expires
	if o := extendOutcome(t, a, unsynced, time.Minute); !errors.Is(o.Err, redisops.ErrNotSynced) || !errors.Is(o.Err, redisops.ErrRenewalNotSynced) {
		t.Fatalf("Extend not acknowledged by the replicas = %+v, want ErrNotSynced", o)
	}
	if !hUnsynced.expires.Equal(wasUnsynced) || !hUnsynced.unacked || a.holds[unsynced] != hUnsynced {
		t.Fatal("a hold whose extension the replicas did not acknowledge must keep its validity, marked")
	}

	if o := extendOutcome(t, a, gone, time.Minute); o.Reason != messages.ReasonNotHeld {
		t.Fatalf("Extend of a hold Redis found gone = %+v, want not held", o)
	}
	if a.holds[gone] != nil || p.releasesOf(gone) != 0 {
		t.Fatalf("the hold found gone: held %v, released %d times; want lost, not released", a.holds[gone] != nil, p.releasesOf(gone))
	}

	if o := extendOutcome(t, a, late, time.Minute); o.Reason != messages.ReasonNotHeld {
		t.Fatalf("Extend answered after the hold's validity = %+v, want not held", o)
	}
	if a.holds[late] != nil || p.releasesOf(late) != 1 {
		t.Fatalf("the late hold: held %v, given back %d times; want lost, given back once", a.holds[late] != nil, p.releasesOf(late))
	}
	if o := unlockOutcome(t, a, late); o.Reason != messages.ReasonNotHeld || p.releasesOf(late) != 1 {
		t.Fatalf("Unlock of the late hold = %+v after %d releases, want not held without a second", o, p.releasesOf(late))
	}

	if o := extendOutcome(t, a, dog, time.Minute); !errors.Is(o.Err, ErrWatchdogHold) || calls[dog] != 0 {
		t.Fatalf("Extend of a watchdog hold = %+v after %d calls, want ErrWatchdogHold and no call", o, calls[dog])
	}
	if o := extendOutcome(t, a, holdKey{"nobody", KindPlain}, time.Minute); o.Reason != messages.ReasonNotHeld {
		t.Fatalf("Extend of no hold = %+v, want not held", o)
	}
}
