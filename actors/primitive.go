package actors

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// Take asks for permits of a semaphore or of a permit semaphore, or, on a count-down latch, waits until
// its count is zero. It is answered once the permits are taken (or the count is zero), or, without
// Wait, after one attempt.
type Take struct {
	// Name is the semaphore's or latch's name; it must not be empty.
	Name string
	// Kind is KindSemaphore, KindPermitSemaphore or KindLatch.
	Kind Kind
	// Owner names the taker in events (a handle's owner id).
	Owner string
	// Permits is how many permits to take (semaphores; at least 1).
	Permits int64
	// Lease is a permit semaphore's fixed lease per permit; 0 takes watchdog permits, renewed for as
	// long as the coordinator lives.
	Lease time.Duration
	// Wait queues the command until it succeeds or its ticket is abandoned.
	Wait bool
	// Started is when the caller asked; events measure the wait from it.
	Started time.Time
	// Span is the caller's span (nil when none).
	Span trace.Span
	// Ticket gets the command's one outcome (Permits: a permit semaphore's taken permits); it must not
	// be nil. Abandoning it makes the actor drop the command and give back what it obtained for it.
	Ticket *Ticket
	// Inline tells that the caller sends the command to the actor itself (see Locate), waits for the
	// answer on its own goroutine and cannot give up (its context never ends): the actor, when idle,
	// handles it on the caller's goroutine, Redis call included (see inlineSafe).
	Inline bool

	queued   bool
	attempts int
	// sent is when the latest attempt was sent.
	sent time.Time
	// ambiguous is set while the latest attempt failed on an error: it may have taken permits.
	// firstSent is when the first attempt since the last definite answer was sent: the earliest that
	// permits an attempt under the same request id (or permit ids) reports may have been taken.
	ambiguous bool
	firstSent time.Time
	// timedOut is set once EventWaitTimedOut was published for the take.
	timedOut bool
	// givingBack is when a give-back of what the take obtained first failed (see retryGiveBacks);
	// giveBackID is the request id under which it is sent again.
	givingBack time.Time
	giveBackID string
	// requestID is the retry latch id of a semaphore's attempt that failed on an error (see
	// semaphoreStrategy.try).
	requestID string
	// ids are the permit ids of a permit semaphore's take, chosen at its first attempt and kept for
	// the next, so that a retried attempt is recognised in Redis.
	ids []string
}

// PrimitiveOp is an operation of [Operate].
type PrimitiveOp uint8

// The operations of Operate. Each applies to the kinds its comment names.
const (
	// OpTrySet sets the permits (semaphores) or the count (latch) to N if none is set; OK reports
	// whether it was. A semaphore's TTL, when positive, is the expiry of its permit count.
	OpTrySet PrimitiveOp = iota + 1
	// OpSet sets a permit semaphore's permits to N, counting those taken.
	OpSet
	// OpAdd adds N (which may be negative) to the available permits; Value is the new count
	// (semaphore only).
	OpAdd
	// OpRelease gives back N permits (semaphore; Value is the new count), or the permit ID (permit
	// semaphore).
	OpRelease
	// OpAvailable reads the available permits (semaphores) or the count (latch) into Value.
	OpAvailable
	// OpAcquired reads how many permits of a permit semaphore are taken into Value.
	OpAcquired
	// OpDrain takes every available permit of a semaphore; Value is how many.
	OpDrain
	// OpCountDown counts a latch down by one; Value is the count left.
	OpCountDown
	// OpDelete deletes a latch; OK reports whether there was one.
	OpDelete
)

// Operate runs one operation on a semaphore, a permit semaphore or a count-down latch that waits for
// nothing but Redis' answer.
type Operate struct {
	// Name is the semaphore's or latch's name; it must not be empty.
	Name string
	// Kind is KindSemaphore, KindPermitSemaphore or KindLatch.
	Kind Kind
	// Op is the operation; one that Kind has not gets ErrUnsupportedOp.
	Op PrimitiveOp
	// N is the operation's number, as Op's comment says: permits, a count or a delta.
	N int64
	// TTL is, for OpTrySet on a semaphore, the expiry of the permit count it sets; 0 or negative
	// sets none. Other operations ignore it.
	TTL time.Duration
	// ID is the permit of OpRelease on a permit semaphore.
	ID string
	// RequestID names the operation in its retry latch in Redis: an operation sent again under the
	// same id after an error takes effect once (empty: a fresh id each time).
	RequestID string
	// Resent marks an operation sent again after an error: its first run may have taken effect in
	// Redis, so a release is not handed off to a local waiter (see handOff) but sent to Redis, whose
	// retry latch answers for it. NotAfter is when a resent operation is too late to be sent (its
	// latch may be gone): the actor then answers ErrResendTooLate and sends nothing.
	Resent bool
	// NotAfter is the deadline of a Resent operation (see Resent); zero means none.
	NotAfter time.Time
	// Owner names the caller in events.
	Owner string
	// Ticket gets the command's one outcome (OK and Value, as Op says); it must not be nil.
	Ticket *Ticket
	// Inline is as for Take.
	Inline bool
}

// LockName implements Routed.
func (m *Take) LockName() string { return m.Name }

// LockKind implements Routed.
func (m *Take) LockKind() Kind { return m.Kind }

func (m *Take) routeKey() string { return RouteKey(m.Kind, m.Name) }

// LockName implements Routed.
func (m *Operate) LockName() string { return m.Name }

// LockKind implements Routed.
func (m *Operate) LockKind() Kind { return m.Kind }

func (m *Operate) routeKey() string { return RouteKey(m.Kind, m.Name) }

// Permit is one permit of a permit semaphore, taken by [Take].
type Permit struct {
	// ID is the permit's id: 32 lower-case hex characters, as Redisson shows them.
	ID string
	// Done is closed when the permit ends: released, its lease ran out, or a renewal found it gone.
	Done <-chan struct{}
	// Expires is when a permit with a fixed lease runs out; zero for a watchdog permit.
	Expires time.Time
}

// primitiveStrategy is everything in which a semaphore, a permit semaphore and a latch differ; the
// primitive actor's core (queue, subscription, retries, events, permits and their watchdog) asks it.
type primitiveStrategy interface {
	lockKind() messages.LockKind
	// channel is the pub/sub channel of the name's notices.
	channel() string
	// try makes one attempt for t. When it fails, retryAt is when at the latest to try again (zero:
	// a notice or the actor's own poll will tell).
	try(ctx context.Context, a *primitiveActor, t *Take) (ok bool, retryAt time.Time, err error)
	// granted is the outcome of t's successful attempt; it may register permits.
	granted(a *primitiveActor, t *Take) Outcome
	// giveBack undoes the successful take t whose caller had left; sent again after an error, it
	// takes effect once (t.giveBackID names it).
	giveBack(ctx context.Context, a *primitiveActor, t *Take) error
	// forget drops the request id or permit ids of t's attempts that failed, so that its next attempt
	// runs under new ones.
	forget(t *Take)
	// wakes reports whether a notice with payload may let a waiter in.
	wakes(payload string) bool
	// servesAll reports whether one waiter's success is every waiter's (a latch at zero).
	servesAll() bool
	// operate runs m.
	operate(ctx context.Context, a *primitiveActor, m *Operate) Outcome
}

// primitiveActor serialises everything about one semaphore, permit semaphore or count-down latch name in
// one coordinator: its local waiters (FIFO, only the head tries Redis), the channel subscription that
// wakes them, and a permit semaphore's permits taken here, with their watchdog. Its Redis calls are
// made in turn, the actor waiting for each, as a fair lock's are.
type primitiveActor struct {
	name, key string
	kind      Kind
	strat     primitiveStrategy
	env       *Env
	self      *actor.PID
	parent    *actor.PID
	root      *actor.RootContext
	sched     *scheduler.TimerScheduler

	queue []*Take
	// unsettled are the takes whose latest attempt failed on an error when their caller was told
	// the error (a take without Wait) or left: the attempt may have taken permits all the same. They
	// are tried again under the same request id (or permit ids) until Redis answers, and what they
	// took is given back (see settle).
	unsettled []*Take
	// givebacks are the takes whose give-back failed, sent again (see retryGiveBacks).
	givebacks []*Take
	// stopCtx bounds the Redis calls made while the actor stops (see shutdown).
	stopCtx context.Context
	// subscribed is set while the actor is subscribed to the channel.
	subscribed bool
	// permits are a permit semaphore's permits taken through this actor, by id.
	permits map[string]*permitHold

	retry, watchdog, expiry, idle oneShot
	// retryAt is when the retry timer, when armed, fires: settleSoon brings a later one forward (the
	// poll is a third of the watchdog timeout away, and unsettled takes must settle within
	// unsettledFor).
	retryAt time.Time
	// handoffs counts a semaphore's local handoffs in a row (see handOff).
	handoffs int
	// renewSoon is set while the watchdog's latest renewal failed: the next comes sooner.
	renewSoon bool
	backoff   lazyBackOff
	failing   bool

	routed, binding uint64
}

// permitHold is one permit of a permit semaphore taken through the actor.
type permitHold struct {
	id, owner string
	done      chan struct{}
	// watchdog marks a permit renewed by the watchdog; validUntil is when it lapses unless renewed
	// (a fixed-lease permit's expiry, less the clock-drift margin).
	watchdog   bool
	validUntil time.Time
	taken      time.Time
}

type (
	primitiveRetryTick    struct{ gen uint64 }
	primitiveWatchdogTick struct{ gen uint64 }
	primitiveExpiryTick   struct{ gen uint64 }
	primitiveIdleTick     struct{ gen uint64 }
)

func newPrimitiveActor(name, key string, k Kind, env *Env, binding uint64) *primitiveActor {
	a := &primitiveActor{name: name, key: key, kind: k, env: env, binding: binding,
		permits: make(map[string]*permitHold), backoff: lazyBackOff{b: env.NewBackOff()}}
	a.strat = newPrimitiveStrategy(k, name, env.Ops)
	return a
}

// inlineSafe reports whether msg may run on the goroutine that posts it (see inlineMailbox): a command
// that its caller sent itself (never the guardian: see Locate) and waits for on that goroutine anyway,
// unable to give up. A turn that runs so may also take the Inline commands that other callers posted
// meanwhile (each its Redis call, and a release the attempts of the waiters it lets in), up to the
// dispatcher's throughput; anything else (notices, ticks) goes to the dispatcher.
func (a *primitiveActor) inlineSafe(msg any) bool {
	switch m := msg.(type) {
	case *Take:
		return m.Inline
	case *Operate:
		return m.Inline
	}
	return false
}

// boundName is the name the actor serves, for the reports of a recovered panic.
func (a *primitiveActor) boundName() string { return a.name }

func (a *primitiveActor) log() *slog.Logger {
	return a.env.Logger.With("name", a.name, "kind", a.kind.String())
}

// Receive implements actor.Actor.
func (a *primitiveActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.parent, a.root = ctx.Self(), ctx.Parent(), ctx.ActorSystem().Root
		a.sched = scheduler.NewTimerScheduler(ctx)
	case *Take:
		a.routed++
		a.onTake(m)
	case *Operate:
		a.routed++
		a.onOperate(m)
	case *Abandon:
		a.routed++
		a.onAbandon(m)
	case *messages.Subscribed:
		if a.subscribed && m.Channel == a.strat.channel() {
			a.tryQueue()
		}
	case *messages.Notice:
		if a.subscribed && m.Channel == a.strat.channel() && a.strat.wakes(m.Payload) {
			a.tryQueue()
		}
	case primitiveRetryTick:
		if a.retry.current(m.gen) {
			a.settle()
			a.tryQueue()
		}
	case primitiveWatchdogTick:
		if a.watchdog.current(m.gen) {
			a.renewPermits()
		}
	case primitiveExpiryTick:
		if a.expiry.current(m.gen) {
			a.expirePermits(time.Now())
		}
	case primitiveIdleTick:
		if a.idle.current(m.gen) && a.isIdle() {
			ctx.Send(a.parent, &idle{key: a.key, pid: a.self, routed: a.routed, binding: a.binding})
		}
	case *actor.Stopping:
		a.shutdown()
		return
	default:
		return
	}
	a.afterMessage()
}

func (a *primitiveActor) isIdle() bool {
	return len(a.queue) == 0 && len(a.permits) == 0 && len(a.unsettled) == 0 && len(a.givebacks) == 0
}

// afterMessage keeps the subscription and the timers in line with the state.
func (a *primitiveActor) afterMessage() {
	want := len(a.queue) > 0
	if want != a.subscribed {
		a.subscribed = want
		if want {
			a.root.Send(a.env.Bridge, &messages.Subscribe{Channel: a.strat.channel(), Subscriber: a.self})
		} else {
			a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: a.strat.channel(), Subscriber: a.self})
		}
	}
	if len(a.queue) == 0 && len(a.unsettled) == 0 && len(a.givebacks) == 0 {
		a.retry.stop()
	} else if !a.retry.armed() {
		// Nobody may publish what the waiters wait for while the bridge is cut off: poll now and
		// then, as the lock actors do.
		a.armRetry(a.env.WatchdogTimeout / 3)
	}
	a.armPermitTimers()
	if a.isIdle() {
		if !a.idle.armed() {
			a.idle.arm(a.sched, a.self, a.env.IdleTimeout, func(g uint64) any { return primitiveIdleTick{g} })
		}
	} else {
		a.idle.stop()
	}
}

func (a *primitiveActor) armRetry(d time.Duration) {
	d = max(d, 0)
	a.retryAt = time.Now().Add(d)
	a.retry.arm(a.sched, a.self, d, func(g uint64) any { return primitiveRetryTick{g} })
}

// callContext bounds a Redis call the actor waits for on its turn: by the stop's deadline while the
// actor stops, otherwise by the coordinator's lifetime and the stop release timeout (see
// Env.turnDeadline).
func (a *primitiveActor) callContext() (context.Context, context.CancelFunc) {
	if a.stopCtx != nil {
		return a.stopCtx, func() {}
	}
	return a.env.turnContext(time.Time{})
}

// onTake makes the first attempt of m, or queues it behind the waiters already there.
func (a *primitiveActor) onTake(m *Take) {
	if m.Ticket.Abandoned() {
		return
	}
	if m.Started.IsZero() {
		m.Started = time.Now()
	}
	if len(a.queue) > 0 && m.Wait {
		a.enqueue(m)
		return
	}
	ok, retryAt, err := a.attempt(m)
	switch {
	case ok:
		a.grant(m)
	case isNotSynced(err):
		// As for locks: the caller learns at once, rather than waiting on.
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotSynced, Err: err, Attempts: m.attempts})
	case !m.Wait && err != nil:
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err, Attempts: m.attempts})
		a.leave(m)
	case !m.Wait:
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotObtained, Attempts: m.attempts})
	default:
		a.enqueue(m)
		a.scheduleRetry(retryAt, err)
	}
}

// attempt makes one Redis attempt for m.
func (a *primitiveActor) attempt(m *Take) (bool, time.Time, error) {
	m.attempts++
	m.sent = time.Now()
	if !m.ambiguous {
		m.firstSent = m.sent
	} else if m.sent.Sub(m.firstSent) >= unsettledFor {
		// The request id (or the permit ids) of the attempts that failed is too old to be sent again:
		// its retry latch may be gone, and a run under it could take permits a second time. Start
		// over under new ones; what the failed attempts may have taken is not known.
		a.log().Warn("an attempt that failed could not be settled in time: permits it may have taken are not given back",
			"owner", m.Owner, "since", m.firstSent)
		a.strat.forget(m)
		m.firstSent = m.sent
	}
	wasAmbiguous := m.ambiguous
	ctx, cancel := a.callContext()
	ok, retryAt, err := a.strat.try(ctx, a, m)
	cancel()
	if err == nil && !ok && wasAmbiguous {
		// A failed attempt may still run in Redis after this refusal (a stalled server): a later
		// attempt under the same ids would take it for its own, with the wrong expiry.
		a.strat.forget(m)
	}
	// A grant that replicas did not acknowledge was given back: a definite answer.
	m.ambiguous = err != nil && !isNotSynced(err)
	if err != nil {
		m.Ticket.noteError(err)
		if !a.failing {
			a.log().Warn("attempt failed", "err", err)
		}
		a.failing = true
		return false, time.Time{}, err
	}
	m.Ticket.noteError(nil)
	a.failing = false
	a.backoff.reset()
	return ok, retryAt, nil
}

// scheduleRetry arms the retry for a failed attempt: at retryAt when Redis named a time, after the
// backoff when Redis failed.
func (a *primitiveActor) scheduleRetry(retryAt time.Time, err error) {
	switch {
	case err != nil:
		a.armRetry(a.backoff.next())
	case !retryAt.IsZero():
		// No later than the poll, which covers lost notices.
		a.armRetry(min(time.Until(retryAt), a.env.WatchdogTimeout/3))
	}
}

func (a *primitiveActor) enqueue(m *Take) {
	if !m.queued {
		m.queued = true
		a.emitWait(messages.EventWaitStarted, m, "")
	}
	a.queue = append(a.queue, m)
}

// unsettledFor bounds how long an unsettled take is tried again: well within the life of its retry
// latch in Redis, so that a run after one that took permits finds the latch.
const unsettledFor = redisops.DefaultLatchExpiry / 2

// leave is for a take whose caller is gone or was answered with an error: if its latest attempt failed
// on an error, it may have taken permits, and it becomes unsettled until Redis says.
func (a *primitiveActor) leave(m *Take) {
	a.emitWait(messages.EventWaitTimedOut, m, "") // once, for a waiter that waited
	if m.ambiguous && a.strat.lockKind() != messages.LockLatch {
		a.unsettled = append(a.unsettled, m)
		a.settleSoon()
	}
}

// settle tries the unsettled takes again: one that Redis now says took permits (its first run did)
// gives them back, as for a caller that left; one refused is done with. A take whose first failed
// attempt is older than unsettledFor is not sent again (see attempt). Then it retries the give-backs
// that failed.
func (a *primitiveActor) settle() {
	keep := a.unsettled[:0]
	for _, m := range a.unsettled {
		if time.Since(m.firstSent) >= unsettledFor {
			a.log().Warn("an attempt that failed stays unsettled: permits it may have taken are not given back", "owner", m.Owner)
			continue
		}
		ok, _, err := a.attempt(m)
		switch {
		case ok:
			a.grant(m) // its caller was answered: grant gives the permits back
		case err != nil:
			keep = append(keep, m)
		}
	}
	clear(a.unsettled[len(keep):])
	a.unsettled = keep
	a.retryGiveBacks()
	if len(a.unsettled) > 0 || len(a.givebacks) > 0 {
		a.scheduleRetry(time.Time{}, errUnsettled)
	}
}

// settleSoon makes sure the retry timer runs settle after the backoff, or sooner when it is armed for
// sooner: it never puts off a retry already due.
func (a *primitiveActor) settleSoon() {
	if d := a.backoff.next(); !a.retry.armed() || time.Now().Add(d).Before(a.retryAt) {
		a.armRetry(d)
	}
}

// giveBack gives back what the take m obtained for a caller that had left (or was told an error). A
// give-back that fails is sent again under the same request id, with backoff (retryGiveBacks), so
// that it takes effect once.
func (a *primitiveActor) giveBack(m *Take) {
	ctx, cancel := a.env.stopContext()
	defer cancel()
	if m.giveBackID == "" {
		m.giveBackID = a.env.NewRequestID()
	}
	sent := time.Now()
	if err := a.strat.giveBack(ctx, a, m); err != nil {
		if m.givingBack.IsZero() {
			m.givingBack = sent // the resends' window counts from the first send, as the latch's life does
			a.givebacks = append(a.givebacks, m)
		}
		a.log().Warn("giving back what a caller that left obtained failed; retrying", "owner", m.Owner, "err", err)
		a.settleSoon()
	}
}

// retryGiveBacks sends the give-backs that failed again, for as long as their retry latch lives.
func (a *primitiveActor) retryGiveBacks() {
	keep := a.givebacks[:0]
	for _, m := range a.givebacks {
		if time.Since(m.givingBack) >= unsettledFor {
			a.log().Warn("a give-back could not be made in time: its permits stay taken", "owner", m.Owner)
			continue
		}
		ctx, cancel := a.env.stopContext()
		err := a.strat.giveBack(ctx, a, m)
		cancel()
		if err != nil {
			keep = append(keep, m)
		}
	}
	clear(a.givebacks[len(keep):])
	a.givebacks = keep
}

// ErrResendTooLate answers an operation sent again after an error that reached its actor too late to
// be sent to Redis under its request id: whether its first run took effect is not known.
var ErrResendTooLate = errors.New("lockwarden: an operation sent again after an error came too late to be sent")

// errUnsettled makes scheduleRetry back off for the unsettled takes.
var errUnsettled = errors.New("unsettled takes")

// tryQueue lets in as many waiters as Redis allows, in order: the head tries, and the next tries once
// it got in. Waiters whose caller left are dropped on the way.
func (a *primitiveActor) tryQueue() {
	for len(a.queue) > 0 {
		head := a.queue[0]
		if head.Ticket.Abandoned() {
			a.queue = a.queue[1:]
			a.leave(head)
			continue
		}
		ok, retryAt, err := a.attempt(head)
		if isNotSynced(err) {
			a.queue = a.queue[1:]
			head.Ticket.deliver(Outcome{Reason: messages.ReasonNotSynced, Err: err, Attempts: head.attempts})
			continue
		}
		if !ok {
			a.scheduleRetry(retryAt, err)
			return
		}
		a.queue = a.queue[1:]
		a.grant(head)
		if a.strat.servesAll() {
			for _, m := range a.queue {
				if !m.Ticket.Abandoned() {
					a.grant(m)
				}
			}
			a.queue = nil
		}
	}
}

// grant answers the successful take m, or gives back what it took when its caller had left.
func (a *primitiveActor) grant(m *Take) {
	o := a.strat.granted(a, m)
	o.Attempts = m.attempts
	if !m.Ticket.deliver(o) {
		a.giveBack(m)
		a.emitWait(messages.EventWaitTimedOut, m, "")
		return
	}
	if a.strat.lockKind() != messages.LockLatch {
		a.emit(messages.Event{Type: messages.EventAcquired, Owner: m.Owner, HoldCount: m.Permits,
			Queued: m.queued, Wait: time.Since(m.Started)})
	}
}

// onAbandon takes the waiter whose caller left out of the queue.
func (a *primitiveActor) onAbandon(m *Abandon) {
	for i, w := range a.queue {
		if w.Ticket == m.Ticket {
			a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
			if w.queued {
				a.emitWait(messages.EventWaitTimedOut, w, "")
			}
			a.leave(w)
			if i == 0 && len(a.queue) > 0 {
				a.tryQueue() // the head kept the others out: a smaller take behind it may fit now
			}
			break
		}
	}
	if m.Ack != nil {
		m.Ack.deliver(Outcome{})
	}
}

// onOperate runs m; an operation that may have freed permits lets the local waiters try at once,
// rather than after the notice that Redis publishes.
func (a *primitiveActor) onOperate(m *Operate) {
	if m.Ticket.Abandoned() {
		return
	}
	if m.Resent && !m.NotAfter.IsZero() && !time.Now().Before(m.NotAfter) {
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: ErrResendTooLate})
		return
	}
	if m.Op == OpRelease && a.kind == KindSemaphore && !m.Resent && a.handOff(m) {
		return
	}
	// A release that goes to Redis after MaxHandoffs handoffs in a row gives the other processes
	// their turn: the local waiters then try on its notice, as theirs do, not at once.
	othersTurn := m.Op == OpRelease && a.maxHandoffs() > 0 && a.handoffs >= a.maxHandoffs()
	if m.Op == OpRelease {
		a.handoffs = 0
	}
	ctx, cancel := a.callContext()
	o := a.strat.operate(ctx, a, m)
	cancel()
	m.Ticket.deliver(o)
	if o.Reason == messages.ReasonNone && len(a.queue) > 0 && !othersTurn {
		switch m.Op {
		case OpTrySet, OpSet, OpAdd, OpRelease, OpCountDown:
			a.tryQueue()
		}
	}
}

// maxSemaphoreHandoffs bounds a semaphore's local handoffs in a row, below Env.MaxHandoffs when that is
// higher. Measured with 64 waiters on 4 permits in 2 coordinators (BenchmarkSemaphoreBusy): with no
// handoff the permits were busy 0.78-0.84 of the time; with at most 2, 4 and 8 handoffs in a row,
// 0.905, 0.95 and 0.96, and the fewest acquisitions of a waiter against the most (fairness across the
// processes) 0.60-0.62, 0.45-0.60 and 0.30-0.51.
const maxSemaphoreHandoffs = 4

func (a *primitiveActor) maxHandoffs() int { return min(a.env.MaxHandoffs, maxSemaphoreHandoffs) }

// handOff gives the permits that the semaphore release m gives back straight to the local waiters at
// the head of the queue, in order, with no Redis call: the permits stay taken in Redis, by their new
// holders. It does so only when those waiters take all of them (a release is never split between
// handoffs and Redis, so that one sent again after an error is never handed off in part twice), and
// reports whether it did; m is then answered. After MaxHandoffs handoffs in a row the release goes
// to Redis, whose notice lets the waiters of every process race for the permits, so that other
// processes get their turn.
func (a *primitiveActor) handOff(m *Operate) bool {
	if a.handoffs >= a.maxHandoffs() {
		return false
	}
	served, need := 0, int64(0)
	var gone []bool // the waiters counted out as abandoned, by index
	for _, w := range a.queue {
		if w.Ticket.Abandoned() {
			gone = append(gone, true)
			served++
			continue
		}
		gone = append(gone, false)
		if w.ambiguous || need+w.Permits > m.N {
			// A waiter whose latest attempt failed on an error may hold permits from it already:
			// its next attempt, under the same request id, tells.
			break
		}
		served++
		need += w.Permits
		if need == m.N {
			break
		}
	}
	if need != m.N {
		return false
	}
	heads := a.queue[:served]
	a.queue = a.queue[served:]
	for i, w := range heads {
		if gone[i] {
			a.leave(w)
			continue
		}
		// A waiter counted in whose caller left since gets its share all the same, and gives it
		// back to Redis (grant).
		a.handoffs++
		a.grant(w)
	}
	m.Ticket.deliver(Outcome{})
	a.emit(messages.Event{Type: messages.EventReleased, Owner: m.Owner, HoldCount: m.N, Reason: messages.ReleaseUnlocked})
	return true
}

// emit publishes ev about the actor's name.
func (a *primitiveActor) emit(ev messages.Event) {
	if a.env.Events == nil {
		return
	}
	ev.Name, ev.Kind, ev.Time, ev.Coordinator = a.name, a.strat.lockKind(), time.Now(), a.env.CoordinatorID
	a.env.Events.Publish(ev)
}

func (a *primitiveActor) emitWait(typ messages.EventType, m *Take, reason string) {
	ev := messages.Event{Type: typ, Owner: m.Owner, HoldCount: m.Permits, Reason: reason}
	if typ == messages.EventWaitTimedOut {
		// Once per waiter that waited: its caller left, and it may be dropped, settled or given
		// back after.
		if !m.queued || m.timedOut {
			return
		}
		m.timedOut = true
		ev.Wait = time.Since(m.Started)
	}
	a.emit(ev)
}

// shutdown runs when the coordinator closes: waiters are answered ReasonClosed, and the permits taken
// here are given back on a best-effort basis.
func (a *primitiveActor) shutdown() {
	if a.subscribed {
		a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: a.strat.channel(), Subscriber: a.self})
		a.subscribed = false
	}
	for _, m := range a.queue {
		m.Ticket.deliver(Outcome{Reason: messages.ReasonClosed})
		if m.queued {
			a.emitWait(messages.EventWaitTimedOut, m, messages.ReasonClosed.String())
		}
		a.leave(m)
	}
	a.queue = nil
	// One last pass over the attempts that failed and the give-backs that failed: what Redis says
	// they took is given back, as far as the stop's deadline allows.
	ctx, cancel := a.env.stopContext()
	defer cancel()
	a.stopCtx = ctx
	if len(a.unsettled) > 0 || len(a.givebacks) > 0 {
		a.settle()
	}
	for _, s := range []*oneShot{&a.retry, &a.watchdog, &a.expiry, &a.idle} {
		s.stop()
	}
	for id, p := range a.permits {
		if _, err := a.env.Ops.PermitsRelease(ctx, a.name, id, time.Now()); err != nil {
			a.log().Warn("release at close failed; the permit comes back when its lease runs out", "permit", id, "err", err)
		}
		a.endPermit(p, messages.EventReleased, messages.ReleaseClosed)
	}
}

// recovered answers the caller of the command whose handling panicked.
func (a *primitiveActor) recovered(_ actor.ReceiverContext, msg any, err error) {
	if t := commandTicket(msg); t != nil {
		t.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
	}
	if _, stopping := msg.(*actor.Stopping); stopping {
		for _, m := range a.queue {
			m.Ticket.deliver(Outcome{Reason: messages.ReasonClosed})
		}
		a.queue = nil
	}
}

// redisOutcome is the outcome of an operation that failed on err.
func redisOutcome(err error) Outcome {
	if errors.Is(err, redisops.ErrNotHeld) {
		return Outcome{Reason: messages.ReasonNotHeld, Err: err}
	}
	return Outcome{Reason: messages.ReasonRedis, Err: err}
}
