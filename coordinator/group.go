package coordinator

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
	c       *Coordinator
	redLock bool
	members []*Mutex
	// groupOptions are the group's settings (nodeTimeout, maxLease), kept in the group so that its
	// options apply to it in place.
	groupOptions
	// defaultTimeout is set when nodeTimeout is a MultiLock's default, which a call's lease caps.
	defaultTimeout bool
	// watchdog is the shortest watchdog timeout of the members without a fixed lease of their own.
	watchdog time.Duration
	pid      *actor.PID
	err      error

	// knownLease (the members' own leases and watchdog timeouts) and callLease (the longest lease of
	// the group's calls) make the default of maxLease.
	knownLease time.Duration
	callLease  atomic.Int64

	mu      sync.Mutex
	token   int64
	tokens  []int64
	done    <-chan struct{}
	expires time.Time
}

// Errors of a member that a group did not take; see [MemberError].
var (
	// ErrHeldByOther is the reason of a member that another owner holds.
	ErrHeldByOther = actors.ErrHeldByOther
	// ErrNodeRestarted is the reason of a RedLock node that does not count because it restarted less
	// than [WithMaxLease] ago (its run id changed), and may have forgotten a hold that is still
	// valid; see [Coordinator.RedLock].
	ErrNodeRestarted = errors.New("lockwarden: redlock node restarted recently")
)

// GroupOption configures a Group. Like every option of the package (see [Option]), it applies its
// value and returns its validation error; the group's constructor reports the first error through
// [Group.Err].
type GroupOption func(*groupOptions) error

// groupOptions are the settings of a Group that its options set; zero means the default.
type groupOptions struct {
	// nodeTimeout bounds each member's attempt (see WithNodeTimeout).
	nodeTimeout time.Duration
	// maxLease is WithMaxLease's value.
	maxLease time.Duration
}

// WithNodeTimeout bounds each member's attempt to d, for a MultiLock and a RedLock alike: a member
// that has not answered by then (a paused or unreachable server) counts as not taken, with
// [ErrNoAnswer], and whatever its request still obtains is given back. It also bounds how long a
// failed call waits for the releases of the members it took.
//
// The default differs. A RedLock's is a tenth of the lease (of the shortest watchdog timeout of the
// members without one), between 10 ms and 500 ms, so that a slow or paused node costs little of the
// validity; raise it for nodes whose acquisitions wait for replicas ([WithReplicaSync]). A
// MultiLock's watchdog holds are renewed as soon as each member is taken, so its default is
// generous: 1s plus the longest replica-sync timeout of the members' coordinators that have replica
// sync on (2s with the defaults), so that a member whose master waits for a lagging replica, or whose
// lock actor is busy, is not given up too early. A MultiLock call with a fixed lease ([Lease]) has a
// validity to protect, as a RedLock has: its default is at most the lease minus the drift allowance
// (1% of the lease plus 2 ms), since the members taken first expire with their lease. d must be
// positive and at most [MaxDuration], or the option's error is [ErrInvalidOption].
func WithNodeTimeout(d time.Duration) GroupOption {
	return func(o *groupOptions) error {
		if err := checkDuration("node timeout", d); err != nil {
			return err
		}
		o.nodeTimeout = d
		return nil
	}
}

// WithMaxLease sets the longest lease that any holder of a RedLock's name takes on its nodes, in any
// process: a node that restarted (its run id changed) is refused for that long after the group's
// coordinator saw the restart, since it may have forgotten a hold that is still valid. The default is
// the longest lease the group knows of: the members' fixed leases and their coordinators' watchdog
// timeouts, and the leases of the group's calls so far. Set it when other processes take the name
// with longer leases. It has no effect on a MultiLock. d must be positive and at most [MaxDuration],
// or the option's error is [ErrInvalidOption].
func WithMaxLease(d time.Duration) GroupOption {
	return func(o *groupOptions) error {
		if err := checkDuration("max lease", d); err != nil {
			return err
		}
		o.maxLease = d
		return nil
	}
}

// MultiLock returns a group that holds only when it holds every one of members (Redisson's
// RedissonMultiLock), which may sit on different coordinators and Redis servers.
//
// All members are asked at once, each attempt bounded by [WithNodeTimeout]. If any of them is not
// obtained, the group releases the others and, while the call may wait, tries again: each later
// attempt waits on the members (woken by their unlock notices) for a backoff with jitter, from 10 ms
// up to 500 ms, so that two groups over the same locks in different orders both get through instead
// of livelocking. A member that no later attempt can take (its coordinator closed: [ErrClosed]; its
// owner holds its name as another kind of lock: [ErrKindMismatch]; an upgrade: [ErrUpgrade]) ends the
// call at once. A lease applies to every member; without
// one each member is a watchdog hold renewed by its own coordinator. With a lease, the hold is valid
// for the lease minus the time the acquisition took minus the drift allowance, as a RedLock's
// ([Group.ValidUntil]): the member taken first expires with its lease, so an attempt that leaves no
// validity fails (with Expired in the [*GroupError]) and releases what it took. If any member's hold
// is lost, the group is lost: [Group.Done] closes and the other members are released.
//
// MultiLock does no I/O, and returns no error: its construction error, which [Group.Err] reports at
// once and every call on the group returns, is the error of the first invalid option
// ([ErrInvalidOption]), else [ErrInvalidGroup] when there are no members, else the first problem
// found going through the members in order: [ErrInvalidGroup] for a nil member or a member that
// appears again, the member handle's own construction error ([Mutex.Err]) for an invalid one; else
// [ErrClosed] when the coordinator is closed.
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
//
// Nodes that restart empty: a node that restarts without persistence forgets the holds it had, so
// another owner could get a majority with it while the first holder's lease still runs, with a lower
// token, which fencing cannot catch. Redlock is safe there only if a restarted node stays out of use
// for at least the longest lease, or the nodes persist every write (appendonly yes, appendfsync
// always). The group enforces what it can see: with each attempt on a node it reads the node's run
// id (INFO server, in parallel with the acquisition, bounded by the node timeout on a client with
// ContextTimeoutEnabled; attempts that start while such a read runs, of any group on the node's
// coordinator, share its answer instead of sending their own, and one that finds the read running
// for a whole node timeout does not count the node, with [ErrNoAnswer]), and a node whose run id
// changed since its
// coordinator last saw it does not count (a hold it granted is given back at once), with
// [ErrNodeRestarted] in the [*GroupError], until [WithMaxLease] has passed since the change was
// seen. A node behind Sentinel that fails over to another server counts as restarted too: the new
// master may lack holds that had not reached it. A coordinator that meets a node for the first time after it restarted
// cannot tell, and neither is checked a Redis Cluster client or a server that does not report its
// run id: there the rule above is the operator's.
//
// RedLock does no I/O, and returns no error: its construction error is reported by [Group.Err] and
// every call, as for [Coordinator.MultiLock].
func (c *Coordinator) RedLock(members []*Mutex, opts ...GroupOption) *Group {
	return c.newGroup(true, members, opts)
}

func (c *Coordinator) newGroup(redLock bool, members []*Mutex, opts []GroupOption) *Group {
	g := &Group{c: c, redLock: redLock, members: append([]*Mutex(nil), members...)}
	g.err = applyOptions(&g.groupOptions, opts)
	if g.err == nil {
		g.err = validateMembers(g.members)
	}
	if g.err != nil {
		return g
	}
	if !redLock && g.nodeTimeout == 0 {
		g.nodeTimeout, g.defaultTimeout = multiLockNodeTimeout(g.members), true
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
		g.knownLease = max(g.knownLease, lease)
		gms[i] = groupMember{m: m}
		if redLock {
			gms[i] = groupMember{m: m, red: g}
		}
	}
	g.watchdog = watchdog
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

// callNodeTimeout is the node timeout of a call with lease (0: watchdog holds). A MultiLock's default
// is cut to the lease minus the drift allowance, the longest an attempt can take and still leave
// some validity: waiting longer for a slow member could only end in an expired attempt.
func (g *Group) callNodeTimeout(lease time.Duration) time.Duration {
	if !g.defaultTimeout || lease <= 0 {
		return g.nodeTimeout
	}
	return min(g.nodeTimeout, max(lease-actors.DriftOf(lease), time.Millisecond))
}

// multiLockNodeTimeout is a MultiLock's default node timeout (see [WithNodeTimeout]): 1s plus the
// longest replica-sync timeout of the members' coordinators that wait for replicas. A call with a
// lease caps it (see [Group.callNodeTimeout]).
func multiLockNodeTimeout(members []*Mutex) time.Duration {
	sync := time.Duration(0)
	for _, m := range members {
		if m.c.opts.syncReplicas != 0 {
			sync = max(sync, m.c.opts.syncTimeout)
		}
	}
	return time.Second + sync
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

// Err returns the group's construction error (see [Coordinator.MultiLock]): [ErrInvalidOption],
// [ErrInvalidGroup], a member handle's own construction error, or [ErrClosed]. Every call on the group
// returns this same error, without I/O. It returns nil for a valid group.
func (g *Group) Err() error { return g.err }

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
// matches both [ErrNotObtained] and ctx.Err() and, when an attempt had failed or was in flight, holds
// a [*GroupError] that says which members were not taken and why. The attempt in flight is cancelled:
// Lock returns without waiting for Redis, and the members it took are released at once, in the
// background (each release bounded by its coordinator's Redis calls). A member whose error trying
// again cannot cure (its coordinator closed, [ErrUpgrade]) fails the call with a *GroupError that
// matches that error. It returns [ErrClosed] when the group's coordinator closes.
func (g *Group) Lock(ctx context.Context) error {
	_, err := g.acquire(ctx, 0, true, time.Time{}, nil)
	return err
}

// TryLock tries to take the group and reports whether it succeeded. Without [Wait] it makes one
// attempt; with Wait(d) it tries until d has passed. [Lease] gives every member a fixed lease with no
// watchdog.
//
// As with [Mutex.TryLock], it reports false with a nil error only when other owners hold the group:
// every member that the last attempt did not take is held by another owner (or was asked less than
// 200 ms before the wait ran out and has not answered yet). When a member failed
// otherwise (a Redis error, no answer within the node timeout, a RedLock node refused after a
// restart) or the acquisition of a RedLock, or of a MultiLock with a fixed lease, outlasted its
// validity, it reports false with a [*GroupError], which
// matches [ErrNotObtained] and each member's error and says which members failed and why. Either way
// the group holds nothing when TryLock returns: the members the call took (in its last attempt, in
// an attempt that succeeded just as the wait ran out, or in earlier attempts whose releases were still
// in flight) have answered their releases, or the node timeout has passed (a member that stopped answering just then; its release
// goes on in the background). Errors as for [Group.Lock], plus the error of the first invalid option
// ([ErrInvalidWait], [ErrInvalidLease]), returned before anything else.
func (g *Group) TryLock(ctx context.Context, opts ...TryOption) (bool, error) {
	var o tryOptions
	if err := applyOptions(&o, opts); err != nil {
		return false, err
	}
	if !o.waitSet {
		return g.acquire(ctx, o.lease, false, time.Time{}, nil)
	}
	deadline := time.Now().Add(o.wait)
	waitCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	ok, err := g.acquire(waitCtx, o.lease, true, deadline, ctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// The wait ran out, not the caller's ctx.
		var why *GroupError
		if errors.As(err, &why) && !why.contended() {
			return false, why
		}
		return false, nil
	}
	return ok, err
}

// GroupError is why a MultiLock or RedLock was not obtained: which members its last attempt did not
// take, and why. errors.Is matches [ErrNotObtained] and the error of each member (for instance
// [ErrHeldByOther], [ErrNoAnswer], [ErrNodeRestarted], a Redis error); errors.As finds it.
type GroupError struct {
	// RedLock is set for a RedLock, clear for a MultiLock.
	RedLock bool
	// Taken is how many members the last attempt took (and gave back), Quorum how many it needed:
	// all of them for a MultiLock, a majority for a RedLock.
	Taken, Quorum int
	// Attempts is how many attempts the call made.
	Attempts int
	// Expired is set when the last attempt of a RedLock, or of a MultiLock with a fixed lease, took
	// a quorum but took longer than the validity of its lease (the lease minus the drift allowance).
	Expired bool
	// Members are the members the last attempt did not take, in member order.
	Members []MemberError
}

// MemberError is why a group did not take one of its members.
type MemberError struct {
	// Index is the member's position in the group: the index of its handle in the slice given to
	// MultiLock or RedLock, from 0.
	Index int
	// Name is the member's lock name.
	Name string
	// Err is the reason: [ErrHeldByOther]; [ErrNoAnswer] when the member did not answer within the
	// node timeout, or for 200 ms or more before the caller left; [ErrNodeRestarted]; a Redis error;
	// the error of an unusable member handle, such as [ErrClosed].
	Err error
	// Pending is set for a member that was asked less than 200 ms before the caller left and had not
	// answered yet: no failure of its own (Err says so).
	Pending bool
}

// Error describes the member and its reason: "member <Index> (<Name>): <Err>".
func (e MemberError) Error() string { return fmt.Sprintf("member %d (%s): %v", e.Index, e.Name, e.Err) }

// Unwrap returns the member's reason.
func (e MemberError) Unwrap() error { return e.Err }

// Error says that the group was not obtained ([ErrNotObtained]), how many members the last attempt
// took of how many it needed, whether it took too long for its lease, and each member's reason.
func (e *GroupError) Error() string {
	var b strings.Builder
	kind := "multilock"
	if e.RedLock {
		kind = "redlock"
	}
	fmt.Fprintf(&b, "%v: %s: %d of %d members taken, %d needed", ErrNotObtained, kind, e.Taken, e.Taken+len(e.Members), e.Quorum)
	if e.Expired {
		b.WriteString(", but the acquisition took longer than the validity of the lease")
	}
	for _, m := range e.Members {
		b.WriteString("; ")
		b.WriteString(m.Error())
	}
	return b.String()
}

// Unwrap returns [ErrNotObtained] and the members' errors.
func (e *GroupError) Unwrap() []error {
	errs := []error{ErrNotObtained}
	for _, m := range e.Members {
		errs = append(errs, m)
	}
	return errs
}

// contended reports whether only other owners' holds stood in the way (see [Group.TryLock]).
func (e *GroupError) contended() bool {
	if e.Expired {
		return false
	}
	for _, m := range e.Members {
		if !m.Pending && !errors.Is(m.Err, ErrHeldByOther) {
			return false
		}
	}
	return true
}

// groupError turns the supervisor's description of a failed attempt into a *GroupError, or returns
// nil when err is not one.
func (g *Group) groupError(err error) *GroupError {
	var f *actors.GroupFailure
	if !errors.As(err, &f) {
		return nil
	}
	e := &GroupError{RedLock: f.RedLock, Taken: f.Taken, Quorum: f.Quorum, Attempts: f.Attempts, Expired: f.Expired}
	for _, m := range f.Members {
		me := MemberError{Index: m.Index, Err: m.Err, Pending: m.Pending}
		if m.Index >= 0 && m.Index < len(g.members) {
			me.Name = g.members[m.Index].name
		}
		e.Members = append(e.Members, me)
	}
	return e
}

// leaveAnswerBound bounds how long a caller that left waits for the supervisor's account of the
// cancelled attempt; the supervisor answers without any Redis call.
const leaveAnswerBound = 100 * time.Millisecond

// leave tells the supervisor that the caller of ticket left, and returns why the group was not
// obtained (nil when no attempt failed). With waitCtx it waits, bounded by waitCtx and the stop
// release timeout, until the members the cancelled attempt took have answered their releases.
func (g *Group) leave(ticket *actors.Ticket, waitCtx context.Context) *GroupError {
	if g.c.isClosed() {
		return nil
	}
	ack := actors.NewTicket()
	msg := &actors.GroupAbandon{Ticket: ticket, Ack: ack}
	var ctx context.Context
	var cancel context.CancelFunc
	if waitCtx != nil && waitCtx.Err() == nil {
		msg.AfterRelease = true
		ctx, cancel = context.WithTimeout(waitCtx, g.c.opts.stopReleaseTimeout)
	} else {
		ctx, cancel = context.WithTimeout(context.Background(), leaveAnswerBound)
	}
	defer cancel()
	g.c.system.Root.Send(g.pid, msg)
	select {
	case o := <-ack.Result():
		return g.groupError(o.Err)
	case <-ctx.Done():
	case <-g.c.closed:
	}
	return nil
}

func (g *Group) acquire(ctx context.Context, lease time.Duration, wait bool, deadline time.Time, leaveCtx context.Context) (bool, error) {
	ok, _, err := g.take(ctx, lease, wait, deadline, leaveCtx)
	return ok, err
}

// take is acquire that also returns the Done channel of the hold it got (nil when it got none).
func (g *Group) take(ctx context.Context, lease time.Duration, wait bool, deadline time.Time, leaveCtx context.Context) (ok bool, done <-chan struct{}, err error) {
	if err := g.usable(ctx); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return false, nil, errors.Join(ErrNotObtained, err)
		}
		return false, nil, err
	}
	kind := messages.LockMultiLock
	if g.redLock {
		kind = messages.LockRedLock
	}
	for prev := g.callLease.Load(); int64(lease) > prev && !g.callLease.CompareAndSwap(prev, int64(lease)); {
		prev = g.callLease.Load()
	}
	ctx, op := g.c.tel.StartGroupAcquire(ctx, kind, len(g.members))
	var o actors.Outcome
	defer func() { op.EndAcquire(acquireOutcome(ok, err), o.Token, o.Attempts, err) }()
	cmd := &actors.GroupAcquire{
		Lease: lease, Wait: wait, Deadline: deadline, NodeTimeout: g.callNodeTimeout(lease), Parent: spanParent(ctx),
		Ticket: actors.NewTicket(),
	}
	o, err = g.c.ask(ctx, g.pid, cmd, cmd.Ticket)
	if err != nil {
		if why := g.leave(cmd.Ticket, leaveCtx); why != nil {
			return false, nil, errors.Join(why, err)
		}
		return false, nil, errors.Join(ErrNotObtained, err)
	}
	switch o.Reason {
	case messages.ReasonNone:
		g.mu.Lock()
		g.token, g.tokens, g.done, g.expires = o.Token, o.Tokens, o.Done, o.Expires
		g.mu.Unlock()
		return true, o.Done, nil
	case messages.ReasonNotObtained:
		if why := g.groupError(o.Err); why != nil && !why.contended() {
			return false, nil, why
		}
		return false, nil, nil
	default:
		if why := g.groupError(o.Err); why != nil {
			return false, nil, why
		}
		return false, nil, outcomeError(o)
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
	cmd := &actors.GroupRelease{Span: op.Span(), Ticket: actors.NewTicket()}
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

// ValidUntil returns when the current hold stops being valid if it was taken with a fixed lease: the
// start of the acquisition plus the lease minus the drift allowance (1% of the lease plus 2 ms), for
// a MultiLock as for a RedLock; Done closes then. It returns the zero
// time for a watchdog hold, which is valid until Done closes, and when the group holds nothing.
func (g *Group) ValidUntil() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil || isClosedChan(g.done) {
		return time.Time{}
	}
	return g.expires
}

// restartGrace is how long a RedLock node that restarted stays out: see [WithMaxLease].
func (g *Group) restartGrace() time.Duration {
	if g.maxLease > 0 {
		return g.maxLease
	}
	return max(g.knownLease, time.Duration(g.callLease.Load()))
}

// nodeRuns remembers the run id of a coordinator's Redis server, as RedLock groups see it before
// they ask the node: a server whose run id changed restarted, and without persistence forgot the
// locks it held.
type nodeRuns struct {
	mu    sync.Mutex
	runID string
	// changed is when a change of run id was seen; zero when none was.
	changed time.Time
	// read is the read of the run id in progress (nil when none is), which every attempt on the node
	// that starts meanwhile shares, whichever group it is for: attempts against a node that does not
	// answer do not pile up reads, each holding a connection, and concurrent attempts on a healthy
	// node all get its answer.
	read *runRead
	// longest is the longest bound of any attempt that has read the run id: a shared read lasts at
	// least that long, so an attempt with a short bound that starts it does not cut it short for
	// those with longer ones that join it.
	longest time.Duration
}

// runRead is one read of a node's run id: runID and err are set when done closes.
type runRead struct {
	started time.Time
	done    chan struct{}
	runID   string
	err     error
}

// join returns the read of the run id in progress, or, with lead, a new one started at now, which
// the caller runs and ends with finish.
//
// bound is the caller's own bound; readBound is how long a new read may take: the longest bound of
// any attempt so far, and at least the default node timeout's cap.
func (n *nodeRuns) join(now time.Time, bound time.Duration) (r *runRead, lead bool, readBound time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.longest = max(n.longest, bound)
	if n.read != nil {
		return n.read, false, 0
	}
	n.read = &runRead{started: now, done: make(chan struct{})}
	return n.read, true, max(n.longest, actors.NodeTimeoutFor(MaxDuration))
}

// finish records the answer of r and wakes the attempts that share it.
func (n *nodeRuns) finish(r *runRead, runID string, err error) {
	n.mu.Lock()
	r.runID, r.err = runID, err
	if n.read == r {
		n.read = nil
	}
	n.mu.Unlock()
	close(r.done)
}

// see records runID as seen at now and returns until when the node stays out (zero when it need
// not): grace after the latest change of run id. The first run id seen is trusted: whether that
// server restarted recently cannot be told.
func (n *nodeRuns) see(runID string, now time.Time, grace time.Duration) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.runID == "":
		n.runID = runID
	case runID != n.runID:
		n.runID, n.changed = runID, now
	}
	if until := n.changed.Add(grace); !n.changed.IsZero() && now.Before(until) {
		return until
	}
	return time.Time{}
}

// checkNode refuses a RedLock node that restarted less than the restart grace ago, with
// ErrNodeRestarted, or whose run id could not be read, with the read's error; runID and err are the
// answer of the read.
func (g *Group) checkNode(c *Coordinator, runID string, err error) error {
	if err != nil || runID == "" {
		return err
	}
	now := time.Now()
	if until := c.runs.see(runID, now, g.restartGrace()); !until.IsZero() {
		return fmt.Errorf("%w: kept out for another %v (a lease of %v after the restart was seen)",
			ErrNodeRestarted, until.Sub(now).Round(time.Millisecond), g.restartGrace())
	}
	return nil
}

// checkTimeout bounds a RedLock node's run-id check for an attempt with lease (0: a watchdog hold):
// the node timeout.
func (g *Group) checkTimeout(lease time.Duration) time.Duration {
	if g.nodeTimeout > 0 {
		return g.nodeTimeout
	}
	if lease == 0 {
		lease = g.watchdog
	}
	return actors.NodeTimeoutFor(lease)
}

// goNodeCheck runs f on its own goroutine, which Close waits for, unless c is closed.
func (c *Coordinator) goNodeCheck(f func()) bool {
	c.groupsMu.Lock()
	defer c.groupsMu.Unlock()
	if c.isClosed() {
		return false
	}
	c.stopping.Add(1)
	go func() {
		defer c.stopping.Done()
		f()
	}()
	return true
}

// groupMember drives a Mutex handle as a member of a group; red is the group of a RedLock member,
// whose node is checked for a restart before each attempt.
type groupMember struct {
	m   *Mutex
	red *Group
}

func (gm groupMember) StartAcquire(lease, wait time.Duration, span trace.Span, notify func(actors.MemberAnswer)) (func() bool, func() error) {
	m := gm.m
	if err := m.usable(context.Background()); err != nil {
		notify(actors.MemberAnswer{Err: err, Permanent: true})
		return func() bool { return false }, func() error { return err }
	}
	if gm.red != nil {
		return gm.checkThenAcquire(lease, wait, span, notify)
	}
	return gm.startAcquire(lease, wait, span, notify)
}

// checkThenAcquire asks a RedLock node for its run id and for the hold at once, and reports the
// hold only if the node is not refused (see [Group.checkNode]); a hold taken on a refused node, or on
// a node whose run id could not be read, is given back. Both requests run in parallel, so the check
// costs no extra round trip. notify and the member's release are never called with mu held: the
// member actor runs inline and may call abandon on the same goroutine.
func (gm groupMember) checkThenAcquire(lease, wait time.Duration, span trace.Span, notify func(actors.MemberAnswer)) (func() bool, func() error) {
	m := gm.m
	var (
		mu       sync.Mutex
		done     bool // answer reported, or abandoned
		checked  bool
		checkErr error
		answered bool
		answer   actors.MemberAnswer
	)
	release := func() { gm.StartRelease(nil, func(error) {}) }
	// settle reports the answer once both the check and the acquisition have answered.
	settle := func() {
		mu.Lock()
		if done || !checked || !answered {
			mu.Unlock()
			return
		}
		done = true
		err, a := checkErr, answer
		mu.Unlock()
		switch {
		case err != nil && a.OK:
			release()
			notify(actors.MemberAnswer{Err: err})
		case errors.Is(err, ErrNodeRestarted):
			notify(actors.MemberAnswer{Err: err})
		default:
			notify(a)
		}
	}
	// The read of the run id is bounded (by the longest node timeout of the attempts on this node,
	// at least 500 ms), so that a paused node holds up neither the next attempts nor Close for the
	// client's ReadTimeout (a network read is bounded only with a client that has
	// ContextTimeoutEnabled; see [Coordinator.Close]). An attempt that starts while a read runs
	// waits for its answer, bounded by its own node timeout, rather than sending its own.
	bound := gm.red.checkTimeout(lease)
	ctx, cancel := context.WithTimeout(m.c.lifetime, bound)
	started := time.Now()
	read, lead, readBound := m.c.runs.join(started, bound)
	if age := started.Sub(read.started); !lead && age >= bound {
		// A read that has run for a whole node timeout: the node does not answer, and this attempt
		// does not count it (nor wait, nor pile up another read).
		cancel()
		checked, checkErr = true, fmt.Errorf("%w: its run id has not been read for %v", ErrNoAnswer, age.Round(time.Millisecond))
	} else if !m.c.goNodeCheck(func() {
		defer cancel()
		if lead {
			// The read is not cut short when this attempt is abandoned, nor by this attempt's
			// bound: others may share it, with longer bounds of their own.
			readCtx, cancelRead := context.WithTimeout(m.c.lifetime, readBound)
			runID, err := m.c.ops.RunID(readCtx)
			cancelRead()
			m.c.runs.finish(read, runID, err)
		}
		var err error
		select {
		case <-read.done:
			err = gm.red.checkNode(m.c, read.runID, read.err)
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w: its run id was not read in time: %w", ErrNoAnswer, err)
			}
		case <-ctx.Done():
			err = fmt.Errorf("%w: its run id was not read within %v", ErrNoAnswer, bound)
		}
		mu.Lock()
		checked, checkErr = true, err
		mu.Unlock()
		settle()
	}) {
		cancel()
		if lead {
			m.c.runs.finish(read, "", ErrClosed)
		}
		notify(actors.MemberAnswer{Err: ErrClosed, Permanent: true})
		return func() bool { return false }, func() error { return ErrClosed }
	}
	abandonAcquisition, pendingAcquisition := gm.startAcquire(lease, wait, span, func(a actors.MemberAnswer) {
		mu.Lock()
		answered, answer = true, a
		abandoned := done
		mu.Unlock()
		if abandoned {
			if a.OK {
				release() // nobody wants this hold any more
			}
			return
		}
		settle()
	})
	abandon := func() bool {
		mu.Lock()
		if done {
			mu.Unlock()
			return false
		}
		done = true
		wasAnswered, a := answered, answer
		mu.Unlock()
		cancel()
		switch {
		case wasAnswered:
			if a.OK {
				release()
			}
		case !abandonAcquisition():
			// The acquisition's answer is on its way: its callback sees done and gives a hold back.
		}
		return true
	}
	pending := func() error {
		mu.Lock()
		acquisitionAnswered, runChecked := answered, checked
		mu.Unlock()
		if !acquisitionAnswered {
			return pendingAcquisition()
		}
		if d := time.Since(started); !runChecked && d >= actors.NoAnswerAfter {
			return fmt.Errorf("%w for %v", ErrNoAnswer, d.Round(time.Millisecond))
		}
		return nil
	}
	return abandon, pending
}

// startAcquire sends the acquisition of one hold of the member.
func (gm groupMember) startAcquire(lease, wait time.Duration, span trace.Span, notify func(actors.MemberAnswer)) (func() bool, func() error) {
	m := gm.m
	cmd := m.acquireCommand(new(actors.Acquire), lease, wait > 0, wait, actors.NewTicketFunc(func(o actors.Outcome) {
		if o.Reason != messages.ReasonNone {
			var err error
			if o.Reason != messages.ReasonNotObtained {
				err = outcomeError(o)
			}
			// An answer that no later attempt can change ends the call at once.
			permanent := o.Reason == messages.ReasonClosed || o.Reason == messages.ReasonUpgrade ||
				o.Reason == messages.ReasonKindMismatch
			notify(actors.MemberAnswer{Err: err, Permanent: permanent})
			return
		}
		m.recordHold(o)
		notify(actors.MemberAnswer{OK: true, Token: o.Token, Done: o.Done})
	}))
	cmd.Span = span
	m.c.system.Root.Send(m.c.guardian, cmd)
	pending := func() error {
		if err := cmd.Ticket.LastError(); err != nil {
			return err
		}
		if d := cmd.Ticket.Unanswered(); d >= actors.NoAnswerAfter {
			return fmt.Errorf("%w for %v", ErrNoAnswer, d.Round(time.Millisecond))
		}
		return nil
	}
	return func() bool { return m.c.abandon(cmd, cmd.Ticket) }, pending
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
