package integration

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// TestSemaphoreWaiterBehindLeavingHead: a waiter queued behind a head that leaves tries at once, rather
// than at the next notice or poll, when the permits it wants are there.
func TestSemaphoreWaiterBehindLeavingHead(t *testing.T) {
	_, _, c := setup(t)
	name := "test:prim:hol:" + t.Name()
	ctx := t.Context()
	s := c.Semaphore(name)
	if ok, err := s.TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	sub := c.Subscribe(coordinator.ForLock(name), 0)
	defer sub.Close()
	big := make(chan error, 1)
	go func() {
		bctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		big <- c.Semaphore(name).Acquire(bctx, 3) // never satisfiable: 2 permits
	}()
	waitEvent(t, sub, messages.EventWaitStarted)
	small := make(chan error, 1)
	start := time.Now()
	go func() { small <- c.Semaphore(name).Acquire(ctx, 1) }()
	waitEvent(t, sub, messages.EventWaitStarted)
	<-big
	select {
	case err := <-small:
		if err != nil {
			t.Fatalf("small waiter: %v (after %v)", err, time.Since(start))
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("waiter for 1 of 2 available permits still waiting 3 s after the head left")
	}
}

// lostReply is a go-redis hook that runs the first call of the script sha and then reports an error (the reply is lost), then
// fails every call of it without running it until until, then lets them through.
type lostReply struct {
	sha   string
	mu    sync.Mutex
	calls int
	until time.Time
	dur   time.Duration
}

func (h *lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == h.sha {
			h.mu.Lock()
			h.calls++
			n := h.calls
			if n == 1 {
				h.until = time.Now().Add(h.dur)
			}
			until := h.until
			h.mu.Unlock()
			if n == 1 {
				_ = next(ctx, cmd)
				err := errors.New("injected: connection reset after the script ran")
				cmd.SetErr(err)
				return err
			}
			if time.Now().Before(until) {
				err := errors.New("injected: connection refused")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}
func (h *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestPermitRetryKeepsRedisExpiry: a leased permit whose acquisition reply was lost, found taken by a
// retry after its lease (counted from the first run) ran out, is not granted: it is given back and the
// wait goes on under new ids, so that no two holders share one permit.
func TestPermitRetryKeepsRedisExpiry(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	script := redisops.PermitsScripts()["permits_acquire"]
	if err := script.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &lostReply{sha: script.Hash(), dur: 1500 * time.Millisecond}
	client.AddHook(hook)
	c1 := newCoordinator(t, client)
	c2 := newCoordinator(t, srv.Client(t))
	name := "test:prim:permretry:" + t.Name()
	if ok, err := c2.PermitSemaphore(name).TrySetPermits(ctx, 1); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	p, err := c1.PermitSemaphore(name).Acquire(ctx, coordinator.Lease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	score := client.ZScore(ctx, "{"+name+"}:timeout", string(mustHex(t, p.ID()))).Val()
	if redisEnd := time.UnixMilli(int64(score)); p.Expires().After(redisEnd) {
		t.Fatalf("Expires %v is after the permit's expiry in Redis, %v", p.Expires(), redisEnd)
	}
	other, err := c2.PermitSemaphore(name).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		if other != nil && time.Now().Before(p.Expires()) {
			t.Fatalf("two holders of a 1-permit semaphore: c1's permit valid until %v (in %v), c2 got %s",
				p.Expires().Format("15:04:05.000"), time.Until(p.Expires()), other.ID())
		}
	}
}

func mustHex(t *testing.T, id string) []byte {
	t.Helper()
	b := make([]byte, 16)
	for i := range 16 {
		var v byte
		for _, ch := range id[2*i : 2*i+2] {
			v <<= 4
			switch {
			case ch >= '0' && ch <= '9':
				v |= byte(ch - '0')
			default:
				v |= byte(ch-'a') + 10
			}
		}
		b[i] = v
	}
	return b
}

// TestSemaphoreWaitRetryUnderOneID: a waiting Acquire whose attempt ran but lost its reply, then met
// 1.5 s of errors, is retried under the same request id: the retry latch answers that the first run
// took the permit, which is not taken a second time.
func TestSemaphoreWaitRetryUnderOneID(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	script := redisops.SemaphoreScripts()["sem_acquire"]
	if err := script.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &lostReply{sha: script.Hash(), dur: 1500 * time.Millisecond}
	client.AddHook(hook)
	c1 := newCoordinator(t, client)
	admin := srv.Client(t)
	name := "test:prim:semlatch:" + t.Name()
	if ok, err := c1.Semaphore(name).TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if err := c1.Semaphore(name).Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c1.Semaphore(name).Release(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if v := admin.Get(ctx, name).Val(); v != "2" {
		t.Fatalf("after one Acquire(1) and one Release(1): GET = %s, want 2 (a permit is lost)", v)
	}
}

// failOnce is a go-redis hook that fails the first call of the script sha: after running it (lost reply) when ran, else
// without running it.
type failOnce struct {
	sha  string
	ran  bool
	mu   sync.Mutex
	done bool
}

func (h *failOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == h.sha {
			h.mu.Lock()
			first := !h.done
			h.done = true
			h.mu.Unlock()
			if first {
				if h.ran {
					_ = next(ctx, cmd)
				}
				err := errors.New("injected: connection reset")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}
func (h *failOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestSemaphoreGiveBackRetried: a TryAcquire whose reply was lost is settled (its permit found taken)
// and the permit given back; the give-back that fails once is sent again.
func TestSemaphoreGiveBackRetried(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	acq, rel := redisops.SemaphoreScripts()["sem_acquire"], redisops.SemaphoreScripts()["sem_release"]
	for _, s := range []*redis.Script{acq, rel} {
		if err := s.Load(ctx, client).Err(); err != nil {
			t.Fatal(err)
		}
	}
	client.AddHook(&failOnce{sha: acq.Hash(), ran: true})
	client.AddHook(&failOnce{sha: rel.Hash(), ran: false})
	c1 := newCoordinator(t, client)
	admin := srv.Client(t)
	name := "test:prim:giveback:" + t.Name()
	if ok, err := c1.Semaphore(name).TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if ok, err := c1.Semaphore(name).TryAcquire(ctx, 1); ok || err == nil {
		t.Fatalf("TryAcquire with its reply lost = %v, %v; want an error", ok, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && admin.Get(ctx, name).Val() != "2" {
		time.Sleep(50 * time.Millisecond) // polling Redis for the give-back
	}
	if v := admin.Get(ctx, name).Val(); v != "2" {
		t.Fatalf("GET = %s 5 s after a TryAcquire that failed, want 2: its permit was never given back", v)
	}
}

// TestSemaphoreCloseSettles: Close with an unsettled take (a TryAcquire whose reply was lost) settles it
// and gives its permit back.
func TestSemaphoreCloseSettles(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	acq := redisops.SemaphoreScripts()["sem_acquire"]
	if err := acq.Load(ctx, client).Err(); err != nil {
		t.Fatal(err)
	}
	client.AddHook(&failOnce{sha: acq.Hash(), ran: true})
	c1, err := coordinator.New(client)
	if err != nil {
		t.Fatal(err)
	}
	admin := srv.Client(t)
	name := "test:prim:closeunsettled:" + t.Name()
	if ok, err := c1.Semaphore(name).TrySetPermits(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if ok, err := c1.Semaphore(name).TryAcquire(ctx, 1); ok || err == nil {
		t.Fatalf("TryAcquire with its reply lost = %v, %v; want an error", ok, err)
	}
	_ = c1.Close()
	if v := admin.Get(ctx, name).Val(); v != "2" {
		t.Fatalf("GET after Close = %s, want 2", v)
	}
}

// TestLatchDeletedLetsAwaitersIn: a deleted latch has the count 0: its awaiters, which Delete's notice
// does not wake, return at their next reading of the count (at the latest the poll, a third of the
// watchdog timeout).
func TestLatchDeletedLetsAwaitersIn(t *testing.T) {
	_, _, c := setup(t, coordinator.WithWatchdogTimeout(300*time.Millisecond))
	name := "test:prim:latchdel:" + t.Name()
	ctx := t.Context()
	l := c.CountDownLatch(name)
	if ok, err := l.TrySetCount(ctx, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	sub := c.Subscribe(coordinator.ForLock(name), 0)
	defer sub.Close()
	got := make(chan error, 1)
	go func() { got <- c.CountDownLatch(name).Await(ctx) }()
	waitEvent(t, sub, messages.EventWaitStarted)
	if ok, err := l.Delete(ctx); !ok || err != nil {
		t.Fatal(ok, err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Await of a deleted latch did not return by the poll (100 ms)")
	}
}

// TestSemaphoreHandoffWithLeavingWaiters: 32 goroutines whose Acquire gives up after 50-350 µs, local
// handoffs among them: waiters that leave while a release hands them permits give them back, and all 4
// permits are there at the end.
func TestSemaphoreHandoffWithLeavingWaiters(t *testing.T) {
	srv, client, c := setup(t)
	_ = srv
	name := "test:prim:hostress:" + t.Name()
	ctx := t.Context()
	s := c.Semaphore(name)
	if ok, err := s.TrySetPermits(ctx, 4); !ok || err != nil {
		t.Fatal(ok, err)
	}
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := 0
			for time.Now().Before(stop) {
				i++
				n := int64(1 + (w+i)%2)
				wctx, cancel := context.WithTimeout(ctx, time.Duration((w*7+i)%300)*time.Microsecond+50*time.Microsecond)
				err := c.Semaphore(name).Acquire(wctx, n)
				cancel()
				if err == nil {
					if err := c.Semaphore(name).Release(ctx, n); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && client.Get(ctx, name).Val() != "4" {
		time.Sleep(20 * time.Millisecond) // polling Redis for the give-backs
	}
	if v := client.Get(ctx, name).Val(); v != "4" {
		t.Fatalf("GET = %s at the end, want 4", v)
	}
}

// TestPrimitivesCloseLeavesNoGoroutines: Close with a watchdog permit held and waiters of all three kinds
// releases the permit, answers the waiters and leaves no goroutine behind.
func TestPrimitivesCloseLeavesNoGoroutines(t *testing.T) {
	srv := redistest.Start(t)
	ignore := goleak.IgnoreCurrent()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	c, err := coordinator.New(client, coordinator.WithWatchdogTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := "test:prim:leak:" + t.Name()
	ps := c.PermitSemaphore(name)
	ps.TrySetPermits(ctx, 1)
	if _, err := ps.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	s := c.Semaphore(name + "s")
	s.TrySetPermits(ctx, 1)
	s.Acquire(ctx, 1)
	l := c.CountDownLatch(name + "l")
	l.TrySetCount(ctx, 1)
	sub := c.Subscribe(coordinator.OfType(messages.EventWaitStarted), 0)
	errs := make(chan error, 3)
	go func() { _, err := ps.Acquire(ctx); errs <- err }()
	go func() { errs <- s.Acquire(ctx, 1) }()
	go func() { errs <- l.Await(ctx) }()
	for range 3 {
		waitEvent(t, sub, messages.EventWaitStarted)
	}
	_ = c.Close()
	for range 3 {
		<-errs
	}
	_ = client.Close()
	if v := srv.Client(t).ZCard(ctx, "{"+name+"}:timeout").Val(); v != 0 {
		t.Errorf("ZCARD after Close = %d", v)
	}
	goleak.VerifyNone(t, ignore)
}

// TestPermitReleaseUpperCaseID: a permit released by its id in upper-case hexadecimal ends its local
// hold too (Done closes).
func TestPermitReleaseUpperCaseID(t *testing.T) {
	_, _, c := setup(t)
	ctx := t.Context()
	name := "test:prim:upper:" + t.Name()
	ps := c.PermitSemaphore(name)
	ps.TrySetPermits(ctx, 1)
	p, err := ps.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Release(ctx, strings.ToUpper(p.ID())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(time.Second):
		t.Fatalf("Done still open 1 s after a successful Release of %s", strings.ToUpper(p.ID()))
	}
}
