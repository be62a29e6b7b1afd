package actors

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/cenkalti/backoff/v4"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// hold is one local owner's hold on the lock.
type hold struct {
	count    int64
	token    int64
	lease    time.Duration
	watchdog bool
	// expires is a conservative estimate of when Redis drops the lock unless it is renewed: the time
	// the last acquire or renewal was sent, plus its lease.
	expires time.Time
	done    chan struct{}
	// deadline closes done at expires even while the actor is blocked in a slow Redis call, so the
	// holder learns of the loss no later than Redis drops the lock.
	deadline  *time.Timer
	closeOnce sync.Once
}

func newHold(expires time.Time) *hold {
	h := &hold{expires: expires, done: make(chan struct{})}
	h.deadline = time.AfterFunc(time.Until(expires), h.end)
	return h
}

// extend moves the hold's deadline after a successful acquisition or renewal sent at sent.
func (h *hold) extend(sent time.Time, lease time.Duration) {
	h.expires = sent.Add(lease)
	h.deadline.Reset(time.Until(h.expires))
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

// lockActor serialises everything about one lock name in one coordinator.
type lockActor struct {
	name    string
	channel string
	env     *Env
	self    *actor.PID
	parent  *actor.PID
	root    *actor.RootContext
	sched   *scheduler.TimerScheduler

	holds map[string]*hold
	// lost holds the owners whose last hold was lost, so that their Unlock answers "not held" even
	// when the local lease estimate ran out a moment before Redis expired the key.
	lost  map[string]struct{}
	queue []*Acquire
	// handoffs counts local handoffs in a row.
	handoffs int
	// subscribed reports whether the bridge forwards this lock's channel to us.
	subscribed bool
	// routed counts the commands received from the guardian.
	routed uint64

	retry    oneShot
	expiry   oneShot
	expiryAt time.Time
	idle     oneShot
	watchdog oneShot
	backoff  backoff.BackOff
}

func newLockActor(name string, env *Env) *lockActor {
	return &lockActor{
		name:    name,
		channel: redisops.ChannelName(name),
		env:     env,
		holds:   make(map[string]*hold),
		lost:    make(map[string]struct{}),
		backoff: env.NewBackOff(),
	}
}

// Receive implements actor.Actor.
func (a *lockActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self, a.parent = ctx.Self(), ctx.Parent()
		a.root = ctx.ActorSystem().Root
		a.sched = scheduler.NewTimerScheduler(a.root)
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
		if a.subscribed {
			a.tryHead()
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
		if a.watchdog.current(m.gen) {
			a.renewAll()
		}
	case idleTick:
		if a.idle.current(m.gen) && a.isIdle() {
			ctx.Send(a.parent, &idle{name: a.name, pid: a.self, routed: a.routed})
		}
	case *actor.Stopping:
		a.shutdown()
		return
	default:
		return
	}
	a.afterMessage()
}

func (a *lockActor) log() *slog.Logger { return a.env.Logger.With("lock", a.name) }

func (a *lockActor) isIdle() bool { return len(a.holds) == 0 && len(a.queue) == 0 }

// afterMessage keeps the subscription, the timers and the idle clock in line with the state.
func (a *lockActor) afterMessage() {
	// Subscribe as soon as someone waits, and stay subscribed until the actor is idle, so that busy
	// locks don't subscribe and unsubscribe on every handoff.
	if len(a.queue) > 0 && !a.subscribed {
		a.subscribed = true
		a.root.Send(a.env.Bridge, &messages.Subscribe{Channel: a.channel, Subscriber: a.self})
	} else if a.isIdle() && a.subscribed {
		a.subscribed = false
		a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: a.channel, Subscriber: a.self})
	}
	switch {
	case len(a.queue) == 0:
		a.retry.stop()
	case len(a.holds) == 0 && !a.retry.armed():
		// Nobody local will wake the queue: make sure a timer does, whatever path led here.
		a.armRetry(a.env.WatchdogTimeout / 3)
	}
	a.armExpiry()
	a.armWatchdog()
	if a.isIdle() {
		if !a.idle.armed() {
			a.idle.arm(a.sched, a.self, a.env.IdleTimeout, func(g uint64) any { return idleTick{g} })
		}
	} else {
		a.idle.stop()
	}
}

// redisContext bounds a Redis call by the coordinator's lifetime.
func (a *lockActor) redisContext() context.Context { return a.env.Context }

func (a *lockActor) onAcquire(m *Acquire) {
	if m.Ticket.Abandoned() {
		return
	}
	if h := a.holds[m.Owner]; h != nil && h.ended() {
		a.lose(m.Owner, "lease ran out")
	}
	_, reentry := a.holds[m.Owner]
	switch {
	case reentry || (len(a.queue) == 0 && len(a.holds) == 0):
		ok, ttl, err := a.attempt(m)
		if ok {
			return
		}
		if err != nil && !m.Wait {
			m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
			return
		}
		if !m.Wait {
			m.Ticket.deliver(Outcome{Reason: messages.ReasonNotObtained})
			return
		}
		if _, holder := a.holds[m.Owner]; holder {
			// A re-entry that failed on a Redis error goes first: it must not wait behind waiters
			// that wait for this very owner.
			a.queue = append([]*Acquire{m}, a.queue...)
		} else {
			a.queue = append(a.queue, m)
		}
		if err != nil {
			a.armRetry(a.backoff.NextBackOff())
		} else {
			a.armRetry(ttl)
		}
	case !m.Wait:
		// Another local owner holds the lock, or local waiters are ahead: the answer is known
		// without asking Redis.
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotObtained})
	default:
		a.queue = append(a.queue, m)
	}
}

// attempt runs the acquire script for m and grants the lock on success. It reports whether it
// succeeded, the holder's remaining lease when the lock is taken, and any Redis error.
func (a *lockActor) attempt(m *Acquire) (bool, time.Duration, error) {
	held := int64(redisops.UnknownHoldCount)
	if !m.SharedOwner {
		held = 0
		if h := a.holds[m.Owner]; h != nil {
			held = h.count
		}
	}
	sent := time.Now()
	res, err := a.env.Ops.Acquire(a.redisContext(), a.name, m.Owner, m.Lease, held)
	if err != nil {
		a.log().Warn("acquire failed", "owner", m.Owner, "err", err)
		return false, 0, err
	}
	a.backoff.Reset()
	if !res.OK {
		if _, had := a.holds[m.Owner]; had {
			// A re-entry found the lock taken by someone else: our hold was lost.
			a.lose(m.Owner, "taken by another owner")
		}
		return false, res.TTL, nil
	}
	a.grant(m, res.HoldCount, res.Token, sent)
	return true, 0, nil
}

// grant records a successful acquisition and answers the caller. If the caller already gave up, the
// acquisition is undone at once.
func (a *lockActor) grant(m *Acquire, count, token int64, sent time.Time) {
	h := a.holds[m.Owner]
	if h != nil && count == 1 {
		// A "re-entry" that starts a new hold: the old one lapsed in Redis, and someone else may
		// have held the lock in between.
		a.lose(m.Owner, "lease ran out before a re-entry")
		h = nil
	}
	if h == nil {
		h = newHold(sent.Add(m.Lease))
		a.holds[m.Owner] = h
		delete(a.lost, m.Owner)
	}
	h.count, h.token, h.lease = count, token, m.Lease
	h.watchdog = h.watchdog || m.Watchdog
	h.extend(sent, m.Lease)
	if m.Ticket.deliver(Outcome{HoldCount: count, Token: token, Done: h.done}) {
		return
	}
	// The caller left while we were obtaining the lock for it. The undo has its own deadline, because
	// the caller may have left because the coordinator is closing.
	ctx, cancel := context.WithTimeout(context.Background(), a.env.StopReleaseTimeout)
	defer cancel()
	rel, err := a.env.Ops.Release(ctx, a.name, m.Owner, a.env.NewRequestID(), h.lease, nil)
	switch {
	case errors.Is(err, redisops.ErrNotHeld):
		a.lose(m.Owner, "lost before an abandoned acquisition was undone")
	case err != nil:
		// Redis may still count the abandoned hold, so the local count can no longer be trusted: give
		// the whole hold up (Done closes, the watchdog stops) and let its lease expire in Redis, rather
		// than renew a hold that one Unlock too few would leave behind.
		a.log().Warn("undoing an abandoned acquisition failed; the lease will expire", "owner", m.Owner, "err", err)
		a.lose(m.Owner, "undo of an abandoned acquisition failed")
	case rel.Remaining == 0:
		a.drop(m.Owner)
	default:
		h.count = rel.Remaining
	}
}

// tryHead lets the head waiter try Redis, and keeps granting while the next head is an owner that
// already holds the lock (a queued re-entry).
func (a *lockActor) tryHead() {
	for len(a.queue) > 0 {
		i := a.nextInLine()
		if i < 0 {
			// Held by another local owner: its release or loss wakes the queue.
			return
		}
		m := a.queue[i]
		ok, ttl, err := a.attempt(m)
		switch {
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

// nextInLine drops abandoned waiters and returns the index of the waiter that may try Redis now: a
// queued re-entry of a local holder first, else the head if no local owner holds the lock, else -1.
func (a *lockActor) nextInLine() int {
	live := a.queue[:0]
	for _, m := range a.queue {
		if !m.Ticket.Abandoned() {
			live = append(live, m)
		}
	}
	clear(a.queue[len(live):])
	a.queue = live
	if len(a.queue) == 0 {
		return -1
	}
	if len(a.holds) == 0 {
		return 0
	}
	for i, m := range a.queue {
		if _, holder := a.holds[m.Owner]; holder {
			return i
		}
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
	a.retry.arm(a.sched, a.self, ttl, func(g uint64) any { return retryTick{g} })
}

func (a *lockActor) onRelease(m *Release) {
	h := a.holds[m.Owner]
	if h != nil && h.ended() {
		a.lose(m.Owner, "lease ran out")
		h = nil
	}
	if _, lost := a.lost[m.Owner]; lost && h == nil {
		delete(a.lost, m.Owner)
		// Free what may be left of the hold in Redis at once, but the holder already learnt from
		// Done that its hold ended: it does not hold the lock.
		if _, err := a.env.Ops.Release(a.redisContext(), a.name, m.Owner, a.env.NewRequestID(), a.env.WatchdogTimeout, nil); err != nil && !errors.Is(err, redisops.ErrNotHeld) {
			a.log().Warn("release of a lost hold failed; its lease will expire", "owner", m.Owner, "err", err)
		}
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	}
	lease := a.env.WatchdogTimeout
	var next *redisops.Handoff
	var nextCmd *Acquire
	if h != nil {
		lease = h.lease
		if h.count == 1 {
			nextCmd = a.handoffCandidate(m.Owner)
		}
	}
	if nextCmd != nil {
		next = &redisops.Handoff{
			Owner: nextCmd.Owner, Lease: nextCmd.Lease, OnlyIfAlone: a.handoffs >= a.env.MaxHandoffs,
		}
	}
	sent := time.Now()
	rel, err := a.env.Ops.Release(a.redisContext(), a.name, m.Owner, a.env.NewRequestID(), lease, next)
	switch {
	case errors.Is(err, redisops.ErrNotHeld):
		if h != nil {
			a.lose(m.Owner, "release found the hold gone")
			a.tryHead()
		}
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	case err != nil:
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
		return
	}
	if rel.Remaining > 0 {
		if h != nil {
			h.count = rel.Remaining
			h.extend(sent, lease)
		}
		m.Ticket.deliver(Outcome{HoldCount: rel.Remaining})
		return
	}
	if h != nil {
		a.drop(m.Owner)
	}
	if !rel.HandedOff {
		// The unlock notice, our own included, wakes the head waiter, so that waiters in other
		// processes race on equal terms.
		a.handoffs = 0
		m.Ticket.deliver(Outcome{})
		return
	}
	a.handoffs++
	a.queue = a.queue[1:]
	// The next holder first: it is the one waiting.
	a.grant(nextCmd, 1, rel.Token, sent)
	m.Ticket.deliver(Outcome{})
	a.tryHead()
}

// handoffCandidate returns the head waiter if the lock may go to it straight from owner's release.
func (a *lockActor) handoffCandidate(owner string) *Acquire {
	if a.env.MaxHandoffs == 0 {
		return nil
	}
	for len(a.queue) > 0 && a.queue[0].Ticket.Abandoned() {
		a.queue = a.queue[1:]
	}
	if len(a.queue) == 0 || a.queue[0].Owner == owner || len(a.holds) > 1 {
		return nil
	}
	return a.queue[0]
}

func (a *lockActor) onForceUnlock(m *ForceUnlock) {
	deleted, err := a.env.Ops.ForceUnlock(a.redisContext(), a.name)
	if err != nil {
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: err})
		return
	}
	for owner := range a.holds {
		a.lose(owner, "force-unlocked")
	}
	m.Ticket.deliver(Outcome{Deleted: deleted})
	a.tryHead()
}

func (a *lockActor) onAbandon(m *Abandon) {
	for i, w := range a.queue {
		if w.Ticket == m.Ticket {
			a.queue = append(a.queue[:i:i], a.queue[i+1:]...)
			return
		}
	}
}

func (a *lockActor) onNotice(m *messages.Notice) {
	if m.Payload != redisops.UnlockMessage && m.Payload != redisops.ReadUnlockMessage {
		return
	}
	if len(a.holds) > 0 && !a.holdsGone() {
		// A local owner holds the lock, so the notice is about an earlier hold; the local release
		// will wake the queue.
		return
	}
	a.tryHead()
}

// holdsGone checks in Redis whether the local holds still exist, after a notice said the lock was
// freed while we hold it: a force unlock, or a release through a shared owner id elsewhere. It loses
// the holds that are gone and reports whether none is left.
func (a *lockActor) holdsGone() bool {
	for owner := range a.holds {
		st, err := a.env.Ops.Status(a.redisContext(), a.name, owner)
		if err == nil && st.HoldCount == 0 {
			a.lose(owner, "freed by another client")
		}
	}
	return len(a.holds) == 0
}

// drop ends a hold that was released.
func (a *lockActor) drop(owner string) {
	if h := a.holds[owner]; h != nil {
		delete(a.holds, owner)
		h.deadline.Stop()
		h.end()
	}
}

// lose ends a hold that was lost, and says so.
func (a *lockActor) lose(owner, why string) {
	if _, ok := a.holds[owner]; ok {
		a.log().Warn("lock lost", "owner", owner, "reason", why)
		a.drop(owner)
		a.lost[owner] = struct{}{}
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
	a.expiry.arm(a.sched, a.self, time.Until(first), func(g uint64) any { return expiryTick{g} })
}

func (a *lockActor) expireHolds() {
	now := time.Now()
	lost := false
	for owner, h := range a.holds {
		if !now.Before(h.expires) || h.ended() {
			a.lose(owner, "lease ran out")
			lost = true
		}
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
		a.watchdog.arm(a.sched, a.self, a.env.WatchdogTimeout/3, func(g uint64) any { return watchdogTick{g} })
	case !need:
		a.watchdog.stop()
	}
}

// renewAll renews every watchdog hold. An error is not a loss: the next tick tries again, and the
// expiry timer declares the loss if the lease runs out first.
func (a *lockActor) renewAll() {
	lost := false
	for owner, h := range a.holds {
		if !h.watchdog {
			continue
		}
		sent := time.Now()
		// A renewal that answers after the hold's expiry is worthless: bound it by that expiry (go-redis
		// honours it when the client has ContextTimeoutEnabled).
		ctx, cancel := context.WithDeadline(a.redisContext(), h.expires)
		err := a.env.Ops.Renew(ctx, a.name, owner, a.env.WatchdogTimeout)
		cancel()
		switch {
		case err == nil:
			h.lease = a.env.WatchdogTimeout
			h.extend(sent, a.env.WatchdogTimeout)
		case errors.Is(err, redisops.ErrNotHeld):
			a.lose(owner, "renewal found the hold gone")
			lost = true
		default:
			a.log().Warn("renewal failed; retrying on the next tick", "owner", owner, "err", err)
		}
	}
	if lost {
		a.tryHead()
	}
}

// shutdown runs when the coordinator closes: waiters get ReasonClosed, held locks are released on a
// best-effort basis, and every timer stops.
func (a *lockActor) shutdown() {
	a.retry.stop()
	a.expiry.stop()
	a.idle.stop()
	a.watchdog.stop()
	for _, m := range a.queue {
		m.Ticket.deliver(Outcome{Reason: messages.ReasonClosed})
	}
	a.queue = nil
	if len(a.holds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.env.StopReleaseTimeout)
	defer cancel()
	for owner, h := range a.holds {
		for n := h.count; n > 0; n-- {
			rel, err := a.env.Ops.Release(ctx, a.name, owner, a.env.NewRequestID(), h.lease, nil)
			if err != nil || rel.Remaining == 0 {
				if err != nil && !errors.Is(err, redisops.ErrNotHeld) {
					a.log().Warn("release at close failed; the lease will expire", "owner", owner, "err", err)
				}
				break
			}
		}
		a.drop(owner)
	}
}
