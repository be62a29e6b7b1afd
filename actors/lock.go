package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/cenkalti/backoff/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

// holdKey names one local owner's hold of one kind: on a read-write lock an owner may hold both sides.
type holdKey struct {
	owner string
	kind  Kind
}

// hold is one local owner's hold on the lock.
type hold struct {
	// acquired is when the hold was first granted; announced is set once its caller got it (and an
	// acquired event went out), so that its end is reported only then.
	acquired  time.Time
	announced bool
	count     int64
	token     int64
	lease     time.Duration
	watchdog  bool
	// expires is a conservative estimate of when Redis drops the lock unless it is renewed: the time
	// the last acquire or renewal was sent, plus its lease, less the drift allowance (validUntil).
	expires time.Time
	done    chan struct{}
	// deadline closes done at expires even while the actor is blocked in a slow Redis call, so the
	// holder learns of the loss before Redis can drop the lock.
	deadline  holdTimer
	closeOnce sync.Once
	// retryID is the request id of the owner's last release that failed on a Redis error: the next
	// Unlock sends it again, so that the release latch answers it if the failed one took effect after
	// all. A hold with a failed release is no longer renewed.
	retryID string
	// shared marks an owner id that other processes may use too: Redis may count their holds as well.
	shared bool
	// unacked is set while the latest renewal took effect on the master but the replicas did not
	// acknowledge it: the master's key outlasts expires, so a hold that runs out then is given back.
	unacked bool
}

// newHold returns a hold valid until expires, whose deadline is a runtime timer of its own (for an
// actor outside a guardian; see lockActor.newHold).
func newHold(expires time.Time) *hold {
	h := &hold{acquired: time.Now(), expires: expires, done: make(chan struct{})}
	h.deadline.rt = time.AfterFunc(time.Until(expires), h.end)
	return h
}

// newHold returns a hold valid until expires, whose deadline the coordinator's timer service keeps.
func (a *lockActor) newHold(expires time.Time) *hold {
	if a.timers == nil {
		return newHold(expires)
	}
	h := &hold{acquired: time.Now(), expires: expires, done: make(chan struct{})}
	h.deadline.timers = a.timers
	h.deadline.w = wakeup{hold: h, index: -1}
	a.timers.set(&h.deadline.w, expires)
	return h
}

// extend moves the hold's deadline after a successful acquisition or renewal sent at sent.
func (h *hold) extend(sent time.Time, lease time.Duration) {
	h.expires = validUntil(sent, lease)
	h.deadline.Reset(time.Until(h.expires))
}

// validUntil is the end of the validity of a lease that Redis granted for a call sent at sent: the
// lease counted from the send (Redis starts it later), less the clock drift allowance of the Redlock
// rule (DriftOf), so that a holder learns of the end of its hold before Redis can drop the key even
// when the clocks run at slightly different rates or the actor is scheduled late.
func validUntil(sent time.Time, lease time.Duration) time.Time {
	return sent.Add(lease - DriftOf(lease))
}

// lateGrant reports whether a grant for a call sent at sent with lease comes back with no validity
// left: Redis may already have dropped, or be about to drop, what it granted.
func lateGrant(sent time.Time, lease time.Duration) bool {
	return !time.Now().Before(validUntil(sent, lease))
}

// end closes done once.
func (h *hold) end() { h.closeOnce.Do(func() { close(h.done) }) }

// ended reports whether done is closed: released, lost, or past its deadline.
func (h *hold) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

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
	// lost holds the owners whose last hold was lost, so that their Unlock answers "not held" even
	// when the local lease estimate ran out a moment before Redis expired the key: the hold count to
	// give back, or lostGivenBack once it was given back.
	lost  map[holdKey]int64
	queue []*Acquire
	// handoffs counts local handoffs in a row.
	handoffs int
	// subs is the set of channels the bridge forwards to us; recent is when each channel of a fair lock
	// was last wanted by a waiter (see keepRecentChannels).
	subs   map[string]struct{}
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
	// stash holds the messages that wait for the calls in flight (see Receive), oldest first.
	stash []any
	// batch holds the read acquires and read releases of a read-write lock waiting to go to Redis
	// together; nil when there are none.
	batch *readBatch
	// running are the read batches sent to Redis and not settled yet, oldest first; settling are those
	// whose settlement is under way (see settleRest).
	running  []*readBatch
	settling []*readBatch
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
	backoff     backoff.BackOff
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
		backoff: env.NewBackOff(),
	}
}

// recycle drops everything the actor kept of its name once the guardian unbound it (it was idle: no
// holds, no waiters, no batch), so that it carries nothing over to the next name it is bound to.
func (a *lockActor) recycle() {
	for ch := range a.subs {
		a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: ch, Subscriber: a.self})
	}
	clear(a.subs)
	for _, s := range a.timerSlots() {
		s.stop()
	}
	a.clock.release()
	clear(a.lost)
	clear(a.holds)
	a.recent, a.leaving = nil, nil
	a.queue, a.batch, a.running, a.settling, a.stash = nil, nil, nil, nil, nil
	a.handoffs, a.headBusy, a.headWanted, a.failing = 0, 0, false, false
	a.intentOwner, a.intentSent = "", time.Time{}
	a.expiryAt, a.keepAliveAt = time.Time{}, time.Time{}
	a.renewTicks, a.renewSoon = 0, false
	a.routed = 0
	a.backoff.Reset()
	a.name, a.key, a.proto = "", "", nil
}

// rebind binds a recycled actor to a new name.
func (a *lockActor) rebind(m *bind) {
	a.name, a.key, a.family, a.binding = m.name, m.key, m.family, m.binding
	a.proto = newStrategy(m.family, m.name, a.env.Ops)
}

// boundName is the lock name the actor serves now, for the reports of a recovered panic.
func (a *lockActor) boundName() string { return a.name }

// Receive implements actor.Actor.
//
// The actor never waits for Redis between messages: a call goes to Redis on a goroutine of its own (a
// batch, see batch.go) and its answer comes back as a batchDone message. A message that cannot join
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
		a.dispatch(ctx, msg)
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

// handle handles one message, or one timer's tick.
func (a *lockActor) handle(ctx actor.Context, msg any) {
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
		a.onAcquire(m)
	case *Release:
		a.routed++
		a.onRelease(m)
	case *ForceUnlock:
		a.routed++
		a.onForceUnlock(m)
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
	case len(a.holds) == 0 && !a.retry.armed():
		// Nobody local will wake the queue: make sure a timer does, whatever path led here.
		a.armRetry(a.env.WatchdogTimeout / 3)
	}
	a.armExpiry()
	a.armWatchdog()
	a.proto.tend(a)
	if a.isIdle() {
		if !a.idle.armed() {
			a.idle.setAt(time.Now().Add(a.env.IdleTimeout))
		}
	} else {
		a.idle.stop()
	}
}

// syncSubscriptions subscribes the channels on which the waiters are woken. The channel of a plain or
// read-write lock is subscribed as soon as someone waits and stays subscribed until the actor is idle,
// so that busy locks don't subscribe and unsubscribe on every handoff. A fair lock has a channel per
// waiting owner, subscribed while that owner waits.
func (a *lockActor) syncSubscriptions() {
	if len(a.queue) == 0 && len(a.subs) == 0 {
		return // the common uncontended case: nothing to do
	}
	want := make(map[string]struct{}, len(a.queue))
	for _, m := range a.queue {
		if !m.Ticket.Abandoned() {
			want[a.proto.channel(m)] = struct{}{}
		}
	}
	a.proto.keepChannels(a, want)
	for ch := range want {
		if _, ok := a.subs[ch]; !ok {
			a.subs[ch] = struct{}{}
			a.root.Send(a.env.Bridge, &messages.Subscribe{Channel: ch, Subscriber: a.self})
		}
	}
	for ch := range a.subs {
		if _, ok := want[ch]; !ok {
			delete(a.subs, ch)
			a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: ch, Subscriber: a.self})
		}
	}
}

// redisContext bounds a Redis call by the coordinator's lifetime.
func (a *lockActor) redisContext() context.Context { return a.env.Context }

func (a *lockActor) onAcquire(m *Acquire) {
	m.Ticket.watch(&a.inflight)
	if a.batching() && !a.batchable(m.Owner, m.Kind) {
		a.flush()
	}
	if m.Ticket.Abandoned() {
		return
	}
	if !a.reserve(m) {
		a.refuse(m, Outcome{Reason: messages.ReasonKindMismatch, Err: redisops.ErrKindMismatch})
		return
	}
	k := holdKey{m.Owner, m.Kind}
	if h := a.holds[k]; h != nil && h.ended() {
		a.lose(k, "lease ran out")
	}
	if _, lost := a.lost[k]; lost && a.holds[k] == nil && !m.SharedOwner {
		a.clearLost(k)
	}
	if a.proto.refusesUpgrade(a, m) {
		a.refuse(m, Outcome{Reason: messages.ReasonUpgrade})
		return
	}
	reentry := a.isReentry(m)
	// A fair waiter takes its place in the Redis queue on arrival, even behind local waiters, so that
	// the order across processes is the order of arrival.
	queuesInRedis := a.proto.queuesInRedis() && m.Wait
	switch {
	case reentry || (len(a.queue) == 0 && a.compatible(m)) || queuesInRedis:
		if a.batchable(m.Owner, m.Kind) {
			a.batchAcquire(m, func(ok bool, ttl time.Duration, err error) { a.afterFirstAttempt(m, reentry, ok, ttl, err) })
			return
		}
		if a.callsAsync() {
			a.attemptAsync(m, reentry)
			return
		}
		ok, ttl, err := a.attempt(m)
		a.afterFirstAttempt(m, reentry, ok, ttl, err)
	case !m.Wait:
		// Another local owner holds the lock, or local waiters are ahead: the answer is known
		// without asking Redis.
		a.answer(m, Outcome{Reason: messages.ReasonNotObtained})
	default:
		a.queue = append(a.queue, m)
		m.queued = true
		a.emitWait(messages.EventWaitStarted, m, "")
	}
}

// afterFirstAttempt answers or queues m after the attempt it made on arrival.
func (a *lockActor) afterFirstAttempt(m *Acquire, reentry, ok bool, ttl time.Duration, err error) {
	if ok {
		if a.proto.queuesInRedis() && len(a.queue) > 0 {
			// A waiter that queues in Redis tries on arrival even behind local waiters; when it got the
			// lock (a handoff to its owner that an earlier call of the owner waits for), that call
			// re-enters now.
			a.tryHead()
		}
		return
	}
	// A key of another type, or the owner's hold of another kind in Redis, will not change by
	// waiting: the caller is told at once.
	if err != nil && (!m.Wait || isUpgrade(err) || errors.Is(err, redisops.ErrWrongType) || errors.Is(err, redisops.ErrKindMismatch)) {
		reason := messages.ReasonRedis
		switch {
		case isUpgrade(err):
			reason = messages.ReasonUpgrade
		case errors.Is(err, redisops.ErrKindMismatch):
			reason = messages.ReasonKindMismatch
		}
		a.answer(m, Outcome{Reason: reason, Err: err})
		return
	}
	if !m.Wait {
		a.answer(m, Outcome{Reason: messages.ReasonNotObtained})
		return
	}
	if reentry {
		// A re-entry that failed on a Redis error goes first: it must not wait behind waiters
		// that wait for this very owner.
		a.queue = append([]*Acquire{m}, a.queue...)
	} else {
		a.queue = append(a.queue, m)
	}
	m.queued = true
	a.emitWait(messages.EventWaitStarted, m, "")
	if a.retry.armed() && len(a.queue) > 1 {
		return
	}
	if err != nil {
		a.armRetry(a.backoff.NextBackOff())
	} else {
		a.armRetry(ttl)
	}
}

// isReentry reports whether m's owner already holds the lock in a way that lets m in at once: a hold
// of the same kind, or one of the kind the strategy lets it enter through (a writer taking read holds).
func (a *lockActor) isReentry(m *Acquire) bool {
	if _, ok := a.holds[holdKey{m.Owner, m.Kind}]; ok {
		return true
	}
	if through, ok := a.proto.enteredThrough(m.Kind); ok {
		_, held := a.holds[holdKey{m.Owner, through}]
		return held
	}
	return false
}

// compatible reports whether m could be granted next to the local holds of other owners, as the
// strategy shares them (readers with readers). Holds of m's own owner never stand in its way
// (re-entry, or a writer taking read holds).
func (a *lockActor) compatible(m *Acquire) bool {
	for k := range a.holds {
		if k.owner == m.Owner {
			continue
		}
		if !a.proto.shares(m.Kind, k.kind) {
			return false
		}
	}
	return true
}

// attempt runs the acquire script for m and grants the lock on success. It reports whether m is
// settled (granted, or answered with ReasonNotSynced), the holder's remaining lease when the lock is
// taken, and any Redis error.
func (a *lockActor) attempt(m *Acquire) (bool, time.Duration, error) {
	held := a.beginAttempt(m)
	sent := time.Now()
	if len(a.running) == 0 { // else the oldest running batch is the oldest unanswered call
		a.inflight.Store(sent.UnixNano())
	}
	res, err := acquireCall(a.redisContext(), a.proto, m, held)
	if len(a.running) == 0 {
		a.inflight.Store(0)
	}
	acquireEvent(m, sent, res.OK, err)
	return a.settleAttempt(m, sent, res, err)
}

// callsAsync reports whether the actor's next call may go to Redis without the actor waiting for it
// (startCall): when the strategy allows it and no call is in flight.
func (a *lockActor) callsAsync() bool { return a.proto.async() && !a.batching() }

// beginAttempt counts an attempt of m, and returns the hold count the attempt checks retries against.
func (a *lockActor) beginAttempt(m *Acquire) int64 {
	m.attempts++
	a.proto.beginAttempt(a, m)
	return a.knownHeld(m)
}

// acquireCall runs the acquire script for m. An answer that comes after the lease is worthless (see
// lateGrant): the call is bounded by it (go-redis honours the deadline when the client has
// ContextTimeoutEnabled).
func acquireCall(ctx context.Context, p protocol, m *Acquire, held int64) (redisops.Acquired, error) {
	ctx, cancel := context.WithTimeout(ctx, m.Lease)
	defer cancel()
	return p.acquire(ctx, m, held, m.Wait)
}

// acquireEvent records an acquire attempt for m, started at start, as an event on the caller's span,
// unless it is the first attempt and it got the lock: the span alone tells that story (with
// lockwarden.lock.attempts 1), and the event would cost about as much as the span's start.
func acquireEvent(m *Acquire, start time.Time, ok bool, err error) {
	if ok && err == nil && m.attempts == 1 {
		return
	}
	redisEvent(m.Span, "lockwarden.redis.acquire", start, ok, err)
}

// releaseEvent records a release that failed, started at start, as an event on the caller's span s.
func releaseEvent(s trace.Span, start time.Time, err error) {
	if err != nil {
		redisEvent(s, "lockwarden.redis.release", start, false, err)
	}
}

// handoffAttempt counts a handoff to the waiter m (another owner's release gave it the lock in the
// Redis call sent at start) as one of m's attempts, as an attempt of its own would have been, and
// records it on the caller's span; ok is false when it came too late to be used.
func handoffAttempt(m *Acquire, start time.Time, ok bool) {
	m.attempts++
	redisEvent(m.Span, "lockwarden.redis.acquire", start, ok, nil, telemetry.AttrHandoff.Bool(true))
}

// redisEvent records a Redis call made for a caller, started at start, as an event on the caller's
// span s, when it records. An event rather than a child span: it costs a fraction of one.
func redisEvent(s trace.Span, name string, start time.Time, ok bool, err error, extra ...attribute.KeyValue) {
	if s == nil || !s.IsRecording() {
		return
	}
	attrs := append([]attribute.KeyValue{
		attribute.Bool("lockwarden.redis.ok", ok),
		attribute.Int64("lockwarden.redis.duration_us", time.Since(start).Microseconds()),
	}, extra...)
	if err != nil {
		attrs = append(attrs, attribute.String("lockwarden.redis.error", err.Error()))
	}
	s.AddEvent(name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
}

// knownHeld is the hold count of m's owner and kind that the acquire scripts check retries against:
// the local count, or redisops.UnknownHoldCount for an owner id shared with other processes.
func (a *lockActor) knownHeld(m *Acquire) int64 {
	if m.SharedOwner {
		return redisops.UnknownHoldCount
	}
	if h := a.holds[holdKey{m.Owner, m.Kind}]; h != nil {
		return h.count
	}
	return 0
}

// settleAttempt takes the answer to an acquire attempt for m sent at sent, as attempt reports it.
func (a *lockActor) settleAttempt(m *Acquire, sent time.Time, res redisops.Acquired, err error) (bool, time.Duration, error) {
	k := holdKey{m.Owner, m.Kind}
	if isNotSynced(err) {
		if errors.Is(err, redisops.ErrReplicasChanged) && m.resyncs < maxResyncs {
			// The master has fewer replicas than the WAIT asked for (a failover): the hold was
			// given back, and one more attempt waits for the replicas the master has now. A
			// master whose replicas are still settling may drop one again meanwhile; every retry
			// follows a count lower than the last one asked for, and their number is bounded.
			// A re-entry's write set the lock's expiry to its lease from about sent, and a lagging
			// replica may have only it: the hold's validity is cut to it now, since a retry that is
			// undone too only cuts to its own, later, send.
			a.cutValidity(k, sent, m.Lease)
			if h := a.holds[k]; h != nil && !time.Now().Before(h.expires) {
				// The re-entry's lease, shorter than its WAIT, used up the hold's validity: the
				// hold is lost (its Done has closed), and a retry would re-enter it. The call
				// fails instead; the owner's field lapses with that lease, or the owner's next
				// acquisition clears it.
				a.lose(k, "lease ran out")
				a.refuse(m, Outcome{Reason: messages.ReasonNotSynced, Err: err})
				return true, 0, nil
			}
			m.resyncs++
			return a.attempt(m)
		}
		// Redis gave the hold and took it back because replicas did not acknowledge it. The call
		// fails, waiting or not: trying again would most likely meet the same replicas.
		a.refuse(m, Outcome{Reason: messages.ReasonNotSynced, Err: err})
		a.cutAfterUndoneReentry(k, sent, m.Lease)
		return true, 0, nil
	}
	if err != nil {
		if !isUpgrade(err) {
			a.log().Warn("acquire failed", "owner", m.Owner, "err", err)
			a.noteRedisError(m, err)
		}
		return false, 0, err
	}
	a.backoff.Reset()
	a.noteRedisError(m, nil)
	if !res.OK {
		// A fair grant notice whose token is above the watermark was sent after this call ran, so
		// after it was sent: its hold's lease started no earlier than sent (see onFairGrant).
		m.watermark, m.lastSent = max(m.watermark, res.Watermark), sent
		if _, had := a.holds[k]; had {
			// A re-entry found the lock taken by someone else: our hold was lost.
			a.lose(k, "taken by another owner")
		}
		return false, res.TTL, nil
	}
	if lateGrant(sent, m.Lease) {
		// Redis answered after the lease had run out (a paused server, a slow network): the hold
		// may already be gone, and another owner may have it. It is never reported; what this call
		// may still hold is given back, and a waiter keeps waiting.
		a.giveBackLate(k, m.Lease, res.HoldCount)
		err := fmt.Errorf("%w (Redis answered after %v, lease %v)", ErrGrantTooLate, time.Since(sent).Round(time.Millisecond), m.Lease)
		a.noteRedisError(m, err)
		return false, 0, err
	}
	a.grant(m, res.HoldCount, res.Token, sent)
	if h := a.holds[k]; h != nil && h.watchdog && time.Until(h.expires) < a.env.WatchdogTimeout/2 {
		// A late answer left less validity than the watchdog's next tick may need: renew now. A hold
		// found gone leaves the head to be tried after this attempt (see deferHead).
		if a.renewHold(k, h) {
			a.deferHead()
		}
	}
	return true, 0, nil
}

// cutAfterUndoneReentry keeps the hold of k honest after its re-entry with lease, sent at
// sent, was given back because replicas did not acknowledge it. The re-entry set the lock's expiry to
// its own lease (acquire.lua, fair_acquire.lua), and so did the release that gave it back; a replica
// may have either. So the hold's validity is cut to the re-entry's, when that is shorter, and a
// watchdog hold is renewed at once, so that the master (and, once they acknowledge, the replicas)
// get the watchdog's lease again; until a renewal counts, Done closes before the shorter expiry ends.
// A hold with a fixed lease keeps the cut validity: nothing renews it. A hold whose re-entries only
// ever raise the expiry (the read-write lock's, see strategy.reentryRaisesExpiry) keeps its own. A hold that the
// renewal finds gone leaves the head to be tried after the attempt (see deferHead).
func (a *lockActor) cutAfterUndoneReentry(k holdKey, sent time.Time, lease time.Duration) {
	a.cutValidity(k, sent, lease)
	if h := a.holds[k]; h != nil && h.watchdog && !a.proto.reentryRaisesExpiry(k.kind) && a.renewHold(k, h) {
		a.deferHead()
	}
}

// cutValidity cuts the validity of the hold of k to that of a re-entry with lease sent at sent, when
// that is shorter (see cutAfterUndoneReentry).
func (a *lockActor) cutValidity(k holdKey, sent time.Time, lease time.Duration) {
	h := a.holds[k]
	if h == nil || a.proto.reentryRaisesExpiry(k.kind) {
		return
	}
	if v := validUntil(sent, lease); v.Before(h.expires) {
		h.expires = v
		h.deadline.Reset(time.Until(v))
	}
}

// deferHead asks for the head waiter to be tried once the attempt being settled is done: by the
// outermost tryHead or batch settlement under way, or else after the message (afterMessage). Trying
// it at once, from inside an attempt that tryWaiter made, would change the queue under tryWaiter,
// which then removes its waiter by an index that no longer points at it.
func (a *lockActor) deferHead() { a.headWanted = true }

// ErrGrantTooLate is the error of an acquisition whose grant came back from Redis after the lease had
// run out, counting from when the call was sent, less the drift allowance. The hold was given back
// (with the owner check, so no other owner's hold is touched); a waiting caller keeps waiting.
var ErrGrantTooLate = errors.New("lockwarden: the lock was granted after its lease had run out; it was given back")

// ErrNoAnswer is the error of a wait that ended while an attempt had gone unanswered by Redis for
// NoAnswerAfter or longer: a paused, partitioned or restarting server, not another owner's hold.
var ErrNoAnswer = errors.New("lockwarden: Redis did not answer")

// NoAnswerAfter is how long an attempt in flight must have gone unanswered for a wait that ends then
// to report ErrNoAnswer rather than a plain "not obtained".
const NoAnswerAfter = 200 * time.Millisecond

// maxResyncs bounds the attempts of one command retried because the master's replicas changed
// (redisops.ErrReplicasChanged): a failover that leaves the new master with fewer replicas, and the
// replicas that join or drop while it settles.
const maxResyncs = 3

// giveBackLate undoes one hold of k that a late answer granted (count is the owner's hold count after
// it). A first hold is released whole; a failure is only logged, since nothing renews it and it ends
// with its lease. A re-entry keeps the earlier holds: its release resets the expiry to their lease (the
// late re-entry may have cut it to its own), and when it fails the count in Redis is unknown, so the
// hold is lost rather than renewed with one hold too many.
func (a *lockActor) giveBackLate(k holdKey, lease time.Duration, count int64) {
	h := a.holds[k]
	if h != nil && count == 1 {
		a.lose(k, "lease ran out before a re-entry")
		h = nil
	}
	if h != nil {
		lease = h.lease
	}
	ctx, cancel := a.env.stopContext()
	defer cancel()
	_, err := a.proto.release(ctx, k, a.env.NewRequestID(), lease, nil)
	switch {
	case err == nil:
		if h != nil {
			h.count = count - 1
		}
	case h != nil:
		a.log().Warn("giving back a late re-entry failed; the hold is given up", "owner", k.owner, "err", err)
		a.lose(k, "giving back a late re-entry failed")
	case !errors.Is(err, redisops.ErrNotHeld):
		a.log().Warn("giving back a late grant failed; its lease will expire", "owner", k.owner, "err", err)
	}
}

// noteRedisError tells the callers waiting for the lock the outcome of the latest attempt: err when
// it failed on a Redis error, nil when Redis answered. A caller whose wait ends reports the error that
// stood at that moment, rather than a plain "not obtained" that reads as another owner holding it.
func (a *lockActor) noteRedisError(m *Acquire, err error) {
	if err == nil && !a.failing {
		return
	}
	a.failing = err != nil
	m.Ticket.noteError(err)
	for _, w := range a.queue {
		w.Ticket.noteError(err)
	}
}

// grant records a successful acquisition and answers the caller. If the caller already gave up, the
// acquisition is undone at once.
func (a *lockActor) grant(m *Acquire, count, token int64, sent time.Time) {
	k := holdKey{m.Owner, m.Kind}
	h := a.holds[k]
	if h != nil && count == 1 {
		// A "re-entry" that starts a new hold: the old one lapsed in Redis, and someone else may
		// have held the lock in between.
		a.lose(k, "lease ran out before a re-entry")
		h = nil
	}
	if h == nil {
		h = a.newHold(validUntil(sent, m.Lease))
		a.holds[k] = h
		a.env.Held.add(a.name, k.owner, k.kind)
		delete(a.lost, k)
	}
	reentry := h.count > 0
	h.count, h.token, h.lease = count, token, m.Lease
	h.watchdog = h.watchdog || m.Watchdog
	h.shared = m.SharedOwner
	h.retryID = "" // Redis' count is known again
	switch {
	case reentry && a.proto.reentryRaisesExpiry(m.Kind) && validUntil(sent, m.Lease).Before(h.expires):
		// Such a re-entry never cuts the expiry in Redis, but a retried one whose first try's
		// addition a renewal has reset since may add nothing (rw_write_acquire.lua). So the estimate
		// is only ever raised, to this call's own validity.
	default:
		h.extend(sent, m.Lease)
	}
	if a.answer(m, Outcome{HoldCount: count, Token: token, Done: h.done, Attempts: m.attempts}) {
		h.announced = true
		typ := messages.EventAcquired
		if count > 1 {
			typ = messages.EventReentered
		}
		a.emit(messages.Event{Type: typ, Owner: m.Owner, Kind: kindOf(m.Kind), Token: token, HoldCount: count, Wait: waitOf(m), Queued: m.queued})
		return
	}
	// The caller left while we were obtaining the lock for it. The undo has its own deadline, because
	// the caller may have left because the coordinator is closing.
	if m.queued {
		a.emitWait(messages.EventWaitTimedOut, m, "")
	}
	ctx, cancel := a.env.stopContext()
	defer cancel()
	rel, err := a.proto.release(ctx, k, a.env.NewRequestID(), h.lease, nil)
	switch {
	case errors.Is(err, redisops.ErrNotHeld):
		a.lose(k, "lost before an abandoned acquisition was undone")
	case err != nil:
		// Redis may still count the abandoned hold, so the local count can no longer be trusted: give
		// the whole hold up (Done closes, the watchdog stops) and let its lease expire in Redis, rather
		// than renew a hold that one Unlock too few would leave behind.
		a.log().Warn("undoing an abandoned acquisition failed; the lease will expire", "owner", m.Owner, "err", err)
		a.lose(k, "undo of an abandoned acquisition failed")
	case rel.Remaining == 0:
		a.drop(k)
	default:
		h.count = rel.Remaining
	}
}

// tryHead lets the head waiter try Redis, and keeps granting while the next head is an owner that
// already holds the lock (a queued re-entry).
//
// Called while a tryHead or the settlement of a read batch is under way (a settled release that frees
// the lock), it only notes the call, and the outermost of them tries the head again when it is done.
// Otherwise a nested tryHead could grant the readers that the outer one is still trying, which would
// then take a second hold for them, and later batches would settle in the middle of an earlier one.
func (a *lockActor) tryHead() {
	if a.headBusy > 0 {
		a.headWanted = true
		return
	}
	a.headBusy++
	defer func() { a.headBusy-- }()
	for {
		a.headWanted = false
		a.tryQueue()
		if !a.headWanted {
			return
		}
	}
}

// tryQueue is one pass of tryHead.
func (a *lockActor) tryQueue() {
	for len(a.queue) > 0 {
		i := a.nextInLine()
		if i < 0 {
			// Held by another local owner: its release or loss wakes the queue.
			return
		}
		if run := a.readRun(i); len(run) > 1 {
			if !a.attemptReads(run) {
				return
			}
			continue
		}
		m := a.queue[i]
		ok, ttl, err := a.attempt(m)
		switch {
		case isUpgrade(err):
			a.refuse(m, Outcome{Reason: messages.ReasonUpgrade, Err: err})
		case err != nil:
			a.armRetry(a.backoff.NextBackOff())
			return
		case !ok:
			a.armRetry(ttl)
			return
		}
		a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
	}
}

// readRun returns the waiters that may try along with the waiter at index i: on a read-write lock, when
// it is a reader at the head of the queue, the readers that follow it up to the first writer (a
// waiting writer keeps later readers out). It is nil otherwise.
func (a *lockActor) readRun(i int) []*Acquire {
	if i != 0 || !a.proto.batches(a.queue[0].Kind) {
		return nil
	}
	var run []*Acquire
	seen := make(map[string]struct{})
	for _, m := range a.queue {
		if !a.proto.batches(m.Kind) {
			break
		}
		if _, dup := seen[m.Owner]; dup || m.Ticket.Abandoned() || !a.compatible(m) {
			continue // a second call of one owner waits for the answer to its first
		}
		seen[m.Owner] = struct{}{}
		run = append(run, m)
	}
	return run
}

// attemptReads makes one attempt for every reader of run in one batch, takes the ones that got the
// lock out of the queue, and reports whether all of them did; if not, the retry timer is armed.
func (a *lockActor) attemptReads(run []*Acquire) bool {
	a.flush()
	settled := make(map[*Acquire]bool, len(run))
	all := true
	for _, m := range run {
		a.batchAcquire(m, func(ok bool, ttl time.Duration, err error) {
			switch {
			case ok:
				settled[m] = true
			case isUpgrade(err):
				a.refuse(m, Outcome{Reason: messages.ReasonUpgrade, Err: err})
				settled[m] = true
			case err != nil:
				all = false
				a.armRetry(a.backoff.NextBackOff())
			default:
				all = false
				a.armRetry(ttl)
			}
		})
	}
	a.flush()
	a.queue = slices.DeleteFunc(a.queue, func(m *Acquire) bool { return settled[m] })
	return all
}

// nextInLine drops abandoned waiters and returns the index of the waiter that may try Redis now: a
// queued re-entry of a local holder first, else the head if no local owner holds the lock, else -1.
func (a *lockActor) nextInLine() int {
	var gone []*Acquire
	live := a.queue[:0]
	for _, m := range a.queue {
		if m.Ticket.Abandoned() {
			gone = append(gone, m)
		} else {
			live = append(live, m)
		}
	}
	clear(a.queue[len(live):])
	a.queue = live
	for _, m := range gone {
		// The event comes after the leave, so that it tells that the waiter's kind is free again.
		a.leaveQueue(m)
		a.emitWait(messages.EventWaitTimedOut, m, "")
	}
	if len(a.queue) == 0 {
		return -1
	}
	for i, m := range a.queue {
		if a.isReentry(m) {
			return i
		}
	}
	if a.compatible(a.queue[0]) {
		return 0
	}
	return -1
}

// armRetry sets the fallback wake-up of the head waiter: the holder's remaining lease, in case no
// unlock notice ever comes (a holder that crashed publishes nothing).
func (a *lockActor) armRetry(ttl time.Duration) {
	if ttl <= 0 {
		// The lock vanished or has no expiry: try again soon rather than never.
		ttl = 10 * time.Millisecond
	}
	a.retry.setAt(time.Now().Add(ttl))
}

func (a *lockActor) onRelease(m *Release) {
	k := holdKey{m.Owner, m.Kind}
	joinable := func() bool {
		h := a.holds[k]
		return h != nil && !h.ended() && a.batchable(m.Owner, m.Kind)
	}
	if a.batching() && !joinable() {
		a.flush()
	}
	h := a.holds[k]
	if h != nil && h.ended() {
		a.lose(k, "lease ran out")
		h = nil
	}
	if _, lost := a.lost[k]; lost && h == nil {
		// Free what may be left of the hold in Redis at once, but the holder already learnt from
		// Done that its hold ended: it does not hold the lock.
		a.clearLost(k)
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	}
	if h == nil && a.env.Held.otherFamily(a.name, m.Owner, m.Kind) {
		// Sent to Redis, it would release the other kind's hold (they share the hash).
		m.Ticket.deliver(Outcome{Reason: messages.ReasonKindMismatch, Err: redisops.ErrKindMismatch})
		return
	}
	lease := a.env.WatchdogTimeout
	var next *redisops.Handoff
	var nextCmd *Acquire
	if h != nil {
		lease = h.lease
		if h.count == 1 {
			nextCmd = a.proto.handoffCandidate(a, m.Owner)
		}
	}
	if nextCmd != nil {
		next = &redisops.Handoff{
			Owner: nextCmd.Owner, Lease: nextCmd.Lease, OnlyIfAlone: a.handoffs >= a.env.MaxHandoffs,
			WaitWindow: nextCmd.WaitWindow,
		}
	}
	requestID := a.env.NewRequestID()
	if h != nil && h.retryID != "" {
		// The owner's last release failed: send it again, so that if it took effect after all, the
		// latch answers what it did rather than a second release taking another hold away.
		requestID, next, nextCmd = h.retryID, nil, nil
	}
	if joinable() {
		a.batchRelease(m, requestID, func(sent time.Time, rel redisops.Released, err error) {
			a.settleRelease(m, h, lease, nil, requestID, sent, rel, err)
		})
		return
	}
	held := int64(redisops.UnknownHoldCount)
	if h != nil && !h.shared {
		held = h.count // as Redis counts it, unless re-entries' replies were lost (releaseStray)
	}
	if a.callsAsync() {
		a.releaseAsync(m, h, requestID, lease, held, next, nextCmd)
		return
	}
	sent := time.Now()
	rel, err := a.proto.releaseHeld(a.redisContext(), k, requestID, lease, held, next)
	releaseEvent(m.Span, sent, err)
	a.settleRelease(m, h, lease, nextCmd, requestID, sent, rel, err)
}

// settleRelease takes the answer to the release of m's hold h (nil when the actor knew of no hold),
// sent at sent with nextCmd as the handoff candidate, and answers m.
func (a *lockActor) settleRelease(m *Release, h *hold, lease time.Duration, nextCmd *Acquire, requestID string, sent time.Time, rel redisops.Released, err error) {
	k := holdKey{m.Owner, m.Kind}
	switch {
	case errors.Is(err, redisops.ErrNotHeld):
		if h != nil {
			a.lose(k, "release found the hold gone")
			a.tryHead()
		}
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	case err != nil:
		if h == nil {
			m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
			return
		}
		// Whether the release took effect is unknown. As in Redisson, the Unlock counts as done for
		// the holder all the same. An inner hold's failure leaves the outer holds held and renewed;
		// if it never took effect, the last Unlock finds the hold left over and gives it back
		// (releaseStray). When it was the last hold, the hold is no longer renewed, whatever happens
		// next, so that the lock frees itself within its lease even if the caller never retries; an
		// Unlock called again then sends the same request.
		if h.count > 1 {
			h.count--
			m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: &UnlockError{Err: err}})
			return
		}
		h.watchdog = false
		h.retryID = requestID
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: &UnlockError{Expires: h.expires, Err: err}})
		return
	}
	if h != nil {
		h.retryID = ""
		if rel.Remaining > 0 && h.count <= 1 && !h.shared {
			// Redis counts holds of this owner that the actor does not know of: re-entries whose
			// replies were lost although they took effect. They are given back now, or the last Unlock
			// would leave the lock held (and renewed) with nobody to release it.
			rel.Remaining = a.releaseStray(k, lease, rel.Remaining)
		}
	}
	// The caller is answered before the event goes out: events and metrics are not on its path.
	if rel.Remaining > 0 {
		m.Ticket.deliver(Outcome{HoldCount: rel.Remaining})
		if h != nil {
			h.count = rel.Remaining
			switch {
			case a.env.Ops.WaitsForReplicas(a.redisContext(), a.name):
				// The release's new expiry is not waited for: a replica promoted now may have an
				// older one, so the estimate may go down with it but not up. The master's may now
				// outlast the estimate: a hold that runs out then is given back (expireHolds).
				if !a.proto.releaseRaisesExpiry(k.kind) && validUntil(sent, lease).Before(h.expires) {
					h.extend(sent, lease)
				}
				h.unacked = true
			case !a.proto.releaseRaisesExpiry(k.kind) || sent.Add(lease).After(h.expires):
				h.extend(sent, lease)
			}
			a.emitHold(messages.EventReleased, k, h, rel.Remaining, releaseReason(m))
		}
		return
	}
	if h != nil {
		a.drop(k) // Done closes before Unlock returns
	}
	released := func() {
		if h != nil {
			a.emitHold(messages.EventReleased, k, h, 0, releaseReason(m))
		}
	}
	if rel.NotSynced != nil && nextCmd != nil {
		// The handoff was given back: the lock is free and its waiters were told. The waiter it was
		// for fails, as an attempt of its own would have.
		a.queue = slices.DeleteFunc(a.queue, func(w *Acquire) bool { return w == nextCmd })
		a.refuse(nextCmd, Outcome{Reason: messages.ReasonNotSynced, Err: rel.NotSynced})
	}
	if !rel.HandedOff || nextCmd == nil {
		// Who is woken now is the strategy's to say (strategy.freed).
		a.handoffs = 0
		m.Ticket.deliver(Outcome{})
		released()
		if rel.HandedOff {
			// A retried release whose first try handed the lock to a local waiter (its latch says
			// so): that waiter's attempt finds the hold as its own lost reply.
			a.tryHead()
			return
		}
		a.proto.freed(a, m, rel)
		return
	}
	a.handoffs++
	a.queue = slices.DeleteFunc(a.queue, func(w *Acquire) bool { return w == nextCmd })
	released()
	late := lateGrant(sent, nextCmd.Lease)
	handoffAttempt(nextCmd, sent, !late)
	if late {
		// The handoff came back too late to count for the next owner: it gives it back and waits on.
		m.Ticket.deliver(Outcome{})
		nextCmd.queued = true
		a.queue = append([]*Acquire{nextCmd}, a.queue...)
		a.giveBackLate(holdKey{nextCmd.Owner, nextCmd.Kind}, nextCmd.Lease, 1)
		a.tryHead()
		return
	}
	a.emit(messages.Event{Type: messages.EventHandedOff, Owner: nextCmd.Owner, From: m.Owner, Kind: kindOf(nextCmd.Kind), Token: rel.Token, HoldCount: 1})
	// The next holder first: it is the one waiting.
	a.grant(nextCmd, 1, rel.Token, sent)
	m.Ticket.deliver(Outcome{})
	a.tryHead()
}

// releaseStray releases the holds of k that Redis counts beyond the actor's (remaining of them), and
// returns how many are left. When a release fails, the count is unknown: the actor drops the hold all
// the same (Done closes, renewal stops), and what is left in Redis expires with its lease.
func (a *lockActor) releaseStray(k holdKey, lease time.Duration, remaining int64) int64 {
	ctx, cancel := context.WithTimeout(a.redisContext(), a.env.StopReleaseTimeout)
	defer cancel()
	for remaining > 0 {
		rel, err := a.proto.release(ctx, k, a.env.NewRequestID(), lease, nil)
		if err != nil {
			if !errors.Is(err, redisops.ErrNotHeld) {
				a.log().Warn("releasing holds whose replies were lost failed; they expire with their lease", "owner", k.owner, "err", err)
			}
			return 0
		}
		remaining = rel.Remaining
	}
	return 0
}

// UnlockError is the error of a release that failed on a Redis error (a cut connection, a server
// restarting): whether it took effect is unknown. The Unlock counts as done for the holder, as in
// Redisson. For the last hold, the hold is no longer renewed, so the lock frees itself by Expires at
// the latest even if the release is never retried; a later Unlock of the same owner sends the same
// request again, and the release latch makes it safe to retry. For an inner hold (Expires is zero),
// the outer holds stay held and renewed, and the last Unlock gives back what the failed one may have
// left in Redis.
type UnlockError struct {
	// Expires is when the hold's lease runs out, unless a retried Unlock frees it earlier; zero for an
	// inner hold.
	Expires time.Time
	// Err is the Redis error.
	Err error
}

func (e *UnlockError) Error() string {
	if e.Expires.IsZero() {
		return fmt.Sprintf("lockwarden: unlock of an inner hold failed; it counts as released, and the outer holds stay held: %v", e.Err)
	}
	return fmt.Sprintf("lockwarden: unlock failed, the hold is no longer renewed and expires by %s unless Unlock is retried: %v",
		e.Expires.Format(time.RFC3339Nano), e.Err)
}

func (e *UnlockError) Unwrap() error { return e.Err }

func (a *lockActor) onForceUnlock(m *ForceUnlock) {
	deleted, err := a.proto.forceUnlock(a.redisContext(), m.Kind)
	if err != nil {
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
		return
	}
	if deleted {
		a.emit(messages.Event{Type: messages.EventForceUnlocked, Kind: kindOf(m.Kind)})
	}
	// A read-write lock is only force-unlocked in the mode asked for; every other lock is gone.
	if deleted || !a.proto.forceUnlockKeepsHolds() {
		for k := range a.holds {
			a.lose(k, "force-unlocked")
		}
	}
	m.Ticket.deliver(Outcome{Deleted: deleted})
	a.tryHead()
}

func (a *lockActor) onAbandon(m *Abandon) {
	headLeft := a.dropWaiter(m.Ticket)
	if m.Ack != nil {
		m.Ack.deliver(Outcome{}) // the waiter has left: its caller need not wait for the next one's try
	}
	if headLeft && a.proto.headKeepsOut() {
		a.tryHead()
	}
}

// dropWaiter takes the waiter of ticket out of the queue, gives up what it keeps in Redis (see
// leaveQueue), and then reports it gone (EventWaitTimedOut). It reports whether that waiter was the
// head.
func (a *lockActor) dropWaiter(ticket *Ticket) bool {
	for i, w := range a.queue {
		if w.Ticket == ticket {
			a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
			a.leaveQueue(w)
			a.emitWait(messages.EventWaitTimedOut, w, "")
			return i == 0
		}
	}
	return false
}

// leaveQueue gives up what a waiter that was taken out of the local queue because its caller left
// keeps in Redis (a fair lock's queue place, a writer's intent), unless its owner still waits through
// another call or holds the lock, and then frees the waiter's reservation. (When the waiter was
// already dropped by nextInLine, the Abandon message finds nothing: nextInLine left for it.)
//
// The reservation stands until the leave is done, and while a failed leave of a fair waiter is
// retried: until then Redis may hand the fair lock to the owner (another process's release), and a
// plain acquisition of the same owner would re-enter that hold, which the leave then gives back.
func (a *lockActor) leaveQueue(gone *Acquire) {
	retrying := false
	defer func() {
		// Deferred, so that a panic on the way does not keep the kind reserved.
		if !retrying {
			a.unreserve(gone)
		}
	}()
	if !a.proto.keepsInRedis(gone) {
		return
	}
	for _, w := range a.queue {
		if w.Owner == gone.Owner && w.Kind == gone.Kind && !w.Ticket.Abandoned() {
			return // the owner still waits through another call, which has a reservation of its own
		}
	}
	if _, holds := a.holds[holdKey{gone.Owner, gone.Kind}]; holds {
		return // the hold's record keeps the kind
	}
	if err := a.proto.leave(a.redisContext(), gone, true); err != nil {
		retrying = a.proto.leaveFailed(a, gone, err)
	}
}

// onNotice takes a message published on a channel the actor subscribed; the strategy reads it.
func (a *lockActor) onNotice(m *messages.Notice) {
	if _, ok := a.subs[m.Channel]; !ok {
		return
	}
	a.proto.notice(a, m)
}

// onFairGrant takes the notice that a release handed the fair lock, with fencing token token, to the
// wait waitID on channel, which had registered for handoffs. A notice for a wait that is gone is
// stale (the waiter got the lock by an attempt of its own, or left, and leaving gave the hold back),
// or is for a call of the owner that gave up while another call of the same owner waits on (the
// registration is the owner's, and the latest call's): an attempt of a live call then finds out.
func (a *lockActor) onFairGrant(channel string, token int64, waitID string) {
	match := func(w *Acquire) bool { return a.proto.channel(w) == channel }
	live := slices.IndexFunc(a.queue, func(w *Acquire) bool { return match(w) && !w.Ticket.Abandoned() })
	if live >= 0 {
		if h := a.holds[holdKey{a.queue[live].Owner, a.queue[live].Kind}]; h != nil && !h.ended() {
			// The owner has its hold already, which an attempt found (a call that arrived after the
			// grant): its other calls re-enter.
			a.tryHead()
			return
		}
	}
	i := slices.IndexFunc(a.queue, func(w *Acquire) bool { return w.waitID == waitID && match(w) })
	if i < 0 {
		if live >= 0 {
			a.tryWaiter(match)
			return
		}
		a.giveBackGrant(channel)
		return
	}
	w := a.queue[i]
	if token <= w.watermark {
		// The grant is older than an attempt of w's that was refused: the hold it gave has lapsed
		// (and the lock may have had other owners since), or w got it by an attempt and gave it back.
		// A notice held up on its way (a stalled connection, a busy actor) must not grant it again.
		a.tryWaiter(func(x *Acquire) bool { return x == w })
		return
	}
	if len(a.holds) > 0 && !a.holdsGone() {
		// The lock was free in Redis for the grant, so no other local hold can be left there.
		a.log().Warn("a fair grant notice while local holds remain in Redis; ignored", "owner", w.Owner)
		return
	}
	if w.Ticket.Abandoned() {
		if live >= 0 {
			// Another call of the owner still waits: its attempt finds the hold (as a retry of its
			// own) and sets its lease.
			a.tryWaiter(match)
			return
		}
		// grant finds the caller gone and gives the hold back.
		a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
		a.grant(w, 1, token, w.lastSent)
		return
	}
	if time.Until(w.lastSent.Add(w.Lease)) < w.Lease/2 {
		// The grant came after w's latest refused attempt ran (its token is above that attempt's
		// watermark), so after it was sent, which bounds the lease's start from below; when that
		// attempt is too old to leave a useful lease, an attempt now finds the hold (as a retry) and
		// gives a fresh lower bound.
		a.tryWaiter(func(x *Acquire) bool { return x == w })
		return
	}
	a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
	handoffAttempt(w, time.Now(), true)
	a.grant(w, 1, token, w.lastSent)
	a.tryHead() // other calls of the same owner re-enter
}

// tryWaiter makes one attempt for the first live waiter that match accepts, if its owner may hold the
// lock next to the local holds.
func (a *lockActor) tryWaiter(match func(*Acquire) bool) {
	for i, w := range a.queue {
		if w.Ticket.Abandoned() || !match(w) {
			continue
		}
		if !a.compatible(w) {
			return
		}
		ok, ttl, err := a.attempt(w)
		switch {
		case ok:
			a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
		case err != nil:
			a.armRetry(a.backoff.NextBackOff())
		default:
			a.armRetry(ttl)
		}
		return
	}
}

// holdsGone checks in Redis whether the local holds still exist, after a notice said the lock was
// freed while we hold it: a force unlock, or a release through a shared owner id elsewhere. It loses
// the holds that are gone and reports whether none is left.
func (a *lockActor) holdsGone() bool {
	for k := range a.holds {
		if n, err := a.proto.holdCount(a.redisContext(), k); err == nil && n == 0 {
			a.lose(k, "freed by another client")
		}
	}
	return len(a.holds) == 0
}

// clearLost frees what may be left in Redis of the hold of k that was lost: the local estimate of its
// lease ran out a little before Redis drops it (the drift margin), or a renewal took effect although
// its answer was lost or came too late. The owner's next acquisition should not find that dead hold,
// which the acquire script takes for the owner's own lost reply and takes over (with a fresh fencing
// token: it answered the dead hold's token when this clearing failed). Each release checks the owner,
// so another owner's hold is never touched.
//
// An owner marked lostGivenBack had its holds given back already (see giveBackLost): nothing goes to
// Redis.
func (a *lockActor) clearLost(k holdKey) {
	n := a.lost[k]
	delete(a.lost, k)
	if n == lostGivenBack {
		return
	}
	ctx, cancel := context.WithTimeout(a.redisContext(), a.env.StopReleaseTimeout)
	defer cancel()
	for n = max(n, 1); n > 0; n-- {
		rel, err := a.proto.release(ctx, k, a.env.NewRequestID(), a.env.WatchdogTimeout, nil)
		if err != nil {
			if !errors.Is(err, redisops.ErrNotHeld) {
				a.log().Warn("release of a lost hold failed; its lease will expire", "owner", k.owner, "err", err)
			}
			return
		}
		if rel.Remaining == 0 {
			return
		}
	}
}

// lostGivenBack marks in lockActor.lost an owner whose lost holds were given back already.
const lostGivenBack int64 = -1

// giveBackLost gives back at once what the lost hold of k may have left in Redis (see clearLost), and
// keeps k marked as lost, so that the owner's Unlock answers "not held" without a second release:
// that one would take away a hold of an owner id shared with another process.
func (a *lockActor) giveBackLost(k holdKey) {
	a.clearLost(k)
	if a.holds[k] == nil {
		a.lost[k] = lostGivenBack
	}
}

// drop ends a hold that was released.
func (a *lockActor) drop(k holdKey) {
	if h := a.holds[k]; h != nil {
		delete(a.holds, k)
		a.env.Held.remove(a.name, k.owner, k.kind)
		h.deadline.Stop()
		h.end()
	}
}

// lose ends a hold that was lost, and says so.
func (a *lockActor) lose(k holdKey, why string) {
	if h, ok := a.holds[k]; ok {
		a.log().Warn("lock lost", "owner", k.owner, "reason", why)
		a.emitHold(messages.EventLost, k, h, 0, why)
		a.drop(k)
		a.lost[k] = h.count
	}
}

// armExpiry wakes the actor when the earliest local hold's lease runs out.
func (a *lockActor) armExpiry() {
	var first time.Time
	for _, h := range a.holds {
		if first.IsZero() || h.expires.Before(first) {
			first = h.expires
		}
	}
	if first.Equal(a.expiryAt) && (first.IsZero() || a.expiry.armed()) {
		return
	}
	a.expiryAt = first
	if first.IsZero() {
		a.expiry.stop()
		return
	}
	a.expiry.setAt(first)
}

func (a *lockActor) expireHolds() {
	now := time.Now()
	lost := false
	var giveBack []holdKey
	for k, h := range a.holds {
		if !now.Before(h.expires) || h.ended() {
			a.lose(k, "lease ran out")
			lost = true
			// Renewals that the replicas did not acknowledge extended the key on the master past
			// the validity the holder counted on: nobody owns it now, so it is given back rather
			// than left to keep contenders out until that lease ends (a shared owner id's holds
			// are left to its holder's Unlock, as in settleRenewal).
			if h.unacked && !h.shared {
				giveBack = append(giveBack, k)
			}
		}
	}
	for _, k := range giveBack {
		a.giveBackLost(k)
	}
	if lost {
		a.tryHead()
	}
}

func (a *lockActor) armWatchdog() {
	need := false
	for _, h := range a.holds {
		need = need || h.watchdog
	}
	switch {
	case need && !a.watchdog.armed():
		if a.renewSoon {
			a.watchdog.setAt(time.Now().Add(renewRetryDelay(a.env.WatchdogTimeout)))
			break
		}
		a.watchdog.setAt(watchdogDue(time.Now(), a.env.WatchdogTimeout))
	case !need:
		a.watchdog.stop()
		a.renewSoon = false
	}
}

// watchdogGrid is the share of the watchdog timeout to which the watchdog's ticks are rounded up.
const watchdogGrid = 30

// watchdogDue is when the watchdog armed at now ticks: a third of the watchdog timeout later, rounded up
// to a grid of a thirtieth of it on the wall clock, so that the holds of every actor taken at about the
// same time are renewed on the same tick, and their renewals can share round trips. The tick comes at
// most watchdog/3 + watchdog/30 after the arm, well inside the validity of the lease (the watchdog
// timeout less the drift allowance) that the latest acquisition or renewal before the arm granted.
func watchdogDue(now time.Time, watchdog time.Duration) time.Time {
	due := now.Add(watchdog / 3)
	grid := int64(watchdog / watchdogGrid)
	if grid <= 0 {
		return due
	}
	ns := due.UnixNano()
	if r := ns % grid; r != 0 {
		due = due.Add(time.Duration(grid - r))
	}
	return due
}

// renewRetryDelay is how long the watchdog waits to try again after a renewal that did not count: a
// tenth of the watchdog timeout, so that a hold whose renewals fail for a while (a failover, replicas
// that lag) gets several more tries before its validity runs out.
func renewRetryDelay(watchdog time.Duration) time.Duration { return max(watchdog/10, time.Millisecond) }

// renewAll renews every watchdog hold. An error is not a loss: the next tick, soon, tries again, and the
// expiry timer declares the loss if the lease runs out first.
//
// The holds go to Redis together (redisops.Ops.RenewMany): with replica sync on, in one pipeline
// followed by one WAIT, so that replicas that lag cost a tick one sync timeout however many watchdog
// holds the actor has (the readers of a read-write lock in this coordinator). The round trip is
// bounded by the latest of their validities only when the client has ContextTimeoutEnabled; otherwise
// by the client's ReadTimeout (5 s by default in go-redis v9). A hold whose own validity ran out before
// the answer is lost (see settleRenewal). A hold whose Done closed, or whose validity ran out, is not renewed: a
// renewal sent with the others would extend on the master a hold that nobody holds any more; the
// expiry timer declares it lost.
//
// With the coordinator's Renewals (Env.Renewals), the holds go to it instead, and the actor does not
// wait for Redis: the answers come back as a renewalsDone message (see renewAsync).
func (a *lockActor) renewAll() {
	a.renewTicks++
	a.renewSoon = false
	var ks []holdKey
	for k, h := range a.holds {
		if h.watchdog {
			ks = append(ks, k)
		}
	}
	if a.env.Renewals != nil {
		a.renewAsync(ks, 0)
		return
	}
	lost := false
	renewed, failed := 0, 0
	var lastErr error
	for try := 0; ; try++ {
		now := time.Now()
		ks = slices.DeleteFunc(ks, func(k holdKey) bool {
			h := a.holds[k]
			return h == nil || h.ended() || !now.Before(h.expires)
		})
		if len(ks) == 0 {
			break
		}
		var again []holdKey
		for _, r := range a.renewMany(ks) {
			if try == 0 && !r.gone && errors.Is(r.err, redisops.ErrReplicasChanged) {
				// The master has fewer replicas than the WAIT asked for (a failover left the new
				// master without the old one's): ask again at once for what it has now.
				again = append(again, r.k)
				continue
			}
			if r.err != nil {
				failed++
				lastErr = r.err
				a.renewSoon = a.renewSoon || !r.gone
			} else {
				renewed++
			}
			lost = lost || r.gone
		}
		ks = again
	}
	a.traceRenewals(renewed, failed, lastErr)
	if lost {
		a.tryHead()
	}
}

// renewalsDone carries the answers to the renewals of the holds ks (holds, the hold of each when it was
// sent) that renewAsync handed to the coordinator's Renewals at sent, on its try-th try.
type renewalsDone struct {
	sent  time.Time
	try   int
	ks    []holdKey
	holds []*hold
	errs  []error
}

// renewAsync hands the renewals of the watchdog holds ks to the coordinator's Renewals, which sends
// them with the other actors' (in as few script calls and round trips as it can) and answers with a
// renewalsDone message, settled by settleRenewals. A hold whose Done closed, or whose validity ran
// out, is left out, as in renewAll. The round trip is bounded by the latest validity of the holds it
// carries; the answer of a hold whose own validity ran out before it is late (see settleRenewal).
func (a *lockActor) renewAsync(ks []holdKey, try int) {
	now := time.Now()
	m := renewalsDone{sent: now, try: try}
	var holds []redisops.Hold
	var deadline time.Time
	for _, k := range ks {
		h := a.holds[k]
		if h == nil || h.ended() || !now.Before(h.expires) {
			continue
		}
		m.ks, m.holds = append(m.ks, k), append(m.holds, h)
		holds = append(holds, redisops.Hold{Name: a.name, Owner: k.owner, Kind: a.proto.renewKind(k.kind), Lease: a.env.WatchdogTimeout})
		if h.expires.After(deadline) {
			deadline = h.expires
		}
	}
	if len(holds) == 0 {
		return
	}
	a.renewing++
	self, root := a.self, a.root
	a.env.Renewals.submit(&renewRequest{holds: holds, deadline: deadline, done: func(errs []error) {
		m.errs = errs
		root.Send(self, m)
	}})
}

// settleRenewals settles the answers of renewAsync's renewals as renewAll settles those it waits for.
// A hold released while its renewal was out is not touched; one lost meanwhile (its validity ran
// out) whose renewal took effect all the same is given back, as a late renewal is (see
// settleRenewal), since nobody owns what the renewal extended. Holds whose renewal met a master with
// fewer replicas than the WAIT asked for are sent again at once, once.
func (a *lockActor) settleRenewals(m renewalsDone) {
	var giveBack, again []holdKey
	renewed, failed := 0, 0
	lost, soon := false, a.renewSoon
	var lastErr error
	for i, k := range m.ks {
		h, err := m.holds[i], m.errs[i]
		if a.holds[k] != h {
			took := err == nil || errors.Is(err, redisops.ErrRenewalNotSynced)
			if n, ok := a.lost[k]; ok && a.holds[k] == nil && n != lostGivenBack && took && !h.shared {
				giveBack = append(giveBack, k)
			}
			continue
		}
		if m.try == 0 && errors.Is(err, redisops.ErrReplicasChanged) && !errors.Is(err, redisops.ErrNotHeld) {
			again = append(again, k)
			continue
		}
		gone, back, err := a.settleRenewal(k, h, m.sent, err)
		if back {
			giveBack = append(giveBack, k)
		}
		if err != nil {
			failed++
			lastErr = err
			a.renewSoon = a.renewSoon || !gone
		} else {
			renewed++
		}
		lost = lost || gone
	}
	for _, k := range giveBack {
		a.giveBackLost(k)
	}
	if len(again) > 0 {
		a.renewAsync(again, 1)
	}
	a.traceRenewals(renewed, failed, lastErr)
	if a.renewSoon && !soon {
		a.watchdog.stop() // armed again, sooner, after this message
	}
	if lost {
		a.tryHead()
	}
}

// renewal is the outcome of one hold's renewal in renewMany.
type renewal struct {
	k    holdKey
	gone bool
	err  error
}

// renewMany makes one renewal of each watchdog hold of ks in one round trip, and settles each as
// renewOnce does. Every hold's answer is settled before any give-back (see settleRenewal) goes to
// Redis, so that the give-backs' round trips do not make a later hold's timely answer look late.
func (a *lockActor) renewMany(ks []holdKey) []renewal {
	var deadline time.Time
	for _, k := range ks {
		if h := a.holds[k]; h != nil && h.expires.After(deadline) {
			deadline = h.expires
		}
	}
	sent := time.Now()
	ctx, cancel := context.WithDeadline(a.redisContext(), deadline)
	errs := a.proto.renewMany(ctx, ks, a.env.WatchdogTimeout)
	cancel()
	out := make([]renewal, len(ks))
	var giveBack []holdKey
	for i, k := range ks {
		out[i].k = k
		if h := a.holds[k]; h != nil {
			var back bool
			out[i].gone, back, out[i].err = a.settleRenewal(k, h, sent, errs[i])
			if back {
				giveBack = append(giveBack, k)
			}
		}
	}
	for _, k := range giveBack {
		a.giveBackLost(k)
	}
	return out
}

// renewHold renews the watchdog hold h of k at once, outside the watchdog's tick, and reports whether
// the hold was lost.
func (a *lockActor) renewHold(k holdKey, h *hold) bool {
	gone, err := a.renew(k, h)
	a.traceRenewals(btoi(err == nil), btoi(err != nil), err)
	if err != nil && !gone && !a.renewSoon {
		a.renewSoon = true
		a.watchdog.stop() // armed again, sooner, after this message
	}
	return gone
}

// renew renews the watchdog hold h of k. It reports whether the hold was found gone (and lost), and
// the error of a renewal that failed. A renewal counts only once it is answered in time and, with
// replica sync on, acknowledged by the replicas: until then the hold keeps the validity of its last
// renewal that counted, which a replica promoted meanwhile has too, so Done closes before that
// replica can drop the lock.
func (a *lockActor) renew(k holdKey, h *hold) (bool, error) {
	gone, err := a.renewOnce(k, h)
	if errors.Is(err, redisops.ErrReplicasChanged) {
		// The master has fewer replicas than the WAIT asked for (a failover left the new master
		// without the old one's): ask again at once for what it has now.
		gone, err = a.renewOnce(k, h)
	}
	return gone, err
}

// renewOnce makes one renewal of the watchdog hold h of k, as renew describes.
func (a *lockActor) renewOnce(k holdKey, h *hold) (bool, error) {
	sent := time.Now()
	// A renewal that answers after the hold's expiry is worthless: bound it by that expiry (go-redis
	// honours it when the client has ContextTimeoutEnabled).
	ctx, cancel := context.WithDeadline(a.redisContext(), h.expires)
	err := a.proto.renew(ctx, k, a.env.WatchdogTimeout)
	cancel()
	gone, back, err := a.settleRenewal(k, h, sent, err)
	if back {
		a.giveBackLost(k)
	}
	return gone, err
}

// settleRenewal takes the answer err to a renewal of the watchdog hold h of k sent at sent, and reports
// whether the hold was found gone (and lost), whether the caller must give the owner's holds back
// (giveBackLost) once every answer of the round trip is settled, and the error of a renewal that did
// not count.
func (a *lockActor) settleRenewal(k holdKey, h *hold, sent time.Time, err error) (gone, giveBack bool, _ error) {
	renewed := err == nil || errors.Is(err, redisops.ErrRenewalNotSynced)
	switch {
	case renewed && (h.ended() || lateGrant(sent, a.env.WatchdogTimeout)):
		// Done closed while the renewal was on its way (a WAIT for a lagging replica, a client without
		// ContextTimeoutEnabled), or the renewal came back with no validity left: the renewal set the
		// expiry to the watchdog's lease from some moment after sent, which can no longer be counted
		// on, and may have cut a longer one. The holder has been told, or must be, that the hold
		// ended, and it stays ended. The renewal did take effect on the master, acknowledged by the
		// replicas or not, and nobody would own what it renewed, so the owner's holds are given back
		// (with the owner check) rather than left to keep contenders out for a whole watchdog
		// timeout. An owner id shared with other processes is left alone: Redis counts their holds
		// together, and the holder's Unlock gives back this process' own (see clearLost).
		err = fmt.Errorf("%w (renewal answered after %v, the hold's validity ran out)", ErrGrantTooLate, time.Since(sent).Round(time.Millisecond))
		a.lose(k, "lease ran out")
		return true, !h.shared, err
	case err == nil:
		h.lease = a.env.WatchdogTimeout
		h.extend(sent, a.env.WatchdogTimeout)
		h.unacked = false
		a.emitHold(messages.EventRenewed, k, h, h.count, "")
		return false, false, nil
	case errors.Is(err, redisops.ErrNotHeld):
		a.lose(k, "renewal found the hold gone")
		return true, false, err
	default:
		h.unacked = h.unacked || renewed
		a.log().Warn("renewal failed; retrying soon", "owner", k.owner, "err", err)
		a.emitHold(messages.EventRenewalFailed, k, h, h.count, err.Error())
		return false, false, err
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// renewSpanEvery is how often a watchdog tick gets a span: the first and every tenth, and every tick
// with a failure.
const renewSpanEvery = 10

// traceRenewals records the span of a watchdog tick, when it is sampled or something failed.
func (a *lockActor) traceRenewals(renewed, failed int, err error) {
	t := a.env.Telemetry
	if t == nil || renewed+failed == 0 || (failed == 0 && a.renewTicks%renewSpanEvery != 1) {
		return
	}
	span := t.StartChild(trace.SpanContext{}, "lockwarden.renew", a.name, a.proto.lockKind(),
		telemetry.AttrRenewed.Int(renewed), attribute.Int("lockwarden.renewal.failed", failed))
	telemetry.EndSpan(span, err)
}

// shutdown runs when the coordinator closes: waiters get ReasonClosed, held locks are released on a
// best-effort basis, and every timer stops.
func (a *lockActor) shutdown() {
	for ch := range a.subs {
		a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: ch, Subscriber: a.self})
	}
	clear(a.subs)
	for _, s := range a.timerSlots() {
		s.stop()
	}
	a.clock.release()
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

// emit completes ev with the lock's name, the time and the coordinator, and publishes it.
func (a *lockActor) emit(ev messages.Event) {
	if a.env.Events == nil {
		return
	}
	ev.Name, ev.Time, ev.Coordinator = a.name, time.Now(), a.env.CoordinatorID
	a.env.Events.Publish(ev)
}

// emitHold publishes an event about the hold h of k, with the owner's hold count after it.
func (a *lockActor) emitHold(typ messages.EventType, k holdKey, h *hold, count int64, reason string) {
	if a.env.Events == nil || !h.announced {
		return
	}
	ev := messages.Event{Type: typ, Owner: k.owner, Kind: kindOf(k.kind), Token: h.token, HoldCount: count, Reason: reason}
	if count == 0 {
		ev.Held = time.Since(h.acquired)
	}
	a.emit(ev)
}

// emitWait publishes an event about the waiter m.
func (a *lockActor) emitWait(typ messages.EventType, m *Acquire, reason string) {
	if a.env.Events == nil {
		return
	}
	ev := messages.Event{Type: typ, Owner: m.Owner, Kind: kindOf(m.Kind), Reason: reason}
	if typ != messages.EventWaitStarted {
		ev.Wait = waitOf(m)
	}
	a.emit(ev)
}

// refuse answers the acquire m with an unsuccessful outcome; a waiter that had queued is reported as
// no longer waiting.
func (a *lockActor) refuse(m *Acquire, o Outcome) {
	if a.answer(m, o) && m.queued {
		a.emitWait(messages.EventWaitTimedOut, m, o.Reason.String())
	}
}

// reserve reserves m's kind of lock for its owner on the name (see HeldKinds), and reports false when
// the owner holds or asks for the name as a kind of another family.
func (a *lockActor) reserve(m *Acquire) bool {
	if !a.env.Held.reserve(a.name, m.Owner, m.Kind) {
		return false
	}
	m.reserved = true
	return true
}

// unreserve frees m's reservation, once m ends: answered, or dropped after its caller left. A hold
// that m got is recorded before (grant), so that the kind stays taken without a gap.
func (a *lockActor) unreserve(m *Acquire) {
	if m.reserved {
		m.reserved = false
		a.env.Held.unreserve(a.name, m.Owner, m.Kind)
	}
}

// answer ends the acquire m with o: it frees m's reservation, then answers the caller, and reports
// whether the caller was still waiting. The reservation goes first, so that a caller that goes on to
// a call of another kind finds the kind free.
func (a *lockActor) answer(m *Acquire, o Outcome) bool {
	a.unreserve(m)
	return m.Ticket.deliver(o)
}

// releaseReason is the Reason of the Released event of m.
func releaseReason(m *Release) string {
	if m.Reason == "" {
		return messages.ReleaseUnlocked
	}
	return m.Reason
}

// waitOf is how long the caller of m has waited so far.
func waitOf(m *Acquire) time.Duration {
	if m.Started.IsZero() {
		return 0
	}
	return time.Since(m.Started)
}

// kindOf names a kind in events.
func kindOf(k Kind) messages.LockKind { return k.LockKind() }

// emitRegisteredHandoff says that the release m handed the lock to a registered waiter, here or
// elsewhere, whose notice tells it.
func (a *lockActor) emitRegisteredHandoff(m *Release, rel redisops.Released) {
	a.emit(messages.Event{Type: messages.EventHandedOff, Owner: rel.Next, From: m.Owner, Kind: kindOf(m.Kind), Token: rel.Token, HoldCount: 1})
}
