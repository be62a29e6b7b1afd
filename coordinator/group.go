package coordinator

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/messages"
)

// Group is a lock over several locks, taken and released together: a MultiLock (every member) or a
// RedLock (a majority of members on independent Redis masters). Create it with
// [Coordinator.MultiLock] or [Coordinator.RedLock]. A Group is one owner; it is safe for concurrent use.
//
// Each group has a supervisor actor on the coordinator that created it, with one child actor per
// member, so the members are asked in parallel: taking a group costs about the slowest member's time,
// not the sum. The members may be handles of any kind ([Mutex], [Coordinator.FairMutex], a side of an
// [RWMutex]) on any coordinators, on any Redis deployments.
//
// A Group is reentrant the simple way: Lock on a group that holds counts one more hold without asking
// the members again (a fixed lease is not extended), and each Lock needs its own Unlock. Do not use the
// member handles directly while the group holds them: the group's holds are theirs.
//
// The supervisor lives as long as the Group value: it stops when the coordinator closes, or when the
// Group is garbage collected, releasing what the group still held.
type Group struct {
	c           *Coordinator
	redLock     bool
	members     []*Mutex
	nodeTimeout time.Duration
	pid         *actor.PID
	err         error

	mu      sync.Mutex
	token   int64
	tokens  []int64
	done    <-chan struct{}
	expires time.Time
}

// GroupOption configures a Group.
type GroupOption func(*Group)

// WithNodeTimeout bounds each member's attempt to d. The default for a RedLock is a tenth of the lease
// (of the watchdog timeout without one), between 10 ms and 500 ms, so that a slow or paused node costs
// little of the validity; a MultiLock's attempts have no bound of their own by default. d must be
// positive and at most [MaxDuration], or every call returns [ErrInvalidOption].
func WithNodeTimeout(d time.Duration) GroupOption {
	return func(g *Group) {
		if (d <= 0 || d > MaxDuration) && g.err == nil {
			g.err = fmt.Errorf("%w: node timeout %v must be in (0, %v]", ErrInvalidOption, d, MaxDuration)
		}
		g.nodeTimeout = d
	}
}

// MultiLock returns a group that holds only when it holds every one of members (Redisson's
// RedissonMultiLock), which may sit on different coordinators and Redis servers.
//
// All members are asked at once. If any of them is not obtained, the group releases the others and,
// while the call may wait, tries again: each later attempt waits on the members (woken by their unlock
// notices) for a backoff with jitter, from 10 ms up to 500 ms, so that two groups over the same locks in
// different orders both get through instead of livelocking. A lease applies to every member; without
// one each member is a watchdog hold renewed by its own coordinator. If any member's hold is lost, the
// group is lost: [Group.Done] closes and the other members are released.
//
// An invalid group (no members, a nil member, a member twice) makes every call return
// [ErrInvalidGroup]; a member handle that is itself invalid makes every call return its error.
func (c *Coordinator) MultiLock(members []*Mutex, opts ...GroupOption) *Group {
	return c.newGroup(false, members, opts)
}

// RedLock returns a group over members that are the same lock on independent Redis masters, one
// coordinator each, that holds when it holds a majority (n/2+1) of them: the Redlock algorithm.
//
// All nodes are asked at once, each attempt bounded by [WithNodeTimeout]. The hold is valid for the
// lease (the watchdog timeout without one) minus the time the acquisition took minus a clock drift
// allowance of 1% of the lease plus 2 ms; when that is not positive, or fewer than a majority answered
// yes, the attempt fails and the group releases the lock on every node, also on those whose answer
// failed, since a reply may be lost after the node took the lock. While the call may wait it tries
// again after a backoff with jitter. Without a lease, each node's hold is renewed by the watchdog of
// its coordinator, and the group is lost when fewer than a majority of them are still held; with a
// lease, the group is lost when its validity runs out ([Group.ValidUntil]). Either way [Group.Done]
// closes.
//
// Fencing: each node keeps its own token counter. On success the group raises the counter of every
// node it took to the highest token it got (one more round trip, only when the nodes disagree), and
// [Group.Token] is that highest token. Since two majorities share a node, the next RedLock holder of the
// name gets a higher token, as long as the nodes keep their counters (a node that restarts empty
// forgets its counter, as it forgets the lock). The Redlock algorithm's own safety depends on bounded
// clock drift and pauses; prefer a [Mutex] with replica sync and fencing tokens where you can.
func (c *Coordinator) RedLock(members []*Mutex, opts ...GroupOption) *Group {
	return c.newGroup(true, members, opts)
}

func (c *Coordinator) newGroup(redLock bool, members []*Mutex, opts []GroupOption) *Group {
	g := &Group{c: c, redLock: redLock, members: append([]*Mutex(nil), members...)}
	for _, opt := range opts {
		if opt != nil {
			opt(g)
		}
	}
	if err := validateMembers(g.members); err != nil && g.err == nil {
		g.err = err
	}
	if g.err != nil {
		return g
	}
	// A member without a fixed lease of its own is a watchdog hold of its coordinator; the group's
	// validity counts with the shortest of their leases.
	watchdog := time.Duration(0)
	gms := make([]actors.GroupMember, len(g.members))
	for i, m := range g.members {
		lease := m.lease
		if lease == 0 {
			lease = m.c.opts.watchdogTimeout
		}
		if watchdog == 0 || lease < watchdog {
			watchdog = lease
		}
		gms[i] = groupMember{m}
	}
	props := actors.NewGroupProps(actors.GroupConfig{
		Members:         gms,
		RedLock:         redLock,
		WatchdogTimeout: watchdog,
		ReleaseTimeout:  c.opts.stopReleaseTimeout,
		NewBackOff:      actors.DefaultGroupBackOff,
		Logger:          c.opts.logger,
		Telemetry:       c.tel,
		Failures:        c.failures,
	})
	pid, ok := c.spawnGroup(props)
	if !ok {
		g.err = ErrClosed
		return g
	}
	g.pid = pid
	runtime.AddCleanup(g, c.stopGroup, pid)
	return g
}

// validateMembers returns ErrInvalidGroup for no members, a nil member or a member twice, and the
// error of an invalid member handle.
func validateMembers(members []*Mutex) error {
	if len(members) == 0 {
		return fmt.Errorf("%w: no members", ErrInvalidGroup)
	}
	seen := make(map[*Mutex]bool, len(members))
	for i, m := range members {
		switch {
		case m == nil:
			return fmt.Errorf("%w: member %d is nil", ErrInvalidGroup, i)
		case seen[m]:
			return fmt.Errorf("%w: member %d (%q) appears twice", ErrInvalidGroup, i, m.name)
		case m.err != nil:
			return m.err
		}
		seen[m] = true
	}
	return nil
}

// Members returns the group's member handles, in order.
func (g *Group) Members() []*Mutex { return append([]*Mutex(nil), g.members...) }

func (g *Group) usable(ctx context.Context) error {
	if g.err != nil {
		return g.err
	}
	if g.c.isClosed() {
		return ErrClosed
	}
	return ctx.Err()
}

// Lock takes the group, waiting until it holds or ctx ends; the hold is a watchdog hold of every member
// (a member handle created with [WithLease] keeps its fixed lease). When ctx ends first, the error
// matches both [ErrNotObtained] and ctx.Err(), and whatever the attempt in flight takes is released.
// It returns [ErrClosed] when the coordinator closes.
func (g *Group) Lock(ctx context.Context) error {
	_, err := g.acquire(ctx, 0, true, time.Time{})
	return err
}

// TryLock tries to take the group and reports whether it succeeded. Without [Wait] it makes one
// attempt; with Wait(d) it tries until d has passed and then reports false with a nil error. [Lease]
// gives every member a fixed lease with no watchdog. Errors as for [Group.Lock], plus
// [ErrInvalidWait] and [ErrInvalidLease].
func (g *Group) TryLock(ctx context.Context, opts ...TryOption) (bool, error) {
	o, err := parseTryOptions(0, opts)
	if err != nil {
		return false, err
	}
	if !o.waitSet {
		return g.acquire(ctx, o.lease, false, time.Time{})
	}
	deadline := time.Now().Add(o.wait)
	waitCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return ownWaitRanOut(ctx)(g.acquire(waitCtx, o.lease, true, deadline))
}

func (g *Group) acquire(ctx context.Context, lease time.Duration, wait bool, deadline time.Time) (ok bool, err error) {
	if err := g.usable(ctx); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return false, errors.Join(ErrNotObtained, err)
		}
		return false, err
	}
	kind := messages.LockMultiLock
	if g.redLock {
		kind = messages.LockRedLock
	}
	ctx, op := g.c.tel.StartGroupAcquire(ctx, kind, len(g.members))
	var o actors.Outcome
	defer func() { op.EndAcquire(acquireOutcome(ok, err), o.Token, o.Attempts, err) }()
	cmd := &actors.GroupAcquire{
		Lease: lease, Wait: wait, Deadline: deadline, NodeTimeout: g.nodeTimeout, Parent: spanParent(ctx),
		Ticket: actors.NewTicket(),
	}
	o, err = g.c.ask(ctx, g.pid, cmd, cmd.Ticket)
	if err != nil {
		return false, errors.Join(ErrNotObtained, err)
	}
	switch o.Reason {
	case messages.ReasonNone:
		g.mu.Lock()
		g.token, g.tokens, g.done, g.expires = o.Token, o.Tokens, o.Done, o.Expires
		g.mu.Unlock()
		return true, nil
	case messages.ReasonNotObtained:
		return false, nil
	default:
		return false, outcomeError(o)
	}
}

// Unlock drops one hold of the group; the last one releases every member (a RedLock: on every node).
// It returns [ErrNotHeld] when the group holds nothing, including after it was lost. If ctx ends first
// it returns ctx.Err(), and the release still takes effect.
func (g *Group) Unlock(ctx context.Context) (err error) {
	if err := g.usable(ctx); err != nil {
		return err
	}
	kind := messages.LockMultiLock
	if g.redLock {
		kind = messages.LockRedLock
	}
	ctx, op := g.c.tel.StartRelease(ctx, g.c.tel.Describe("", kind, ""))
	defer func() { op.End(err) }()
	cmd := &actors.GroupRelease{Span: trace.SpanFromContext(ctx), Ticket: actors.NewTicket()}
	o, err := g.c.ask(ctx, g.pid, cmd, cmd.Ticket)
	if err != nil {
		return err
	}
	return outcomeError(o)
}

// Token returns the fencing token of a RedLock's current hold (see [Coordinator.RedLock]), or 0 when
// the group holds nothing. A MultiLock's members are different locks: its Token is 0; use
// [Group.Tokens].
func (g *Group) Token() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil || isClosedChan(g.done) {
		return 0
	}
	return g.token
}

// Tokens returns the fencing tokens of the current hold's members, in member order: each is that
// member lock's own token (0 for a RedLock node that was not taken). It returns nil when the group
// holds nothing.
func (g *Group) Tokens() []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil || isClosedChan(g.done) {
		return nil
	}
	return append([]int64(nil), g.tokens...)
}

// Done returns a channel that is closed when the group's current hold ends: released, lost (a
// MultiLock member lost, a RedLock below its majority, a fixed lease's validity over) or dropped by
// Close. When the group holds nothing, the channel is already closed.
func (g *Group) Done() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		return closedChan
	}
	return g.done
}

// ValidUntil returns when the current hold stops being valid if it was taken with a fixed lease: for a
// RedLock the start of the acquisition plus the lease minus the drift allowance. It returns the zero
// time for a watchdog hold, which is valid until Done closes, and when the group holds nothing.
func (g *Group) ValidUntil() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil || isClosedChan(g.done) {
		return time.Time{}
	}
	return g.expires
}

// groupMember drives a Mutex handle as a member of a group.
type groupMember struct{ m *Mutex }

func (gm groupMember) StartAcquire(lease, wait time.Duration, span trace.Span, notify func(actors.MemberAnswer)) func() bool {
	m := gm.m
	if err := m.usable(context.Background()); err != nil {
		notify(actors.MemberAnswer{Err: err, Permanent: true})
		return func() bool { return false }
	}
	cmd := m.acquireCommand(lease, wait > 0, wait, actors.NewTicketFunc(func(o actors.Outcome) {
		if o.Reason != messages.ReasonNone {
			var err error
			if o.Reason != messages.ReasonNotObtained {
				err = outcomeError(o)
			}
			permanent := o.Reason == messages.ReasonClosed || o.Reason == messages.ReasonUpgrade
			notify(actors.MemberAnswer{Err: err, Permanent: permanent})
			return
		}
		m.recordHold(o)
		notify(actors.MemberAnswer{OK: true, Token: o.Token, Done: o.Done})
	}))
	cmd.Span = span
	m.c.system.Root.Send(m.c.guardian, cmd)
	return func() bool { return m.c.abandon(cmd, cmd.Ticket) }
}

func (gm groupMember) StartRelease(span trace.Span, notify func(error)) {
	m := gm.m
	if err := m.usable(context.Background()); err != nil {
		if errors.Is(err, ErrClosed) {
			err = nil // the member's own coordinator released its holds as it closed
		}
		notify(err)
		return
	}
	cmd := &actors.Release{Name: m.name, Kind: m.kind, Owner: m.owner, Span: span, Ticket: actors.NewTicketFunc(func(o actors.Outcome) {
		if err := outcomeError(o); err != nil && !errors.Is(err, ErrNotHeld) {
			notify(err)
			return
		}
		notify(nil)
	})}
	m.c.system.Root.Send(m.c.guardian, cmd)
}

func (gm groupMember) Release(ctx context.Context) error {
	if err := gm.m.Unlock(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		return err
	}
	return nil
}

func (gm groupMember) RaiseToken(ctx context.Context, floor int64) error {
	if err := gm.m.usable(ctx); err != nil {
		return err
	}
	_, err := gm.m.c.ops.RaiseToken(ctx, gm.m.name, floor)
	return err
}
