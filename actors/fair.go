package actors

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// fairStrategy is the fair lock (Redisson's RFairLock): every waiter keeps a place in a queue in Redis
// and is woken on a channel of its own. A waiter whose owner id is this process's alone registers for
// handoffs, so that a release in any process gives it the lock in the same call and tells it on its
// channel.
type fairStrategy struct {
	exclusive
	name string
	ops  *redisops.Ops
}

func newFairStrategy(name string, ops *redisops.Ops) strategy {
	return fairStrategy{name: name, ops: ops}
}

func (fairStrategy) lockKind() messages.LockKind { return messages.LockFair }

// acquire queues a waiter (enqueue) with a place that the lock actor keeps alive (refresh), so that
// its deadline lapses one window after its process stopped.
func (p fairStrategy) acquire(ctx context.Context, m *Acquire, held int64, enqueue bool) (redisops.Acquired, error) {
	switch {
	case enqueue && handsOff(m) && m.waitID != "":
		return p.ops.FairWait(ctx, p.name, m.Owner, m.Lease, m.WaitWindow, held, m.waitID)
	case enqueue:
		return p.ops.FairQueue(ctx, p.name, m.Owner, m.Lease, m.WaitWindow, held)
	}
	return p.ops.FairAcquire(ctx, p.name, m.Owner, m.Lease, m.WaitWindow, held, false)
}

// refresh keeps the Redis places of the waiting owners alive and reports, for each, whether it is
// still queued.
func (p fairStrategy) refresh(ctx context.Context, places []redisops.FairPlace) ([]redisops.FairPlaceState, error) {
	return p.ops.FairRefresh(ctx, p.name, places)
}

// handsOff reports whether the fair waiter m registers for handoffs: not with an owner id that other
// processes may use, since the grant is told to whoever listens for the owner.
func handsOff(m *Acquire) bool { return m.Wait && !m.SharedOwner }

func (p fairStrategy) release(ctx context.Context, k holdKey, requestID string, lease time.Duration, next *redisops.Handoff) (redisops.Released, error) {
	return p.ops.FairRelease(ctx, p.name, k.owner, requestID, lease, next)
}

func (p fairStrategy) releaseHeld(ctx context.Context, k holdKey, requestID string, lease time.Duration, _, _ int64, next *redisops.Handoff) (redisops.Released, error) {
	return p.release(ctx, k, requestID, lease, next)
}

func (p fairStrategy) renew(ctx context.Context, k holdKey, lease time.Duration) error {
	return p.ops.Renew(ctx, p.name, k.owner, lease)
}

func (p fairStrategy) renewMany(ctx context.Context, ks []holdKey, lease time.Duration) []error {
	return p.ops.RenewMany(ctx, p.name, lockRenewals(ks, lease))
}

func (p fairStrategy) forceUnlock(ctx context.Context, _ Kind) (bool, error) {
	return p.ops.FairForceUnlock(ctx, p.name)
}

func (p fairStrategy) holdCount(ctx context.Context, k holdKey) (int64, error) {
	st, err := p.ops.Status(ctx, p.name, k.owner)
	return st.HoldCount, err
}

func (p fairStrategy) leave(ctx context.Context, m *Acquire, unclaimed bool) error {
	if unclaimed && handsOff(m) {
		_, err := p.ops.FairLeave(ctx, p.name, m.Owner, m.WaitWindow)
		return err
	}
	_, err := p.ops.FairCancel(ctx, p.name, m.Owner, m.WaitWindow)
	return err
}

func (p fairStrategy) channel(m *Acquire) string { return redisops.FairChannelName(p.name, m.Owner) }

func (fairStrategy) queuesInRedis() bool { return true }

// beginAttempt names a waiter's wait, for its handoff registration and the grant notice.
func (fairStrategy) beginAttempt(a *lockActor, m *Acquire) {
	if m.Wait && m.waitID == "" {
		m.waitID = a.env.NewRequestID()
	}
}

// handoffCandidate returns the local waiter that may get a fair lock straight from owner's release:
// the earliest live local waiter, because local waiters took their places in the Redis queue in
// arrival order. The release script hands the lock to it only if it is at the head of the Redis queue,
// so the order across processes stays strict. Abandoned waiters are left in the queue, so that
// nextInLine gives their Redis places up.
func (fairStrategy) handoffCandidate(a *lockActor, owner string) *Acquire {
	if a.env.MaxHandoffs == 0 || len(a.holds) > 1 {
		return nil
	}
	for _, w := range a.queue {
		if w.Ticket.Abandoned() {
			continue
		}
		if w.Owner == owner || !w.Wait {
			return nil
		}
		return w
	}
	return nil
}

// freed lets the waiter at the head of the Redis queue try at once if it is local, without waiting
// for its notice; a registered waiter, here or elsewhere, was handed the lock and its notice tells it.
func (fairStrategy) freed(a *lockActor, m *Release, rel redisops.Released) {
	switch {
	case rel.Registered:
		a.emitRegisteredHandoff(m, rel)
	case rel.Next != "":
		a.tryWaiter(func(w *Acquire) bool { return w.Owner == rel.Next })
	}
}

func (fairStrategy) keepsInRedis(*Acquire) bool { return true }

func (fairStrategy) leaveFailed(a *lockActor, gone *Acquire, err error) bool {
	a.log().Warn("leaving the fair queue failed; retrying", "owner", gone.Owner, "err", err)
	return a.retryLeave(gone, leaveRetryFirst, time.Now().Add(gone.WaitWindow))
}

// subscribed: the confirmation is for one waiter's channel: a notice for it may have been published
// before the subscription took, so that waiter tries now.
func (p fairStrategy) subscribed(a *lockActor, channel string) {
	a.tryWaiter(func(w *Acquire) bool { return p.channel(w) == channel })
}

func (p fairStrategy) notice(a *lockActor, m *messages.Notice) {
	if token, waitID, ok := redisops.ParseFairGrant(m.Payload); ok {
		a.onFairGrant(m.Channel, token, waitID)
		return
	}
	if !isUnlockNotice(m.Payload) {
		return
	}
	// The notice names the waiter at the head of the Redis queue, which need not be the local head (a
	// local waiter whose place lapsed queued again at the tail). A notice for a waiter that already got
	// the lock (from our own release) is stale.
	match := func(w *Acquire) bool { return p.channel(w) == m.Channel }
	if !slices.ContainsFunc(a.queue, func(w *Acquire) bool { return match(w) && !w.Ticket.Abandoned() }) {
		return
	}
	if len(a.holds) > 0 && !a.holdsGone() {
		return
	}
	a.tryWaiter(match)
}

// keepChannels keeps a waiter's channel for a while after it got the lock or left, also while the
// actor is idle: a worker in a loop leaves the lock idle between its turns. The idle tick, which comes
// later than fairChannelKeep, drops what is left.
func (fairStrategy) keepChannels(a *lockActor, want map[string]struct{}) { a.keepRecentChannels(want) }

func (fairStrategy) tend(a *lockActor) { a.armKeepAlive() }

// A fair lock's waiter keeps its place in the Redis queue alive: its deadline there is one wait window
// ahead, and the lock actor pushes it forward about every third of the window (keepAliveTick). A
// waiter whose process died stops being refreshed, so it lapses one window after it stopped, however
// many waiters stand ahead of it and however long the holder's lease.
type (
	// keepAliveTick wakes a fair lock's actor to refresh its waiters' places.
	keepAliveTick struct{ gen uint64 }
	// leaveRetry retries, after delay, the leave of a fair waiter whose caller gave up, after the
	// leave failed; the retries stop at until, when the place lapses anyway.
	leaveRetry struct {
		m     *Acquire
		delay time.Duration
		until time.Time
	}
)

// keepAliveShare is the part of the shortest wait window between two refreshes of a fair lock's places:
// a refresh may be late by the time of a Redis round trip, a pause of this process, or a failed call
// before the next one succeeds.
const keepAliveShare = 3

// Bounds of the delay between retries of a failed leave.
const (
	leaveRetryFirst = 50 * time.Millisecond
	leaveRetryMax   = 2 * time.Second
)

// fairChannelKeep is how long a fair lock keeps a waiter's channel subscribed after the waiter got the
// lock or left, and fairChannelsKept the most channels it keeps so: an owner that queues again soon
// after its release (a worker in a loop) then finds its channel subscribed, and needs neither a new
// subscription nor the attempt that follows its confirmation.
const (
	fairChannelKeep  = time.Second
	fairChannelsKept = 256
)

// keepRecentChannels adds to want the subscribed channels of a fair lock that were wanted within
// fairChannelKeep, and notes when the channels in want were last wanted.
func (a *lockActor) keepRecentChannels(want map[string]struct{}) {
	now := time.Now()
	if a.recent == nil {
		a.recent = make(map[string]time.Time)
	}
	for ch := range want {
		a.recent[ch] = now
	}
	for ch, last := range a.recent {
		if _, wanted := want[ch]; wanted {
			// Wanted now, so kept. A new channel is not subscribed yet (that comes after this), and
			// the check below would forget it: a waiter granted before the confirmation came would
			// then lose its channel at once.
			continue
		}
		_, subscribed := a.subs[ch]
		switch {
		case !subscribed || now.Sub(last) >= fairChannelKeep:
			delete(a.recent, ch)
		case len(want) < fairChannelsKept:
			want[ch] = struct{}{}
		}
	}
}

// fairPlaces returns the places in the Redis queue that the local waiters keep alive, one per owner (the
// calls of one owner share its place, with the longest of their windows), and the shortest window. A
// waiter has a place once it made an attempt.
func (a *lockActor) fairPlaces() ([]redisops.FairPlace, time.Duration) {
	var places []redisops.FairPlace
	var shortest time.Duration
	for _, w := range a.queue {
		if !w.Wait || w.attempts == 0 || w.Ticket.Abandoned() || w.WaitWindow <= 0 {
			continue
		}
		if shortest == 0 || w.WaitWindow < shortest {
			shortest = w.WaitWindow
		}
		known := false
		for i := range places {
			if places[i].Owner == w.Owner {
				places[i].WaitWindow = max(places[i].WaitWindow, w.WaitWindow)
				known = true
				break
			}
		}
		if !known {
			places = append(places, redisops.FairPlace{Owner: w.Owner, WaitWindow: w.WaitWindow})
		}
	}
	return places, shortest
}

// armKeepAlive keeps the refresh of a fair lock's places scheduled while local waiters have places,
// one third of the shortest window ahead at most.
func (a *lockActor) armKeepAlive() {
	places, shortest := a.fairPlaces()
	if len(places) == 0 {
		a.keepAlive.stop()
		a.keepAliveAt = time.Time{}
		return
	}
	every := shortest / keepAliveShare
	due := time.Now().Add(every)
	if a.keepAlive.armed() && !a.keepAliveAt.After(due) {
		return
	}
	a.keepAliveAt = due
	a.keepAlive.setAt(due)
}

// refreshPlaces pushes the deadlines of the local waiters' places forward. A waiter at the head of a
// free lock, or whose place is gone (purged after a pause of this process or of Redis longer than its
// window, or handed the lock by a release whose notice was lost), makes an attempt at once: it takes the
// lock, queues again at the tail, or finds its hold. A failed refresh is retried at the next tick.
func (a *lockActor) refreshPlaces() {
	a.keepAliveAt = time.Time{}
	places, shortest := a.fairPlaces()
	if len(places) == 0 {
		return
	}
	// The call must not hold the actor up past the next refresh (nor past the stop release timeout).
	ctx, cancel := a.env.turnContext(time.Now().Add(shortest / keepAliveShare))
	states, err := a.proto.(fairStrategy).refresh(ctx, places)
	cancel()
	if err != nil {
		a.log().Warn("refreshing the fair queue places failed; retrying on the next tick", "err", err)
		return
	}
	attempted := false
	for i, p := range places {
		if states[i] == redisops.FairPlaceQueued {
			continue
		}
		for j, w := range a.queue {
			if w.Owner != p.Owner || w.Ticket.Abandoned() {
				continue
			}
			ok, _, err := a.attempt(w)
			switch {
			case ok:
				a.queue = append(a.queue[:j:j], a.queue[j+1:]...)
				attempted = true
			case err != nil && !a.retry.armed():
				a.armRetry(a.nextBackOff())
			}
			break
		}
	}
	if attempted {
		a.tryHead() // other calls of the owners that got the lock re-enter
	}
}

// retryLeave schedules another try to leave the fair queue for gone, whose leave failed: with a
// doubling delay, until its place lapses anyway (one window after its last refresh). It reports
// whether it did; gone keeps its reservation until the leave is done or given up (see leaveQueue),
// and when it reports false the caller frees it.
func (a *lockActor) retryLeave(gone *Acquire, delay time.Duration, until time.Time) bool {
	if delay > leaveRetryMax {
		delay = leaveRetryMax
	}
	if !time.Now().Add(delay).Before(until) {
		delete(a.leaving, gone)
		a.log().Warn("leaving the fair queue failed; the place lapses after the wait window", "owner", gone.Owner)
		return false
	}
	if a.leaving == nil {
		a.leaving = make(map[*Acquire]scheduler.CancelFunc)
	}
	if a.sched == nil {
		a.sched = scheduler.NewTimerScheduler(a.root)
	}
	a.leaving[gone] = a.sched.SendOnce(delay, a.self, leaveRetry{m: gone, delay: delay, until: until})
	return true
}

// onLeaveRetry tries again to leave for a waiter whose leave failed, unless its owner waits again or
// holds the lock: its place in Redis is then its own again. The waiter's reservation ends with the
// leave, unless it is retried once more.
func (a *lockActor) onLeaveRetry(r leaveRetry) {
	gone := r.m
	if _, pending := a.leaving[gone]; !pending {
		return // tried at shutdown
	}
	delete(a.leaving, gone)
	retrying := false
	defer func() {
		if !retrying {
			a.unreserve(gone)
		}
	}()
	for _, w := range a.queue {
		if w.Owner == gone.Owner && w.Kind == gone.Kind && !w.Ticket.Abandoned() {
			return
		}
	}
	if _, holds := a.holds[holdKey{gone.Owner, gone.Kind}]; holds {
		return
	}
	if err := a.leaveBounded(gone); err != nil {
		retrying = a.retryLeave(gone, 2*r.delay, r.until)
	}
}

// leaveAtShutdown makes one last try for the leaves still to be retried, within ctx.
func (a *lockActor) leaveAtShutdown(ctx context.Context) {
	for gone, cancel := range a.leaving {
		cancel()
		if err := a.proto.leave(ctx, gone, true); err != nil {
			a.log().Warn("leaving the fair queue at close failed", "owner", gone.Owner, "err", err)
		}
		a.unreserve(gone)
	}
	clear(a.leaving)
}

// giveBackGrant gives back a fair lock that a release handed, as its notice on channel says, to an owner
// of ours that no call waits for nor holds: a wait that left while its attempt was still on its way
// (held up by a Redis pause, it ran after the leave and queued the owner again). Nobody would claim the
// hold, and everyone would wait for its lease to run out.
func (a *lockActor) giveBackGrant(channel string) {
	owner, ok := strings.CutPrefix(channel, redisops.ChannelName(a.name)+":")
	if !ok || owner == "" {
		return
	}
	if _, holds := a.holds[holdKey{owner, KindFair}]; holds {
		return
	}
	gone := &Acquire{Name: a.name, Kind: KindFair, Owner: owner, Wait: true}
	if err := a.leaveBounded(gone); err != nil {
		a.log().Warn("giving back a fair lock handed to a gone wait failed; retrying", "owner", owner, "err", err)
		a.retryLeave(gone, leaveRetryFirst, time.Now().Add(a.env.WatchdogTimeout))
	}
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
