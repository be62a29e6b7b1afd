package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// The tests in this file pin the lock's contract under faults: a success is never returned for a hold
// whose validity is gone, a failed Unlock never leaks the lock, a wait that ends while Redis is down
// says so, and Done closes before Redis can drop the key.

// contractLocker is what the late-grant test drives: a plain, fair or write lock.
type contractLocker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Token() int64
	Done() <-chan struct{}
}

// TestContractLateGrantIsNeverReported: Redis is paused for longer than the watchdog timeout while Lock
// is in flight. When the grant comes back, its lease has run out: Lock must not report it. It either
// returns a hold that is valid (Token set, Done open, Unlock works) or keeps waiting.
func TestContractLateGrantIsNeverReported(t *testing.T) {
	const watchdog = 1500 * time.Millisecond
	kinds := []struct {
		name string
		make func(c *coordinator.Coordinator, name string) contractLocker
	}{
		{"plain", func(c *coordinator.Coordinator, name string) contractLocker { return c.Mutex(name) }},
		{"fair", func(c *coordinator.Coordinator, name string) contractLocker { return c.FairMutex(name) }},
		{"write", func(c *coordinator.Coordinator, name string) contractLocker { return c.RWMutex(name).Write() }},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
			t.Cleanup(func() { _ = client.Close() })
			c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
			name := "contract-late-" + kind.name
			m := kind.make(c, name)

			// Warm the connection and the scripts, so that the paused call is the acquire itself.
			if err := m.Lock(t.Context()); err != nil {
				t.Fatalf("warm-up Lock: %v", err)
			}
			if err := m.Unlock(t.Context()); err != nil {
				t.Fatalf("warm-up Unlock: %v", err)
			}

			srv.Pause()
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			errc := lockAsync2(ctx, m)
			// The fault's length is the point of the test: the grant must come back after the lease.
			time.Sleep(2 * watchdog)
			srv.Resume()

			if err := <-errc; err != nil {
				t.Fatalf("Lock after the pause: %v", err)
			}
			select {
			case <-m.Done():
				t.Fatal("Lock returned success for a hold whose Done is already closed")
			default:
			}
			if m.Token() == 0 {
				t.Fatal("Lock returned success with token 0: the hold was already counted as lost")
			}
			ttl, err := client.PTTL(t.Context(), name).Result()
			if err != nil || ttl <= 0 {
				t.Fatalf("the lock key after Lock: PTTL %v, %v; want it held", ttl, err)
			}
			if err := m.Unlock(t.Context()); err != nil {
				t.Fatalf("Unlock of the hold Lock reported: %v", err)
			}
		})
	}
}

// lockAsync2 runs l.Lock(ctx) in a goroutine and returns the channel that receives its error.
func lockAsync2(ctx context.Context, l contractLocker) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- l.Lock(ctx) }()
	return errc
}

// TestContractLateGrantTryLockGivesBack: a TryLock without a wait whose grant comes back too late
// reports an error (not success), and the hold it may have taken is given back.
func TestContractLateGrantTryLockGivesBack(t *testing.T) {
	const lease = 500 * time.Millisecond
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	c := newCoordinator(t, client)
	name := "contract-late-try"
	m := c.Mutex(name)
	if ok, err := m.TryLock(t.Context(), coordinator.Lease(lease)); !ok || err != nil {
		t.Fatalf("warm-up TryLock: %v, %v", ok, err)
	}
	mustUnlock(t, m)

	srv.Pause()
	type answer struct {
		ok  bool
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		ok, err := m.TryLock(t.Context(), coordinator.Lease(lease))
		answers <- answer{ok, err}
	}()
	time.Sleep(3 * lease) // the fault's length
	srv.Resume()
	got := <-answers
	if got.ok {
		t.Fatal("TryLock reported a grant that came back after its lease")
	}
	if !errors.Is(got.err, coordinator.ErrNotObtained) || !errors.Is(got.err, coordinator.ErrGrantTooLate) {
		t.Fatalf("TryLock error = %v, want ErrNotObtained and ErrGrantTooLate", got.err)
	}
	if n, err := client.Exists(t.Context(), name).Result(); err != nil || n != 0 {
		t.Fatalf("the late grant was not given back: EXISTS %d, %v", n, err)
	}
}

// TestContractRenewalAfterDoneGivesBack: a renewal that Redis answers after the holder's Done closed
// (a paused server) took effect but counts for nothing: the hold is lost, and its field is given back
// (with the owner check), so that contenders do not wait a whole watchdog timeout for a lock nobody
// holds.
func TestContractRenewalAfterDoneGivesBack(t *testing.T) {
	const watchdog = 3 * time.Second
	srv := redistest.Start(t)
	client := pausableClient(t, srv)
	c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	name := "contract-renewal-after-done"
	m := c.Mutex(name)
	mustLock(t, m)
	// The key outlives the holder's estimate in Redis (as the late renewal itself makes it do), so
	// that what is left once the renewal answers does not depend on when the server resumes.
	if err := client.PExpire(t.Context(), name, time.Minute).Err(); err != nil {
		t.Fatalf("PEXPIRE: %v", err)
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	waitFor(t, m.Done(), 2*watchdog, "Done closing while the server is paused")
	srv.Resume()
	waitKeyGone(t, client, name, time.Now(), watchdog/2, "the server resumed")
}

// TestContractRenewalAfterDoneSharedOwner: with an owner id shared by two coordinators, each holding
// the lock once (Redis counts 2), a renewal of the first that answers after its Done closed gives back
// its hold once in all, whatever the holder does next: the other coordinator's hold stays in Redis
// after the first holder's Unlock. The hold was given back twice, once when the renewal was settled
// and once more by the Unlock, which left the second holder with a free lock.
func TestContractRenewalAfterDoneSharedOwner(t *testing.T) {
	const watchdog = 3 * time.Second
	srv := redistest.Start(t)
	client := pausableClient(t, srv)
	c1 := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	c2 := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	const name, owner = "contract-renewal-after-done-shared", "contract-shared-owner"
	m1 := c1.Mutex(name, coordinator.WithOwner(owner))
	m2 := c2.Mutex(name, coordinator.WithOwner(owner))
	mustLock(t, m1)
	if ok, err := m2.TryLock(t.Context(), coordinator.Lease(time.Minute)); !ok || err != nil {
		t.Fatalf("TryLock of the second holder = %v, %v", ok, err)
	}
	if n := holdCount(t, m2); n != 2 {
		t.Fatalf("hold count %d, want 2", n)
	}
	if err := client.PExpire(t.Context(), name, time.Minute).Err(); err != nil {
		t.Fatalf("PEXPIRE: %v", err)
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	waitFor(t, m1.Done(), 2*watchdog, "Done closing while the server is paused")
	srv.Resume()
	// The Unlock waits behind the late renewal in the first coordinator.
	if err := m1.Unlock(t.Context()); err != nil && !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock of the lost hold = %v", err)
	}
	if n := holdCount(t, m2); n != 1 {
		t.Fatalf("hold count %d after the first holder's hold was given back, want 1 (the second holder's)", n)
	}
	mustUnlock(t, m2)
}

// TestContractFailedUnlockStopsRenewal: an Unlock that fails on a cut connection returns the error,
// stops the watchdog, and the lock frees itself within one lease: another coordinator gets it and the
// first holder's Done closes. Without that, the watchdog renewed the hold for the life of the process.
func TestContractFailedUnlockStopsRenewal(t *testing.T) {
	const watchdog = time.Second
	srv := redistest.Start(t)
	px, cut := faultProxiedClient(t, srv)
	c1 := newCoordinator(t, cut, coordinator.WithWatchdogTimeout(watchdog))
	c2 := newCoordinator(t, srv.Client(t), coordinator.WithWatchdogTimeout(watchdog))
	name := "contract-failed-unlock"
	m := c1.Mutex(name)
	mustLock(t, m)

	px.Disable()
	err := m.Unlock(t.Context())
	var ue *coordinator.UnlockError
	if err == nil || !errors.As(err, &ue) {
		t.Fatalf("Unlock over a cut connection = %v, want an *UnlockError", err)
	}
	px.Enable()
	faultWaitPing(t, cut, 5*time.Second)
	failedAt := time.Now()

	other := c2.Mutex(name)
	ctx, cancel := context.WithTimeout(t.Context(), 4*watchdog)
	defer cancel()
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("another owner could not take the lock within %v of a failed Unlock: %v", 4*watchdog, err)
	}
	if took := time.Since(failedAt); took > 2*watchdog {
		t.Fatalf("the lock was free only %v after the failed Unlock, want within one lease (%v)", took, watchdog)
	}
	waitFor(t, m.Done(), time.Second, "Done of the hold whose Unlock failed")
	if err := m.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
	}
	mustUnlock(t, other)
}

// TestContractFailedUnlockCanBeRetried: after an Unlock of the last hold that failed, a second Unlock
// frees the lock at once (the same request, so it never takes away more than the failed one would).
func TestContractFailedUnlockCanBeRetried(t *testing.T) {
	srv := redistest.Start(t)
	px, cut := faultProxiedClient(t, srv)
	c := newCoordinator(t, cut)
	name := "contract-retry-unlock"
	m := c.Mutex(name)
	mustLock(t, m)

	px.Disable()
	var ue *coordinator.UnlockError
	if err := m.Unlock(t.Context()); !errors.As(err, &ue) || ue.Expires.IsZero() {
		t.Fatalf("Unlock over a cut connection = %v, want an *UnlockError with the hold's expiry", err)
	}
	px.Enable()
	faultWaitPing(t, cut, 5*time.Second)
	mustUnlock(t, m) // the retried release
	if n, err := cut.Exists(t.Context(), name).Result(); err != nil || n != 0 {
		t.Fatalf("the lock is still in Redis after the retried Unlock: EXISTS %d, %v", n, err)
	}
	waitFor(t, m.Done(), time.Second, "Done after the retried Unlock")
}

// TestContractWaitWhileRedisDownReportsTheError: TryLock with a wait, while Redis is unreachable for
// the whole wait, returns the Redis error joined with ErrNotObtained, not (false, nil), which reads as
// "another owner holds it". So does Lock whose ctx ends.
func TestContractWaitWhileRedisDownReportsTheError(t *testing.T) {
	srv := redistest.Start(t)
	px, cut := faultProxiedClient(t, srv)
	c := newCoordinator(t, cut)
	m := c.Mutex("contract-wait-down")
	if err := cut.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	px.Disable()
	ok, err := m.TryLock(t.Context(), coordinator.Wait(time.Second))
	if ok || err == nil || !errors.Is(err, coordinator.ErrNotObtained) {
		t.Fatalf("TryLock(Wait) with Redis down = %v, %v; want false and an error matching ErrNotObtained", ok, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock(Wait) with Redis down = %v; the caller's ctx did not end", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = m.Lock(ctx)
	if !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with Redis down = %v; want ErrNotObtained and the ctx's error", err)
	}
	if err.Error() == errors.Join(coordinator.ErrNotObtained, context.DeadlineExceeded).Error() {
		t.Fatalf("Lock with Redis down = %v; want the Redis error too", err)
	}
}

// TestContractDoneClosesBeforeRedisDropsTheKey: Done closes with a margin before the lease can run
// out in Redis (1%% of the lease plus 2 ms), so that the key is still there when the holder learns of
// the end of its hold.
func TestContractDoneClosesBeforeRedisDropsTheKey(t *testing.T) {
	const lease = 5 * time.Second // a margin of 52 ms
	_, client, c := setup(t)
	name := "contract-done-margin"
	m := c.Mutex(name)
	if ok, err := m.TryLock(t.Context(), coordinator.Lease(lease)); !ok || err != nil {
		t.Fatalf("TryLock: %v, %v", ok, err)
	}
	waitFor(t, m.Done(), 2*lease, "Done of a leased hold")
	ttl, err := client.PTTL(t.Context(), name).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Without a margin the key has about 0 ms left (it may be gone); the margin leaves 52 ms, less the
	// time the test takes to ask.
	if ttl < 20*time.Millisecond {
		t.Fatalf("the key had %v left when Done closed, want at least 20ms: no margin before Redis drops it", ttl)
	}
}

// TestContractWriterBehindLocalReaderSetsIntent: a writer that waits behind a reader of its own
// coordinator leaves its write intent, so readers of other processes stay out and the writer gets in.
func TestContractWriterBehindLocalReaderSetsIntent(t *testing.T) {
	_, client, c1 := setup(t)
	c2 := newCoordinator(t, client)
	name := "contract-intent-local"
	reader := c1.RWMutex(name)
	if err := reader.RLock(t.Context()); err != nil {
		t.Fatal(err)
	}
	writer := c1.RWMutex(name)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	wrote := make(chan error, 1)
	go func() { wrote <- writer.Lock(ctx) }()

	intent := redisops.WriteIntentKey(name)
	deadline := time.Now().Add(2 * time.Second)
	for {
		got, err := client.Get(t.Context(), intent).Result()
		if err == nil && got == writer.Write().Owner() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write intent of the waiting writer after 2s: %q, %v", got, err)
		}
		time.Sleep(10 * time.Millisecond) // polls Redis for the state the test waits on
	}
	if ok, err := c2.RWMutex(name).TryRLock(t.Context()); ok || err != nil {
		t.Fatalf("a reader of another coordinator got in while a writer waits: %v, %v", ok, err)
	}
	// The intent is kept while the writer waits longer than its expiry.
	time.Sleep(3 * time.Second) // longer than the intent's own expiry (2s)
	if ok, err := c2.RWMutex(name).TryRLock(t.Context()); ok || err != nil {
		t.Fatalf("a reader of another coordinator got in after the intent's expiry: %v, %v", ok, err)
	}
	if err := reader.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writer Lock: %v", err)
	}
	if err := writer.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// contractWaitEvent waits for an event of type typ on sub, for at most within.
func contractWaitEvent(t *testing.T, sub *coordinator.Subscription, typ messages.EventType, within time.Duration) messages.Event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-sub.Events():
			if ev.Type == typ {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", typ, within)
		}
	}
}

// TestContractRetriedUnlockAfterLostReply: the release of a Mutex's last hold, with no waiter to hand
// the lock to, is checked by the token counter rather than by an unlock latch. Sent twice by go-redis
// (its retry after a read timeout) while Redis is paused, then a third time by the Unlock called
// again, it frees the lock once: one unlock notice, the counter one above the hold's token plus one,
// no latch key, and the Unlock called again answers that the release took effect.
func TestContractRetriedUnlockAfterLostReply(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: 1,
		MinRetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond})
	t.Cleanup(func() { _ = client.Close() })
	loadScripts(t, client) // the copies that the pause holds back run as sent
	c := newCoordinator(t, client)
	name := t.Name()
	direct := srv.Client(t)
	notices := direct.Subscribe(t.Context(), redisops.ChannelName(name))
	t.Cleanup(func() { _ = notices.Close() })
	if _, err := notices.ReceiveTimeout(t.Context(), 2*time.Second); err != nil {
		t.Fatalf("subscribing: %v", err)
	}
	m := c.Mutex(name)
	mustLock(t, m)
	token := m.Token()

	unlockWhilePaused(t, srv, m)
	// Both copies run once Redis is back: the first frees the lock, the second finds it freed.
	if msg, err := notices.ReceiveTimeout(t.Context(), 5*time.Second); err != nil || msg.(*redis.Message).Payload != redisops.UnlockMessage {
		t.Fatalf("unlock notice: %v, %v", msg, err)
	}
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatalf("the Unlock called again = %v, want nil (the release took effect)", err)
	}
	if msg, err := notices.ReceiveTimeout(t.Context(), 300*time.Millisecond); err == nil {
		t.Fatalf("a second unlock notice: %v (the lock was released twice)", msg)
	}
	if got, err := direct.Get(t.Context(), redisops.TokenKey(name)).Int64(); err != nil || got != token+2 {
		t.Errorf("token counter = %d, %v; want %d (the token plus one, raised once by the release)", got, err, token+2)
	}
	if latches, err := direct.Keys(t.Context(), "redisson_unlock_latch:*").Result(); err != nil || len(latches) != 0 {
		t.Errorf("latch keys %v, %v; want none", latches, err)
	}
	// The owner locks again: a hold of its own, which its Unlock frees.
	mustLock(t, m)
	if m.Token() <= token {
		t.Errorf("the new hold's token %d is not above %d", m.Token(), token)
	}
	mustUnlock(t, m)
	if n, err := direct.Exists(t.Context(), name).Result(); err != nil || n != 0 {
		t.Errorf("the lock is still in Redis: %d, %v", n, err)
	}
}

// TestContractRetriedUnlockAfterLostHandoffReply: a release that handed the lock to a local waiter took
// effect, but its reply was lost. The retried Unlock gets the latched answer (handed off) and the waiter
// gets the hold at once: no actor failure, and no wait for a fallback timer.
func TestContractRetriedUnlockAfterLostHandoffReply(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	c := newCoordinator(t, client)
	name := "contract-handoff-retry"
	sub := c.Subscribe(coordinator.ForLock(name), 64)
	a, b := c.Mutex(name), c.Mutex(name)
	loadScripts(t, client) // the release that the pause holds back runs as sent
	mustLock(t, a)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	berr := lockAsync(ctx, b)
	contractWaitEvent(t, sub, messages.EventWaitStarted, 5*time.Second)

	unlockWhilePaused(t, srv, a)
	// The release runs once Redis is back: b's owner holds the lock in Redis.
	direct := srv.Client(t)
	deadline := time.Now().Add(5 * time.Second)
	for direct.HExists(t.Context(), name, b.Owner()).Val() == false {
		if time.Now().After(deadline) {
			t.Fatalf("the paused release did not hand the lock to b: %v", direct.HGetAll(t.Context(), name).Val())
		}
		time.Sleep(5 * time.Millisecond) // polls Redis for the state the test waits on
	}
	if err := a.Unlock(t.Context()); err != nil {
		t.Fatalf("the retried Unlock = %v, want nil (the latch says the release took effect)", err)
	}
	select {
	case err := <-berr:
		if err != nil {
			t.Fatalf("b.Lock = %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("b did not get the hold within 2s of the retried Unlock (the fallback timer is 10s)")
	}
	mustUnlock(t, b)
}

// TestContractLateReentryKeepsOuterHold: a re-entry with a short lease whose grant comes back late is
// given back, and the outer watchdog hold keeps its lease in Redis: another owner cannot get in while
// the holder's Done is open.
func TestContractLateReentryKeepsOuterHold(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	c1 := newCoordinator(t, client)
	c2 := newCoordinator(t, srv.Client(t))
	name := "contract-late-reentry"
	a := c1.Mutex(name)
	mustLock(t, a)
	srv.Pause()
	res := make(chan error, 1)
	go func() {
		_, err := a.TryLock(t.Context(), coordinator.Lease(300*time.Millisecond))
		res <- err
	}()
	time.Sleep(time.Second) // the fault's length: longer than the re-entry's lease
	srv.Resume()
	if err := <-res; !errors.Is(err, coordinator.ErrGrantTooLate) {
		t.Fatalf("late re-entry = %v, want ErrGrantTooLate", err)
	}
	if ttl := client.PTTL(t.Context(), name).Val(); ttl < 10*time.Second {
		t.Fatalf("the outer watchdog hold has %v left in Redis after the late re-entry was given back", ttl)
	}
	if ok, err := c2.Mutex(name).TryLock(t.Context()); ok || err != nil {
		t.Fatalf("another owner's TryLock = %v, %v while the holder's Done is open", ok, err)
	}
	if n := holdCount(t, a); n != 1 {
		t.Fatalf("hold count after the late re-entry = %d, want 1", n)
	}
	mustUnlock(t, a)
}

// TestContractFailedInnerUnlockKeepsOuterRenewal: an inner Unlock that fails counts as done (as in
// Redisson): the outer hold stays held and renewed by the watchdog, and the outer Unlock frees the
// lock, giving back whatever the failed release left in Redis; nothing is left renewed with nobody to
// release it.
func TestContractFailedInnerUnlockKeepsOuterRenewal(t *testing.T) {
	const watchdog = time.Second
	srv := redistest.Start(t)
	px, cut := faultProxiedClient(t, srv)
	c := newCoordinator(t, cut, coordinator.WithWatchdogTimeout(watchdog))
	name := "contract-inner-unlock"
	m := c.Mutex(name)
	mustLock(t, m)
	mustLock(t, m)
	px.Disable()
	var ue *coordinator.UnlockError
	if err := m.Unlock(t.Context()); !errors.As(err, &ue) || !ue.Expires.IsZero() {
		t.Fatalf("inner Unlock over a cut connection = %v, want an *UnlockError of an inner hold", err)
	}
	px.Enable()
	faultWaitPing(t, cut, 5*time.Second)
	select {
	case <-m.Done():
		t.Fatal("the outer hold was lost after a failed inner Unlock: the watchdog stopped renewing it")
	case <-time.After(4 * watchdog): // a bound on what must not happen
	}
	mustUnlock(t, m) // the outer hold's Unlock
	if n, err := cut.Exists(t.Context(), name).Result(); err != nil || n != 0 {
		t.Fatalf("the lock is still in Redis after one Unlock per Lock: EXISTS %d, %v (%v)", n, err, cut.HGetAll(t.Context(), name).Val())
	}
	waitFor(t, m.Done(), time.Second, "Done after the outer Unlock")
}

// TestContractWriteRetryAfterRenewalKeepsValidity: a write re-entry whose reply was lost took effect;
// a renewal then set the expiry back to the watchdog timeout, and the retried re-entry adds nothing.
// The holder's estimate must not count the re-entry's lease on top: cut off afterwards, its Done closes
// before another owner can get the write lock.
func TestContractWriteRetryAfterRenewalKeepsValidity(t *testing.T) {
	const watchdog = 2 * time.Second
	const lease = 1500 * time.Millisecond
	srv := redistest.Start(t)
	px, cut := faultProxiedClient(t, srv)
	c := newCoordinator(t, cut, coordinator.WithWatchdogTimeout(watchdog))
	other := newCoordinator(t, srv.Client(t))
	name := "contract-write-retry"
	sub := c.Subscribe(coordinator.OfType(messages.EventRenewed), 64)
	w := c.RWMutex(name).Write()
	mustLock(t, w)
	// Warm the script cache, so that the paused call is one EVALSHA.
	if ok, err := w.TryLock(t.Context(), coordinator.Lease(lease)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	mustUnlock(t, w)
	srv.Pause()
	_, _ = w.TryLock(t.Context(), coordinator.Lease(lease)) // its reply is lost (200 ms timeout); it runs at Resume
	time.Sleep(300 * time.Millisecond)                      // the fault's length
	srv.Resume()
	faultWaitPing(t, cut, 5*time.Second)
	for len(sub.Events()) > 0 {
		<-sub.Events()
	}
	contractWaitEvent(t, sub, messages.EventRenewed, 2*watchdog) // the expiry is back to the watchdog timeout
	if ok, err := w.TryLock(t.Context(), coordinator.Lease(lease)); !ok || err != nil {
		t.Fatalf("retried re-entry: %v %v", ok, err)
	}
	done := w.Done()
	px.Disable() // the holder is cut off: no more renewals
	start := time.Now()
	var otherAt, doneAt time.Duration
	for (otherAt == 0 || doneAt == 0) && time.Since(start) < 10*time.Second {
		if doneAt == 0 && isDone(done) {
			doneAt = time.Since(start)
		}
		if otherAt == 0 {
			if ok, _ := other.RWMutex(name).Write().TryLock(t.Context(), coordinator.Lease(10*time.Second)); ok {
				otherAt = time.Since(start)
			}
		}
		time.Sleep(10 * time.Millisecond) // polls Redis for the state the test waits on
	}
	if otherAt != 0 && (doneAt == 0 || otherAt < doneAt) {
		t.Fatalf("two owners: another owner got the write lock at %v, the holder's Done closed only at %v", otherAt, doneAt)
	}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestContractReadWaitWhileRedisPaused: a read or write TryLock with a wait, while Redis does not answer
// for the whole wait, reports that (ErrNoAnswer), not (false, nil).
func TestContractReadWaitWhileRedisPaused(t *testing.T) {
	for _, kind := range []string{"read", "write"} {
		t.Run(kind, func(t *testing.T) {
			srv := redistest.Start(t)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
			t.Cleanup(func() { _ = client.Close() })
			c := newCoordinator(t, client)
			name := "contract-read-paused-" + kind
			side := func(rw *coordinator.RWMutex) *coordinator.Mutex {
				if kind == "write" {
					return rw.Write()
				}
				return rw.Read()
			}
			warm := side(c.RWMutex(name))
			if err := warm.Lock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := warm.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			srv.Pause()
			ok, err := side(c.RWMutex(name)).TryLock(t.Context(), coordinator.Wait(time.Second))
			srv.Resume()
			if ok || !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, coordinator.ErrNoAnswer) {
				t.Fatalf("TryLock(Wait) while Redis is paused = %v, %v; want false, ErrNotObtained and ErrNoAnswer", ok, err)
			}
		})
	}
}

// TestContractTokenAfterLostHoldLeftInRedis: a hold whose Done closed while Redis still kept it (a
// renewal took effect although its answer was lost, so the key outlived the lease the holder knew of)
// is cleared before the owner's next acquisition; when that clearing fails too (the connection is cut
// at that moment), the next acquisition that gets through finds the dead hold, takes it over, and must
// still get a fencing token above the dead hold's. It got the same token: the acquire scripts took the
// dead hold for the owner's own lost reply and answered the counter, the dead hold's token. The fault
// suite saw it on proxied children: "got token T, not above T".
func TestContractTokenAfterLostHoldLeftInRedis(t *testing.T) {
	for _, kind := range []string{fsPlain, fsFair, fsRW} {
		t.Run(kind, func(t *testing.T) {
			srv := redistest.Start(t)
			px, cut := faultProxiedClient(t, srv)
			direct := srv.Client(t)
			c := newCoordinator(t, cut)
			name := "contract-dead-hold-token-" + kind
			var m *coordinator.Mutex
			switch kind {
			case fsPlain:
				m = c.Mutex(name)
			case fsFair:
				m = c.FairMutex(name)
			default:
				m = c.RWMutex(name).Write()
			}
			ctx := t.Context()
			if ok, err := m.TryLock(ctx, coordinator.Lease(300*time.Millisecond)); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			first := m.Token()
			// A renewal that took effect although its answer was lost: Redis keeps the hold.
			if err := direct.PExpire(ctx, name, 10*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, m.Done(), 2*time.Second, "Done of the hold whose lease ran out")
			// The next Lock's clearing of the dead hold fails; its later attempt gets through.
			px.Disable()
			heal := time.AfterFunc(300*time.Millisecond, px.Enable)
			defer heal.Stop()
			lctx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			if err := m.Lock(lctx); err != nil {
				t.Fatalf("Lock after the connection came back: %v", err)
			}
			if got := m.Token(); got <= first {
				t.Fatalf("token %d after a hold with token %d was lost: not above it (a token issued twice)", got, first)
			}
			mustUnlock(t, m)
		})
	}
}

// TestContractTakenOverDeadHoldGetsItsLease: as in TestContractTokenAfterLostHoldLeftInRedis, the
// owner's next Lock takes over a dead hold of its own that Redis kept (with 1 s left) because clearing
// it failed. Lock reports a hold valid for a full lease, so Redis must keep it that long: no other
// owner may get the lock while Done is open. The write lock's script answered the dead hold without
// setting its expiry, so it ran out after the 1 s left and another owner took the write lock under a
// holder whose Done was open (the fault suite: "c3/9/13 entered while c1/9/17 was inside, and its Done
// had not closed first", c1/9/17's Unlock then said not held). The read lock's script did the same
// with the read hold's key and the hash, and a writer got in under the reader.
func TestContractTakenOverDeadHoldGetsItsLease(t *testing.T) {
	for _, kind := range []string{fsPlain, fsFair, fsRW, "read"} {
		t.Run(kind, func(t *testing.T) {
			srv := redistest.Start(t)
			px, cut := faultProxiedClient(t, srv)
			direct := srv.Client(t)
			c := newCoordinator(t, cut, coordinator.WithWatchdogTimeout(6*time.Second))
			c2 := newCoordinator(t, direct)
			name := "contract-dead-hold-lease-" + kind
			handle := func(c *coordinator.Coordinator) *coordinator.Mutex {
				switch kind {
				case fsPlain:
					return c.Mutex(name)
				case fsFair:
					return c.FairMutex(name)
				default:
					return c.RWMutex(name).Write()
				}
			}
			m, other := handle(c), handle(c2)
			keys := []string{name}
			if kind == "read" {
				// A read hold, and a writer that must not get in while it lasts.
				m = c.RWMutex(name).Read()
				keys = append(keys, redisops.ReadTimeoutKey(name, m.Owner(), 1))
			}
			ctx := t.Context()
			if ok, err := m.TryLock(ctx, coordinator.Lease(300*time.Millisecond)); !ok || err != nil {
				t.Fatalf("TryLock = %v, %v", ok, err)
			}
			// A renewal that took effect although its answer was lost: Redis keeps the hold.
			for _, k := range keys {
				if err := direct.PExpire(ctx, k, 10*time.Second).Err(); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, m.Done(), 2*time.Second, "Done of the hold whose lease ran out")
			for _, k := range keys {
				if err := direct.PExpire(ctx, k, time.Second).Err(); err != nil {
					t.Fatal(err)
				}
			}
			// The next Lock's clearing of the dead hold fails; its later attempt gets through.
			px.Disable()
			heal := time.AfterFunc(200*time.Millisecond, px.Enable)
			defer heal.Stop()
			lctx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			if err := m.Lock(lctx); err != nil {
				t.Fatalf("Lock after the connection came back: %v", err)
			}
			// The watchdog's first renewal is 2 s away: the hold must last on its own until then.
			if ok, err := other.TryLock(ctx, coordinator.Wait(1500*time.Millisecond)); ok || err != nil {
				select {
				case <-m.Done():
					t.Fatalf("another owner got the lock (%v, %v) after the holder's Done closed: the hold lasted less than its lease", ok, err)
				default:
					t.Fatalf("another owner got the lock (%v, %v) while the holder's Done was open", ok, err)
				}
			}
			mustUnlock(t, m)
		})
	}
}

// pausableClient returns a client of srv that waits out a pause (a long read timeout, no retries),
// with every script loaded: a renewal that a pause holds back must run as it is sent, since with the
// script not cached its EVALSHA would answer NOSCRIPT and the EVAL after it, past the hold's
// deadline, would not go.
func pausableClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 10 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	loadScripts(t, client)
	return client
}

// loadScripts loads every script of lockwarden on client's server, so that a call that a pause holds
// back runs as it was sent (an EVALSHA of a script not cached would answer NOSCRIPT instead).
func loadScripts(t *testing.T, client *redis.Client) {
	t.Helper()
	for _, script := range redisops.Scripts() {
		if err := script.Load(t.Context(), client).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
}

// cutCoordinator returns a coordinator whose client reaches a new redis-server through a fault proxy
// (faultProxiedClient): the proxy, that client, and a client of the server's own.
func cutCoordinator(t *testing.T) (*redistest.Proxy, *redis.Client, *redis.Client, *coordinator.Coordinator) {
	t.Helper()
	srv := redistest.Start(t)
	px, client := faultProxiedClient(t, srv)
	return px, client, srv.Client(t), newCoordinator(t, client)
}

// TestContractLockAfterFailedUnlock: an owner whose Unlock of its last hold failed (it counts as done)
// and that then locks and unlocks again, as a worker in a loop does, leaves the lock free: the new Lock
// is a hold of its own, not a re-entry of the hold whose release is unknown, and its Unlock frees the
// lock in Redis, whether the failed release never reached Redis (Disable) or ran there after its
// answer was lost (Stall, then the held-up release goes through).
func TestContractLockAfterFailedUnlock(t *testing.T) {
	for _, cut := range []struct {
		name string
		cut  func(*redistest.Proxy)
	}{{"never-sent", (*redistest.Proxy).Disable}, {"answer-lost", (*redistest.Proxy).Stall}} {
		t.Run(cut.name, func(t *testing.T) {
			px, client, direct, c := cutCoordinator(t)
			name := t.Name()
			m := c.Mutex(name)
			mustLock(t, m)
			first := m.Token()

			cut.cut(px)
			var ue *coordinator.UnlockError
			if err := m.Unlock(t.Context()); !errors.As(err, &ue) {
				t.Fatalf("Unlock over a cut connection = %v, want an *UnlockError", err)
			}
			px.Unstall()
			px.Enable()
			faultWaitPing(t, client, 5*time.Second)

			mustLock(t, m)
			if m.Token() <= first {
				t.Errorf("the Lock after the failed Unlock has token %d, want above the first hold's %d (a hold of its own)", m.Token(), first)
			}
			if n, err := m.HoldCount(t.Context()); err != nil || n != 1 {
				t.Errorf("HoldCount after Lock = %d, %v; want 1", n, err)
			}
			mustUnlock(t, m)
			if held, err := m.IsHeld(t.Context()); err != nil || held {
				t.Errorf("IsHeld after the Unlock = %v, %v; want false", held, err)
			}
			if got, err := direct.HGetAll(t.Context(), name).Result(); err != nil || len(got) != 0 {
				t.Fatalf("the lock is still in Redis after Lock and Unlock: %v, %v", got, err)
			}
		})
	}
}

// TestContractRWLockAfterFailedUnlock: on a read-write lock, an owner whose last Unlock of one side
// failed and that then takes either side again (or a read batch with another reader) leaves the lock
// free once it has unlocked: the failed release is sent again first, whichever side the new
// acquisition is, so that a read never enters through a write hold whose release is unknown and a
// write is not refused as an upgrade of read holds that count as released.
func TestContractRWLockAfterFailedUnlock(t *testing.T) {
	type step func(t *testing.T, rw *coordinator.RWMutex) error
	lockW := func(t *testing.T, rw *coordinator.RWMutex) error { return rw.Lock(t.Context()) }
	lockR := func(t *testing.T, rw *coordinator.RWMutex) error { return rw.RLock(t.Context()) }
	unlockW := func(t *testing.T, rw *coordinator.RWMutex) error { return rw.Unlock(t.Context()) }
	unlockR := func(t *testing.T, rw *coordinator.RWMutex) error { return rw.RUnlock(t.Context()) }
	for _, tc := range []struct {
		name                     string
		first, failing, then, un step
	}{
		{"write-then-read", lockW, unlockW, lockR, unlockR},
		{"read-then-write", lockR, unlockR, lockW, unlockW},
		{"read-then-read", lockR, unlockR, lockR, unlockR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			px, client, direct, c := cutCoordinator(t)
			name := t.Name()
			rw := c.RWMutex(name)
			if err := tc.first(t, rw); err != nil {
				t.Fatal(err)
			}
			px.Disable()
			var ue *coordinator.UnlockError
			if err := tc.failing(t, rw); !errors.As(err, &ue) {
				t.Fatalf("Unlock over a cut connection = %v, want an *UnlockError", err)
			}
			px.Enable()
			faultWaitPing(t, client, 5*time.Second)
			if err := tc.then(t, rw); err != nil {
				t.Fatalf("the next acquisition: %v", err)
			}
			if err := tc.un(t, rw); err != nil {
				t.Fatalf("its Unlock: %v", err)
			}
			if got, err := direct.HGetAll(t.Context(), name).Result(); err != nil || len(got) != 0 {
				t.Fatalf("the lock is still in Redis after the second acquisition and its Unlock: %v, %v", got, err)
			}
		})
	}
}

// TestContractReadBatchAfterFailedUnlock: a reader whose last RUnlock failed and whose next RLock
// waits (Redis still unreachable) behind nothing, with a second reader queued behind it, is tried in
// one read batch with that reader once Redis is back: its failed release is sent again first, so it
// takes a read hold of its own, and after both RUnlocks the lock is free.
func TestContractReadBatchAfterFailedUnlock(t *testing.T) {
	px, _, direct, c := cutCoordinator(t)
	name := t.Name()
	a, b := c.RWMutex(name), c.RWMutex(name)
	mustLock(t, a.Read())
	px.Disable()
	var ue *coordinator.UnlockError
	if err := a.RUnlock(t.Context()); !errors.As(err, &ue) {
		t.Fatalf("RUnlock over a cut connection = %v, want an *UnlockError", err)
	}
	sub := c.Subscribe(coordinator.OfType(messages.EventWaitStarted), 8)
	defer sub.Close()
	aLocked := lockInBackground(t, a.Read())
	// a's failed release, sent again before its RLock, fails again: a waits in the queue.
	if ev := contractWaitEvent(t, sub, messages.EventWaitStarted, 5*time.Second); ev.Owner != a.Read().Owner() {
		t.Fatalf("wait-started of %s, want a's (%s)", ev.Owner, a.Read().Owner())
	}
	bLocked := lockInBackground(t, b.Read())
	if ev := contractWaitEvent(t, sub, messages.EventWaitStarted, 5*time.Second); ev.Owner != b.Read().Owner() {
		t.Fatalf("wait-started of %s, want b's (%s)", ev.Owner, b.Read().Owner())
	}
	px.Enable()
	waitLocked(t, aLocked, 10*time.Second, "a's RLock")
	waitLocked(t, bLocked, 10*time.Second, "b's RLock")
	if n, err := a.Read().HoldCount(t.Context()); err != nil || n != 1 {
		t.Errorf("a's read HoldCount = %d, %v; want 1", n, err)
	}
	if err := a.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := direct.HGetAll(t.Context(), name).Result(); err != nil || len(got) != 0 {
		t.Fatalf("the lock is still in Redis after both RUnlocks: %v, %v", got, err)
	}
}

// unlockWhilePaused unlocks m while srv is paused, resumes srv, and fails the test unless the Unlock
// returned an *UnlockError (the release's reply was not read; go-redis sends it again).
func unlockWhilePaused(t *testing.T, srv *redistest.Server, m *coordinator.Mutex) {
	t.Helper()
	srv.Pause()
	err := m.Unlock(t.Context())
	srv.Resume()
	var ue *coordinator.UnlockError
	if !errors.As(err, &ue) {
		t.Fatalf("Unlock while paused = %v, want an *UnlockError", err)
	}
}
