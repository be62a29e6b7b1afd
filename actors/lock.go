package actors

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/cenkalti/backoff/v4"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// lockActor serialises everything about one lock name of one family (plain, fair or read-write) in
// one coordinator.
type lockActor struct {
	name   string
	key    string
	family family
	// proto is the family's strategy: its Redis calls and every decision in which families differ.
	proto  strategy
	env    *Env
	self   *actor.PID
	parent *actor.PID
	root   *actor.RootContext
	// sched runs the retries of fair queue leaves (rare, see retryLeave); created when first needed.
	sched *scheduler.TimerScheduler
	// clock registers the actor's earliest timer deadline with the coordinator's timer service.
	clock clock

	holds map[holdKey]*hold
	// kindHolds counts the holds of each kind, so that compatible need not walk them all.
	kindHolds [maxKinds]int
	// lost holds the owners whose last hold was lost, so that their Unlock answers "not held" even
	// when the local lease estimate ran out a moment before Redis expired the key: the hold count to
	// give back, or lostGivenBack once it was given back.
	lost  map[holdKey]int64
	queue []*Acquire
	// handoffs counts local handoffs in a row. othersTurnSince is when a release of a reentrant lock
	// ended such a run by freeing the lock for other processes' waiters (zero otherwise): on that
	// release's notice the local head lets them go first (see plainStrategy.notice).
	handoffs        int
	othersTurnSince time.Time
	// latchedUntil is until when an owner of a Mutex on this name may have an unlock latch in Redis: a
	// release of its hold through the latch answered (or failed) less than the latch's expiry ago (see
	// noteLatch). Until then the releases of the reentrant lock all go through the latch, so that each
	// stores a higher sequence there; after it, a Mutex's release with no handoff needs none
	// (hold.fencedToken). The actor does not go idle before it (the actor that would take over the
	// name does not know of it).
	latchedUntil time.Time
	// early is the waiter granted from a local handoff before Redis answered the release in flight
	// that hands it the lock (see grantEarly); nil when none. unconfirmed is such a waiter whose
	// release failed on a Redis error, so that whether it took effect is unknown: its hold waits for
	// the retried release of unconfirmedBy (the hold whose release it was, of key unconfirmedKey) to
	// confirm it. alone is set while the latest release that counted the lock's listeners found no
	// client but this one (see handsOffEarly).
	early          *Acquire
	unconfirmed    *Acquire
	unconfirmedBy  *hold
	unconfirmedKey holdKey
	alone          bool
	// subs is the set of channels the bridge forwards to us; recent is when each channel of a fair lock
	// was last wanted by a waiter (see keepRecentChannels).
	subs map[string]struct{}
	// want is syncSubscriptions' set of the channels wanted, kept to be reused.
	want   map[string]struct{}
	recent map[string]time.Time
	// routed counts the commands received from the guardian since the actor was bound to its name;
	// binding names that binding (see Guardian).
	routed  uint64
	binding uint64
	// timers is the coordinator's timer service (nil outside a guardian: then no timer fires).
	timers *Timers

	// soloCall is the reentrant lock's call in flight without the actor waiting for it, reused (see
	// startCall); nil until the first.
	soloCall *soloCall
	// stash holds the messages that wait for the calls in flight (see Receive), oldest first;
	// replaying is the one of them that replay is handling, so that a panic fails it (see recovered).
	stash     []any
	replaying any
	// batch holds the read acquires and read releases of a read-write lock waiting to go to Redis
	// together; nil when there are none.
	batch *readBatch
	// running are the read batches sent to Redis and not settled yet, oldest first; settling are those
	// whose settlement is under way (see settleRest).
	running  []*readBatch
	settling []*readBatch
	// stopBy is when the actor gives up waiting for the batches still running; zero until it stops or
	// the coordinator's context ends (see awaitBatch).
	stopBy time.Time
	// headBusy counts the tryHead calls and batch settlements in progress; headWanted records that the
	// head should be tried once the outermost of them is done (see tryHead).
	headBusy   int
	headWanted bool
	// failing is set while the latest attempt failed on a Redis error (see noteRedisError).
	failing bool
	// inflight is when the Redis attempt in flight was sent (Unix nanoseconds), 0 when none is; the
	// callers' tickets watch it (Ticket.Unanswered).
	inflight atomic.Int64
	// intentOwner is the waiting writer whose write intent keepWriteIntent last left, at intentSent.
	intentOwner string
	intentSent  time.Time
	intent      oneShot

	retry    oneShot
	expiry   oneShot
	expiryAt time.Time
	idle     oneShot
	watchdog oneShot
	// keepAlive refreshes the places of a fair lock's waiters in the Redis queue, next at keepAliveAt;
	// leaving holds the leaves of fair waiters to be retried (see retryLeave).
	keepAlive   oneShot
	keepAliveAt time.Time
	leaving     map[*Acquire]scheduler.CancelFunc
	backoff     lazyBackOff
	// renewTicks counts the watchdog ticks, to sample their spans.
	renewTicks uint64
	// renewSoon is set while a renewal did not count (an error, a late answer, or replicas that did not
	// acknowledge it): the watchdog's next tick comes after renewRetryDelay rather than a third of the
	// watchdog timeout.
	renewSoon bool
	// renewing counts the renewals handed to the coordinator's Renewals and not answered yet (see
	// renewAsync); a watchdog tick while one is out sends nothing more.
	renewing int
}

func newLockActor(name, key string, f family, env *Env) *lockActor {
	return &lockActor{
		name:    name,
		key:     key,
		family:  f,
		proto:   newStrategy(f, name, env.Ops),
		env:     env,
		holds:   make(map[holdKey]*hold),
		lost:    make(map[holdKey]int64),
		subs:    make(map[string]struct{}),
		backoff: lazyBackOff{b: env.NewBackOff()},
	}
}

// recycle drops everything the actor kept of its name once the guardian unbound it (it was idle: no
// holds, no waiters, no batch), so that it carries nothing over to the next name it is bound to.
func (a *lockActor) recycle() {
	a.unsubscribeAndStopTimers()
	clear(a.lost)
	clear(a.holds)
	a.kindHolds = [maxKinds]int{}
	a.recent, a.leaving = nil, nil
	a.queue, a.batch, a.running, a.settling, a.stash = nil, nil, nil, nil, nil
	a.handoffs, a.othersTurnSince, a.headBusy, a.headWanted, a.failing = 0, time.Time{}, 0, false, false
	a.latchedUntil = time.Time{}
	a.early, a.unconfirmed, a.unconfirmedBy, a.alone = nil, nil, nil, false
	a.intentOwner, a.intentSent = "", time.Time{}
	a.expiryAt, a.keepAliveAt = time.Time{}, time.Time{}
	a.renewTicks, a.renewSoon = 0, false
	a.routed = 0
	a.want = nil
	a.resetBackOff()
	a.name, a.key, a.proto = "", "", nil
}

// nextBackOff returns the next wait of the retry schedule, which starts over at its first wait after
// resetBackOff.
func (a *lockActor) nextBackOff() time.Duration { return a.backoff.next() }

// resetBackOff starts the retry schedule over from its first wait.
func (a *lockActor) resetBackOff() { a.backoff.reset() }

// lazyBackOff is a retry schedule that starts over at its first wait after reset. The schedule is
// reset when it is first used after a reset, so that a reset on the path of every successful call
// costs nothing (a reset reads the clock).
type lazyBackOff struct {
	b backoff.BackOff
	// used is set once next has run since the last reset.
	used bool
}

// next returns the next wait.
func (l *lazyBackOff) next() time.Duration {
	if !l.used {
		l.used = true
		l.b.Reset()
	}
	return l.b.NextBackOff()
}

// reset starts the schedule over.
func (l *lazyBackOff) reset() { l.used = false }

// rebind binds a recycled actor to a new name.
func (a *lockActor) rebind(m *bind) {
	a.name, a.key, a.family, a.binding = m.name, m.key, m.family, m.binding
	a.proto = newStrategy(m.family, m.name, a.env.Ops)
}

// boundName is the lock name the actor serves now, for the reports of a recovered panic.
func (a *lockActor) boundName() string { return a.name }

// Receive implements actor.Actor.
//
// A reentrant lock's first attempts and releases and a read-write lock's reads go to Redis on a
// goroutine of their own (a batch, see batch.go) and their answer comes back as a batchDone message;
// the actor's other calls wait for Redis on its turn (see the package doc). A message that cannot join
// the calls in flight (everything but read acquires and read releases of a read-write lock that the
// batch does not touch) waits in the stash until they are settled, and so does every message after
// it: the actor handles its messages in the order they came, each seeing the state as if the calls
// before it had run one by one.
func (a *lockActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	switch msg.(type) {
	case flushBatch, batchDone, *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		if len(a.stash) > 0 || (a.batching() && !a.joins(msg)) {
			a.stash = append(a.stash, msg)
			return
		}
	}
	a.dispatch(ctx, msg)
	if _, done := msg.(batchDone); done {
		a.replay(ctx)
	}
	a.clock.want(a.nextDeadline())
}

// dispatch handles one message: a wake-up of the timer service runs the timers that are due.
func (a *lockActor) dispatch(ctx actor.Context, msg any) {
	if _, ok := msg.(Wake); ok {
		a.clock.woken()
		a.fireTimers(ctx)
		return
	}
	a.handle(ctx, msg)
}

// settlesAtOnce reports whether the answer of the batch b may be settled on the goroutine that ran it.
// A goroutine of the actor's may settle anything: it has nothing else to do. A caller that ran its
// own call (b.carrier) settles it only when the settlement is its own answer and nothing else: no
// stashed message to replay (any of them may make a call the actor waits for), and no queue to try,
// unless the answer is a release that handed the lock to the next local waiter, which grants it
// without a call. Otherwise the answer goes to a goroutine of the dispatcher, and the caller waits
// for its outcome as any caller does.
func (a *lockActor) settlesAtOnce(b *readBatch) bool {
	if b.carrier == nil {
		return true
	}
	if len(a.stash) > 0 {
		return false
	}
	if len(a.queue) == 0 {
		return true
	}
	s := a.soloCall
	return s != nil && b == &s.batch && s.rel != nil && s.err == nil && s.released.HandedOff
}

// inlineSafe reports whether msg, posted while the actor is idle, may run on the goroutine that
// posted it (see inlineMailbox): its handling waits on nothing. That is the answer of a call
// (batchDone), whose goroutine is free; and, with no message waiting and nothing to retry, an
// acquisition (unless the owner's hold of that kind has ended and must be given back first) or the
// release of a live hold whose call goes to Redis without the actor waiting: on a
// reentrant lock (a solo call, or the stash while one is in flight), and a read on a read-write lock
// with no waiter queued (a read batch; a queued writer may make the actor leave its intent in Redis).
// It is called only while the actor is not running elsewhere.
//
// An answer comes back on the goroutine that ran the call; when that is a caller's (Ticket.OpenCarry),
// the caller's Lock or Unlock returns only once the turn is over, so the answer runs there only when
// its settlement waits on nothing (settlesAtOnce).
func (a *lockActor) inlineSafe(msg any) bool {
	if m, ok := msg.(batchDone); ok {
		return a.settlesAtOnce(m.batch)
	}
	if a.proto == nil || len(a.stash) > 0 || a.headWanted {
		return false
	}
	if a.touchesUnconfirmed(msg) {
		return false // the release whose outcome is unknown is sent again first (resolveUnconfirmed)
	}
	var k holdKey
	switch m := msg.(type) {
	case *Acquire:
		if m.SharedOwner {
			return false
		}
		k = holdKey{m.Owner, m.Kind}
		if h := a.holds[k]; h != nil && (h.ended() || h.retryID != "") {
			// The hold is given back first (lose), or its failed release sent again
			// (settleFailedRelease): a call the actor waits for.
			return false
		}
	case *Release:
		k = holdKey{m.Owner, m.Kind}
		if h := a.holds[k]; h == nil || h.ended() || h.retryID != "" {
			return false
		}
	default:
		return false
	}
	if _, lost := a.lost[k]; lost {
		return false
	}
	return a.proto.async() || (a.proto.batches(k.kind) && len(a.queue) == 0)
}

// joins reports whether msg, which arrives while calls are in flight, can join them rather than wait
// for them: a read acquire or a read release of a hold the batches do not touch.
func (a *lockActor) joins(msg any) bool {
	switch m := msg.(type) {
	case *Acquire:
		return a.batchable(m.Owner, m.Kind)
	case *Release:
		h := a.holds[holdKey{m.Owner, m.Kind}]
		return h != nil && !h.ended() && a.batchable(m.Owner, m.Kind)
	}
	return false
}

// replay handles the stashed messages, in the order they came, until one must wait for calls in
// flight again.
func (a *lockActor) replay(ctx actor.Context) {
	for len(a.stash) > 0 {
		msg := a.stash[0]
		if a.batching() && !a.joins(msg) {
			return
		}
		a.stash[0] = nil
		a.stash = a.stash[1:]
		a.replaying = msg
		a.dispatch(ctx, msg)
		a.replaying = nil
	}
	a.stash = nil
}

// timerSlots are the actor's timers, in the order of timerTick.
func (a *lockActor) timerSlots() [6]*oneShot {
	return [6]*oneShot{&a.expiry, &a.watchdog, &a.retry, &a.intent, &a.keepAlive, &a.idle}
}

// timerTick is the tick of the timer at index i of timerSlots, of generation gen.
func timerTick(i int, gen uint64) any {
	switch i {
	case 0:
		return expiryTick{gen}
	case 1:
		return watchdogTick{gen}
	case 2:
		return retryTick{gen}
	case 3:
		return intentTick{gen}
	case 4:
		return keepAliveTick{gen}
	default:
		return idleTick{gen}
	}
}

// fireTimers runs every timer whose deadline has passed, earliest first, each as the tick message it
// stands for, so that the actor handles it as it would a tick sent by a timer of its own. Each timer
// fires at most once per wake-up: one re-armed with no delay waits for the next.
func (a *lockActor) fireTimers(ctx actor.Context) {
	now := time.Now()
	var fired [6]bool
	for {
		slots := a.timerSlots()
		best := -1
		for i, s := range slots {
			if !fired[i] && s.due(now) && (best < 0 || s.at.Before(slots[best].at)) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		fired[best] = true
		a.handle(ctx, timerTick(best, slots[best].gen))
	}
}

// nextDeadline is the earliest deadline of the actor's timers, zero when none is armed.
func (a *lockActor) nextDeadline() time.Time {
	var first time.Time
	for _, s := range a.timerSlots() {
		if !s.at.IsZero() && (first.IsZero() || s.at.Before(first)) {
			first = s.at
		}
	}
	return first
}

// handle handles one message, or one timer's tick. An actor idle in the guardian's pool (bound to no
// name) handles only bind and the lifecycle messages: a notice, a confirmation or a tick of the name
// it served before may still reach it, and is dropped.
func (a *lockActor) handle(ctx actor.Context, msg any) {
	if a.proto == nil {
		switch msg.(type) {
		case *bind, recycle, *actor.Started, *actor.Stopping:
		default:
			return
		}
	}
	switch m := msg.(type) {
	case flushBatch:
		a.send()
	case batchDone:
		if !a.settleUpTo(m.batch) {
			break // settled already, by a flush
		}
		// The calls that came in while the batch ran go to Redis now, rather than after the
		// flushBatch that waits behind them in the mailbox.
		a.send()
		// The actor has just woken the callers of a whole batch at once, on its own processor.
		// Yield, so they run (and send their next calls) before the actor takes its next message;
		// otherwise they wait for the other processors, or for the actor's whole turn.
		if len(m.batch.settle) > 1 {
			runtime.Gosched()
		}
	case *actor.Started:
		a.self, a.parent = ctx.Self(), ctx.Parent()
		a.root = ctx.ActorSystem().Root
		a.clock.init(a.timers, a.self)
	case *bind:
		a.rebind(m)
	case recycle:
		a.recycle()
		return
	case *Acquire:
		a.routed++
		if a.touchesUnconfirmed(m) && !a.resolveUnconfirmed() && (holdKey{m.Owner, m.Kind}) == a.unconfirmedKey {
			// The holder whose release granted the waiter early locks again while Redis still does
			// not answer: its own field may still be in Redis, so its acquisition would count as a
			// re-entry while the waiter holds the lock. The waiter's hold ends first.
			a.revokeEarly(a.unconfirmed, "the release that handed the lock over went unanswered")
		}
		a.onAcquire(m)
	case *Release:
		a.routed++
		if a.touchesUnconfirmed(m) {
			a.resolveUnconfirmed()
		}
		a.onRelease(m)
	case *ForceUnlock:
		a.routed++
		a.onForceUnlock(m)
	case *Extend:
		a.routed++
		if a.touchesUnconfirmed(m) {
			a.resolveUnconfirmed()
		}
		a.onExtend(m)
	case *Abandon:
		a.routed++
		a.onAbandon(m)
	case *messages.Subscribed:
		if _, ok := a.subs[m.Channel]; ok {
			a.proto.subscribed(a, m.Channel)
		}
	case *messages.Notice:
		a.onNotice(m)
	case retryTick:
		if a.retry.current(m.gen) {
			a.tryHead()
		}
	case expiryTick:
		if a.expiry.current(m.gen) {
			a.expiryAt = time.Time{}
			a.expireHolds()
		}
	case watchdogTick:
		if a.watchdog.current(m.gen) && a.renewing == 0 {
			a.renewAll()
		}
	case renewalsDone:
		a.renewing--
		a.settleRenewals(m)
	case intentTick:
		a.intent.current(m.gen) // afterMessage refreshes the intent
	case keepAliveTick:
		if a.keepAlive.current(m.gen) {
			a.refreshPlaces()
		}
	case leaveRetry:
		a.onLeaveRetry(m)
	case idleTick:
		// An actor with fair queue leaves still to retry is not idle for the guardian: the
		// retries need its name.
		if a.idle.current(m.gen) && a.isIdle() && len(a.leaving) == 0 {
			ctx.Send(a.parent, &idle{key: a.key, pid: a.self, routed: a.routed, binding: a.binding})
		}
	case *actor.Stopping:
		a.stopBy = a.env.stopDeadline()
		a.flush()
		for _, msg := range a.stash {
			// As a message left in the mailbox of a stopped actor: its caller learns that the
			// coordinator closed from the coordinator.
			answerClosed(msg)
		}
		a.stash = nil
		a.shutdown()
		return
	default:
		return
	}
	a.afterMessage()
}

func (a *lockActor) log() *slog.Logger { return a.env.Logger.With("lock", a.name) }

func (a *lockActor) isIdle() bool {
	return len(a.holds) == 0 && len(a.queue) == 0 && !a.batching() && len(a.stash) == 0 && a.renewing == 0
}

// afterMessage keeps the subscription, the timers and the idle clock in line with the state.
func (a *lockActor) afterMessage() {
	if a.headWanted && a.headBusy == 0 {
		a.tryHead() // put off by deferHead
	}
	a.syncSubscriptions()
	switch {
	case len(a.queue) == 0:
		a.retry.stop()
		a.othersTurnSince = time.Time{} // no local waiter gives way (and the notice may not come)
	case len(a.holds) == 0 && !a.retry.armed():
		// Nobody local will wake the queue: make sure a timer does, whatever path led here.
		a.armRetry(a.env.WatchdogTimeout / 3)
	}
	a.armExpiry()
	a.armWatchdog()
	a.proto.tend(a)
	if a.isIdle() {
		if !a.idle.armed() {
			// Not before an owner's latch may have expired (latchedUntil): the actor that would take
			// over the name does not know of it.
			at := time.Now().Add(a.env.IdleTimeout)
			if a.latchedUntil.After(at) {
				at = a.latchedUntil
			}
			a.idle.setAt(at)
		}
	} else {
		a.idle.stop()
	}
}

// unsubscribeAndStopTimers drops the actor's subscriptions and timers, when it stops or is recycled.
func (a *lockActor) unsubscribeAndStopTimers() {
	for ch := range a.subs {
		a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: ch, Subscriber: a.self})
	}
	clear(a.subs)
	for _, s := range a.timerSlots() {
		s.stop()
	}
	a.clock.release()
}

// redisContext bounds a Redis call by the coordinator's lifetime.
func (a *lockActor) redisContext() context.Context { return a.env.Context }

// inlineContext bounds a call that gives back what an abandoned acquisition keeps in Redis, or that
// must go on while the coordinator closes: a queue leave, a write intent, a check of the holds. It
// ends at the stop release timeout, like every undo of an abandoned acquisition (see
// Env.stopContext), and unlike Env.turnContext is not cancelled when the coordinator closes.
func (a *lockActor) inlineContext() (context.Context, context.CancelFunc) { return a.env.stopContext() }

// shutdown runs when the coordinator closes: waiters get ReasonClosed, held locks are released on a
// best-effort basis, and every timer stops.
func (a *lockActor) shutdown() {
	a.unsubscribeAndStopTimers()
	ctx, cancel := a.env.stopContext()
	defer cancel()
	a.leaveAtShutdown(ctx)
	for _, m := range a.queue {
		// Whether its caller is still there (it may have left because the coordinator closes), the
		// waiter waits no more.
		a.answer(m, Outcome{Reason: messages.ReasonClosed})
		if m.queued {
			a.emitWait(messages.EventWaitTimedOut, m, messages.ReasonClosed.String())
		}
		// A fair waiter gives its place back, so that it doesn't hold up other processes for the
		// wait window, and a waiting writer its intent.
		_, holds := a.holds[holdKey{m.Owner, m.Kind}]
		if err := a.proto.leave(ctx, m, !holds); err != nil {
			a.log().Warn("leaving the fair queue at close failed", "owner", m.Owner, "err", err)
		}
	}
	a.queue = nil
	for k, h := range a.holds {
		for n := h.count; n > 0; n-- {
			rel, err := a.proto.release(ctx, k, a.env.NewRequestID(), h.lease, nil)
			if err != nil || rel.Remaining == 0 {
				if err != nil && !errors.Is(err, redisops.ErrNotHeld) {
					a.log().Warn("release at close failed; the lease will expire", "owner", k.owner, "err", err)
				}
				break
			}
		}
		a.emitHold(messages.EventReleased, k, h, 0, messages.ReleaseClosed)
		a.drop(k)
	}
}
