package integration

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// evNext returns the next event of sub, failing the test if none arrives within a second.
func evNext(t *testing.T, sub *coordinator.Subscription) messages.Event {
	t.Helper()
	select {
	case ev, ok := <-sub.Events():
		if !ok {
			t.Fatal("subscription closed")
		}
		return ev
	case <-time.After(time.Second):
		t.Fatal("no event within 1s")
		return messages.Event{}
	}
}

// evExpect reads the next event and checks its type, owner and hold count.
func evExpect(t *testing.T, sub *coordinator.Subscription, typ messages.EventType, owner string, holds int64) messages.Event {
	t.Helper()
	ev := evNext(t, sub)
	if ev.Type != typ || ev.Owner != owner || ev.HoldCount != holds {
		t.Fatalf("event = %s owner %q holds %d (%+v), want %s owner %q holds %d", ev.Type, ev.Owner, ev.HoldCount, ev, typ, owner, holds)
	}
	return ev
}

// evNone checks that no event is pending on sub.
func evNone(t *testing.T, sub *coordinator.Subscription) {
	t.Helper()
	select {
	case ev := <-sub.Events():
		t.Fatalf("unexpected event %s %+v", ev.Type, ev)
	default:
	}
}

// evTimedOut returns owner's wait-timed-out event, skipping the events of other owners and owner's
// wait-started. It reports false when none arrives within a second: the wait ended before the actor
// took the command, which then published nothing.
func evTimedOut(t *testing.T, sub *coordinator.Subscription, owner string) (messages.Event, bool) {
	t.Helper()
	deadline := time.After(time.Second)
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatal("subscription closed")
			}
			if ev.Owner == owner && ev.Type == messages.EventWaitTimedOut {
				return ev, true
			}
		case <-deadline:
			return messages.Event{}, false
		}
	}
}

// TestEventsTimedOutWaitCountsTheWholeWait: when a TryLock's or TryAcquire's Wait runs out (not its
// caller's ctx), the Wait of its wait-timed-out event is at least the wait it was given: both count
// from one reading of the clock when the call began. They were two readings, the deadline's and then
// the command's, and a caller held up between them (a loaded machine) reported less: with both CPUs
// busy with other processes, 5-7 runs of 20 of the Mutex case and 3-7 of the Semaphore case failed,
// with 8.2-9.5 ms for a 10 ms wait; and 49.89 ms for a 50 ms wait once (TestEventsLifeOfALock).
func TestEventsTimedOutWaitCountsTheWholeWait(t *testing.T) {
	t.Parallel()
	const wait = 10 * time.Millisecond
	_, _, c := setup(t)
	for _, tc := range []struct {
		kind string
		// asked is the HoldCount of the waiter's wait events: the permits it asks for, 0 for a lock.
		asked int64
		// hold takes what the waiter then waits for; try is the waiter's call, which must time out.
		hold func(t *testing.T, name string, sub *coordinator.Subscription)
		try  func(t *testing.T, name string) (owner string, ok bool, err error)
	}{
		{
			kind: "mutex",
			hold: func(t *testing.T, name string, sub *coordinator.Subscription) {
				holder := c.Mutex(name)
				mustLock(t, holder)
				evExpect(t, sub, messages.EventAcquired, holder.Owner(), 1)
			},
			try: func(t *testing.T, name string) (string, bool, error) {
				m := c.Mutex(name)
				ok, err := m.TryLock(t.Context(), coordinator.Wait(wait))
				return m.Owner(), ok, err
			},
		},
		{
			kind: "semaphore", asked: 1,
			hold: func(t *testing.T, name string, _ *coordinator.Subscription) {
				// No permit is ever set: every acquisition waits.
			},
			try: func(t *testing.T, name string) (string, bool, error) {
				s := c.Semaphore(name)
				ok, err := s.TryAcquire(t.Context(), 1, coordinator.Wait(wait))
				return s.Owner(), ok, err
			},
		},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			name := t.Name()
			sub := c.Subscribe(coordinator.ForLock(name), 8)
			defer sub.Close()
			tc.hold(t, name, sub)
			waited := 0
			for i := range 50 {
				owner, ok, err := tc.try(t, name)
				if ok || err != nil {
					t.Fatalf("try %d = %v, %v", i, ok, err)
				}
				// A try whose command reached the actor only after its wait ran out (a loaded
				// machine) never waited, and has no events: it is skipped.
				to, ok := evTimedOut(t, sub, owner)
				if !ok {
					continue
				}
				waited++
				if to.HoldCount != tc.asked {
					t.Errorf("try %d: wait-timed-out HoldCount = %d, want %d", i, to.HoldCount, tc.asked)
				}
				if to.Wait < wait {
					t.Fatalf("try %d: wait-timed-out Wait = %v, want at least the %v wait", i, to.Wait, wait)
				}
			}
			if waited < 10 {
				t.Fatalf("%d tries of 50 waited, want at least 10", waited)
			}
		})
	}
}

// TestEventsLifeOfALock: every change in a lock's life is an event, with its owner, token, wait and
// hold time, in order.
func TestEventsLifeOfALock(t *testing.T) {
	t.Parallel()
	_, _, c := setup(t, coordinator.WithWatchdogTimeout(600*time.Millisecond))
	name := t.Name()
	sub := c.Subscribe(coordinator.ForLock(name), 64)
	defer sub.Close()
	a, b := c.Mutex(name), c.Mutex(name)

	mustLock(t, a)
	ev := evExpect(t, sub, messages.EventAcquired, a.Owner(), 1)
	if ev.Name != name || ev.Kind != messages.LockPlain || ev.Token != a.Token() || ev.Coordinator != c.ID() || ev.Time.IsZero() {
		t.Errorf("acquired event = %+v, want name, kind plain, token %d, coordinator %s and a time", ev, a.Token(), c.ID())
	}
	mustLock(t, a)
	evExpect(t, sub, messages.EventReentered, a.Owner(), 2)

	// The watchdog renews (every 200 ms here).
	evExpect(t, sub, messages.EventRenewed, a.Owner(), 2)

	// b waits; a's two Unlocks; b gets the lock from a's release.
	errc := lockAsync(t.Context(), b)
	evExpect(t, sub, messages.EventWaitStarted, b.Owner(), 0)
	mustUnlock(t, a)
	evExpect(t, sub, messages.EventReleased, a.Owner(), 1)
	mustUnlock(t, a)
	rel := evExpect(t, sub, messages.EventReleased, a.Owner(), 0)
	if rel.Held <= 0 || rel.Reason != messages.ReleaseUnlocked {
		t.Errorf("released event = %+v, want a hold time and reason %q", rel, messages.ReleaseUnlocked)
	}
	if err := semRecv(t, errc, 2*time.Second, "b's Lock"); err != nil {
		t.Fatal(err)
	}
	ho := evExpect(t, sub, messages.EventHandedOff, b.Owner(), 1)
	if ho.From != a.Owner() {
		t.Errorf("handed-off From = %q, want %q", ho.From, a.Owner())
	}
	acq := evExpect(t, sub, messages.EventAcquired, b.Owner(), 1)
	if acq.Wait <= 0 || acq.Token != b.Token() {
		t.Errorf("b's acquired event = %+v, want a wait time and token %d", acq, b.Token())
	}

	// A TryLock whose wait runs out.
	if ok, err := a.TryLock(t.Context(), coordinator.Wait(50*time.Millisecond)); ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	evExpect(t, sub, messages.EventWaitStarted, a.Owner(), 0)
	if to := evExpect(t, sub, messages.EventWaitTimedOut, a.Owner(), 0); to.Wait < 50*time.Millisecond {
		t.Errorf("wait-timed-out Wait = %v, want at least the 50ms wait", to.Wait)
	}

	// Force unlock: the lock is gone and b's hold is lost.
	if ok, err := a.ForceUnlock(t.Context()); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	evExpect(t, sub, messages.EventForceUnlocked, "", 0)
	if lost := evExpect(t, sub, messages.EventLost, b.Owner(), 0); lost.Reason != "force-unlocked" || lost.Held <= 0 {
		t.Errorf("lost event = %+v, want reason force-unlocked and a hold time", lost)
	}

	// A fixed lease that runs out.
	if ok, err := a.TryLock(t.Context(), coordinator.Lease(100*time.Millisecond)); !ok || err != nil {
		t.Fatalf("TryLock(Lease) = %v, %v", ok, err)
	}
	evExpect(t, sub, messages.EventAcquired, a.Owner(), 1)
	if lost := evExpect(t, sub, messages.EventLost, a.Owner(), 0); lost.Reason != "lease ran out" {
		t.Errorf("lost event = %+v, want reason lease ran out", lost)
	}
	evNone(t, sub)
}

// TestEventsPerLockOrder: under contention from many goroutines, each lock's events come in the order
// they happened: every acquisition is followed by its owner's release before the next acquisition.
func TestEventsPerLockOrder(t *testing.T) {
	t.Parallel()
	_, _, c := setup(t)
	const workers, rounds, locks = 8, 20, 2
	sub := c.Subscribe(coordinator.OfType(messages.EventAcquired, messages.EventReleased), 4*workers*rounds*locks)
	defer sub.Close()
	var wg sync.WaitGroup
	for l := range locks {
		name := fmt.Sprintf("%s:%d", t.Name(), l)
		for range workers {
			m := c.Mutex(name)
			wg.Go(func() {
				lockCycles(t, m, rounds)
			})
		}
	}
	wg.Wait()
	holder := map[string]string{}
	count := 0
	for count < 2*workers*rounds*locks {
		ev := evNext(t, sub)
		count++
		switch ev.Type {
		case messages.EventAcquired:
			if h := holder[ev.Name]; h != "" {
				t.Fatalf("%s acquired by %s while %s holds it (event %d)", ev.Name, ev.Owner, h, count)
			}
			holder[ev.Name] = ev.Owner
		case messages.EventReleased:
			if h := holder[ev.Name]; h != ev.Owner {
				t.Fatalf("%s released by %s, but the holder is %q (event %d)", ev.Name, ev.Owner, h, count)
			}
			holder[ev.Name] = ""
		}
	}
	if d := sub.Dropped(); d != 0 {
		t.Errorf("Dropped = %d, want 0", d)
	}
}

// TestEventsSlowSubscriber: a subscriber that never reads does not slow the locks down; its missed
// events are counted.
func TestEventsSlowSubscriber(t *testing.T) {
	t.Parallel()
	_, _, c := setup(t)
	blocked := c.Subscribe(nil, 1)
	defer blocked.Close()
	m := c.Mutex(t.Name())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lockCycles(t, m, 200)
	}()
	waitFor(t, done, 10*time.Second, "200 lock cycles with a blocked subscriber")
	// 400 events (acquired and released) were published for a buffer of 1.
	groupEventually(t, 2*time.Second, "the dropped count", func() bool { return blocked.Dropped() >= 399-1 })
	if len(blocked.Events()) != 1 {
		t.Errorf("buffered events = %d, want 1", len(blocked.Events()))
	}
}

// TestEventsOnEventStream: events are published on the actor system's EventStream.
func TestEventsOnEventStream(t *testing.T) {
	t.Parallel()
	_, _, c := setup(t)
	got := make(chan messages.Event, 16)
	es := c.ActorSystem().EventStream
	s := es.Subscribe(func(e any) {
		if ev, ok := e.(messages.Event); ok && ev.Name == t.Name() {
			got <- ev
		}
	})
	defer es.Unsubscribe(s)
	m := c.Mutex(t.Name())
	mustLock(t, m)
	mustUnlock(t, m)
	for _, want := range []messages.EventType{messages.EventAcquired, messages.EventReleased} {
		select {
		case ev := <-got:
			if ev.Type != want || ev.Owner != m.Owner() {
				t.Fatalf("EventStream event = %s %s, want %s %s", ev.Type, ev.Owner, want, m.Owner())
			}
		case <-time.After(time.Second):
			t.Fatalf("no %s event on the EventStream", want)
		}
	}
}

// TestEventsJournal: events appended to a Redis Stream are read back, typed, by another client, with
// XREAD and with a consumer group.
func TestEventsJournal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	stream := "lockwarden:events:" + t.Name()
	c := newCoordinator(t, srv.Client(t), coordinator.WithEventJournal(stream, 1000))
	reader := srv.Client(t)
	sub := c.Subscribe(nil, 16)
	m := c.Mutex(t.Name())
	mustLock(t, m)
	mustUnlock(t, m)
	want := []messages.Event{evNext(t, sub), evNext(t, sub)}
	sub.Close()

	var got []coordinator.JournalEntry
	after := "0"
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		entries, err := coordinator.ReadJournal(t.Context(), reader, stream, after, 10, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			got = append(got, e)
			after = e.ID
		}
	}
	if len(got) != 2 {
		t.Fatalf("journal entries = %d, want 2", len(got))
	}
	for i, e := range got {
		w := want[i]
		if e.Event.Type != w.Type || e.Event.Owner != w.Owner || e.Event.Token != w.Token || e.Event.Name != w.Name ||
			e.Event.Kind != w.Kind || !e.Event.Time.Equal(w.Time) || e.Event.Held != w.Held || e.Event.Coordinator != w.Coordinator {
			t.Errorf("journal entry %d = %+v, want %+v", i, e.Event, w)
		}
	}

	// A consumer group reads the same entries.
	if err := reader.XGroupCreate(t.Context(), stream, "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := reader.XReadGroup(t.Context(), &redis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{stream, ">"}, Count: 10}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var types []messages.EventType
	for _, msg := range res[0].Messages {
		e, err := coordinator.ParseJournalEntry(msg)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Event.Type)
	}
	if !slices.Equal(types, []messages.EventType{messages.EventAcquired, messages.EventReleased}) {
		t.Errorf("consumer group read %v, want acquired, released", types)
	}
	if _, err := coordinator.ParseJournalEntry(redis.XMessage{ID: "1-1", Values: map[string]any{"type": "bogus"}}); err == nil {
		t.Error("ParseJournalEntry of a foreign entry succeeded")
	}
	if d := c.JournalDropped(); d != 0 {
		t.Errorf("JournalDropped = %d, want 0", d)
	}
}

// TestEventsClose: Close closes the subscriptions; bad journal options are refused.
func TestEventsClose(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	sub := c.Subscribe(nil, 4)
	_ = c.Close()
	select {
	case _, ok := <-sub.Events():
		if ok {
			t.Fatal("an event after Close, want the channel closed")
		}
	case <-time.After(time.Second):
		t.Fatal("subscription not closed by Close")
	}
	sub.Close() // idempotent
	if _, ok := <-c.Subscribe(nil, 1).Events(); ok {
		t.Error("Subscribe after Close returned an open channel")
	}
	for _, opt := range []coordinator.Option{coordinator.WithEventJournal("", 10), coordinator.WithEventJournal("s", -1)} {
		if _, err := coordinator.New(client, opt); !errors.Is(err, coordinator.ErrInvalidOption) {
			t.Errorf("New with a bad journal option = %v, want ErrInvalidOption", err)
		}
	}
}

// TestEventsOnApplicationEventStream: with WithActorSystem, events reach an EventStream subscription
// the application made before the coordinator existed.
func TestEventsOnApplicationEventStream(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	system := newActorSystem(t)
	got := make(chan messages.Event, 16)
	s := system.EventStream.Subscribe(func(e any) {
		if ev, ok := e.(messages.Event); ok && ev.Name == t.Name() {
			got <- ev
		}
	})
	defer system.EventStream.Unsubscribe(s)
	c := newCoordinator(t, srv.Client(t), coordinator.WithActorSystem(system))
	m := c.Mutex(t.Name())
	mustLock(t, m)
	mustUnlock(t, m)
	for _, want := range []messages.EventType{messages.EventAcquired, messages.EventReleased} {
		select {
		case ev := <-got:
			if ev.Type != want {
				t.Fatalf("event = %s, want %s", ev.Type, want)
			}
		case <-time.After(time.Second):
			t.Fatalf("no %s event on the application's EventStream", want)
		}
	}
}

// evEveryField returns an event whose every field holds a value other than its zero value, failing the
// test for a field of a type it does not know, so that a field added to messages.Event is not left out
// of the journal round trip.
func evEveryField(t *testing.T) messages.Event {
	t.Helper()
	var ev messages.Event
	v := reflect.ValueOf(&ev).Elem()
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		switch {
		case sf.Type == reflect.TypeFor[messages.EventType]():
			f.Set(reflect.ValueOf(messages.EventHandedOff))
		case sf.Type == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Unix(1_700_000_000, 123_456_789)))
		case f.Kind() == reflect.String:
			f.SetString("v-" + sf.Name + ":{x}")
		case f.Kind() == reflect.Int64:
			f.SetInt(1_000_000_000_000 + int64(i))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("messages.Event.%s has type %s: give it a value here", sf.Name, sf.Type)
		}
	}
	return ev
}

// TestEventsJournalEveryField: every field of an event survives the journal round trip, each one set on
// its own and all together.
func TestEventsJournalEveryField(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	full := evEveryField(t)
	evs := []messages.Event{full}
	fv := reflect.ValueOf(full)
	for i := range fv.NumField() {
		// The type alone, and the type with field i.
		var ev messages.Event
		ev.Type = messages.EventAcquired
		reflect.ValueOf(&ev).Elem().Field(i).Set(fv.Field(i))
		evs = append(evs, ev)
	}
	stream := "lockwarden:events:" + t.Name()
	if err := redisops.AppendEvents(t.Context(), client, stream, 0, evs); err != nil {
		t.Fatal(err)
	}
	got, err := coordinator.ReadJournal(t.Context(), client, stream, "0", int64(len(evs)+1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(evs) {
		t.Fatalf("journal entries = %d, want %d", len(got), len(evs))
	}
	for i, e := range got {
		want := evs[i]
		gv, wv := reflect.ValueOf(e.Event), reflect.ValueOf(want)
		for j := range wv.NumField() {
			name := wv.Type().Field(j).Name
			g, w := gv.Field(j).Interface(), wv.Field(j).Interface()
			if gt, ok := g.(time.Time); ok {
				if wt := w.(time.Time); !gt.Equal(wt) {
					t.Errorf("entry %d: Time = %v, want %v", i, gt, wt)
				}
				continue
			}
			if g != w {
				t.Errorf("entry %d: %s = %v, want %v", i, name, g, w)
			}
		}
	}
}

// TestEventsJournalQueued: an acquisition after a wait reads back from the journal as queued.
func TestEventsJournalQueued(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	stream := "lockwarden:events:" + t.Name()
	c := newCoordinator(t, srv.Client(t), coordinator.WithEventJournal(stream, 1000))
	sub := c.Subscribe(coordinator.OfType(messages.EventAcquired, messages.EventWaitStarted), 16)
	defer sub.Close()
	a, b := c.Mutex(t.Name()), c.Mutex(t.Name())
	mustLock(t, a)
	evExpect(t, sub, messages.EventAcquired, a.Owner(), 1)
	errc := lockAsync(t.Context(), b)
	evExpect(t, sub, messages.EventWaitStarted, b.Owner(), 0)
	mustUnlock(t, a)
	if err := semRecv(t, errc, 2*time.Second, "b's Lock"); err != nil {
		t.Fatal(err)
	}
	if ev := evExpect(t, sub, messages.EventAcquired, b.Owner(), 1); !ev.Queued {
		t.Fatalf("b's acquired event = %+v, want Queued", ev)
	}
	deadline := time.Now().Add(2 * time.Second)
	after := "0"
	for time.Now().Before(deadline) {
		entries, err := coordinator.ReadJournal(t.Context(), srv.Client(t), stream, after, 10, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			after = e.ID
			if e.Event.Type == messages.EventAcquired && e.Event.Owner == b.Owner() {
				if !e.Event.Queued {
					t.Fatalf("journal: b's acquired event = %+v, want Queued", e.Event)
				}
				return
			}
		}
	}
	t.Fatal("b's acquired event not in the journal within 2s")
}

// TestEventsSlowEventStreamListener: a listener on the actor system's EventStream that takes 1 ms per
// event takes no event from a subscriber that keeps up nor from the journal; what the EventStream's
// listeners miss is counted (EventStreamDropped), and every event reached them or was counted.
func TestEventsSlowEventStreamListener(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	stream := "lockwarden:events:" + t.Name()
	c := newCoordinator(t, srv.Client(t), coordinator.WithEventJournal(stream, 0))
	const workers, cycles = 8, 625 // 10,000 events: an acquired and a released per cycle
	const total = 2 * workers * cycles
	prefix := t.Name() + ":"
	mine := func(ev messages.Event) bool { return len(ev.Name) > len(prefix) && ev.Name[:len(prefix)] == prefix }

	var slow atomic.Bool
	slow.Store(true)
	var onStream atomic.Uint64
	es := c.ActorSystem().EventStream
	s := es.Subscribe(func(e any) {
		if ev, ok := e.(messages.Event); ok && mine(ev) {
			onStream.Add(1)
			if slow.Load() {
				time.Sleep(time.Millisecond) // the slow listener
			}
		}
	})
	defer es.Unsubscribe(s)

	// A subscriber that keeps up: its buffer holds every event, so it never misses one of its own.
	sub := c.Subscribe(mine, total)
	defer sub.Close()
	var got atomic.Uint64
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		for range sub.Events() {
			got.Add(1)
		}
	}()

	var wg sync.WaitGroup
	for w := range workers {
		m := c.Mutex(fmt.Sprintf("%s%d", prefix, w))
		wg.Go(func() {
			lockCycles(t, m, cycles)
		})
	}
	wg.Wait()
	// The subscriber's channel is filled by the hub: wait for it to catch up, or for the events it
	// missed to be counted.
	evEventually(10*time.Second, func() bool { return got.Load()+sub.Dropped()+c.DroppedEvents() >= total })
	if n, d, hub := got.Load(), sub.Dropped(), c.DroppedEvents(); n != total || d != 0 || hub != 0 {
		t.Errorf("subscriber got %d events (Dropped %d, DroppedEvents %d), want all %d", n, d, hub, total)
	}
	evEventually(10*time.Second, func() bool {
		n, _ := srv.Client(t).XLen(t.Context(), stream).Result()
		return n+int64(c.JournalDropped()+c.DroppedEvents()) >= total
	})
	if n, _ := srv.Client(t).XLen(t.Context(), stream).Result(); n != total || c.JournalDropped() != 0 {
		t.Errorf("journal has %d entries (JournalDropped %d), want all %d", n, c.JournalDropped(), total)
	}
	slow.Store(false)
	groupEventually(t, 30*time.Second, "every event on the EventStream, delivered or counted", func() bool {
		return onStream.Load()+c.EventStreamDropped() >= total
	})
	delivered, dropped := onStream.Load(), c.EventStreamDropped()
	if delivered+dropped != total {
		t.Errorf("EventStream: %d delivered + %d dropped, want %d", delivered, dropped, total)
	}
	t.Logf("subscriber %d of %d, journal %d, EventStream %d delivered and %d dropped", got.Load(), total, total, delivered, dropped)
}

// evEventually polls cond every 10 ms until it holds or within passes, and reports whether it held.
func evEventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// TestEventsBlockedEventStreamHandlerClose: an EventStream handler that blocks does not hold up Close
// past its stop release timeout; the events still queued for the EventStream are counted as dropped.
func TestEventsBlockedEventStreamHandlerClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const stopTimeout = 200 * time.Millisecond
	c, err := coordinator.New(srv.Client(t), coordinator.WithStopReleaseTimeout(stopTimeout))
	if err != nil {
		t.Fatal(err)
	}
	unblock := make(chan struct{})
	blocked := make(chan struct{})
	var once sync.Once
	es := c.ActorSystem().EventStream
	es.Subscribe(func(e any) {
		if ev, ok := e.(messages.Event); ok && ev.Name == t.Name() {
			once.Do(func() { close(blocked) })
			<-unblock
		}
	})
	t.Cleanup(func() { close(unblock) })
	m := c.Mutex(t.Name())
	const cycles = 3 // 6 events: the handler blocks on the first
	for range cycles {
		mustLock(t, m)
		mustUnlock(t, m)
	}
	waitFor(t, blocked, 5*time.Second, "the handler blocking")
	closed := make(chan struct{})
	start := time.Now()
	go func() {
		_ = c.Close()
		close(closed)
	}()
	waitFor(t, closed, stopTimeout+2*time.Second, "Close with a blocked EventStream handler")
	t.Logf("Close took %v with a blocked EventStream handler; %d events dropped", time.Since(start), c.EventStreamDropped())
	if n := c.EventStreamDropped(); n != 2*cycles-1 {
		t.Errorf("EventStreamDropped = %d, want %d (every event after the one the handler blocks on)", n, 2*cycles-1)
	}
}
