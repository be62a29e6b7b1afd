package actors

import (
	"context"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/lockwarden/lockwarden/redisops"
)

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
	if a.family != familyFair {
		return
	}
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
	// The call must not hold the actor up past the next refresh.
	ctx, cancel := context.WithTimeout(a.redisContext(), shortest/keepAliveShare)
	states, err := a.proto.(fairProtocol).refresh(ctx, places)
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
				a.armRetry(a.backoff.NextBackOff())
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
	if err := a.proto.leave(a.redisContext(), gone, true); err != nil {
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
	if err := a.proto.leave(a.redisContext(), gone, true); err != nil {
		a.log().Warn("giving back a fair lock handed to a gone wait failed; retrying", "owner", owner, "err", err)
		a.retryLeave(gone, leaveRetryFirst, time.Now().Add(a.env.WatchdogTimeout))
	}
}
