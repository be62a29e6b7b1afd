package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// TestCloseBoundedDuringPartition: Close on a coordinator whose Redis connection is blackholed returns
// within about WithStopReleaseTimeout, as its documentation says, however much it has to give back: held
// plain, fair and read-write locks, waiters (so pub/sub channels), a MultiLock and an event journal. All
// the stop-time work shares one deadline, rather than each stage (groups, lock actors, pub/sub, journal)
// spending its own. The client honours context deadlines (ContextTimeoutEnabled); without it a call
// blocked in a read is bounded by the client's ReadTimeout instead, which the second case keeps short.
func TestCloseBoundedDuringPartition(t *testing.T) {
	const stopRelease = 500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		options func(addr string) *redis.Options
		// extra is what the client's own timeouts may add to the bound.
		extra time.Duration
	}{
		{"context timeouts", func(addr string) *redis.Options {
			return &redis.Options{Addr: addr, ContextTimeoutEnabled: true,
				ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
		}, 0},
		{"read timeout", func(addr string) *redis.Options {
			return &redis.Options{Addr: addr, ReadTimeout: 300 * time.Millisecond,
				WriteTimeout: 300 * time.Millisecond, MaxRetries: -1}
		}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			srv := redistest.Start(t)
			px := redistest.NewProxy(t, srv.Addr())
			client := redis.NewClient(tc.options(px.Addr()))
			t.Cleanup(func() { _ = client.Close() })
			t.Cleanup(func() { px.Unstall(); px.Enable() })
			defer px.Unstall() // lets a call still blocked in the proxy finish before the cleanups
			c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(5*time.Second),
				coordinator.WithStopReleaseTimeout(stopRelease),
				coordinator.WithEventJournal(t.Name()+":journal", 0))
			name := t.Name()

			var dones []<-chan struct{}
			var waits []<-chan error
			for i := range 4 {
				plain := c.Mutex(name + ":plain:" + string(rune('a'+i)))
				mustLock(t, plain)
				dones = append(dones, plain.Done())
				waits = append(waits, lockAsync(ctx, c.Mutex(plain.Name())))
				fair := c.FairMutex(name + ":fair:" + string(rune('a'+i)))
				mustLock(t, fair)
				dones = append(dones, fair.Done())
				waits = append(waits, lockAsync(ctx, c.FairMutex(fair.Name())))
				rw := c.RWMutex(name + ":rw:" + string(rune('a'+i)))
				if err := rw.RLock(ctx); err != nil {
					t.Fatalf("RLock: %v", err)
				}
				dones = append(dones, rw.Read().Done())
			}
			group := c.MultiLock([]*coordinator.Mutex{c.Mutex(name + ":m1"), c.Mutex(name + ":m2")})
			if err := group.Lock(ctx); err != nil {
				t.Fatalf("MultiLock: %v", err)
			}
			dones = append(dones, group.Done())
			for i := range 4 {
				faultWaitSubscribed(t, srv.Client(t), name+":plain:"+string(rune('a'+i)), 1)
			}

			px.Stall()
			start := time.Now()
			closed := make(chan struct{})
			go func() { _ = c.Close(); close(closed) }()
			bound := stopRelease + tc.extra + 500*time.Millisecond
			select {
			case <-closed:
			case <-time.After(bound + 10*time.Second):
				t.Fatalf("Close during a partition has not returned after %v, want about %v", time.Since(start), bound)
			}
			took := time.Since(start)
			t.Logf("Close took %v (stop release timeout %v)", took, stopRelease)
			if took > bound {
				t.Errorf("Close during a partition took %v, want at most %v (stop release timeout %v + client timeouts %v + margin)",
					took, bound, stopRelease, tc.extra)
			}
			for i, d := range dones {
				waitFor(t, d, time.Second, "Done of hold "+string(rune('0'+i))+" closing at Close")
			}
			for _, w := range waits {
				select {
				case <-w:
				case <-time.After(time.Second):
					t.Fatal("a waiter's Lock did not return at Close")
				}
			}
		})
	}
}

// sentHook reports, once armed, the first command or pipeline the client sends.
type sentHook struct {
	armed atomic.Bool
	sent  chan struct{}
	once  sync.Once
}

func (h *sentHook) note() {
	if h.armed.Load() {
		h.once.Do(func() { close(h.sent) })
	}
}

func (h *sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note()
		return next(ctx, cmd)
	}
}

func (h *sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.note()
		return next(ctx, cmds)
	}
}

// stalledSetup is the set-up of the tests of a call in flight at Close: a coordinator, with the stop
// release timeout closeStopRelease, on a client that honours context deadlines and whose read timeout
// is long (10 s), through a proxy to srv, and a hook on the client.
type stalledSetup struct {
	srv  *redistest.Server
	px   *redistest.Proxy
	hook *sentHook
	c    *coordinator.Coordinator
}

// closeStopRelease is the stop release timeout of stalledSetup's coordinator.
const closeStopRelease = 500 * time.Millisecond

func newStalledSetup(t *testing.T) *stalledSetup {
	t.Helper()
	srv := redistest.Start(t)
	px := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: true,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxRetries: -1})
	hook := &sentHook{sent: make(chan struct{})}
	client.AddHook(hook)
	t.Cleanup(func() { _ = client.Close() })
	t.Cleanup(func() { px.Unstall(); px.Enable() })
	c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(30*time.Second),
		coordinator.WithStopReleaseTimeout(closeStopRelease))
	t.Cleanup(px.Unstall) // before the coordinator's cleanups: a call still blocked in the proxy ends
	return &stalledSetup{srv: srv, px: px, hook: hook, c: c}
}

// stall stalls the proxy and arms the hook: the next command the client sends goes into the stall.
func (s *stalledSetup) stall() {
	s.px.Stall()
	s.hook.armed.Store(true)
}

// closeBounded closes the coordinator, with what still in flight, and fails the test unless Close
// returns within the stop release timeout (and a margin).
func (s *stalledSetup) closeBounded(t *testing.T, what string) {
	t.Helper()
	waitFor(t, s.hook.sent, 5*time.Second, what+" sent into the partition")
	start := time.Now()
	closed := make(chan struct{})
	go func() { _ = s.c.Close(); close(closed) }()
	bound := closeStopRelease + 500*time.Millisecond
	select {
	case <-closed:
	case <-time.After(bound + 15*time.Second):
		t.Fatalf("Close with %s in flight has not returned after %v", what, time.Since(start))
	}
	if took := time.Since(start); took > bound {
		t.Errorf("Close with %s in flight took %v, want at most %v", what, took, bound)
	}
}

// TestCloseBoundedWithUnlockInFlight: an Unlock whose release is under way, blocked in a partition, when
// Close starts does not hold Close past the stop release timeout, although its caller gave it no
// deadline and the client's read timeout is long. (go-redis does not interrupt a read when a context is
// cancelled, only when its deadline passes: the lock actor stops waiting for the call instead, and
// Close for the goroutine making it.) The caller runs the call itself when its ctx can never end (see
// actors.Ticket.OpenCarry), and a worker of the coordinator's does when it can.
func TestCloseBoundedWithUnlockInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() context.Context
	}{
		{"background ctx", context.Background},
		{"cancellable ctx", func() context.Context { return t.Context() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStalledSetup(t)
			m := s.c.Mutex(t.Name())
			mustLock(t, m)

			s.stall()
			unlocked := make(chan error, 1)
			go func() { unlocked <- m.Unlock(tc.ctx()) }()
			s.closeBounded(t, "an Unlock")
			// A caller running the call itself returns once the call does, when Redis answers.
			s.px.Unstall()
			select {
			case err := <-unlocked:
				t.Logf("Unlock: %v", err)
			case <-time.After(5 * time.Second):
				t.Fatal("the Unlock in flight did not return once Redis answered")
			}
		})
	}
}

// TestCloseBoundedWithLeaveInFlight: a fair waiter whose caller gives up during a partition leaves the
// lock's queue in Redis on its lock actor; that leave, blocked in the partition, does not hold the
// coordinator's Close past the stop release timeout (it took the client's 10 s read timeout).
func TestCloseBoundedWithLeaveInFlight(t *testing.T) {
	s := newStalledSetup(t)
	holder := s.c.FairMutex(t.Name())
	mustLock(t, holder)
	waitCtx, giveUp := context.WithCancel(t.Context())
	waiter := s.c.FairMutex(t.Name())
	waiting := lockAsync(waitCtx, waiter)
	fairWaitQueued(t, s.srv.Client(t), t.Name(), waiter.Owner())

	s.stall()
	giveUp()
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not return when its context ended")
	}
	s.closeBounded(t, "a waiter's leave")
}

// TestCloseBoundedWithCallOnTurnInFlight: the calls an actor waits for on its turn (a fair lock's
// release, a latch's count-down), blocked in a partition when Close starts, do not hold Close past the
// stop release timeout: they are bounded by it (each took the client's 10 s read timeout).
func TestCloseBoundedWithCallOnTurnInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare readies what call uses, before the stall; call is the call left in flight.
		prepare func(t *testing.T, c *coordinator.Coordinator) (call func() error)
	}{
		{"a fair lock's Unlock", func(t *testing.T, c *coordinator.Coordinator) func() error {
			m := c.FairMutex(t.Name())
			mustLock(t, m)
			return func() error { return m.Unlock(context.Background()) }
		}},
		{"a latch's CountDown", func(t *testing.T, c *coordinator.Coordinator) func() error {
			latch := c.CountDownLatch(t.Name())
			if _, err := latch.TrySetCount(t.Context(), 2); err != nil {
				t.Fatalf("TrySetCount: %v", err)
			}
			return func() error { return latch.CountDown(context.Background()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStalledSetup(t)
			call := tc.prepare(t, s.c)
			s.stall()
			done := make(chan error, 1)
			go func() { done <- call() }()
			s.closeBounded(t, tc.name)
			select {
			case err := <-done:
				t.Logf("%s: %v", tc.name, err)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s in flight did not return", tc.name)
			}
		})
	}
}
