package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// fakeProtocol answers a lock actor's Redis calls from the test's functions and records the releases.
// It behaves as the reentrant lock's strategy otherwise, except that its calls are made in turn, the
// actor waiting for each (unless asyncCalls is set), so that a test sees each call settled when the
// message that made it has been handled.
type fakeProtocol struct {
	plainStrategy
	asyncCalls bool

	acquireFn   func(m *Acquire) (redisops.Acquired, error)
	renewFn     func(k holdKey) error
	renewManyFn func(ks []holdKey) []error
	releaseFn   func(k holdKey) (redisops.Released, error)

	mu       sync.Mutex
	released []holdKey
	renewed  [][]holdKey
}

func (p *fakeProtocol) acquire(_ context.Context, m *Acquire, _ int64, _ bool) (redisops.Acquired, error) {
	return p.acquireFn(m)
}

func (p *fakeProtocol) release(_ context.Context, k holdKey, _ string, _ time.Duration, _ *redisops.Handoff) (redisops.Released, error) {
	p.mu.Lock()
	p.released = append(p.released, k)
	p.mu.Unlock()
	if p.releaseFn != nil {
		return p.releaseFn(k)
	}
	return redisops.Released{}, nil
}

func (p *fakeProtocol) releaseHeld(ctx context.Context, k holdKey, requestID string, lease time.Duration, _, _ int64, next *redisops.Handoff) (redisops.Released, error) {
	return p.release(ctx, k, requestID, lease, next)
}

func (p *fakeProtocol) async() bool { return p.asyncCalls }

func (p *fakeProtocol) renew(_ context.Context, k holdKey, _ time.Duration) error {
	return p.renewFn(k)
}

func (p *fakeProtocol) renewMany(_ context.Context, ks []holdKey, _ time.Duration) []error {
	p.mu.Lock()
	p.renewed = append(p.renewed, slices.Clone(ks))
	p.mu.Unlock()
	return p.renewManyFn(ks)
}

func (p *fakeProtocol) forceUnlock(context.Context, Kind) (bool, error)   { return false, nil }
func (p *fakeProtocol) holdCount(context.Context, holdKey) (int64, error) { return 0, nil }
func (p *fakeProtocol) leave(context.Context, *Acquire, bool) error       { return nil }
func (p *fakeProtocol) channel(*Acquire) string                           { return "" }
func (p *fakeProtocol) releasesOf(k holdKey) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.released {
		if r == k {
			n++
		}
	}
	return n
}

// newTestLockActor is a plain lock actor outside an actor system, whose Redis calls p answers.
func newTestLockActor(t *testing.T, p *fakeProtocol, watchdog time.Duration) *lockActor {
	t.Helper()
	ids := 0
	env := &Env{
		WatchdogTimeout: watchdog, IdleTimeout: time.Minute, StopReleaseTimeout: time.Second,
		Context: context.Background(), Logger: slog.New(slog.DiscardHandler),
		NewRequestID: func() string { ids++; return fmt.Sprint("req-", ids) },
		Held:         &HeldKinds{}, NewBackOff: DefaultBackOff,
	}
	a := newLockActor(t.Name(), t.Name(), familyPlain, env)
	a.proto = p
	t.Cleanup(func() {
		var byKind [maxKinds]int
		for k, h := range a.holds {
			h.deadline.Stop()
			byKind[k.kind]++
		}
		if byKind != a.kindHolds {
			t.Errorf("the actor counts %v holds per kind, it has %v", a.kindHolds, byKind)
		}
	})
	return a
}

// addHold gives the actor a hold of owner, one deep, valid for validity.
func addHold(a *lockActor, owner string, validity time.Duration, watchdog, shared bool) (holdKey, *hold) {
	k := holdKey{owner, KindPlain}
	h := newHold(time.Now().Add(validity))
	h.count, h.lease, h.watchdog, h.shared, h.announced = 1, a.env.WatchdogTimeout, watchdog, shared, true
	a.holds[k] = h
	a.kindHolds[k.kind]++
	a.env.Held.add(a.name, owner, KindPlain, time.Now())
	return k, h
}

func waitDone(t *testing.T, h *hold) {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hold's Done did not close within 10s")
	}
}

func unlockOutcome(t *testing.T, a *lockActor, k holdKey) Outcome {
	t.Helper()
	tk := NewTicket()
	a.onRelease(&Release{Name: a.name, Kind: k.kind, Owner: k.owner, Ticket: tk})
	select {
	case o := <-tk.Result():
		return o
	default:
		t.Fatalf("Unlock of %s got no answer", k.owner)
		return Outcome{}
	}
}

// TestRenewAllBatchSettlesEachHold: in one watchdog tick, each hold gets its own result: a hold that
// renews is extended, one found gone is lost and not released, a late one (answered after its Done
// closed, not acknowledged by the replicas) is lost and given back once, and its Unlock answers "not
// held" without a second release; a late hold of a shared owner id is not given back by the tick but
// by its Unlock, once; a hold whose Done closed before the tick is left out of the batch.
func TestRenewAllBatchSettlesEachHold(t *testing.T) {
	const watchdog = 3 * time.Second
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, watchdog)
	renews, _ := addHold(a, "renews", watchdog, true, false)
	gone, _ := addHold(a, "gone", watchdog, true, false)
	late, hLate := addHold(a, "late", 50*time.Millisecond, true, false)
	shared, hShared := addHold(a, "shared", 50*time.Millisecond, true, true)
	ended, hEnded := addHold(a, "ended", watchdog, true, false)
	hEnded.end()
	p.renewManyFn = func(ks []holdKey) []error {
		waitDone(t, hLate)
		waitDone(t, hShared)
		errs := make([]error, len(ks))
		for i, k := range ks {
			switch k {
			case gone:
				errs[i] = redisops.ErrNotHeld
			case late, shared:
				errs[i] = fmt.Errorf("lockwarden: renew: %w: 0 of 1 replicas acknowledged", redisops.ErrRenewalNotSynced)
			}
		}
		return errs
	}
	before := time.Now()
	a.renewAll()

	if len(p.renewed) != 1 {
		t.Fatalf("%d round trips, want 1", len(p.renewed))
	}
	if slices.Contains(p.renewed[0], ended) || len(p.renewed[0]) != 4 {
		t.Errorf("renewed %v, want every hold but the ended one", p.renewed[0])
	}
	if h := a.holds[renews]; h == nil || h.ended() || h.expires.Before(before.Add(watchdog-DriftOf(watchdog))) {
		t.Errorf("the renewed hold was not extended: %+v", h)
	}
	for _, k := range []holdKey{gone, late, shared} {
		if a.holds[k] != nil {
			t.Errorf("%s: still held, want lost", k.owner)
		}
	}
	if n := p.releasesOf(gone); n != 0 {
		t.Errorf("the hold found gone was released %d times, want 0", n)
	}
	if n := p.releasesOf(late); n != 1 {
		t.Errorf("the late hold was given back %d times by the tick, want 1", n)
	}
	if n := p.releasesOf(shared); n != 0 {
		t.Errorf("the late hold of a shared owner id was given back %d times by the tick, want 0", n)
	}
	if o := unlockOutcome(t, a, late); o.Reason != messages.ReasonNotHeld {
		t.Errorf("Unlock of the late hold = %+v, want not held", o)
	}
	if n := p.releasesOf(late); n != 1 {
		t.Errorf("the late hold was released %d times in all after its Unlock, want 1", n)
	}
	if o := unlockOutcome(t, a, shared); o.Reason != messages.ReasonNotHeld {
		t.Errorf("Unlock of the shared late hold = %+v, want not held", o)
	}
	if n := p.releasesOf(shared); n != 1 {
		t.Errorf("the shared late hold was released %d times in all after its Unlock, want 1", n)
	}
}

// TestRenewManyGivesBackAfterSettling: a give-back of a late hold goes to Redis only once every answer
// of the round trip is settled, so that its round trip does not make a later hold's timely answer
// look late.
func TestRenewManyGivesBackAfterSettling(t *testing.T) {
	const watchdog = 600 * time.Millisecond
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, watchdog)
	late, hLate := addHold(a, "late", 30*time.Millisecond, true, false)
	timely, _ := addHold(a, "timely", watchdog, true, false)
	var sent time.Time
	p.renewManyFn = func(ks []holdKey) []error {
		sent = time.Now()
		waitDone(t, hLate)
		return make([]error, len(ks))
	}
	// The give-back's round trip outlasts what the timely renewal left of its validity.
	p.releaseFn = func(holdKey) (redisops.Released, error) {
		time.Sleep(time.Until(sent.Add(watchdog))) // a slow Redis call
		return redisops.Released{}, nil
	}
	out := a.renewMany([]holdKey{late, timely})
	if !out[0].gone || !errors.Is(out[0].err, ErrGrantTooLate) {
		t.Errorf("late hold: gone %v, err %v; want lost with ErrGrantTooLate", out[0].gone, out[0].err)
	}
	if out[1].gone || out[1].err != nil {
		t.Errorf("timely hold: gone %v, err %v; want renewed", out[1].gone, out[1].err)
	}
	if n := p.releasesOf(late); n != 1 {
		t.Errorf("the late hold was given back %d times, want 1", n)
	}
}

// TestUndoneReentryRetryCutsToFirstSend: a re-entry given back because the master's replicas changed,
// tried again and given back again, leaves the hold with the validity of the first re-entry: its write
// set the lock's expiry to its lease from when it was sent, and a lagging replica may have only it.
func TestUndoneReentryRetryCutsToFirstSend(t *testing.T) {
	const lease = time.Second
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, 3*time.Second)
	k, h := addHold(a, "owner", time.Minute, false, false)
	h.lease = time.Minute
	var first time.Time
	calls := 0
	p.acquireFn = func(*Acquire) (redisops.Acquired, error) {
		calls++
		if calls == 1 {
			first = time.Now()
			time.Sleep(200 * time.Millisecond) // a WAIT that runs its timeout
			return redisops.Acquired{}, fmt.Errorf("%w (%w): 0 of 1 replicas", redisops.ErrNotSynced, redisops.ErrReplicasChanged)
		}
		return redisops.Acquired{}, fmt.Errorf("%w: 0 of 0 replicas", redisops.ErrNotSynced)
	}
	m := &Acquire{Name: a.name, Kind: KindPlain, Owner: k.owner, Lease: lease, Ticket: NewTicket()}
	a.attempt(m)
	if calls != 2 {
		t.Fatalf("%d attempts, want 2", calls)
	}
	if want := validUntil(first, lease); h.expires.After(want) {
		t.Errorf("the hold's validity ends %v after the first re-entry's, want no later", h.expires.Sub(want))
	}
}

// TestUndoneReentryDefersTheHead: a waiter's re-entry given back for ErrNotSynced, whose hold the
// renewal after it finds gone, leaves the try of the head for later rather than trying it in the middle
// of the waiter's attempt: tryWaiter then removes that waiter from the queue, not another one.
func TestUndoneReentryDefersTheHead(t *testing.T) {
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, 3*time.Second)
	k, _ := addHold(a, "reenters", 3*time.Second, true, false)
	p.acquireFn = func(m *Acquire) (redisops.Acquired, error) {
		switch m.Owner {
		case k.owner:
			return redisops.Acquired{}, fmt.Errorf("%w: 0 of 1 replicas", redisops.ErrNotSynced)
		case "head":
			return redisops.Acquired{OK: true, HoldCount: 1, Token: 1}, nil
		}
		return redisops.Acquired{TTL: time.Minute}, nil
	}
	p.renewFn = func(holdKey) error { return redisops.ErrNotHeld }
	waiter := func(owner string) *Acquire {
		return &Acquire{Name: a.name, Kind: KindPlain, Owner: owner, Lease: time.Minute, Ticket: NewTicket(), queued: true}
	}
	head, reentry, last := waiter("head"), waiter(k.owner), waiter("last")
	a.queue = []*Acquire{head, reentry, last}
	a.tryWaiter(func(w *Acquire) bool { return w == reentry })
	if slices.Contains(a.queue, reentry) || !slices.Contains(a.queue, last) {
		t.Fatalf("queue after the undone re-entry: %v, want the re-entry gone and the last waiter kept", owners(a.queue))
	}
	a.tryHead()
	if len(a.queue) != 1 || a.queue[0] != last {
		t.Errorf("queue after the head's try: %v, want [last]", owners(a.queue))
	}
	if a.holds[holdKey{"head", KindPlain}] == nil {
		t.Error("the head waiter did not get the lock")
	}
}

func owners(q []*Acquire) []string {
	var s []string
	for _, m := range q {
		s = append(s, m.Owner)
	}
	return s
}

// TestUndoneReentryRetryAfterValidityUsedUp: a re-entry with a lease shorter than its WAIT, undone for
// a replica count that changed, leaves the outer hold with no validity (its Redis expiry was cut to that
// lease). The call is not retried, which would re-enter a hold whose Done has closed and report it
// held: the hold is lost and the call fails with the not-synced error.
func TestUndoneReentryRetryAfterValidityUsedUp(t *testing.T) {
	const lease = 50 * time.Millisecond
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, 3*time.Second)
	k, h := addHold(a, "owner", time.Minute, false, false)
	h.lease = time.Minute
	calls := 0
	p.acquireFn = func(m *Acquire) (redisops.Acquired, error) {
		calls++
		if calls == 1 {
			time.Sleep(2 * lease) // a WAIT that runs its timeout, longer than the re-entry's lease
			return redisops.Acquired{}, fmt.Errorf("%w (%w): 0 of 1 replicas", redisops.ErrNotSynced, redisops.ErrReplicasChanged)
		}
		// As acquire.lua answers a call that knows of the owner's hold: a re-entry.
		return redisops.Acquired{OK: true, HoldCount: a.knownHeld(m) + 1, Token: 9}, nil
	}
	m := &Acquire{Name: a.name, Kind: KindPlain, Owner: k.owner, Lease: lease, Ticket: NewTicket()}
	a.attempt(m)
	if calls != 1 {
		t.Errorf("%d attempts, want 1: no retry on a hold with no validity left", calls)
	}
	if !h.ended() || a.holds[k] != nil {
		t.Errorf("the outer hold: ended %v, still recorded %v; want it lost", h.ended(), a.holds[k] != nil)
	}
	select {
	case o := <-m.Ticket.Result():
		if o.Reason != messages.ReasonNotSynced || !errors.Is(o.Err, redisops.ErrNotSynced) {
			t.Errorf("the re-entry's outcome: %+v, want ReasonNotSynced with ErrNotSynced", o)
		}
	default:
		t.Error("the re-entry was not answered")
	}
}

// TestSettleRenewalsAfterTheHoldChanged: the answers that the coordinator's renewals bring back to
// the actor are settled against the holds as they are then: a hold still held is extended; one
// released while its renewal was out is not touched; one lost meanwhile (its validity ran out) whose
// renewal took effect all the same is given back once, since nobody owns what the renewal extended;
// one lost meanwhile whose renewal found it gone is not.
func TestSettleRenewalsAfterTheHoldChanged(t *testing.T) {
	const watchdog = 3 * time.Second
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, watchdog)
	held, hHeld := addHold(a, "held", time.Second, true, false)
	released, hReleased := addHold(a, "released", watchdog, true, false)
	lostTook, hLostTook := addHold(a, "lost-took", watchdog, true, false)
	lostGone, hLostGone := addHold(a, "lost-gone", watchdog, true, false)
	sent := time.Now()
	a.renewing = 1
	a.drop(released)
	a.lose(lostTook, "lease ran out")
	a.lose(lostGone, "lease ran out")
	a.renewing--
	a.settleRenewals(renewalsDone{sent: sent,
		ks:    []holdKey{held, released, lostTook, lostGone},
		holds: []*hold{hHeld, hReleased, hLostTook, hLostGone},
		errs:  []error{nil, nil, nil, redisops.ErrNotHeld},
	})
	if h := a.holds[held]; h != hHeld || h.expires.Before(sent.Add(watchdog-DriftOf(watchdog))) {
		t.Errorf("the held hold was not extended: %+v", h)
	}
	for k, want := range map[holdKey]int{released: 0, lostTook: 1, lostGone: 0} {
		if n := p.releasesOf(k); n != want {
			t.Errorf("%s: given back %d times, want %d", k.owner, n, want)
		}
	}
	if a.lost[lostTook] != lostGivenBack {
		t.Errorf("the lost hold whose renewal took effect is not marked given back: %d", a.lost[lostTook])
	}
	if a.holds[released] != nil || a.lost[released] != 0 {
		t.Error("the released hold came back or counts as lost")
	}
}

// TestCompatibleCountsKinds: compatible, which reads the count of holds of each kind, answers what a
// walk over every hold answers, for readers and writers of a read-write lock as holds come and go.
func TestCompatibleCountsKinds(t *testing.T) {
	a := newTestLockActor(t, &fakeProtocol{}, time.Minute)
	a.proto = newRWStrategy(a.name, nil)
	walk := func(m *Acquire) bool {
		for k := range a.holds {
			if k.owner != m.Owner && !a.proto.shares(m.Kind, k.kind) {
				return false
			}
		}
		return true
	}
	take := func(owner string, kind Kind) {
		a.grant(&Acquire{Name: a.name, Kind: kind, Owner: owner, Lease: time.Minute, Ticket: NewTicket()}, 1, 0, time.Now())
	}
	check := func(when string) {
		t.Helper()
		for _, owner := range []string{"r1", "r2", "w", "new"} {
			for _, kind := range []Kind{KindRead, KindWrite} {
				m := &Acquire{Owner: owner, Kind: kind}
				if got, want := a.compatible(m), walk(m); got != want {
					t.Errorf("%s: compatible(%s %v) = %v, want %v", when, owner, kind, got, want)
				}
			}
		}
	}
	check("no holds")
	take("r1", KindRead)
	take("r2", KindRead)
	check("two readers")
	a.drop(holdKey{"r1", KindRead})
	a.drop(holdKey{"r2", KindRead})
	take("w", KindWrite)
	check("a writer")
	take("w", KindRead) // a downgrade
	check("a writer with a read hold")
	a.drop(holdKey{"w", KindWrite})
	check("the downgraded reader")
	a.drop(holdKey{"w", KindRead})
	if a.kindHolds != [maxKinds]int{} {
		t.Errorf("kind counts %v with no holds left", a.kindHolds)
	}
}
