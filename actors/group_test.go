package actors

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
)

func TestQuorum(t *testing.T) {
	for _, tc := range []struct {
		n       int
		redLock bool
		want    int
	}{
		{1, false, 1}, {3, false, 3}, {5, false, 5},
		{1, true, 1}, {2, true, 2}, {3, true, 2}, {4, true, 3}, {5, true, 3}, {7, true, 4},
	} {
		if got := Quorum(tc.n, tc.redLock); got != tc.want {
			t.Errorf("Quorum(%d, redLock=%v) = %d, want %d", tc.n, tc.redLock, got, tc.want)
		}
	}
}

func TestValidity(t *testing.T) {
	for _, tc := range []struct {
		lease, elapsed, want time.Duration
	}{
		// 1% of the lease plus 2 ms of drift.
		{10 * time.Second, 0, 10*time.Second - 102*time.Millisecond},
		{10 * time.Second, 500 * time.Millisecond, 10*time.Second - 602*time.Millisecond},
		{30 * time.Second, time.Second, 30*time.Second - 1302*time.Millisecond},
		// Nothing left: the acquisition fails.
		{100 * time.Millisecond, 97 * time.Millisecond, 0},
		{100 * time.Millisecond, 200 * time.Millisecond, -103 * time.Millisecond},
	} {
		if got := Validity(tc.lease, tc.elapsed); got != tc.want {
			t.Errorf("Validity(%v, %v) = %v, want %v", tc.lease, tc.elapsed, got, tc.want)
		}
	}
}

func TestNodeTimeoutFor(t *testing.T) {
	for _, tc := range []struct{ lease, want time.Duration }{
		{30 * time.Second, 500 * time.Millisecond},
		{2 * time.Second, 200 * time.Millisecond},
		{50 * time.Millisecond, 10 * time.Millisecond},
	} {
		if got := NodeTimeoutFor(tc.lease); got != tc.want {
			t.Errorf("NodeTimeoutFor(%v) = %v, want %v", tc.lease, got, tc.want)
		}
	}
}

func TestDefaultGroupBackOff(t *testing.T) {
	b := DefaultGroupBackOff()
	var prev time.Duration
	for i := range 20 {
		d := b.NextBackOff()
		if d <= 0 || d > 750*time.Millisecond {
			t.Fatalf("pause %d = %v, want in (0, 750ms] (500ms max plus 50%% jitter)", i, d)
		}
		prev = d
	}
	if prev < 250*time.Millisecond {
		t.Errorf("pause after 20 failures = %v, want near the 500ms cap", prev)
	}
}

// scriptedMember is a GroupMember whose answers the test gives: StartAcquire answers at once with the
// member's token, and RaiseToken blocks until the test lets it go.
type scriptedMember struct {
	token    int64
	raising  chan struct{} // receives when RaiseToken is called
	raise    chan struct{} // closed by the test to let RaiseToken return
	released atomic.Int32
}

func newScriptedMember(token int64) *scriptedMember {
	return &scriptedMember{token: token, raising: make(chan struct{}, 1), raise: make(chan struct{})}
}

func (m *scriptedMember) StartAcquire(_, _ time.Duration, _ trace.Span, notify func(MemberAnswer)) (func() bool, func() error) {
	notify(MemberAnswer{OK: true, Token: m.token})
	return func() bool { return false }, func() error { return nil }
}

func (m *scriptedMember) StartRelease(_ trace.Span, notify func(error)) {
	m.released.Add(1)
	notify(nil)
}

func (m *scriptedMember) Release(context.Context) error {
	m.released.Add(1)
	return nil
}

func (m *scriptedMember) RaiseToken(ctx context.Context, _ int64) error {
	m.raising <- struct{}{}
	select {
	case <-m.raise:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A RedLock closed while it raises its members' tokens answers the caller with ReasonClosed, releases
// every member once, and ignores the raises that finish after the close (they used to reach an attempt
// whose request was gone).
func TestGroupCloseWhileRaisingTokens(t *testing.T) {
	system := actor.NewActorSystem()
	// A panic in the supervisor is recovered by protoactor, which restarts it and publishes a
	// SupervisorEvent: that is how a crash shows here.
	crashed := make(chan *actor.SupervisorEvent, 8)
	sub := system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok {
			select {
			case crashed <- e:
			default:
			}
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	members := []*scriptedMember{newScriptedMember(1), newScriptedMember(2), newScriptedMember(3)}
	cfg := GroupConfig{
		RedLock: true, WatchdogTimeout: 30 * time.Second, ReleaseTimeout: 5 * time.Second,
		NewBackOff: DefaultGroupBackOff, Logger: slog.New(slog.DiscardHandler),
	}
	for _, m := range members {
		cfg.Members = append(cfg.Members, m)
	}
	pid := system.Root.Spawn(NewGroupProps(cfg))
	defer system.Root.Stop(pid)

	ticket := NewTicket()
	system.Root.Send(pid, &GroupAcquire{Lease: 10 * time.Second, Ticket: ticket})
	deadline := time.After(10 * time.Second)
	for _, m := range members[:2] { // tokens 1 and 2 are raised to 3
		select {
		case <-m.raising:
		case <-deadline:
			t.Fatal("the tokens were not raised")
		}
	}

	done := make(chan struct{})
	system.Root.Send(pid, &GroupClose{Done: done})
	select {
	case o := <-ticket.Result():
		if o.Reason != messages.ReasonClosed {
			t.Fatalf("outcome = %+v, want ReasonClosed", o)
		}
	case <-deadline:
		t.Fatal("the acquisition was not answered at close")
	}
	select {
	case <-done:
	case <-deadline:
		t.Fatal("GroupClose did not finish")
	}
	for _, m := range members[:2] {
		close(m.raise)
	}
	// The stale raises reach the supervisor within microseconds; a crash would show well within this.
	select {
	case e := <-crashed:
		t.Fatalf("the group supervisor crashed on a raise that finished after the close: %v", e.Reason)
	case <-time.After(300 * time.Millisecond):
	}
	// The group still serves requests after the stale raises: a new one is refused as closed.
	again := NewTicket()
	system.Root.Send(pid, &GroupAcquire{Lease: 10 * time.Second, Ticket: again})
	select {
	case o := <-again.Result():
		if o.Reason != messages.ReasonClosed {
			t.Fatalf("outcome after close = %+v, want ReasonClosed", o)
		}
	case <-deadline:
		t.Fatal("the group stopped answering after the stale raises")
	}
	for i, m := range members {
		if n := m.released.Load(); n != 1 {
			t.Errorf("member %d released %d times, want 1", i, n)
		}
	}
}

// heldMember answers StartAcquire with a hold at once; its releases answer once the test closes
// release. silentMember never answers, and records its abandonment.
type (
	heldMember struct {
		scriptedMember
		release chan struct{}
	}
	silentMember struct {
		scriptedMember
		abandoned atomic.Bool
	}
)

func (m *heldMember) StartRelease(_ trace.Span, notify func(error)) {
	go func() {
		<-m.release
		m.released.Add(1)
		notify(nil)
	}()
}

func (m *silentMember) StartAcquire(_, _ time.Duration, _ trace.Span, _ func(MemberAnswer)) (func() bool, func() error) {
	return func() bool { return m.abandoned.CompareAndSwap(false, true) }, func() error { return nil }
}

// A caller that leaves a MultiLock while a member has not answered cancels the attempt: the silent
// member's request is abandoned, the members taken are released, and the leave is acknowledged, with
// the reason, only once those releases have answered.
func TestGroupAbandonReleasesBeforeAck(t *testing.T) {
	system := actor.NewActorSystem()
	held := []*heldMember{{release: make(chan struct{})}, {release: make(chan struct{})}}
	silent := &silentMember{}
	cfg := GroupConfig{
		Members:         []GroupMember{held[0], held[1], silent},
		WatchdogTimeout: 30 * time.Second, ReleaseTimeout: 5 * time.Second,
		NewBackOff: DefaultGroupBackOff, Logger: slog.New(slog.DiscardHandler),
	}
	pid := system.Root.Spawn(NewGroupProps(cfg))
	defer system.Root.Stop(pid)

	ticket := NewTicket()
	system.Root.Send(pid, &GroupAcquire{Lease: 10 * time.Second, NodeTimeout: 10 * time.Second, Ticket: ticket})
	if !ticket.Abandon() {
		t.Fatalf("the acquisition was answered with a silent member: %+v", <-ticket.Result())
	}
	ack := NewTicket()
	system.Root.Send(pid, &GroupAbandon{Ticket: ticket, Ack: ack, AfterRelease: true})
	select {
	case o := <-ack.Result():
		t.Fatalf("leave acknowledged before the taken members were released: %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	if !silent.abandoned.Load() {
		t.Error("the silent member's request was not abandoned")
	}
	close(held[0].release)
	close(held[1].release)
	var o Outcome
	select {
	case o = <-ack.Result():
	case <-time.After(5 * time.Second):
		t.Fatal("leave not acknowledged after the releases")
	}
	var f *GroupFailure
	if !errors.As(o.Err, &f) || f.Taken != 2 || len(f.Members) != 1 || f.Members[0].Index != 2 {
		t.Fatalf("leave outcome = %+v, want a GroupFailure with member 2 not taken", o)
	}
	for i, m := range held {
		if n := m.released.Load(); n != 1 {
			t.Errorf("member %d released %d times, want 1", i, n)
		}
	}
}

// gatedMember hands its acquisitions' notify functions to the test, which answers them; abandon
// reports cancellable (false: the answer is already on its way). Its releases answer once the test
// closes release.
type gatedMember struct {
	heldMember
	asked       chan func(MemberAnswer)
	cancellable bool
}

func newGatedMember(cancellable bool) *gatedMember {
	return &gatedMember{
		heldMember:  heldMember{release: make(chan struct{})},
		asked:       make(chan func(MemberAnswer), 4),
		cancellable: cancellable,
	}
}

func (m *gatedMember) StartAcquire(_, _ time.Duration, _ trace.Span, notify func(MemberAnswer)) (func() bool, func() error) {
	m.asked <- notify
	return func() bool { return m.cancellable }, func() error { return nil }
}

// slowBackOff keeps a group between its attempts for far longer than a test runs.
type slowBackOff struct{}

func (slowBackOff) NextBackOff() time.Duration { return time.Hour }
func (slowBackOff) Reset()                     {}

// startGatedGroup starts a MultiLock over members and asks it for the group with a wait.
func startGatedGroup(t *testing.T, members ...*gatedMember) (*actor.ActorSystem, *actor.PID, *Ticket) {
	t.Helper()
	system := actor.NewActorSystem()
	cfg := GroupConfig{
		WatchdogTimeout: 30 * time.Second, ReleaseTimeout: 5 * time.Second,
		NewBackOff: func() backoff.BackOff { return slowBackOff{} }, Logger: slog.New(slog.DiscardHandler),
	}
	for _, m := range members {
		cfg.Members = append(cfg.Members, m)
	}
	pid := system.Root.Spawn(NewGroupProps(cfg))
	t.Cleanup(func() { system.Root.Stop(pid) })
	ticket := NewTicket()
	system.Root.Send(pid, &GroupAcquire{
		Lease: 10 * time.Second, Wait: true, Deadline: time.Now().Add(time.Minute), NodeTimeout: 10 * time.Second,
		Ticket: ticket,
	})
	return system, pid, ticket
}

// asked returns the notify of the member's next acquisition.
func (m *gatedMember) next(t *testing.T) func(MemberAnswer) {
	t.Helper()
	select {
	case notify := <-m.asked:
		return notify
	case <-time.After(5 * time.Second):
		t.Fatal("the member was not asked")
		return nil
	}
}

// leaveAfterRelease sends the GroupAbandon of a caller that waits for the releases, checks that it is
// not acknowledged while the members' releases have not answered, lets them answer and waits for the
// acknowledgement.
func leaveAfterRelease(t *testing.T, system *actor.ActorSystem, pid *actor.PID, ticket *Ticket, members ...*gatedMember) {
	t.Helper()
	ack := NewTicket()
	system.Root.Send(pid, &GroupAbandon{Ticket: ticket, Ack: ack, AfterRelease: true})
	select {
	case o := <-ack.Result():
		t.Fatalf("leave acknowledged while the members' releases had not answered: %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	for _, m := range members {
		close(m.release)
	}
	select {
	case <-ack.Result():
	case <-time.After(5 * time.Second):
		t.Fatal("leave not acknowledged after the releases answered")
	}
	for i, m := range members {
		if n := m.released.Load(); n != 1 {
			t.Errorf("member %d released %d times, want 1", i, n)
		}
	}
}

// An attempt that succeeds just after its caller left is undone, and the caller's leave is
// acknowledged only once those releases have answered: the group holds nothing when it returns.
func TestGroupSuccessAfterLeaveReleasesBeforeAck(t *testing.T) {
	a, b := newGatedMember(true), newGatedMember(true)
	system, pid, ticket := startGatedGroup(t, a, b)
	na, nb := a.next(t), b.next(t)
	if !ticket.Abandon() {
		t.Fatal("the acquisition was answered before its members")
	}
	na(MemberAnswer{OK: true, Token: 1})
	nb(MemberAnswer{OK: true, Token: 2})
	leaveAfterRelease(t, system, pid, ticket, a, b)
}

// A caller that leaves during the pause after a failed attempt waits for that attempt's releases.
func TestGroupLeaveBetweenAttemptsWaitsForReleases(t *testing.T) {
	a, b := newGatedMember(true), newGatedMember(true)
	system, pid, ticket := startGatedGroup(t, a, b)
	na, nb := a.next(t), b.next(t)
	na(MemberAnswer{OK: true, Token: 1})
	nb(MemberAnswer{Err: errors.New("redis down")}) // an error: the next attempt comes after the pause
	if !ticket.Abandon() {
		t.Fatal("the acquisition was answered")
	}
	leaveAfterRelease(t, system, pid, ticket, a)
}

// A member whose request cannot be cancelled any more (its answer is on its way) is waited for too.
func TestGroupLeaveWaitsForLateMember(t *testing.T) {
	a, b := newGatedMember(true), newGatedMember(false)
	system, pid, ticket := startGatedGroup(t, a, b)
	_, nb := a.next(t), b.next(t)
	if !ticket.Abandon() {
		t.Fatal("the acquisition was answered")
	}
	ack := NewTicket()
	system.Root.Send(pid, &GroupAbandon{Ticket: ticket, Ack: ack, AfterRelease: true})
	nb(MemberAnswer{OK: true, Token: 2})
	select {
	case o := <-ack.Result():
		t.Fatalf("leave acknowledged while the late member's release had not answered: %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	close(b.release)
	select {
	case <-ack.Result():
	case <-time.After(5 * time.Second):
		t.Fatal("leave not acknowledged after the release answered")
	}
	if n := b.released.Load(); n != 1 {
		t.Errorf("late member released %d times, want 1", n)
	}
}

// blockingMember hands its acquisitions' notify functions to the test, then blocks in StartAcquire
// (and so the supervisor, which runs inline on the sender's goroutine) until the test closes gate.
type blockingMember struct {
	heldMember
	asked chan func(MemberAnswer)
	gate  chan struct{}
}

func (m *blockingMember) StartAcquire(_, _ time.Duration, _ trace.Span, notify func(MemberAnswer)) (func() bool, func() error) {
	m.asked <- notify
	<-m.gate
	return func() bool { return true }, func() error { return nil }
}

// A member whose result is already queued to the supervisor when the caller's leave is processed
// answered before the cancel reached it: what it took is released, and the leave is acknowledged
// only once that release has answered.
func TestGroupLeaveWhileResultQueued(t *testing.T) {
	a := newGatedMember(true)
	b := &blockingMember{heldMember: heldMember{release: make(chan struct{})}, asked: make(chan func(MemberAnswer), 1), gate: make(chan struct{})}
	system := actor.NewActorSystem()
	cfg := GroupConfig{
		Members: []GroupMember{a, b}, WatchdogTimeout: 30 * time.Second, ReleaseTimeout: 5 * time.Second,
		NewBackOff: DefaultGroupBackOff, Logger: slog.New(slog.DiscardHandler),
	}
	pid := system.Root.Spawn(NewGroupProps(cfg))
	t.Cleanup(func() { system.Root.Stop(pid) })
	t.Cleanup(func() { close(b.release) })
	ticket := NewTicket()
	go system.Root.Send(pid, &GroupAcquire{
		Lease: 10 * time.Second, Wait: true, Deadline: time.Now().Add(time.Minute), NodeTimeout: 10 * time.Second,
		Ticket: ticket,
	})
	na := a.next(t)
	select {
	case <-b.asked: // the supervisor is now held up in b's StartAcquire
	case <-time.After(5 * time.Second):
		t.Fatal("member b was not asked")
	}
	if !ticket.Abandon() {
		t.Fatal("the acquisition was answered")
	}
	ack := NewTicket()
	system.Root.Send(pid, &GroupAbandon{Ticket: ticket, Ack: ack, AfterRelease: true})
	na(MemberAnswer{OK: true, Token: 1}) // a's result queues behind the leave
	close(b.gate)
	select {
	case o := <-ack.Result():
		t.Fatalf("leave acknowledged while member a's release had not answered (released %d): %+v", a.released.Load(), o)
	case <-time.After(300 * time.Millisecond):
	}
	close(a.release)
	select {
	case <-ack.Result():
	case <-time.After(5 * time.Second):
		t.Fatal("leave not acknowledged after the release answered")
	}
	if n := a.released.Load(); n != 1 {
		t.Errorf("member a released %d times, want 1", n)
	}
}

// The answer of a request cancelled too late that comes after the next request has asked the member
// is undone, and does not count as the next request's answer: the next request completes.
func TestGroupLateAnswerAfterNextTry(t *testing.T) {
	a, b := newGatedMember(true), newGatedMember(false)
	system := actor.NewActorSystem()
	cfg := GroupConfig{
		Members: []GroupMember{a, b}, WatchdogTimeout: 30 * time.Second, ReleaseTimeout: 5 * time.Second,
		NewBackOff: DefaultGroupBackOff, Logger: slog.New(slog.DiscardHandler),
	}
	pid := system.Root.Spawn(NewGroupProps(cfg))
	t.Cleanup(func() { system.Root.Stop(pid) })
	close(a.release)
	close(b.release)
	first := NewTicket()
	system.Root.Send(pid, &GroupAcquire{
		Lease: 10 * time.Second, Wait: true, Deadline: time.Now().Add(time.Minute), NodeTimeout: 50 * time.Millisecond,
		Ticket: first,
	})
	a.next(t)
	lateB := b.next(t)
	first.Abandon()
	ack := NewTicket()
	system.Root.Send(pid, &GroupAbandon{Ticket: first, Ack: ack})
	<-ack.Result()
	// The second request starts once the first one's settle gives up on b's late answer (50 ms).
	second := NewTicket()
	system.Root.Send(pid, &GroupAcquire{
		Lease: 10 * time.Second, Wait: true, Deadline: time.Now().Add(time.Minute), NodeTimeout: 10 * time.Second,
		Ticket: second,
	})
	na, nb := a.next(t), b.next(t)
	lateB(MemberAnswer{OK: true, Token: 5})
	na(MemberAnswer{OK: true, Token: 6})
	nb(MemberAnswer{OK: true, Token: 7})
	select {
	case o := <-second.Result():
		if o.Reason != messages.ReasonNone {
			t.Fatalf("second request = %+v, want the group", o)
		}
		if want := []int64{6, 7}; !slices.Equal(o.Tokens, want) {
			t.Errorf("second request's tokens = %v, want %v", o.Tokens, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second request not answered after its members answered")
	}
	// The late answer's release runs on its own goroutine: poll for it, with a deadline.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(5 * time.Second); b.released.Load() == 0 && time.Now().Before(deadline); {
		<-tick.C
	}
	if n := b.released.Load(); n != 1 {
		t.Errorf("member b released %d times, want 1 (the late answer)", n)
	}
}

// A MultiLock with a fixed lease whose slow member answers after the lease has run out on the member
// taken first does not hold: the attempt fails as expired and releases what it took. One that
// answers in time holds until the lease minus the drift allowance.
func TestMultiLockLeaseOutlived(t *testing.T) {
	a, b := newGatedMember(true), newGatedMember(true)
	close(a.release)
	close(b.release)
	system := actor.NewActorSystem()
	cfg := GroupConfig{
		Members: []GroupMember{a, b}, WatchdogTimeout: 30 * time.Second, ReleaseTimeout: 5 * time.Second,
		NewBackOff: DefaultGroupBackOff, Logger: slog.New(slog.DiscardHandler),
	}
	pid := system.Root.Spawn(NewGroupProps(cfg))
	t.Cleanup(func() { system.Root.Stop(pid) })

	const lease = 100 * time.Millisecond
	late := NewTicket()
	system.Root.Send(pid, &GroupAcquire{Lease: lease, NodeTimeout: 2 * time.Second, Ticket: late})
	na, nb := a.next(t), b.next(t)
	na(MemberAnswer{OK: true, Token: 1})
	// b is a slow member: it answers 3 leases after a was taken.
	time.Sleep(3 * lease)
	nb(MemberAnswer{OK: true, Token: 2})
	o := <-late.Result()
	var f *GroupFailure
	if o.Reason == messages.ReasonNone {
		t.Fatalf("MultiLock held (Expires %v, %v ago) after member 0's %v lease ran out", o.Expires, time.Since(o.Expires), lease)
	}
	if !errors.As(o.Err, &f) || !f.Expired {
		t.Errorf("outcome = %+v, want a GroupFailure with Expired", o)
	}
	if na, nb := a.released.Load(), b.released.Load(); na != 1 || nb != 1 {
		t.Errorf("members released %d and %d times, want 1 each", na, nb)
	}

	start := time.Now()
	inTime := NewTicket()
	system.Root.Send(pid, &GroupAcquire{Lease: time.Minute, NodeTimeout: 2 * time.Second, Ticket: inTime})
	a.next(t)(MemberAnswer{OK: true, Token: 3})
	b.next(t)(MemberAnswer{OK: true, Token: 4})
	o = <-inTime.Result()
	if o.Reason != messages.ReasonNone {
		t.Fatalf("MultiLock with a minute's lease = %+v, want held", o)
	}
	// The validity counts from the attempt's start, which lies between start and now.
	validity := time.Minute - DriftOf(time.Minute)
	if lo, hi := start.Add(validity), time.Now().Add(validity); o.Expires.Before(lo) || o.Expires.After(hi) {
		t.Errorf("Expires = %v after the call, want the lease minus the drift (%v) after the attempt's start", o.Expires.Sub(start), validity)
	}
}
