package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

// GroupMember is one lock of a MultiLock or RedLock group, as its supervisor drives it. The Start
// calls return at once and report through notify, which may run on any goroutine and must not block;
// the other calls block. All must be safe for concurrent use.
type GroupMember interface {
	// StartAcquire asks for one hold of the member for lease (0: a watchdog hold), waiting up to wait
	// for it (0: one attempt), and reports the answer to notify exactly once, unless abandon, called
	// first, reports true: then nothing is reported and whatever the request obtains is undone.
	// span is the member's attempt span (nil when none): the member's Redis calls are events on it.
	// pending, safe to call from any goroutine, says why the request has no answer yet: the Redis
	// error of its latest attempt, [ErrNoAnswer] when Redis has not answered it for [NoAnswerAfter]
	// or more, nil when Redis answers (a waiting request: the member is held by another owner).
	StartAcquire(lease, wait time.Duration, span trace.Span, notify func(MemberAnswer)) (abandon func() bool, pending func() error)
	// StartRelease asks to drop one hold of the member and reports the outcome to notify. A member
	// that holds nothing is not an error.
	StartRelease(span trace.Span, notify func(error))
	// Release drops one hold of the member and waits for the outcome, bounded by ctx.
	Release(ctx context.Context) error
	// RaiseToken makes the member's fencing-token counter at least floor.
	RaiseToken(ctx context.Context, floor int64) error
}

// MemberAnswer is the answer to [GroupMember.StartAcquire].
type MemberAnswer struct {
	// OK reports whether the member's hold was taken.
	OK bool
	// Token is the hold's fencing token, when OK (0 otherwise).
	Token int64
	// Done is closed when the hold ends (released or lost), when OK; nil otherwise.
	Done <-chan struct{}
	// Err is why the member could not be asked (a closed coordinator, a Redis error).
	Err error
	// Permanent marks an Err that trying again cannot cure (a closed coordinator, an invalid handle, an
	// upgrade refused): the group's call fails with it.
	Permanent bool
}

// GroupConfig configures a group supervisor.
type GroupConfig struct {
	// Members are the locks of the group, in order.
	Members []GroupMember
	// RedLock selects the RedLock rules: success on a majority of the members; after a failed
	// attempt, a release on every member, including those whose answer failed; and a group token that
	// increases from holder to holder. Without it the group is a MultiLock: every member must be
	// taken, and a failed attempt releases what it took. Either way a hold is valid for the lease
	// minus the time spent acquiring minus the clock drift (DriftOf), and an attempt with no validity
	// left fails; for a MultiLock this applies to a fixed lease only (its watchdog holds are renewed
	// by the members' watchdogs as soon as they are taken).
	RedLock bool
	// WatchdogTimeout is the lease of members taken without one; the members' own watchdogs renew them.
	WatchdogTimeout time.Duration
	// ReleaseTimeout bounds each member's release.
	ReleaseTimeout time.Duration
	// NewBackOff returns the schedule of the waits between attempts (with jitter).
	NewBackOff func() backoff.BackOff
	// Logger receives the supervisor's diagnostics.
	Logger *slog.Logger
	// Telemetry records a span per member attempt; nil records nothing.
	Telemetry *telemetry.Telemetry
	// Failures is where the supervisor and its members report a recovered panic (see [Recover]).
	Failures *Failures
}

// Quorum is the number of members a group of n must take: all of them for a MultiLock, a majority
// (n/2+1) for a RedLock.
func Quorum(n int, redLock bool) int {
	if redLock {
		return n/2 + 1
	}
	return n
}

// DriftOf is the clock drift a RedLock allows for on a lease: 1% of it plus 2 ms, as in Redis'
// description of the algorithm.
func DriftOf(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// Validity is how long a RedLock hold, or a MultiLock hold with a fixed lease, stays valid once
// acquired: the lease minus the time spent acquiring minus the drift. The acquisition fails when it
// is not positive.
func Validity(lease, elapsed time.Duration) time.Duration { return lease - elapsed - DriftOf(lease) }

// NodeTimeoutFor is the default bound of one member's attempt for a lease: a tenth of it, between
// 10 ms and 500 ms, so that a slow or paused node costs little of the validity.
func NodeTimeoutFor(lease time.Duration) time.Duration {
	return min(max(lease/10, 10*time.Millisecond), 500*time.Millisecond)
}

// DefaultGroupBackOff is the schedule between a group's attempts: from 10 ms up to 500 ms, with 50%
// jitter so that two groups that overlap don't retry in step, forever (the caller's context or wait
// bounds it).
func DefaultGroupBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 10 * time.Millisecond
	b.MaxInterval = 500 * time.Millisecond
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// GroupAcquire asks a group supervisor for the group. A group that already holds counts one more
// hold locally (re-entry), without asking the members again.
type GroupAcquire struct {
	// Lease is the lease of every member; 0 takes watchdog holds.
	Lease time.Duration
	// Wait retries until the ticket is abandoned or Deadline passes; without it there is one attempt.
	Wait bool
	// Deadline ends a Wait: no attempt starts after it, and the ticket gets the last attempt's
	// failure. Zero means no deadline (the caller abandons the ticket to stop).
	Deadline time.Time
	// NodeTimeout bounds each member's attempt, and how long a failed attempt waits for the releases
	// of the members it took; 0 means NodeTimeoutFor(lease).
	NodeTimeout time.Duration
	// Parent is the span context of the caller's span.
	Parent trace.SpanContext
	// Ticket gets the request's one outcome (Tokens, Expires, HoldCount; Err a [*GroupFailure] when
	// not obtained); it must not be nil. To give up, abandon it and send [GroupAbandon].
	Ticket *Ticket
}

// GroupAbandon tells a group supervisor that the caller of Ticket left (its context ended, or its
// wait ran out) after abandoning the ticket. The attempt in flight is cancelled: the members' requests
// are abandoned (their lock actors undo whatever they still obtain) and the members it took are
// released (a RedLock: every node). Ack then gets an outcome whose Err is the [*GroupFailure] that
// describes the cancelled attempt (or the latest failed one; nil when there is none): at once, or with
// AfterRelease once the members the request took (in the cancelled attempt, in an attempt that
// succeeded after the caller left, in earlier attempts whose releases are still in flight, and in
// requests whose answers came too late to cancel) have answered their releases, bounded by the node
// timeout.
type GroupAbandon struct {
	// Ticket is the abandoned GroupAcquire's ticket.
	Ticket *Ticket
	// Ack gets the outcome described above; it must not be nil.
	Ack *Ticket
	// AfterRelease delays Ack until the members taken for the request have answered their releases
	// (bounded by the node timeout); without it Ack is answered at once.
	AfterRelease bool
}

// ErrHeldByOther is the reason of a group member that was not taken because another owner holds it.
var ErrHeldByOther = errors.New("lockwarden: held by another owner")

// GroupFailure says why an attempt on a MultiLock or RedLock did not obtain it.
type GroupFailure struct {
	// RedLock is set for a RedLock.
	RedLock bool
	// Taken is how many members the attempt took, Quorum how many it needed, Attempts how many
	// attempts the call made.
	Taken, Quorum, Attempts int
	// Expired is set when the attempt took a quorum but no validity was left of its lease (a RedLock,
	// or a MultiLock with a fixed lease).
	Expired bool
	// Members are the members the attempt did not take, in member order.
	Members []MemberFailure
}

// MemberFailure is why a group's attempt did not take one member: [ErrHeldByOther], [ErrNoAnswer]
// (the member did not answer within its bound, or before the caller left), a RedLock node refused
// after a restart, a Redis error, or the error of an unusable member handle.
type MemberFailure struct {
	// Index is the member's position in [GroupConfig.Members], from 0.
	Index int
	// Err is the reason, as listed above; never nil.
	Err error
	// Pending is set for a member asked less than NoAnswerAfter before the caller left: not a failure.
	Pending bool
}

// Error says how many members the attempt took of how many it needed, whether it took too long for
// its lease, and each member's reason.
func (f *GroupFailure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d members taken, %d needed", f.Taken, f.Taken+len(f.Members), f.Quorum)
	if f.Expired {
		b.WriteString(", but the acquisition took longer than the validity of the lease")
	}
	for _, m := range f.Members {
		fmt.Fprintf(&b, "; member %d: %v", m.Index, m.Err)
	}
	return b.String()
}

// GroupClose shuts a group supervisor down without blocking it: callers still waiting get ReasonClosed
// and every member still held is released. Done is closed once the members have answered their
// releases. Send it, wait for Done (with a deadline), then stop the actor.
type GroupClose struct {
	// Done is closed by the supervisor once the members have answered their releases; it must not be
	// nil.
	Done chan struct{}
}

// GroupRelease drops one hold of the group; the last one releases every member.
type GroupRelease struct {
	// Span is the caller's span (nil when none).
	Span trace.Span
	// Ticket gets the release's one outcome (HoldCount: the group's holds left; ReasonNotHeld when
	// the group is not held); it must not be nil.
	Ticket *Ticket
}

// Messages between a group supervisor and its member actors.
type (
	memberTry struct {
		attempt     uint64
		span        trace.Span
		lease, wait time.Duration
		// timeout bounds the attempt, wait included; 0 means wait (or no bound for one attempt).
		timeout time.Duration
	}
	// memberAnswered carries a member's answer from notify to its actor.
	memberAnswered struct {
		attempt uint64
		answer  MemberAnswer
	}
	memberTimeout struct {
		attempt uint64
		bound   time.Duration
	}
	// memberCancel abandons the member's request of attempt, if it is still in flight; the member
	// answers memberCancelled with seq, the request's number.
	memberCancel struct {
		attempt uint64
		seq     uint64
	}
	// memberCancelled says that a memberCancel took effect, or, with late, that the request's answer
	// was already on its way (to the member, or as a result to the supervisor): the member then
	// undoes what it took and answers a loose memberReleased.
	memberCancelled struct {
		seq  uint64
		late bool
	}
	// memberStarted gives the supervisor the pending function of the member's request of attempt.
	memberStarted struct {
		index   int
		attempt uint64
		waits   bool
		pending func() error
	}
	// memberDropped carries the outcome of a release from notify to the member actor.
	memberDropped struct {
		reply bool
		loose bool
		seq   uint64
		err   error
	}
	memberResult struct {
		index     int
		attempt   uint64
		ok        bool
		token     int64
		err       error
		permanent bool
	}
	// memberClose asks a member actor to give up its request in flight and release its hold; it
	// answers memberClosed once the release has its answer.
	memberClose     struct{}
	memberClosed    struct{ index int }
	memberCloseDone struct{ err error }
	memberRaise     struct {
		attempt uint64
		floor   int64
	}
	memberRaised struct {
		index   int
		attempt uint64
		err     error
	}
	// memberRelease drops the member's hold; even drops it when the member does not know of one (a
	// RedLock's release after a failed attempt, whose answer may have been lost). reply asks for a
	// memberReleased with seq; loose marks the release of a request's failed attempt (seq is then the
	// request's number), which a caller that leaves waits for.
	memberRelease struct {
		even  bool
		reply bool
		loose bool
		seq   uint64
		span  trace.Span
	}
	memberReleased struct {
		index int
		loose bool
		seq   uint64
	}
	// memberLost says that the member's hold ended without a release by the group.
	memberLost struct{ index int }
	// memberEnded is sent by a member actor's watcher to itself when the hold's done channel closes.
	memberEnded  struct{ done <-chan struct{} }
	groupRetry   struct{ gen uint64 }
	groupExpired struct{ gen uint64 }
	groupSettled struct{ gen uint64 }
)

// NewGroupProps returns the props of a group supervisor. Each member gets a child actor that drives
// it, so the members are asked in parallel. Neither the supervisor nor its children ever block: they
// run on a synchronized dispatcher, inline on the goroutine that sends to them (the caller's, or the
// member lock actor's that answers), which saves a goroutine wake-up on every hop of an acquisition.
func NewGroupProps(cfg GroupConfig) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &groupActor{cfg: cfg, quorum: Quorum(len(cfg.Members), cfg.RedLock)}
	}, inline(), Recover(cfg.Failures, "group supervisor", ""))
}

// inline is the dispatcher of actors whose Receive never blocks.
func inline() actor.PropsOption {
	return actor.WithDispatcher(actor.NewSynchronizedDispatcher(300))
}

// groupActor is the supervisor of one group handle. It serves one acquire or release at a time; the
// others wait in its queue.
type groupActor struct {
	cfg      GroupConfig
	quorum   int
	self     *actor.PID
	sched    *scheduler.TimerScheduler
	children []*actor.PID

	queue []any
	busy  bool

	// The attempt in flight. inAttempt is set while its members are asked (not during the pause
	// between attempts, nor while a failed attempt's releases are awaited).
	req       *GroupAcquire
	inAttempt bool
	attempt   uint64
	started   time.Time
	results   []memberResult
	// whyPending says, for each member, why its request of the attempt has no answer yet (nil for a
	// member not started), and waits whether that request waits on the member's lock.
	whyPending []func() error
	waits      []bool
	spans      []trace.Span
	attempts   int
	pending    int
	raising    bool
	floor      int64
	backoff    backoff.BackOff
	retry      oneShot
	waitNext   time.Duration

	// The hold.
	count    int
	held     []bool
	tokens   []int64
	token    int64
	done     chan struct{}
	expires  time.Time
	validity oneShot

	// The release in flight, and the sequence number of the latest releases awaited (by Unlock or by
	// settle).
	rel    *GroupRelease
	relSeq uint64

	// A failed or abandoned attempt that waits for the releases of the members it took (settle):
	// settleOutcome goes to the request, settleAcks to the callers that left, once settlePending
	// releases have answered or settleTimer fires.
	settling      bool
	settleOutcome *Outcome
	settleAcks    []*Ticket
	settlePending int
	settleTimer   oneShot
	// reqSeq numbers the requests; loose counts what the request's earlier attempts and cancels left
	// in flight (releases of failed attempts, cancels not yet confirmed, answers that came too late to
	// cancel), which settle waits for as well.
	reqSeq uint64
	loose  int
	// lastFailure is the failure of the request's latest failed attempt; ended and endedFailure are
	// the ticket and the latest failure of the request answered last, for a caller whose leave comes
	// after the answer it abandoned.
	lastFailure  *GroupFailure
	ended        *Ticket
	endedFailure *GroupFailure

	// closing is the GroupClose being served, and closingLeft the member actors yet to answer it.
	closing     *GroupClose
	closingLeft int
}

// Receive implements actor.Actor.
func (g *groupActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.self = ctx.Self()
		g.sched = scheduler.NewTimerScheduler(ctx.ActorSystem().Root)
		g.backoff = g.cfg.NewBackOff()
		g.held = make([]bool, len(g.cfg.Members))
		g.tokens = make([]int64, len(g.cfg.Members))
		g.spans = make([]trace.Span, len(g.cfg.Members))
		g.whyPending = make([]func() error, len(g.cfg.Members))
		g.waits = make([]bool, len(g.cfg.Members))
		for i, member := range g.cfg.Members {
			props := actor.PropsFromProducer(func() actor.Actor {
				return &memberActor{member: member, index: i, release: g.cfg.ReleaseTimeout, logger: g.cfg.Logger}
			}, inline(), Recover(g.cfg.Failures, "group member", ""))
			g.children = append(g.children, ctx.Spawn(props))
		}
	case *GroupAcquire, *GroupRelease:
		if g.closing != nil {
			closedOutcome(m)
			return
		}
		g.queue = append(g.queue, m)
	case *GroupClose:
		g.onClose(ctx, m)
		return
	case *GroupAbandon:
		if g.closing != nil {
			m.Ack.deliver(Outcome{Reason: messages.ReasonClosed})
			return
		}
		g.onAbandon(ctx, m)
	case memberClosed:
		if g.closing != nil {
			if g.closingLeft--; g.closingLeft == 0 {
				close(g.closing.Done)
			}
		}
		return
	case memberResult, memberRaised:
		if g.closing != nil {
			// The members are closing: each releases what it took on its own, and the
			// request was answered with ReasonClosed.
			return
		}
		if r, ok := m.(memberResult); ok {
			g.onResult(ctx, r)
		} else {
			g.onRaised(ctx, m.(memberRaised))
		}
	case memberStarted:
		if m.attempt == g.attempt && g.inAttempt {
			g.whyPending[m.index], g.waits[m.index] = m.pending, m.waits
		}
		return
	case memberReleased:
		g.onReleased(m)
	case memberCancelled:
		if !m.late && m.seq == g.reqSeq {
			g.looseDone()
		}
	case groupSettled:
		if g.settleTimer.current(m.gen) && g.settling {
			g.finishSettle()
		}
	case memberLost:
		g.onLost(ctx, m)
	case groupRetry:
		if g.retry.current(m.gen) && g.req != nil {
			g.startAttempt(ctx)
		}
	case groupExpired:
		if g.validity.current(m.gen) && g.count > 0 {
			g.logger().Warn("group lost", "reason", "validity ran out")
			g.loseGroup(ctx)
		}
	case *actor.Stopping:
		g.shutdown()
		return
	default:
		return
	}
	g.next(ctx)
}

func (g *groupActor) logger() *slog.Logger { return g.cfg.Logger }

// next starts the next queued request when none is in flight.
func (g *groupActor) next(ctx actor.Context) {
	for !g.busy && len(g.queue) > 0 {
		m := g.queue[0]
		g.queue = g.queue[1:]
		switch m := m.(type) {
		case *GroupAcquire:
			g.onAcquire(ctx, m)
		case *GroupRelease:
			g.onRelease(ctx, m)
		}
	}
}

func (g *groupActor) onAcquire(ctx actor.Context, m *GroupAcquire) {
	if m.Ticket.Abandoned() {
		return
	}
	if g.count > 0 {
		g.count++
		m.Ticket.deliver(g.outcome())
		return
	}
	g.busy, g.req = true, m
	g.reqSeq++
	g.loose = 0
	g.attempts = 0
	g.backoff.Reset()
	g.waitNext = 0
	g.lastFailure = nil
	g.startAttempt(ctx)
}

// lease is the lease the members of the request are taken for, as far as the validity goes.
func (g *groupActor) lease() time.Duration {
	if g.req.Lease > 0 {
		return g.req.Lease
	}
	return g.cfg.WatchdogTimeout
}

// nodeTimeout is the bound of each member's attempt of the request.
func (g *groupActor) nodeTimeout() time.Duration {
	if g.req.NodeTimeout > 0 {
		return g.req.NodeTimeout
	}
	return NodeTimeoutFor(g.lease())
}

// startAttempt asks every member at once.
func (g *groupActor) startAttempt(ctx actor.Context) {
	if g.req.Ticket.Abandoned() {
		// The caller left during the pause: wait for the releases of the attempts before.
		g.results = g.results[:0]
		g.settle(ctx, nil, false)
		return
	}
	g.attempt++
	g.inAttempt = true
	g.started = time.Now()
	g.results = g.results[:0]
	clear(g.whyPending)
	g.pending = len(g.children)
	g.raising = false
	timeout := g.nodeTimeout()
	wait := g.waitNext
	if !g.req.Deadline.IsZero() {
		wait = max(min(wait, time.Until(g.req.Deadline)), 0)
	}
	timeout += wait
	g.attempts++
	kind := messages.LockMultiLock
	if g.cfg.RedLock {
		kind = messages.LockRedLock
	}
	for i, child := range g.children {
		var span trace.Span
		if g.cfg.Telemetry != nil {
			g.spans[i] = g.cfg.Telemetry.StartChild(g.req.Parent, "lockwarden.group.member", "", kind,
				telemetry.AttrMember.Int(i), telemetry.AttrAttempts.Int(g.attempts))
			span = g.spans[i]
		}
		ctx.Send(child, memberTry{attempt: g.attempt, span: span, lease: g.req.Lease, wait: wait, timeout: timeout})
	}
}

func (g *groupActor) onResult(ctx actor.Context, m memberResult) {
	if m.attempt != g.attempt || g.req == nil || g.raising {
		// The answer to an attempt that was already settled: what it took is not wanted.
		if m.ok {
			ctx.Send(g.children[m.index], memberRelease{})
		}
		return
	}
	g.results = append(g.results, m)
	if s := g.spans[m.index]; s != nil {
		s.SetAttributes(attribute.Bool("lockwarden.group.member.taken", m.ok))
		telemetry.EndSpan(s, m.err)
		g.spans[m.index] = nil
	}
	if g.pending--; g.pending > 0 {
		return
	}
	taken, top := 0, int64(0)
	for _, r := range g.results {
		if r.ok {
			taken++
			top = max(top, r.token)
		} else if r.err != nil {
			g.logger().Debug("group member attempt failed", "member", r.index, "err", r.err)
		}
	}
	ok := taken >= g.quorum
	if ok && (g.cfg.RedLock || g.req.Lease > 0) && Validity(g.lease(), time.Since(g.started)) <= 0 {
		// The members taken first may have expired already (a MultiLock's fixed lease, too): another
		// owner may hold them.
		ok = false
	}
	if !ok {
		g.failAttempt(ctx)
		return
	}
	if g.cfg.RedLock {
		// Raise every taken member's token counter to the highest token, so that the next holder's
		// majority, which shares a member with ours, gets a higher one.
		g.floor = top
		for _, r := range g.results {
			if r.ok && r.token < top {
				g.pending++
			}
		}
		if g.pending > 0 {
			g.raising = true
			for _, r := range g.results {
				if r.ok && r.token < top {
					ctx.Send(g.children[r.index], memberRaise{attempt: g.attempt, floor: top})
				}
			}
			return
		}
	}
	g.succeed(ctx)
}

func (g *groupActor) onRaised(ctx actor.Context, m memberRaised) {
	if m.attempt != g.attempt || !g.raising || g.req == nil {
		return
	}
	if m.err != nil {
		g.logger().Warn("raising a group member's token failed", "member", m.index, "err", m.err)
		for i, r := range g.results {
			if r.index == m.index {
				g.results[i].ok = false // it does not count for the token's guarantee
				g.results[i].err = fmt.Errorf("raising its fencing token: %w", m.err)
			}
		}
		// Not counted, so not held by the group: release it now, or nothing ever will.
		ctx.Send(g.children[m.index], memberRelease{even: true})
	}
	if g.pending--; g.pending > 0 {
		return
	}
	taken := 0
	for _, r := range g.results {
		if r.ok {
			taken++
		}
	}
	g.raising = false
	if taken < g.quorum || Validity(g.lease(), time.Since(g.started)) <= 0 {
		g.failAttempt(ctx)
		return
	}
	g.succeed(ctx)
}

// failAttempt retries while the request may wait, releasing what the attempt took (a RedLock: every
// member) on the way, or ends the request: it releases what the attempt took and answers once those
// releases have answered (settle), so that a caller told "not obtained" holds nothing. A MultiLock's
// next attempt waits on its members (woken by their unlock notices) for the jittered pause, rather
// than sleeping; a RedLock's nodes get short single attempts, so it sleeps for the pause, and so does
// a MultiLock whose member answered with an error. A member error that trying again cannot cure fails
// the call with it.
func (g *groupActor) failAttempt(ctx actor.Context) {
	g.inAttempt = false
	failure := g.failure(false)
	g.lastFailure = failure
	req := g.req
	pause := g.backoff.NextBackOff()
	now := time.Now()
	failed, permanent := false, false
	for _, r := range g.results {
		if r.err != nil && !errors.Is(r.err, ErrNoAnswer) {
			failed = true
			permanent = permanent || r.permanent
		}
	}
	switch {
	case req.Ticket.Abandoned():
		g.settle(ctx, nil, true)
		return
	case permanent:
		g.settle(ctx, &Outcome{Reason: messages.ReasonRedis, Err: failure}, true)
		return
	case !req.Wait, !req.Deadline.IsZero() && !now.Before(req.Deadline),
		g.cfg.RedLock && !req.Deadline.IsZero() && now.Add(pause).After(req.Deadline):
		g.settle(ctx, &Outcome{Reason: messages.ReasonNotObtained, Err: failure}, true)
		return
	}
	for _, r := range g.results {
		switch {
		case r.ok:
			// Counted in loose: a caller that leaves before the next attempt waits for it.
			g.loose++
			ctx.Send(g.children[r.index], memberRelease{even: g.cfg.RedLock, reply: true, loose: true, seq: g.reqSeq})
		case g.cfg.RedLock:
			ctx.Send(g.children[r.index], memberRelease{even: true})
		}
	}
	if !g.cfg.RedLock && !failed {
		g.waitNext = pause
		g.startAttempt(ctx)
		return
	}
	g.retry.arm(g.sched, g.self, pause, func(gen uint64) any { return groupRetry{gen} })
}

// failure describes the attempt in flight: the members it did not take and why. With cancelled, the
// members that have not answered yet count as unanswered for as long as the attempt has run.
func (g *groupActor) failure(cancelled bool) *GroupFailure {
	f := &GroupFailure{RedLock: g.cfg.RedLock, Quorum: g.quorum, Attempts: g.attempts}
	answered := make([]bool, len(g.children))
	for _, r := range g.results {
		answered[r.index] = true
		switch {
		case r.ok:
			f.Taken++
		case r.err != nil:
			f.Members = append(f.Members, MemberFailure{Index: r.index, Err: r.err})
		default:
			f.Members = append(f.Members, MemberFailure{Index: r.index, Err: ErrHeldByOther})
		}
	}
	if cancelled {
		for i, ok := range answered {
			if ok {
				continue
			}
			var err error
			if why := g.whyPending[i]; why != nil {
				err = why()
				if err == nil && g.waits[i] {
					err = ErrHeldByOther // waiting for another owner's hold to end
				}
			}
			pending := false
			if d := time.Since(g.started); err == nil && d < NoAnswerAfter {
				// Asked too recently to say that it failed.
				err, pending = fmt.Errorf("lockwarden: asked %v ago, no answer yet", d.Round(time.Millisecond)), true
			} else if err == nil {
				err = fmt.Errorf("%w for %v", ErrNoAnswer, d.Round(time.Millisecond))
			}
			f.Members = append(f.Members, MemberFailure{Index: i, Err: err, Pending: pending})
		}
	}
	f.Expired = !cancelled && f.Taken >= g.quorum
	slices.SortFunc(f.Members, func(a, b MemberFailure) int { return a.Index - b.Index })
	return f
}

// settle ends the request after a failed, abandoned or undone attempt: it releases the members the
// attempt took (a RedLock, with every: every node, without waiting for those it did not take, which
// may be down) and, once they and what the request left in flight before (loose) have answered or the
// node timeout has passed, delivers o (nil: nothing to deliver) and the acks of callers that left.
// Anything the attempt's members still report is stale and released.
func (g *groupActor) settle(ctx actor.Context, o *Outcome, every bool) {
	g.inAttempt = false
	g.retry.stop()
	g.relSeq++
	taken := make([]bool, len(g.children))
	for _, r := range g.results {
		taken[r.index] = r.ok
	}
	g.settlePending = g.loose
	for i, child := range g.children {
		switch {
		case taken[i]:
			g.settlePending++
			ctx.Send(child, memberRelease{even: g.cfg.RedLock, reply: true, seq: g.relSeq})
		case g.cfg.RedLock && every:
			ctx.Send(child, memberRelease{even: true})
		}
	}
	g.attempt++
	g.raising, g.pending, g.results = false, 0, g.results[:0]
	g.endSpans()
	g.settling, g.settleOutcome = true, o
	if g.settlePending == 0 {
		g.finishSettle()
		return
	}
	g.settleTimer.arm(g.sched, g.self, g.nodeTimeout(), func(gen uint64) any { return groupSettled{gen} })
}

// finishSettle answers the request that settle ended and the callers that left it.
func (g *groupActor) finishSettle() {
	g.settleTimer.stop()
	if g.settleOutcome != nil {
		g.req.Ticket.deliver(*g.settleOutcome)
	}
	for _, ack := range g.settleAcks {
		ack.deliver(g.leftOutcome())
	}
	g.settling, g.settleOutcome, g.settleAcks = false, nil, nil
	g.endRequest()
}

// endRequest ends the request in flight, keeping its latest failure for a caller that left.
func (g *groupActor) endRequest() {
	if g.req != nil {
		g.ended, g.endedFailure = g.req.Ticket, g.lastFailure
	}
	g.req, g.busy = nil, false
	g.loose = 0
}

// leftOutcome is the answer to a caller that left: why the request was not obtained.
func (g *groupActor) leftOutcome() Outcome {
	o := Outcome{Reason: messages.ReasonNotObtained}
	if g.lastFailure != nil {
		o.Err = g.lastFailure
	}
	return o
}

// onAbandon cancels the request whose caller left: the members' requests in flight are abandoned and
// what the attempt took is released (settle).
func (g *groupActor) onAbandon(ctx actor.Context, m *GroupAbandon) {
	if g.req == nil || g.req.Ticket != m.Ticket {
		// Queued (onAcquire drops it), or already ended: nothing to cancel.
		o := Outcome{Reason: messages.ReasonNotObtained}
		if m.Ticket == g.ended && g.endedFailure != nil {
			o.Err = g.endedFailure
		}
		m.Ack.deliver(o)
		return
	}
	if g.settling {
		if m.AfterRelease {
			g.settleAcks = append(g.settleAcks, m.Ack)
		} else {
			m.Ack.deliver(g.leftOutcome())
		}
		return
	}
	if !g.inAttempt {
		// Between attempts: the releases of the last one may still be on their way.
		g.results = g.results[:0]
		if m.AfterRelease {
			g.settleAcks = append(g.settleAcks, m.Ack)
		} else {
			m.Ack.deliver(g.leftOutcome())
		}
		g.settle(ctx, nil, false)
		return
	}
	if g.lastFailure == nil || time.Since(g.started) >= NoAnswerAfter {
		// The attempt in flight says more than the one before, unless it was only just sent: its
		// members have not had the time to answer.
		g.lastFailure = g.failure(true)
	}
	answered := make([]bool, len(g.children))
	for _, r := range g.results {
		answered[r.index] = true
	}
	for i, child := range g.children {
		if !answered[i] {
			// Counted until the member confirms the cancel, and, if its answer was already on its
			// way, until what that answer took is released.
			g.loose++
			ctx.Send(child, memberCancel{attempt: g.attempt, seq: g.reqSeq})
		}
	}
	if m.AfterRelease {
		g.settleAcks = append(g.settleAcks, m.Ack)
	} else {
		m.Ack.deliver(g.leftOutcome())
	}
	g.settle(ctx, nil, true)
}

// endSpans ends the member spans of the attempt that are still open.
func (g *groupActor) endSpans() {
	for i, s := range g.spans {
		if s != nil {
			telemetry.EndSpan(s, nil)
			g.spans[i] = nil
		}
	}
}

// succeed records the hold and answers the caller, or, if the caller left, undoes it through settle,
// so that a leave that waits for the releases is answered once they are done.
func (g *groupActor) succeed(ctx actor.Context) {
	req := g.req
	g.inAttempt = false
	clear(g.held)
	clear(g.tokens)
	g.token = 0
	for _, r := range g.results {
		if r.ok {
			g.held[r.index] = true
			g.tokens[r.index] = r.token
			g.token = max(g.token, r.token)
		}
	}
	g.count = 1
	g.done = make(chan struct{})
	g.expires = time.Time{}
	if req.Lease > 0 {
		// With a fixed lease nothing renews the members: the group ends with its validity, counted
		// from the start of the attempt, since the member taken first may have been taken then.
		g.expires = g.started.Add(req.Lease - DriftOf(req.Lease))
	}
	if !g.cfg.RedLock {
		g.token = 0 // a MultiLock's members are different locks: only their own tokens mean something
	}
	if !req.Ticket.deliver(g.outcome()) {
		g.done, g.count, g.expires = nil, 0, time.Time{}
		clear(g.held)
		g.settle(ctx, nil, true)
		return
	}
	g.req, g.busy, g.loose = nil, false, 0
	if !g.expires.IsZero() {
		g.validity.arm(g.sched, g.self, time.Until(g.expires), func(gen uint64) any { return groupExpired{gen} })
	}
}

func (g *groupActor) outcome() Outcome {
	return Outcome{
		HoldCount: int64(g.count), Token: g.token, Tokens: append([]int64(nil), g.tokens...),
		Done: g.done, Expires: g.expires, Attempts: g.attempts,
	}
}

func (g *groupActor) onRelease(ctx actor.Context, m *GroupRelease) {
	if g.count == 0 {
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	}
	if g.count--; g.count > 0 {
		m.Ticket.deliver(Outcome{HoldCount: int64(g.count)})
		return
	}
	g.busy, g.rel = true, m
	g.pending = 0
	g.relSeq++
	for i, held := range g.held {
		switch {
		case held:
			g.pending++
			ctx.Send(g.children[i], memberRelease{reply: true, seq: g.relSeq, span: m.Span})
		case g.cfg.RedLock:
			// A node the group did not get may still have granted it after its answer was lost:
			// release there too, but don't wait for it (it may be the node that is down).
			ctx.Send(g.children[i], memberRelease{even: true, span: m.Span})
		}
	}
	g.endHold(ctx, true)
	if g.pending == 0 {
		g.finishRelease()
	}
}

func (g *groupActor) onReleased(m memberReleased) {
	if m.loose {
		if m.seq == g.reqSeq {
			g.looseDone()
		}
		return
	}
	if m.seq != g.relSeq {
		return
	}
	if g.settling {
		if g.settlePending--; g.settlePending == 0 {
			g.finishSettle()
		}
		return
	}
	if g.rel == nil {
		return
	}
	if g.pending--; g.pending == 0 {
		g.finishRelease()
	}
}

// looseDone counts one of the request's loose releases or cancels as answered.
func (g *groupActor) looseDone() {
	if g.req == nil || g.loose == 0 {
		return
	}
	g.loose--
	if g.settling {
		if g.settlePending--; g.settlePending == 0 {
			g.finishSettle()
		}
	}
}

func (g *groupActor) finishRelease() {
	g.rel.Ticket.deliver(Outcome{})
	g.rel, g.busy = nil, false
}

func (g *groupActor) onLost(ctx actor.Context, m memberLost) {
	if g.count == 0 || !g.held[m.index] {
		return
	}
	g.held[m.index] = false
	left := 0
	for _, held := range g.held {
		if held {
			left++
		}
	}
	if left >= g.quorum {
		g.logger().Warn("group member lost; the group still holds a quorum", "member", m.index, "left", left)
		return
	}
	g.logger().Warn("group lost", "member", m.index, "left", left, "quorum", g.quorum)
	g.loseGroup(ctx)
}

// loseGroup ends a hold that is no longer valid and releases what is left of it.
func (g *groupActor) loseGroup(ctx actor.Context) {
	g.count = 0
	g.endHold(ctx, false)
}

// endHold closes the hold's done channel and, unless the release is already on its way (released),
// releases every member still held.
func (g *groupActor) endHold(ctx actor.Context, released bool) {
	g.validity.stop()
	if !released {
		for i, held := range g.held {
			if held {
				ctx.Send(g.children[i], memberRelease{})
			}
		}
	}
	clear(g.held)
	if g.done != nil {
		close(g.done)
		g.done = nil
	}
	g.count = 0
}

// onClose answers every caller still waiting with ReasonClosed, ends the hold and asks every member
// actor to release what it holds; m.Done is closed once they all have.
func (g *groupActor) onClose(ctx actor.Context, m *GroupClose) {
	if g.closing != nil {
		close(m.Done)
		return
	}
	g.closing = m
	g.answerClosed()
	g.closingLeft = len(g.children)
	for _, child := range g.children {
		ctx.Send(child, memberClose{})
	}
	if g.closingLeft == 0 {
		close(m.Done)
	}
}

// answerClosed stops the timers, answers every caller still waiting with ReasonClosed, ends the spans
// of an attempt in flight and closes the hold's done channel.
func (g *groupActor) answerClosed() {
	g.retry.stop()
	g.validity.stop()
	g.settleTimer.stop()
	for _, m := range g.queue {
		closedOutcome(m)
	}
	g.queue = nil
	if g.req != nil {
		g.req.Ticket.deliver(Outcome{Reason: messages.ReasonClosed})
		g.req = nil
	}
	for _, ack := range g.settleAcks {
		ack.deliver(Outcome{Reason: messages.ReasonClosed})
	}
	g.settling, g.settleOutcome, g.settleAcks, g.inAttempt = false, nil, nil, false
	// Whatever the attempt in flight still reports is stale now.
	g.attempt++
	g.raising, g.pending, g.results = false, 0, nil
	if g.rel != nil {
		g.rel.Ticket.deliver(Outcome{})
		g.rel = nil
	}
	g.endSpans()
	if g.done != nil {
		close(g.done)
		g.done = nil
	}
	g.count = 0
	clear(g.held)
}

// closedOutcome answers a queued request of a closing group.
func closedOutcome(m any) {
	switch m := m.(type) {
	case *GroupAcquire:
		m.Ticket.deliver(Outcome{Reason: messages.ReasonClosed})
	case *GroupRelease:
		m.Ticket.deliver(Outcome{Reason: messages.ReasonClosed})
	}
}

// shutdown runs when the actor stops: normally after a GroupClose, so there is nothing left to do but
// answer what came in since; without one (a stop that did not go through the coordinator), the member
// actors, which stop next, release their holds without waiting for the answers.
func (g *groupActor) shutdown() {
	g.answerClosed()
}

// memberActor drives one member of a group: it asks the member without blocking, bounds the attempt
// with a timer, and watches the hold.
type memberActor struct {
	member  GroupMember
	index   int
	release time.Duration
	logger  *slog.Logger
	self    *actor.PID
	root    *actor.RootContext
	sched   *scheduler.TimerScheduler

	// The attempt in flight: its id, the abandon of its request, and whether it was answered.
	attempt  uint64
	abandon  func() bool
	answered bool
	timer    oneShot
	// late is set when a cancel came after the request's answer was on its way: that answer, of
	// lateAttempt, is undone, and a loose memberReleased with lateSeq says when.
	late        bool
	lateAttempt uint64
	lateSeq     uint64

	// held is whether the member holds a hold taken by the group; done is that hold's channel.
	held bool
	done <-chan struct{}
	// closing is set by memberClose: an answer that still arrives is released at once, and the actor
	// reports memberClosed once nothing is held or pending.
	closing bool
	// releasing counts the releases whose answers memberClosed waits for; reported is set once
	// memberClosed went.
	releasing int
	reported  bool
	stop      chan struct{}
	// raises counts the token raises running on their own goroutines.
	raises sync.WaitGroup
}

// Receive implements actor.Actor.
func (a *memberActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.root = ctx.Self(), ctx.ActorSystem().Root
		a.sched = scheduler.NewTimerScheduler(a.root)
		a.stop = make(chan struct{})
	case memberTry:
		a.attempt, a.answered = m.attempt, false
		self, root, attempt := a.self, a.root, m.attempt
		var pending func() error
		a.abandon, pending = a.member.StartAcquire(m.lease, m.wait, m.span, func(ans MemberAnswer) {
			root.Send(self, memberAnswered{attempt: attempt, answer: ans})
		})
		ctx.Send(ctx.Parent(), memberStarted{index: a.index, attempt: attempt, waits: m.wait > 0, pending: pending})
		if bound := max(m.timeout, m.wait); bound > 0 {
			a.timer.arm(a.sched, a.self, bound, func(uint64) any { return memberTimeout{attempt, bound} })
		}
	case memberTimeout:
		if m.attempt == a.attempt && !a.answered && a.abandon() {
			// Nothing will be reported for the request, and what it obtains later is undone.
			a.answered = true
			err := fmt.Errorf("%w within %v", ErrNoAnswer, m.bound)
			ctx.Send(ctx.Parent(), memberResult{index: a.index, attempt: m.attempt, err: err})
		}
	case memberCancel:
		// The caller left: give up the request. If its answer is already on its way, undo what it
		// takes when it comes, and tell the supervisor, which waits for that.
		late := false
		switch {
		case m.attempt == a.attempt && !a.answered && a.abandon != nil:
			a.timer.stop()
			if a.abandon() {
				a.answered = true
			} else {
				late = true
				a.late, a.lateAttempt, a.lateSeq = true, m.attempt, m.seq
			}
		case m.attempt == a.attempt && a.answered && a.held:
			// The request's answer took the hold and its result is on its way to the supervisor,
			// which no longer wants it: release it here, as a late answer, so that the supervisor
			// waits for the release (the stale result then finds nothing held).
			late = true
			a.held = false
			self, root, seq := a.self, a.root, m.seq
			a.member.StartRelease(nil, func(err error) {
				root.Send(self, memberDropped{reply: true, loose: true, seq: seq, err: err})
			})
		}
		ctx.Send(ctx.Parent(), memberCancelled{seq: m.seq, late: late})
	case memberAnswered:
		if a.closing {
			if m.answer.OK {
				a.releaseForClose()
			}
			a.answered = true
			a.reportClosed(ctx)
			return
		}
		if a.late && m.attempt == a.lateAttempt {
			// The answer of a request cancelled too late: undo it, and say when that is done. A
			// later request may have asked the member since: this is not its answer.
			a.late = false
			if m.attempt == a.attempt {
				a.answered = true
			}
			seq := a.lateSeq
			if !m.answer.OK {
				ctx.Send(ctx.Parent(), memberReleased{index: a.index, loose: true, seq: seq})
				return
			}
			self, root := a.self, a.root
			a.member.StartRelease(nil, func(err error) {
				root.Send(self, memberDropped{reply: true, loose: true, seq: seq, err: err})
			})
			return
		}
		if m.attempt != a.attempt || a.answered {
			if m.answer.OK {
				a.member.StartRelease(nil, func(error) {}) // an answer nobody waits for any more
			}
			return
		}
		a.answered = true
		a.timer.stop()
		if m.answer.OK {
			a.held = true
			if m.answer.Done != a.done {
				a.done = m.answer.Done
				a.watch(a.done)
			}
		}
		ctx.Send(ctx.Parent(), memberResult{
			index: a.index, attempt: m.attempt, ok: m.answer.OK, token: m.answer.Token, err: m.answer.Err,
			permanent: m.answer.Permanent,
		})
	case memberRaise:
		a.raises.Add(1)
		self, root, index := a.self, a.root, a.index
		go func() {
			defer a.raises.Done()
			callCtx, cancel := context.WithTimeout(context.Background(), a.release)
			defer cancel()
			err := a.member.RaiseToken(callCtx, m.floor)
			root.Send(self, memberRaised{index: index, attempt: m.attempt, err: err})
		}()
	case memberRaised:
		ctx.Send(ctx.Parent(), m)
	case memberRelease:
		if a.held || m.even {
			a.held = false
			self, root, reply, loose, seq := a.self, a.root, m.reply, m.loose, m.seq
			a.member.StartRelease(m.span, func(err error) {
				root.Send(self, memberDropped{reply: reply, loose: loose, seq: seq, err: err})
			})
		} else if m.reply {
			ctx.Send(ctx.Parent(), memberReleased{index: a.index, loose: m.loose, seq: m.seq})
		}
	case memberDropped:
		if m.err != nil {
			a.logger.Warn("release of a group member failed; its lease will expire", "member", a.index, "err", m.err)
		}
		if m.reply {
			ctx.Send(ctx.Parent(), memberReleased{index: a.index, loose: m.loose, seq: m.seq})
		}
	case memberCloseDone:
		if m.err != nil {
			a.logger.Warn("release of a group member at close failed; its lease will expire", "member", a.index, "err", m.err)
		}
		a.releasing--
		a.reportClosed(ctx)
	case memberClose:
		a.closing = true
		a.timer.stop()
		switch {
		case a.abandon == nil:
			a.answered = true // never asked
		case !a.answered && a.abandon():
			a.answered = true // abandoned: the lock actor undoes whatever it obtains
		}
		if a.held {
			a.releaseForClose()
		}
		a.reportClosed(ctx)
	case memberEnded:
		if m.done == a.done && a.held {
			a.held = false
			ctx.Send(ctx.Parent(), memberLost{index: a.index})
		}
	case *actor.Stopping:
		close(a.stop)
		a.timer.stop()
		// Never block here: the stop may run on the goroutine of the very lock actor a release would
		// wait for. Without a GroupClose first, release without waiting for the answer.
		if a.abandon != nil && !a.answered && !a.abandon() {
			a.held = true // the answer is on its way: the lock is ours, and nobody will read it
		}
		if a.held {
			a.held = false
			a.member.StartRelease(nil, func(error) {})
		}
		a.raises.Wait()
	}
}

// releaseForClose releases the member's hold for a closing group and counts the answer awaited.
func (a *memberActor) releaseForClose() {
	a.held = false
	a.releasing++
	self, root := a.self, a.root
	a.member.StartRelease(nil, func(err error) { root.Send(self, memberCloseDone{err: err}) })
}

// reportClosed tells the supervisor that a closing member holds nothing and waits for nothing.
func (a *memberActor) reportClosed(ctx actor.Context) {
	if a.closing && a.answered && a.releasing == 0 && !a.reported {
		a.reported = true
		ctx.Send(ctx.Parent(), memberClosed{index: a.index})
	}
}

// watch tells the actor when done closes, unless the actor stops first.
func (a *memberActor) watch(done <-chan struct{}) {
	if done == nil {
		return
	}
	go func() {
		select {
		case <-done:
			a.root.Send(a.self, memberEnded{done: done})
		case <-a.stop:
		}
	}()
}
