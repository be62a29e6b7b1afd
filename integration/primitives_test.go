package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// TestSemaphoreExcludesBeyondPermits runs 24 workers on two coordinators against a 3-permit semaphore:
// never more than 3 inside at once, every worker gets in, and every permit is back at the end.
func TestSemaphoreExcludesBeyondPermits(t *testing.T) {
	srv, client, c1 := setup(t)
	c2 := newCoordinator(t, srv.Client(t))
	name := "test:sem:excludes:" + t.Name()
	ctx := t.Context()
	if ok, err := c1.Semaphore(name).TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	var inside, most, done atomic.Int64
	var wg sync.WaitGroup
	for w := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := c1
			if w%2 == 1 {
				c = c2
			}
			s := c.Semaphore(name)
			for range 5 {
				if err := s.Acquire(ctx, 1); err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inside.Add(-1)
				if err := s.Release(ctx, 1); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if most.Load() > 3 {
		t.Fatalf("%d workers inside at once, want at most 3", most.Load())
	}
	if done.Load() != 24*5 {
		t.Fatalf("%d acquisitions, want %d", done.Load(), 24*5)
	}
	if v, err := client.Get(ctx, name).Result(); err != nil || v != "3" {
		t.Fatalf("GET %s = %q, %v; want 3", name, v, err)
	}
}

// TestSemaphoreWaiterWokenByNotice: a waiter is woken by the release's notice, published by Redis on
// redisson_sc:{name}, well before the actor's poll (a third of the 30 s watchdog timeout).
func TestSemaphoreWaiterWokenByNotice(t *testing.T) {
	srv, _, c1 := setup(t)
	c2 := newCoordinator(t, srv.Client(t))
	name := "test:sem:notice:" + t.Name()
	ctx := t.Context()
	if ok, err := c1.Semaphore(name).TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	holder := c1.Semaphore(name)
	if err := holder.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	sub := c2.Subscribe(coordinator.ForLock(name), 0)
	defer sub.Close()
	got := make(chan error, 1)
	go func() { got <- c2.Semaphore(name).Acquire(ctx, 1) }()
	waitEvent(t, sub, messages.EventWaitStarted)
	released := time.Now()
	if err := holder.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if d := time.Since(released); d > 2*time.Second {
			t.Fatalf("waiter woke %v after the release, want well under the 10 s poll", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release")
	}
}

// waitEvent waits until sub delivers an event of type typ.
func waitEvent(t *testing.T, sub *coordinator.Subscription, typ messages.EventType) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-sub.Events():
			if ev.Type == typ {
				return
			}
		case <-deadline:
			t.Fatalf("no %v event", typ)
		}
	}
}

// TestSemaphoreAbandonedWaitLeaksNothing: callers that give up while they wait leave every permit in
// place, even when a release lets them in at the moment they leave.
func TestSemaphoreAbandonedWaitLeaksNothing(t *testing.T) {
	_, client, c := setup(t)
	name := "test:sem:abandon:" + t.Name()
	ctx := t.Context()
	s := c.Semaphore(name)
	if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if err := s.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, time.Duration(1+i%5)*time.Millisecond)
			defer cancel()
			err := c.Semaphore(name).Acquire(wctx, 1)
			if err == nil {
				if err := c.Semaphore(name).Release(ctx, 1); err != nil {
					t.Errorf("Release: %v", err)
				}
				return
			}
			if !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Acquire = %v, want ErrNotObtained and DeadlineExceeded", err)
			}
		}()
	}
	if err := s.Release(ctx, 2); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// The actor gives back a grant whose caller left before it answers the next command: this
	// command's answer comes after every give-back.
	if n, err := s.AvailablePermits(ctx); err != nil || n != 2 {
		t.Fatalf("AvailablePermits = %d, %v; want 2 (GET %v)", n, err, client.Get(ctx, name).Val())
	}
}

// TestSemaphoreOperations checks each operation's effect on the key, and TryAcquire's wait.
func TestSemaphoreOperations(t *testing.T) {
	_, client, c := setup(t)
	name := "test:sem:ops:" + t.Name()
	ctx := t.Context()
	s := c.Semaphore(name)
	if ok, err := s.TryAcquire(ctx, 1); ok || err != nil {
		t.Fatalf("TryAcquire on an unset semaphore = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.TrySetPermits(ctx, 5); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if ok, err := s.TrySetPermits(ctx, 7); ok || err != nil {
		t.Fatalf("second TrySetPermits = %v, %v; want false", ok, err)
	}
	if ok, err := s.TryAcquire(ctx, 4); !ok || err != nil {
		t.Fatalf("TryAcquire(4) = %v, %v", ok, err)
	}
	start := time.Now()
	if ok, err := s.TryAcquire(ctx, 2, coordinator.Wait(50*time.Millisecond)); ok || err != nil {
		t.Fatalf("TryAcquire(2, Wait) = %v, %v; want false, nil", ok, err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("TryAcquire with Wait returned after %v, before its wait", d)
	}
	if err := s.AddPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := s.AvailablePermits(ctx); n != 4 || err != nil {
		t.Fatalf("AvailablePermits = %d, %v; want 4", n, err)
	}
	if n, err := s.DrainPermits(ctx); n != 4 || err != nil {
		t.Fatalf("DrainPermits = %d, %v; want 4", n, err)
	}
	if v := client.Get(ctx, name).Val(); v != "0" {
		t.Fatalf("GET after drain = %q, want 0", v)
	}
	if err := s.Release(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if v := client.Get(ctx, name).Val(); v != "4" {
		t.Fatalf("GET after release = %q, want 4", v)
	}
}

// TestPrimitivesBadInput: each bad input gets its sentinel error and leaves Redis as it was.
func TestPrimitivesBadInput(t *testing.T) {
	_, client, c := setup(t)
	name := "test:prim:bad:" + t.Name()
	ctx := t.Context()
	if err := client.Set(ctx, name, "5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s, ps, l := c.Semaphore(name), c.PermitSemaphore(name), c.CountDownLatch(name)
	checks := []struct {
		what string
		err  error
		want error
	}{
		{"Semaphore.Acquire(0)", s.Acquire(ctx, 0), coordinator.ErrInvalidPermits},
		{"Semaphore.Acquire(-1)", s.Acquire(ctx, -1), coordinator.ErrInvalidPermits},
		{"Semaphore.Release(0)", s.Release(ctx, 0), coordinator.ErrInvalidPermits},
		{"Semaphore.AddPermits(0)", s.AddPermits(ctx, 0), coordinator.ErrInvalidPermits},
		{"Semaphore.TryAcquire(Lease)", second(s.TryAcquire(ctx, 1, coordinator.Lease(time.Second))), coordinator.ErrInvalidOption},
		{"Semaphore.TrySetPermits(0)", second(s.TrySetPermits(ctx, 0)), coordinator.ErrInvalidPermits},
		{"PermitSemaphore.AcquireMany(0)", second(ps.AcquireMany(ctx, 0)), coordinator.ErrInvalidPermits},
		{"PermitSemaphore.Acquire(Wait)", second(ps.Acquire(ctx, coordinator.Wait(time.Second))), coordinator.ErrInvalidOption},
		{"PermitSemaphore.Release(bad id)", ps.Release(ctx, "not-an-id"), coordinator.ErrInvalidPermitID},
		{"PermitSemaphore.Release(unknown id)", ps.Release(ctx, strings.Repeat("ab", 16)), coordinator.ErrNotHeld},
		{"CountDownLatch.TrySetCount(0)", second(l.TrySetCount(ctx, 0)), coordinator.ErrInvalidCount},
		{"CountDownLatch.TrySetCount(-3)", second(l.TrySetCount(ctx, -3)), coordinator.ErrInvalidCount},
		{"empty name", c.Semaphore("").Acquire(ctx, 1), coordinator.ErrEmptyName},
		{"empty name latch", c.CountDownLatch("").Await(ctx), coordinator.ErrEmptyName},
	}
	for _, ch := range checks {
		if !errors.Is(ch.err, ch.want) {
			t.Errorf("%s = %v, want %v", ch.what, ch.err, ch.want)
		}
	}
	if v := client.Get(ctx, name).Val(); v != "5" {
		t.Fatalf("GET after bad input = %q, want 5 unchanged", v)
	}
	// A name that holds another type of data (here a lock's hash) is refused and left alone.
	lockName := name + ":lock"
	m := c.Mutex(lockName)
	mustLock(t, m)
	if err := c.Semaphore(lockName).Release(ctx, 1); !errors.Is(err, coordinator.ErrWrongType) {
		t.Fatalf("Release on a lock's name = %v, want ErrWrongType", err)
	}
	if ok, err := c.CountDownLatch(lockName).TrySetCount(ctx, 1); ok || !errors.Is(err, coordinator.ErrWrongType) {
		t.Fatalf("TrySetCount on a lock's name = %v, %v; want ErrWrongType", ok, err)
	}
	if n := holdCount(t, m); n != 1 {
		t.Fatalf("the lock's hold count = %d after the refused calls, want 1", n)
	}
	// Use after Close.
	c.Close()
	if err := s.Release(ctx, 1); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Release after Close = %v, want ErrClosed", err)
	}
	if _, err := ps.TryAcquire(ctx); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("TryAcquire after Close = %v, want ErrClosed", err)
	}
	if err := l.Await(ctx); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Await after Close = %v, want ErrClosed", err)
	}
}

// second returns the error of a two-value call.
func second[T any](_ T, err error) error { return err }

// TestPermitSemaphoreWatchdogRenews: a permit taken without a lease outlives several watchdog timeouts
// while the coordinator lives, and its release gives it back.
func TestPermitSemaphoreWatchdogRenews(t *testing.T) {
	_, client, c := setup(t, coordinator.WithWatchdogTimeout(300*time.Millisecond))
	name := "test:permits:watchdog:" + t.Name()
	ctx := t.Context()
	s := c.PermitSemaphore(name)
	if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	sub := c.Subscribe(coordinator.ForLock(name), 0)
	defer sub.Close()
	p, err := s.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs := sub.Events()
	renewals := 0
	deadline := time.After(5 * time.Second)
	for renewals < 6 { // two watchdog timeouts' worth of renewals
		select {
		case ev := <-evs:
			if ev.Type == messages.EventRenewed {
				renewals++
			}
			if ev.Type == messages.EventLost {
				t.Fatalf("permit lost: %s", ev.Reason)
			}
		case <-deadline:
			t.Fatalf("%d renewals in 5 s, want 6", renewals)
		}
	}
	if n, err := s.AvailablePermits(ctx); n != 0 || err != nil {
		t.Fatalf("AvailablePermits while held = %d, %v; want 0", n, err)
	}
	if other, err := c.PermitSemaphore(name).TryAcquire(ctx); other != nil || err != nil {
		t.Fatalf("TryAcquire while held = %v, %v; want none", other, err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p.Done(), time.Second, "Done after Release")
	if err := p.Release(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	if v := client.Get(ctx, name).Val(); v != "1" {
		t.Fatalf("GET after release = %q, want 1", v)
	}
	if n := client.ZCard(ctx, "{"+name+"}:timeout").Val(); n != 0 {
		t.Fatalf("ZCARD of the permits = %d, want 0", n)
	}
}

// TestPermitSemaphoreLeaseRunsOut: a permit with a lease is not renewed: its Done closes when the
// lease runs out, and a waiter gets the permit then, woken by its expiry, not by a notice.
func TestPermitSemaphoreLeaseRunsOut(t *testing.T) {
	srv, _, c1 := setup(t)
	c2 := newCoordinator(t, srv.Client(t))
	name := "test:permits:lease:" + t.Name()
	ctx := t.Context()
	if ok, err := c1.PermitSemaphore(name).TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	p, err := c1.PermitSemaphore(name).Acquire(ctx, coordinator.Lease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if p.Expires().IsZero() {
		t.Fatal("a leased permit has no expiry")
	}
	start := time.Now()
	got, err := c2.PermitSemaphore(name).TryAcquire(ctx, coordinator.Wait(5*time.Second))
	if err != nil || got == nil {
		t.Fatalf("waiter: %v, %v", got, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("waiter got the permit after %v, want about the 300 ms lease", d)
	}
	waitFor(t, p.Done(), time.Second, "Done of the expired permit")
	if err := p.Release(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Release of the expired permit = %v, want ErrNotHeld", err)
	}
	if err := got.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPermitSemaphoreKilledHolder: a process that holds a watchdog permit is killed (SIGKILL); its
// permit comes back within about one watchdog timeout, and a waiter in this process gets it.
func TestPermitSemaphoreKilledHolder(t *testing.T) {
	srv, _, c := setup(t)
	name := "test:permits:killed:" + t.Name()
	ctx := t.Context()
	if ok, err := c.PermitSemaphore(name).TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	const watchdog = time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^TestPermitHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOCKWARDEN_PERMIT_CHILD="+srv.Addr()+"|"+name+"|"+watchdog.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	held := make(chan struct{})
	go func() {
		buf := make([]byte, 256)
		var seen strings.Builder
		for {
			n, err := out.Read(buf)
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), "HELD") {
				close(held)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	waitFor(t, held, 20*time.Second, "the child holding the permit")
	// The child renews its permit: it is still taken after three watchdog timeouts' worth of waiting.
	if p, err := c.PermitSemaphore(name).TryAcquire(ctx, coordinator.Wait(3*watchdog)); p != nil || err != nil {
		t.Fatalf("TryAcquire while the child lives = %v, %v; want none", p, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	p, err := c.PermitSemaphore(name).TryAcquire(ctx, coordinator.Wait(10*watchdog))
	if err != nil || p == nil {
		t.Fatalf("TryAcquire after the kill = %v, %v", p, err)
	}
	if d := time.Since(killed); d > 2*watchdog {
		t.Fatalf("the permit came back %v after the kill, want within about one watchdog timeout (%v)", d, watchdog)
	}
}

// TestPermitHolderChild is the child process of TestPermitSemaphoreKilledHolder: it takes a watchdog
// permit and holds it until it is killed.
func TestPermitHolderChild(t *testing.T) {
	spec := os.Getenv("LOCKWARDEN_PERMIT_CHILD")
	if spec == "" {
		t.Skip("the child process of TestPermitSemaphoreKilledHolder")
	}
	parts := strings.Split(spec, "|")
	watchdog, err := time.ParseDuration(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: parts[0]})
	defer client.Close()
	c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	if _, err := c.PermitSemaphore(parts[1]).Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("HELD")
	select {} // until killed
}

// TestLatchAwaitWokenByZero: awaiters in two coordinators are woken when the count reaches zero, by
// count-downs from both.
func TestLatchAwaitWokenByZero(t *testing.T) {
	srv, client, c1 := setup(t)
	c2 := newCoordinator(t, srv.Client(t))
	name := "test:latch:zero:" + t.Name()
	ctx := t.Context()
	l := c1.CountDownLatch(name)
	if ok, err := l.TrySetCount(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	if ok, err := l.TrySetCount(ctx, 5); ok || err != nil {
		t.Fatalf("second TrySetCount = %v, %v; want false", ok, err)
	}
	done := make(chan error, 4)
	for i := range 4 {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		go func() { done <- c.CountDownLatch(name).Await(ctx) }()
	}
	if ok, err := c2.CountDownLatch(name).TryAwait(ctx, coordinator.Wait(50*time.Millisecond)); ok || err != nil {
		t.Fatalf("TryAwait before zero = %v, %v; want false", ok, err)
	}
	for i := range 3 {
		c := c1
		if i == 1 {
			c = c2
		}
		if err := c.CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Await: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an awaiter was not woken by the zero")
		}
	}
	if n, err := client.Exists(ctx, name).Result(); n != 0 || err != nil {
		t.Fatalf("EXISTS after zero = %d, %v; want the key deleted", n, err)
	}
	if n, err := l.Count(ctx); n != 0 || err != nil {
		t.Fatalf("Count = %d, %v", n, err)
	}
	if ok, err := l.TryAwait(ctx); !ok || err != nil {
		t.Fatalf("TryAwait at zero = %v, %v", ok, err)
	}
}

// TestLatchZeroRacesSubscription: the last count-down races the awaiter's subscription, a hundred
// times, on fresh latches: no awaiter misses the zero (it reads the count once subscribed).
func TestLatchZeroRacesSubscription(t *testing.T) {
	srv, _, c1 := setup(t)
	c2 := newCoordinator(t, srv.Client(t))
	ctx := t.Context()
	for i := range 100 {
		name := fmt.Sprintf("test:latch:race:%s:%d", t.Name(), i)
		if ok, err := c1.CountDownLatch(name).TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatalf("TrySetCount = %v, %v", ok, err)
		}
		done := make(chan error, 1)
		go func() { done <- c2.CountDownLatch(name).Await(ctx) }()
		if err := c1.CountDownLatch(name).CountDown(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Await: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the awaiter missed the zero", i)
		}
	}
}

// TestPrimitiveMessages drives a semaphore, a permit semaphore and a latch through the actor message
// API, and checks bad messages get their sentinel errors.
func TestPrimitiveMessages(t *testing.T) {
	_, client, c := setup(t)
	name := "test:prim:msgs:" + t.Name()
	root := c.ActorSystem().Root
	ask := func(m *messages.Primitive) any {
		t.Helper()
		r, err := root.RequestFuture(c.PID(), m, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("RequestFuture(%+v): %v", m, err)
		}
		return r
	}
	ok := func(m *messages.Primitive) *messages.PrimitiveReply {
		t.Helper()
		r, isReply := ask(m).(*messages.PrimitiveReply)
		if !isReply {
			t.Fatalf("%+v: reply %v, want a PrimitiveReply", m, ask(m))
		}
		return r
	}
	sem := name + ":sem"
	if r := ok(&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpTrySet, N: 2}); !r.OK {
		t.Fatal("TrySet: not set")
	}
	if r := ok(&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpAcquire, N: 2}); !r.OK {
		t.Fatal("Acquire(2): not taken")
	}
	if r := ok(&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpAcquire, N: 1, Wait: 20 * time.Millisecond}); r.OK {
		t.Fatal("Acquire(1) with no permit left: taken")
	}
	ok(&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpRelease, N: 2})
	if r := ok(&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpAvailable}); r.Value != 2 {
		t.Fatalf("Available = %d, want 2", r.Value)
	}

	ps := name + ":permits"
	ok(&messages.Primitive{Name: ps, Kind: messages.KindPermitSemaphore, Op: messages.OpTrySet, N: 1})
	r := ok(&messages.Primitive{Name: ps, Kind: messages.KindPermitSemaphore, Op: messages.OpAcquire, N: 1, Wait: messages.WaitForever})
	if !r.OK || len(r.PermitIDs) != 1 {
		t.Fatalf("permit Acquire = %+v", r)
	}
	if n := client.ZCard(t.Context(), "{"+ps+"}:timeout").Val(); n != 1 {
		t.Fatalf("ZCARD = %d, want 1", n)
	}
	ok(&messages.Primitive{Name: ps, Kind: messages.KindPermitSemaphore, Op: messages.OpRelease, ID: r.PermitIDs[0]})
	if n := client.ZCard(t.Context(), "{"+ps+"}:timeout").Val(); n != 0 {
		t.Fatalf("ZCARD after release = %d, want 0", n)
	}

	latch := name + ":latch"
	ok(&messages.Primitive{Name: latch, Kind: messages.KindLatch, Op: messages.OpTrySet, N: 1})
	awaited := make(chan any, 1)
	go func() {
		r, _ := root.RequestFuture(c.PID(), &messages.Primitive{Name: latch, Kind: messages.KindLatch, Op: messages.OpAwait, Wait: messages.WaitForever}, 10*time.Second).Result()
		awaited <- r
	}()
	ok(&messages.Primitive{Name: latch, Kind: messages.KindLatch, Op: messages.OpCountDown})
	select {
	case r := <-awaited:
		if rep, isReply := r.(*messages.PrimitiveReply); !isReply || !rep.OK {
			t.Fatalf("Await reply %#v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Await not answered")
	}

	for _, bad := range []struct {
		m    *messages.Primitive
		want error
	}{
		{&messages.Primitive{Kind: messages.KindSemaphore, Op: messages.OpAvailable}, coordinator.ErrEmptyName},
		{&messages.Primitive{Name: sem, Kind: messages.KindPlain, Op: messages.OpAvailable}, coordinator.ErrInvalidKind},
		{&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpCountDown}, coordinator.ErrInvalidMessage},
		{&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpAcquire, N: 0}, coordinator.ErrInvalidPermits},
		{&messages.Primitive{Name: sem, Kind: messages.KindSemaphore, Op: messages.OpAcquire, N: 1, Wait: -1}, coordinator.ErrInvalidWait},
		{&messages.Primitive{Name: ps, Kind: messages.KindPermitSemaphore, Op: messages.OpRelease, ID: "zz"}, coordinator.ErrInvalidPermitID},
		{&messages.Primitive{Name: latch, Kind: messages.KindLatch, Op: messages.OpTrySet, N: -1}, coordinator.ErrInvalidCount},
	} {
		e, isErr := ask(bad.m).(*messages.Error)
		if !isErr || !errors.Is(e, bad.want) {
			t.Errorf("%+v: reply %#v, want an Error matching %v", bad.m, e, bad.want)
		}
	}
}

// scriptCalls is a go-redis hook that counts the calls of the script with the SHA1 sha; with release
// set, it also holds each of them up until release is closed, and closes entered when the first one
// arrives.
type scriptCalls struct {
	sha              string
	n                atomic.Int64
	entered, release chan struct{}
	once             sync.Once
}

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) see(cmds ...redis.Cmder) {
	for _, cmd := range cmds {
		if args := cmd.Args(); len(args) > 1 && args[1] == h.sha {
			h.n.Add(1)
			if h.release != nil {
				h.once.Do(func() { close(h.entered) })
				<-h.release
			}
		}
	}
}

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(cmd)
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.see(cmds...)
		return next(ctx, cmds)
	}
}

// TestSemaphoreLocalHandoff: a release whose permits a waiter of the same coordinator takes goes to
// that waiter with no Redis call; after MaxHandoffs handoffs in a row the release goes to Redis, and a
// waiter of another coordinator gets its chance (with no bound, c1's goroutines pass the permit among
// themselves hundreds of times first).
func TestSemaphoreLocalHandoff(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	releases := &scriptCalls{sha: redisops.SemaphoreScripts()["sem_release"].Hash()}
	client.AddHook(releases)
	c1 := newCoordinator(t, client, coordinator.WithMaxHandoffs(3))
	c2 := newCoordinator(t, srv.Client(t))
	name := "test:sem:handoff:" + t.Name()
	ctx := t.Context()
	s := c1.Semaphore(name)
	if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	sub := c1.Subscribe(coordinator.ForLock(name), 0)
	defer sub.Close()
	local := make(chan error, 1)
	go func() { local <- c1.Semaphore(name).Acquire(ctx, 1) }()
	waitEvent(t, sub, messages.EventWaitStarted)
	if err := s.Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-local; err != nil {
		t.Fatal(err)
	}
	if n := releases.n.Load(); n != 0 {
		t.Fatalf("%d release scripts run for a release handed to a local waiter, want 0", n)
	}
	if v := client.Get(ctx, name).Val(); v != "0" {
		t.Fatalf("GET = %q while the permit is held, want 0", v)
	}

	// c1's goroutines keep passing the permit among themselves; c2's waiter must get it after at most
	// three handoffs in a row.
	remote := make(chan error, 1)
	sub2 := c2.Subscribe(coordinator.ForLock(name), 0)
	defer sub2.Close()
	go func() { remote <- c2.Semaphore(name).Acquire(ctx, 1) }()
	waitEvent(t, sub2, messages.EventWaitStarted)
	// c1's goroutines all wait before the permit is released: with no bound, they would pass it
	// among themselves for ever.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var handoffs atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := c1.Semaphore(name).Acquire(wctx, 1)
				cancel()
				if err != nil {
					continue
				}
				handoffs.Add(1)
				if err := c1.Semaphore(name).Release(ctx, 1); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	for range 4 {
		waitEvent(t, sub, messages.EventWaitStarted)
	}
	if err := c1.Semaphore(name).Release(ctx, 1); err != nil { // the permit the first waiter took
		t.Fatal(err)
	}
	select {
	case err := <-remote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the other coordinator's waiter did not get the permit (%d acquisitions in c1)", handoffs.Load())
	}
	// After 3 handoffs the permit goes back to Redis, and the waiters of both coordinators race for
	// it on its notice: c1 may win a few races in a row, not dozens.
	if n := handoffs.Load(); n > 60 {
		t.Fatalf("c1 took the permit %d times before c2 got in, want a handful of rounds of 3 handoffs", n)
	}
	close(stop)
	if err := c2.Semaphore(name).Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if v := client.Get(ctx, name).Val(); v != "1" {
		t.Fatalf("GET = %q at the end, want 1", v)
	}
}

// TestPrimitiveCallDoesNotHoldUpRouting: a semaphore's Redis call that takes long, made on the
// caller's goroutine (a ctx that never ends), holds up no other lock of the coordinator: a Mutex on
// another name locks and unlocks meanwhile.
func TestPrimitiveCallDoesNotHoldUpRouting(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	block := &scriptCalls{sha: redisops.SemaphoreScripts()["sem_acquire"].Hash(),
		entered: make(chan struct{}), release: make(chan struct{})}
	client.AddHook(block)
	c := newCoordinator(t, client)
	name := "test:prim:routing:" + t.Name()
	ctx := t.Context()
	s := c.Semaphore(name)
	if ok, err := s.TrySetPermits(context.Background(), 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	for range 3 { // the actor is up and idle: the next command runs on its caller's goroutine
		if _, err := s.AvailablePermits(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	acquired := make(chan error, 1)
	go func() { acquired <- s.Acquire(context.Background(), 1) }()
	waitFor(t, block.entered, 5*time.Second, "the semaphore's acquire call")
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m := c.Mutex(name + ":lock")
	if err := m.Lock(lctx); err != nil {
		close(block.release)
		t.Fatalf("Lock while a semaphore call is held up: %v", err)
	}
	if err := m.Unlock(lctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	close(block.release)
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
}

// TestPrimitiveEventsNameTheHandle: a semaphore's acquired and a latch's wait events name the handle's
// owner id, as a Mutex's do.
func TestPrimitiveEventsNameTheHandle(t *testing.T) {
	_, _, c := setup(t)
	name := "test:prim:owner:" + t.Name()
	ctx := t.Context()
	sub := c.Subscribe(coordinator.OfType(messages.EventAcquired, messages.EventWaitStarted), 0)
	defer sub.Close()
	s, l := c.Semaphore(name+":sem"), c.CountDownLatch(name+":latch")
	if s.Owner() == "" || s.Owner() == l.Owner() {
		t.Fatalf("owners %q and %q: want two distinct ids", s.Owner(), l.Owner())
	}
	if ok, err := s.TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if err := s.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	if ok, err := l.TryAwait(ctx, coordinator.Wait(20*time.Millisecond)); ok || err != nil {
		t.Fatalf("TryAwait = %v, %v", ok, err)
	}
	seen := map[string]string{}
	deadline := time.After(5 * time.Second)
	for len(seen) < 2 {
		select {
		case ev := <-sub.Events():
			seen[ev.Name] = ev.Owner
		case <-deadline:
			t.Fatalf("events seen: %v", seen)
		}
	}
	if seen[name+":sem"] != s.Owner() || seen[name+":latch"] != l.Owner() {
		t.Fatalf("event owners %v, want the handles' %q and %q", seen, s.Owner(), l.Owner())
	}
}
