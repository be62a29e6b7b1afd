package actors

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// Timers is the timer service of one coordinator's lock actors: one goroutine with a heap of wake-ups,
// at most one per actor, at the actor's earliest deadline. A lock actor keeps its timers (lease expiry,
// watchdog, retry, idle, ...) as deadlines of its own ([oneShot] set with setAt); a deadline that moves
// later does not touch the service, since the actor is woken at the earlier one anyway, runs whatever
// timer is due, and registers its next deadline. This costs a heap operation every few seconds per
// actor, rather than a runtime timer armed and stopped for each timer on every Lock and Unlock.
//
// The registrations are spread over shards, each a heap with a lock of its own, so that the actors'
// registrations (one per hold, set at its grant and dropped at its release) do not wait for each other:
// with one lock, the callers of 32 goroutines on 32 names waited about 0.9 µs per Lock+Unlock for it
// (a mutex profile of BenchmarkUncontendedParallel). An actor registers on one shard, and so do its
// holds.
//
// It is safe for concurrent use. Stop ends the goroutine; wake-ups registered after it are dropped.
type Timers struct {
	send func(*actor.PID, any)

	shards [timerShards]timerShard
	// next picks the shard of the next actor (see clock.init).
	next atomic.Uint32
	// armed is when the goroutine wakes next, in Unix nanoseconds, or 0 while it scans the shards: a
	// registration earlier than it (or made during a scan) kicks the goroutine, others need not.
	armed atomic.Int64
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// timerShards is the number of shards of a Timers.
const timerShards = 16

// timerShard is one shard of a Timers, padded to a cache line of its own.
type timerShard struct {
	mu      sync.Mutex
	heap    wakeHeap
	stopped bool
	_       [64 - 8 - 24 - 8]byte
}

// Wake is the message the timer service sends an actor at its registered deadline. It carries nothing:
// the actor runs every timer of its own whose deadline passed, so an early or stale wake-up is harmless.
type Wake struct{}

// wakeup is one actor's registration with the timer service. Its fields belong to the service (under
// the lock of its shard); the actor keeps its own copy of the deadline it registered (see clock).
type wakeup struct {
	pid *actor.PID
	// hold, when set, is the hold whose Done this entry closes at its deadline (see holdTimer); then
	// pid is nil.
	hold  *hold
	at    time.Time
	index int // in the heap, -1 when not in it
	// shard is the shard of Timers it registers on; it never changes.
	shard uint8
}

// holdTimer closes a hold's Done at its deadline: an entry of the timer service, or a runtime timer for
// an actor outside a guardian (rt). It is as safe for concurrent use as a time.Timer.
type holdTimer struct {
	timers *Timers
	w      wakeup
	rt     *time.Timer
}

// Reset moves the deadline to d from now.
func (t *holdTimer) Reset(d time.Duration) {
	if t.timers == nil {
		t.rt.Reset(d)
		return
	}
	t.timers.set(&t.w, time.Now().Add(d))
}

// Stop cancels the deadline; as with time.Timer.Stop, an end already under way may still happen.
func (t *holdTimer) Stop() {
	if t.timers == nil {
		t.rt.Stop()
		return
	}
	t.timers.cancel(&t.w)
}

// NewTimers starts a timer service that wakes an actor by calling send(pid, Wake{}); send must not block
// for long (protoactor's RootContext.Send).
func NewTimers(send func(*actor.PID, any)) *Timers {
	t := &Timers{send: send, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go t.run()
	return t
}

// Stop ends the service's goroutine and waits for it. It is idempotent.
func (t *Timers) Stop() {
	t.once.Do(func() {
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			sh.stopped = true
			sh.heap = nil
			sh.mu.Unlock()
		}
		close(t.stop)
	})
	<-t.done
}

// set registers w to be woken at at, in place of its registration if it has one.
func (t *Timers) set(w *wakeup, at time.Time) {
	sh := &t.shards[w.shard]
	sh.mu.Lock()
	if sh.stopped {
		sh.mu.Unlock()
		return
	}
	w.at = at
	if w.index >= 0 {
		heap.Fix(&sh.heap, w.index)
	} else {
		heap.Push(&sh.heap, w)
	}
	sh.mu.Unlock()
	// Read after the entry is in its shard: a scan that starts later sees the entry, and one that
	// missed it has not stored its deadline yet (0) or stored one this entry is compared with.
	if armed := t.armed.Load(); armed == 0 || at.UnixNano() < armed {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// cancel drops w's registration, if it has one.
func (t *Timers) cancel(w *wakeup) {
	sh := &t.shards[w.shard]
	sh.mu.Lock()
	if w.index >= 0 && !sh.stopped {
		heap.Remove(&sh.heap, w.index)
	}
	w.index = -1
	sh.mu.Unlock()
}

// pick returns the shard for the next actor's registrations: the shards in turn.
func (t *Timers) pick() uint8 { return uint8(t.next.Add(1) % timerShards) }

// len returns the number of registrations (for tests).
func (t *Timers) len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.heap)
		sh.mu.Unlock()
	}
	return n
}

func (t *Timers) run() {
	defer close(t.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []*wakeup
	for {
		t.armed.Store(0)
		now := time.Now()
		due = due[:0]
		next := time.Hour
		for i := range t.shards {
			sh := &t.shards[i]
			sh.mu.Lock()
			for len(sh.heap) > 0 && !sh.heap[0].at.After(now) {
				due = append(due, heap.Pop(&sh.heap).(*wakeup))
			}
			// Outside the lock, only pid and hold of a popped entry are read: they never change once
			// the entry is first set, while its at and index may be set again at once by its owner.
			if len(sh.heap) > 0 {
				next = min(next, sh.heap[0].at.Sub(now))
			}
			sh.mu.Unlock()
		}
		for i, w := range due {
			if w.hold != nil {
				w.hold.end()
			} else {
				t.send(w.pid, Wake{})
			}
			due[i] = nil
		}
		t.armed.Store(now.Add(next).UnixNano())
		timer.Reset(next)
		select {
		case <-timer.C:
		case <-t.kick:
		case <-t.stop:
			return
		}
	}
}

type wakeHeap []*wakeup

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *wakeHeap) Push(x any) {
	w := x.(*wakeup)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// clock is one actor's side of the timer service: its one registration and the deadline it registered
// (zero when none is, or when the wake-up for it was sent).
type clock struct {
	timers     *Timers
	w          wakeup
	registered time.Time
}

func (c *clock) init(t *Timers, self *actor.PID) {
	c.timers = t
	c.w = wakeup{pid: self, index: -1}
	if t != nil {
		c.w.shard = t.pick()
	}
}

// woken notes that the wake-up for the registered deadline arrived: the service no longer holds it.
func (c *clock) woken() { c.registered = time.Time{} }

// want makes sure the actor is woken no later than at (zero: nothing to wake for). A deadline later than
// the one registered leaves the service alone: the actor is woken early and registers again.
func (c *clock) want(at time.Time) {
	if at.IsZero() || c.timers == nil {
		return
	}
	if !c.registered.IsZero() && !at.Before(c.registered) {
		return
	}
	c.registered = at
	c.timers.set(&c.w, at)
}

// release drops the registration, when the actor stops or is recycled.
func (c *clock) release() {
	if c.timers != nil {
		c.timers.cancel(&c.w)
	}
	c.registered = time.Time{}
}

// oneShot is a re-armable single timer. Every arm or cancel bumps the generation, so a tick that was
// already on its way when the timer changed is recognised as stale.
//
// A lock actor's oneShots are deadlines (setAt) that the actor checks when the timer service wakes it
// (see [Timers]); the other actors' send make(gen) through protoactor's scheduler (arm).
type oneShot struct {
	gen    uint64
	cancel scheduler.CancelFunc
	// at is the deadline of a oneShot set with setAt, zero when it is not armed that way.
	at time.Time
}

func (t *oneShot) arm(s *scheduler.TimerScheduler, self *actor.PID, d time.Duration, make func(uint64) any) {
	t.stop()
	t.cancel = s.SendOnce(d, self, make(t.gen))
}

// setAt arms the timer for the deadline at; the actor's clock must be told (clock.want).
func (t *oneShot) setAt(at time.Time) {
	t.stop()
	t.at = at
}

func (t *oneShot) stop() {
	t.gen++
	t.at = time.Time{}
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
}

func (t *oneShot) armed() bool { return t.cancel != nil || !t.at.IsZero() }

// due reports whether the deadline of a timer set with setAt has passed at now.
func (t *oneShot) due(now time.Time) bool { return !t.at.IsZero() && !now.Before(t.at) }

// current reports whether a tick of generation gen is the live one, and disarms the timer if so.
func (t *oneShot) current(gen uint64) bool {
	if gen != t.gen || !t.armed() {
		return false
	}
	t.cancel = nil
	t.at = time.Time{}
	return true
}
