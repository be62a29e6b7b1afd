package actors

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

// wakes starts a timer service whose wake-ups go to the returned channel, by actor id.
func wakes(t *testing.T) (*Timers, <-chan string) {
	t.Helper()
	ch := make(chan string, 64)
	ts := NewTimers(func(pid *actor.PID, msg any) {
		if _, ok := msg.(Wake); !ok {
			t.Errorf("got message %T, want Wake", msg)
		}
		ch <- pid.Id
	})
	t.Cleanup(ts.Stop)
	return ts, ch
}

func nextWake(t *testing.T, ch <-chan string, within time.Duration) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(within):
		t.Fatalf("no wake-up within %v", within)
		return ""
	}
}

func noWake(t *testing.T, ch <-chan string, for_ time.Duration) {
	t.Helper()
	select {
	case id := <-ch:
		t.Fatalf("got a wake-up of %s, want none for %v", id, for_)
	case <-time.After(for_):
	}
}

func newClock(ts *Timers, id string) *clock {
	c := &clock{}
	c.init(ts, actor.NewPID("test", id))
	return c
}

func TestTimersOrder(t *testing.T) {
	ts, ch := wakes(t)
	now := time.Now()
	for _, c := range []struct {
		id string
		in time.Duration
	}{{"c", 150 * time.Millisecond}, {"a", 50 * time.Millisecond}, {"b", 100 * time.Millisecond}} {
		newClock(ts, c.id).want(now.Add(c.in))
	}
	for _, want := range []string{"a", "b", "c"} {
		if got := nextWake(t, ch, 5*time.Second); got != want {
			t.Fatalf("woke %s, want %s", got, want)
		}
	}
	if n := ts.len(); n != 0 {
		t.Fatalf("%d registrations left, want 0", n)
	}
}

func TestTimersEarlierAndLater(t *testing.T) {
	ts, ch := wakes(t)
	c := newClock(ts, "x")
	c.want(time.Now().Add(time.Hour))
	// Earlier: the registration moves, and the service's goroutine sees it at once.
	c.want(time.Now().Add(20 * time.Millisecond))
	if got := nextWake(t, ch, 5*time.Second); got != "x" {
		t.Fatalf("woke %s, want x", got)
	}
	c.woken()
	// Later than what is registered: the service is not touched.
	c.want(time.Now().Add(time.Hour))
	if n := ts.len(); n != 1 {
		t.Fatalf("%d registrations, want 1", n)
	}
	at := c.w.at
	c.want(time.Now().Add(2 * time.Hour))
	if c.w.at != at || c.registered != at {
		t.Fatalf("a later deadline moved the registration from %v to %v", at, c.w.at)
	}
	c.release()
	if n := ts.len(); n != 0 {
		t.Fatalf("%d registrations after release, want 0", n)
	}
	noWake(t, ch, 50*time.Millisecond)
}

// A wake-up that was sent for a deadline the actor has since moved finds nothing due, and the generation
// of a oneShot tells a stale tick from the live one.
func TestOneShotDeadlines(t *testing.T) {
	var s oneShot
	now := time.Now()
	s.setAt(now.Add(time.Second))
	if !s.armed() || s.due(now) {
		t.Fatalf("armed=%v due=%v, want armed and not due", s.armed(), s.due(now))
	}
	stale := s.gen
	s.setAt(now.Add(2 * time.Second)) // moved later: a tick of the old generation is stale
	if s.current(stale) {
		t.Fatal("a tick of a moved deadline was accepted")
	}
	if s.due(now.Add(time.Second)) {
		t.Fatal("due at the old deadline")
	}
	if !s.due(now.Add(2 * time.Second)) {
		t.Fatal("not due at its deadline")
	}
	live := s.gen
	if !s.current(live) || s.armed() {
		t.Fatal("the live tick was not accepted, or left the timer armed")
	}
	if s.current(live) {
		t.Fatal("a tick was accepted twice")
	}
	s.setAt(now)
	s.stop()
	if s.armed() || s.due(now) {
		t.Fatal("a stopped timer is armed or due")
	}
}

func TestTimersStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ch := make(chan string, 1)
	ts := NewTimers(func(pid *actor.PID, _ any) { ch <- pid.Id })
	c := newClock(ts, "x")
	c.want(time.Now().Add(time.Hour))
	ts.Stop()
	ts.Stop() // idempotent
	c.woken()
	c.want(time.Now()) // after Stop: dropped
	c.release()
	noWake(t, ch, 20*time.Millisecond)
}

func TestWatchdogDue(t *testing.T) {
	const wd = 30 * time.Second
	for _, off := range []time.Duration{0, time.Nanosecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		now := time.Unix(1_700_000_000, 0).Add(off)
		due := watchdogDue(now, wd)
		if due.Before(now.Add(wd/3)) || due.After(now.Add(wd/3+wd/watchdogGrid)) {
			t.Fatalf("armed at +%v: due %v after, want between %v and %v", off, due.Sub(now), wd/3, wd/3+wd/watchdogGrid)
		}
		if due.UnixNano()%int64(wd/watchdogGrid) != 0 {
			t.Fatalf("armed at +%v: due %v is off the grid", off, due)
		}
	}
	// Two holds taken within one grid step tick together.
	a := watchdogDue(time.Unix(1_700_000_000, 100), wd)
	b := watchdogDue(time.Unix(1_700_000_000, int64(900*time.Millisecond)), wd)
	if !a.Equal(b) {
		t.Fatalf("ticks %v and %v, want one", a, b)
	}
}

// TestHoldDeadlines: the timer service closes a hold's Done at its deadline, not before; a deadline
// moved later or stopped keeps it open.
func TestHoldDeadlines(t *testing.T) {
	ts, _ := wakes(t)
	a := &lockActor{timers: ts}
	now := time.Now()
	soon := a.newHold(now.Add(30 * time.Millisecond))
	later := a.newHold(now.Add(30 * time.Millisecond))
	later.deadline.Reset(time.Hour)
	stopped := a.newHold(now.Add(30 * time.Millisecond))
	stopped.deadline.Stop()
	select {
	case <-soon.done:
		if time.Now().Before(now.Add(30 * time.Millisecond)) {
			t.Fatal("Done closed before the deadline")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close within 5s of its deadline")
	}
	if later.ended() || stopped.ended() {
		t.Fatalf("ended: moved later %v, stopped %v; want neither", later.ended(), stopped.ended())
	}
	later.deadline.Stop()
	if n := ts.len(); n != 0 {
		t.Fatalf("%d registrations left, want 0", n)
	}
}

// TestTimersShards: clocks and holds on every shard are woken at their deadlines, never before, and
// leave no registration behind.
func TestTimersShards(t *testing.T) {
	woke := make(chan struct {
		id string
		at time.Time
	}, 64)
	ts := NewTimers(func(pid *actor.PID, _ any) {
		woke <- struct {
			id string
			at time.Time
		}{pid.Id, time.Now()}
	})
	t.Cleanup(ts.Stop)
	const clocks = 2*timerShards + 1
	now := time.Now()
	due := map[string]time.Time{}
	shards := map[uint8]bool{}
	for i := range clocks {
		id := strconv.Itoa(i)
		due[id] = now.Add(time.Duration(10+i%7*10) * time.Millisecond)
		c := newClock(ts, id)
		shards[c.w.shard] = true
		c.want(due[id])
	}
	if len(shards) != timerShards {
		t.Fatalf("%d clocks on %d shards, want every one of the %d", clocks, len(shards), timerShards)
	}
	a := &lockActor{timers: ts}
	a.clock.init(ts, actor.NewPID("test", "holder"))
	h := a.newHold(now.Add(30 * time.Millisecond))
	if h.deadline.w.shard != a.clock.w.shard {
		t.Fatalf("hold on shard %d, its actor on %d", h.deadline.w.shard, a.clock.w.shard)
	}
	for range clocks {
		select {
		case w := <-woke:
			want, ok := due[w.id]
			if !ok {
				t.Fatalf("woke %s twice or unknown", w.id)
			}
			if w.at.Before(want) {
				t.Fatalf("woke %s %v before its deadline", w.id, want.Sub(w.at))
			}
			delete(due, w.id)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d clocks not woken within 5s: %v", len(due), due)
		}
	}
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the hold's Done did not close within 5s of its deadline")
	}
	if n := ts.len(); n != 0 {
		t.Fatalf("%d registrations left, want 0", n)
	}
	// A deadline earlier than every other, on another shard than the one the goroutine waits for,
	// wakes it then, not at the later deadline.
	soon, late := newClock(ts, "soon"), newClock(ts, "late")
	if soon.w.shard >= late.w.shard { // the goroutine scans the shards in order: soon's comes first
		t.Fatalf("clocks on shards %d and %d, want the first below the second", soon.w.shard, late.w.shard)
	}
	late.want(time.Now().Add(time.Hour))
	waitsForLate := func() bool { return ts.armed.Load() >= time.Now().Add(30*time.Minute).UnixNano() }
	for deadline := time.Now().Add(5 * time.Second); !waitsForLate(); {
		if time.Now().After(deadline) {
			t.Fatal("the service did not take up the registration within 5s")
		}
		runtime.Gosched() // until the goroutine waits for the late deadline
	}
	at := time.Now().Add(20 * time.Millisecond)
	soon.want(at)
	select {
	case w := <-woke:
		if w.id != "soon" || w.at.Before(at) {
			t.Fatalf("woke %s at %v, want soon at %v or later", w.id, w.at, at)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a deadline 20 ms away on another shard was not woken within 2s")
	}
	late.release()
}
