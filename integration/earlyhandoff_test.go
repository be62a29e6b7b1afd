package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// lockInBackground starts m.Lock on a goroutine and returns a channel that gets its error.
func lockInBackground(t *testing.T, m *coordinator.Mutex) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- m.Lock(t.Context()) }()
	return errc
}

// waitLocked waits for the error of a Lock started by lockInBackground and fails the test unless it
// is nil.
func waitLocked(t *testing.T, errc <-chan error, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("%s: Lock: %v", what, err)
		}
	case <-time.After(within):
		t.Fatalf("%s: Lock did not return within %v", what, within)
	}
}

// earlyWindow is the early handoff window of these tests' coordinators: their holders hold the lock
// for a while (until the waiter waits, and a fault is set up) before the Unlock that hands it over,
// longer than the default window, which runs of short holds fit in.
var earlyWindow = coordinator.WithEarlyHandoffWindow(time.Minute)

// partitioned is a holder a and a waiter b of one lock, on a coordinator whose client reaches srv
// through the proxy px (short timeouts, no retries), after a release of a's that handed the lock to b
// failed because of a partition (failedRelease).
type partitioned struct {
	srv    *redistest.Server
	px     *redistest.Proxy
	client *redis.Client
	direct *redis.Client
	c      *coordinator.Coordinator
	name   string
	a, b   *coordinator.Mutex
}

// failedRelease sets up a holding the lock and b waiting for it, cuts the traffic with cut (px.Stall:
// the release may reach Redis later; px.Disable: it never does), and has a's Unlock fail with an
// *UnlockError, while b gets the lock early. It returns with the partition still on.
func failedRelease(t *testing.T, cut func(*redistest.Proxy), opts ...coordinator.Option) *partitioned {
	t.Helper()
	p := &partitioned{srv: redistest.Start(t), name: t.Name()}
	p.px, p.client = faultProxiedClient(t, p.srv)
	p.direct = p.srv.Client(t)
	p.c = newCoordinator(t, p.client, append([]coordinator.Option{earlyWindow}, opts...)...)
	p.a, p.b = p.c.Mutex(p.name), p.c.Mutex(p.name)
	mustLock(t, p.a)
	bLocked := lockInBackground(t, p.b)
	faultWaitSubscribed(t, p.direct, p.name, 1) // b waits in the lock's queue
	cut(p.px)
	var unlockErr *coordinator.UnlockError
	if err := p.a.Unlock(t.Context()); !errors.As(err, &unlockErr) {
		t.Fatalf("the holder's Unlock during a partition: %v, want an *UnlockError", err)
	}
	waitLocked(t, bLocked, 5*time.Second, "the waiter")
	return p
}

// heal ends the partition and waits until the client reaches Redis again.
func (p *partitioned) heal(t *testing.T) {
	t.Helper()
	p.px.Unstall()
	p.px.Enable()
	faultWaitPing(t, p.client, 5*time.Second)
}

// lockElsewhere locks name from a coordinator of its own on srv (another process, as far as the lock
// goes), within 5 s, and fails the test unless done (a hold's Done) was closed by the time it got the
// lock: no other process may hold the lock while that hold's Done is open.
func lockElsewhere(t *testing.T, srv *redistest.Server, name string, done <-chan struct{}) *coordinator.Mutex {
	t.Helper()
	other := newCoordinator(t, srv.Client(t)).Mutex(name)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("another process's Lock: %v", err)
	}
	select {
	case <-done:
	default:
		t.Fatal("another process holds the lock while the earlier hold's Done is still open")
	}
	return other
}

// proxiedPair returns a holder a (holding the lock named after the test) and a second handle b on the
// same lock, on a coordinator whose client reaches a new redis-server through the proxy px (with a 5 s
// read timeout, so that latency added to px slows the round trips without failing them), and a client
// of the server's own.
func proxiedPair(t *testing.T) (srv *redistest.Server, px *redistest.Proxy, direct *redis.Client, a, b *coordinator.Mutex) {
	t.Helper()
	srv = redistest.Start(t)
	px = redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = client.Close() })
	c := newCoordinator(t, client, earlyWindow)
	a, b = c.Mutex(t.Name()), c.Mutex(t.Name())
	mustLock(t, a)
	return srv, px, srv.Client(t), a, b
}

// TestLocalHandoffGrantsBeforeRedisAnswers: a waiter that the holder hands the lock to in the same
// process gets it as soon as the holder's Unlock starts, while the release that hands it over is still
// on its way to Redis (every round trip takes 500 ms more here), not one round trip later. Its token is
// the previous holder's plus one, at once; Redis' answer records the new holder and raises the token
// counter to that token.
func TestLocalHandoffGrantsBeforeRedisAnswers(t *testing.T) {
	_, px, direct, a, b := proxiedPair(t)
	name := t.Name()
	tokenA := a.Token()
	bLocked := lockInBackground(t, b)
	faultWaitSubscribed(t, direct, name, 1) // b waits in the lock's queue

	const latency = 250 * time.Millisecond // each way: a round trip takes 500 ms more
	px.AddLatency(latency)
	aDone := make(chan error, 1)
	start := time.Now()
	go func() { aDone <- a.Unlock(context.Background()) }()
	waitLocked(t, bLocked, 5*time.Second, "the waiter")
	if took := time.Since(start); took >= latency {
		t.Fatalf("the waiter got the lock %v after the holder's Unlock started: it waited for Redis' answer", took)
	}
	tokenB := b.Token()
	if tokenB != tokenA+1 {
		t.Fatalf("the waiter's token is %d, want the previous holder's plus one, %d", tokenB, tokenA+1)
	}
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatalf("the holder's Unlock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder's Unlock did not return within 5s")
	}
	px.RemoveLatency()
	if got, err := direct.HGetAll(t.Context(), name).Result(); err != nil || len(got) != 1 || got[b.Owner()] != "1" {
		t.Fatalf("the lock in Redis after the handoff: %v (err %v), want only %s: 1", got, err, b.Owner())
	}
	// The counter keeps the value above the waiter's token, for the waiter's own local handoff.
	if tok, err := direct.Get(t.Context(), redisops.TokenKey(name)).Int64(); err != nil || tok != tokenB+1 {
		t.Fatalf("the token counter: %d (%v), want the waiter's token %d plus one", tok, err, tokenB)
	}
	if held, err := b.IsHeld(t.Context()); err != nil || !held {
		t.Fatalf("b.IsHeld: %v, %v", held, err)
	}
	mustUnlock(t, b)
}

// TestEarlyHandoffRevokedWhenHoldWasGone: when the release that hands the lock to a local waiter finds
// that the holder no longer held the lock in Redis (here its key was deleted behind its back, as a
// force unlock from another client would), the waiter that got the lock early loses it at once: its
// Done closes, its token is 0, and its Unlock says it does not hold the lock. The holder's Unlock says
// so too. Nothing is left in Redis, and another owner gets the lock.
func TestEarlyHandoffRevokedWhenHoldWasGone(t *testing.T) {
	_, client, c := setup(t, earlyWindow)
	name := t.Name()
	a, b := c.Mutex(name), c.Mutex(name)
	mustLock(t, a)
	bLocked := lockInBackground(t, b)
	faultWaitSubscribed(t, client, name, 1)

	if err := client.Del(t.Context(), name).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("the holder's Unlock after its hold was deleted: %v, want ErrNotHeld", err)
	}
	waitLocked(t, bLocked, 5*time.Second, "the waiter")
	waitFor(t, b.Done(), 5*time.Second, "the end of the waiter's unconfirmed hold")
	if tok := b.Token(); tok != 0 {
		t.Fatalf("the waiter's token is %d after its hold was revoked, want 0", tok)
	}
	if err := b.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("the waiter's Unlock: %v, want ErrNotHeld", err)
	}
	if n := client.Exists(t.Context(), name).Val(); n != 0 {
		t.Fatalf("the lock's key exists after both Unlocks: %v", client.HGetAll(t.Context(), name).Val())
	}
	other := c.Mutex(name)
	if ok, err := other.TryLock(t.Context()); err != nil || !ok {
		t.Fatalf("another owner's TryLock: %v, %v", ok, err)
	}
	mustUnlock(t, other)
}

// TestEarlyHandoffConfirmedByRetriedUnlock: when the release that hands the lock to a local waiter fails
// on a Redis error (a partition: it may or may not have taken effect), the waiter that got the lock
// early keeps it, with its token, as the holder's hold would have stayed valid; the holder's Unlock,
// called again once the partition heals, sends the same release, whose answer confirms the waiter's
// hold. The waiter then holds the lock in Redis and releases it.
func TestEarlyHandoffConfirmedByRetriedUnlock(t *testing.T) {
	p := failedRelease(t, (*redistest.Proxy).Stall)
	a, b := p.a, p.b
	if tok, want := b.Token(), a.Token()+1; tok != want {
		t.Fatalf("the waiter's token is %d, want the holder's plus one, %d", tok, want)
	}
	tokenB := b.Token()
	p.heal(t)
	if err := a.Unlock(t.Context()); err != nil {
		t.Fatalf("the holder's retried Unlock: %v", err)
	}
	if held, err := b.IsHeld(t.Context()); err != nil || !held {
		t.Fatalf("b.IsHeld after the retried release: %v, %v", held, err)
	}
	select {
	case <-b.Done():
		t.Fatal("the waiter's hold ended although the retried release confirmed it")
	default:
	}
	if tok, err := p.direct.Get(t.Context(), redisops.TokenKey(p.name)).Int64(); err != nil || tok != tokenB+1 {
		t.Fatalf("the token counter: %d (%v), want the waiter's token %d plus one", tok, err, tokenB)
	}
	mustUnlock(t, b)
	if n := p.direct.Exists(t.Context(), p.name).Val(); n != 0 {
		t.Fatalf("the lock's key exists after the waiter's Unlock: %v", p.direct.HGetAll(t.Context(), p.name).Val())
	}
}

// TestEarlyHandoffConfirmedByActorRetry: when the release that hands the lock to a local waiter fails
// on a Redis error and the holder never calls Unlock again, the lock actor sends the release again
// itself once Redis answers (on the watchdog's next try, a tenth of the watchdog timeout later): the
// waiter's hold is confirmed, renewed from then on, and released by its Unlock.
func TestEarlyHandoffConfirmedByActorRetry(t *testing.T) {
	p := failedRelease(t, (*redistest.Proxy).Stall, coordinator.WithWatchdogTimeout(2*time.Second))
	b := p.b
	p.heal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if held, err := b.IsHeld(ctx); err != nil || !held { // waits for the confirmation
		t.Fatalf("b.IsHeld: %v, %v (the lock: %v)", held, err, p.direct.HGetAll(t.Context(), p.name).Val())
	}
	if got := p.direct.HGetAll(t.Context(), p.name).Val(); len(got) != 1 || got[b.Owner()] != "1" {
		t.Fatalf("the lock in Redis: %v, want only %s: 1", got, b.Owner())
	}
	// Renewed past the holder's validity (a 2 s watchdog timeout): its Done stays open.
	select {
	case <-b.Done():
		t.Fatal("the waiter's confirmed hold ended")
	case <-time.After(3 * time.Second):
	}
	mustUnlock(t, b)
}

// TestEarlyHandoffUnconfirmedEndsWithHolderValidity: when the release that hands the lock to a local
// waiter fails and Redis does not answer again before the holder's validity runs out, the waiter's
// hold, which Redis never confirmed, ends (Done closes) then: past it, the holder's field in Redis may
// have expired. The lock is free for another owner once Redis answers again.
func TestEarlyHandoffUnconfirmedEndsWithHolderValidity(t *testing.T) {
	const watchdog = time.Second
	p := failedRelease(t, (*redistest.Proxy).Stall, coordinator.WithWatchdogTimeout(watchdog))
	b := p.b
	if tok := b.Token(); tok == 0 {
		t.Fatal("the waiter's token is 0 right after its Lock")
	}
	waitFor(t, b.Done(), 2*watchdog, "the end of the waiter's unconfirmed hold")
	p.heal(t)
	if err := b.Unlock(t.Context()); err != nil && !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("the waiter's Unlock after its hold ended: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	other := p.c.Mutex(p.name)
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("another owner's Lock: %v (the lock: %v)", err, p.direct.HGetAll(t.Context(), p.name).Val())
	}
	mustUnlock(t, other)
}

// TestEarlyHandoffHolderLocksAgain: the holder whose release granted a local waiter early, and failed
// on a Redis error, locks again. Its own field may still be in Redis, so its Lock must not count as a
// re-entry while the waiter holds the lock: the actor first sends the release again, which confirms the
// waiter, and the holder then waits for the waiter's Unlock.
func TestEarlyHandoffHolderLocksAgain(t *testing.T) {
	p := failedRelease(t, (*redistest.Proxy).Disable) // the release never reaches Redis
	a, b := p.a, p.b
	p.heal(t)
	aLocked := lockInBackground(t, a)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if held, err := b.IsHeld(ctx); err != nil || !held {
		t.Fatalf("b.IsHeld: %v, %v (the lock: %v)", held, err, p.direct.HGetAll(t.Context(), p.name).Val())
	}
	faultWaitSubscribed(t, p.direct, p.name, 1) // a waits for the lock
	select {
	case err := <-aLocked:
		t.Fatalf("the former holder's Lock returned (%v) while the waiter holds the lock", err)
	default:
	}
	if err := b.Unlock(t.Context()); err != nil {
		t.Fatalf("the waiter's Unlock: %v", err)
	}
	waitLocked(t, aLocked, 5*time.Second, "the former holder")
	mustUnlock(t, a)
}

// TestEarlyHandoffTokenCounterAhead: when the token counter is already above the holder's token (a
// RedLock floor, or another client of the counter), the token the waiter was given early is not above
// every token issued: the release hands the lock over all the same, so that no other client takes it
// while the waiter may use it, and the waiter's hold ends (Done closes) before the lock is given back.
func TestEarlyHandoffTokenCounterAhead(t *testing.T) {
	srv, px, direct, a, b := proxiedPair(t)
	name := t.Name()
	if err := direct.Set(t.Context(), redisops.TokenKey(name), a.Token()+1000, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	bLocked := lockInBackground(t, b)
	faultWaitSubscribed(t, direct, name, 1)
	px.AddLatency(100 * time.Millisecond)
	go func() { _ = a.Unlock(context.Background()) }()
	waitLocked(t, bLocked, 5*time.Second, "the waiter")
	other := lockElsewhere(t, srv, name, b.Done())
	if other.Token() <= a.Token()+1000 {
		t.Fatalf("the other process's token %d is not above the counter %d", other.Token(), a.Token()+1000)
	}
	mustUnlock(t, other)
}

// TestEarlyHandoffValidityFromFirstCopy: the release that grants a waiter (with a 2 s lease) early
// runs in Redis, but its answer is lost (the server paused past the client's read timeout). When the
// release is sent again later (here by the former holder's TryLock), the latch answers what the
// first copy did; the waiter's validity counts from its grant, before that first copy, not from the
// copy sent again: its Done closes before Redis drops its field, so no other process gets the lock while
// its Done is open.
func TestEarlyHandoffValidityFromFirstCopy(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 200 * time.Millisecond,
		WriteTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	direct := srv.Client(t)
	c := newCoordinator(t, client, earlyWindow)
	name := t.Name()
	a, b := c.Mutex(name), c.Mutex(name)
	loadScripts(t, client) // the release that the pause holds back runs as sent
	mustLock(t, a)
	const lease = 2 * time.Second
	bLocked := make(chan error, 1)
	go func() {
		ok, err := b.TryLock(t.Context(), coordinator.Wait(20*time.Second), coordinator.Lease(lease))
		if err == nil && !ok {
			err = errors.New("not obtained")
		}
		bLocked <- err
	}()
	faultWaitSubscribed(t, direct, name, 1)

	srv.Pause()
	var unlockErr *coordinator.UnlockError
	err := a.Unlock(t.Context())
	if !errors.As(err, &unlockErr) {
		srv.Resume()
		t.Fatalf("the holder's Unlock while Redis is paused: %v, want an *UnlockError", err)
	}
	waitLocked(t, bLocked, 5*time.Second, "the waiter")
	srv.Resume() // the release, buffered, runs now: the waiter's field gets its 2 s lease
	deadline := time.Now().Add(5 * time.Second)
	for !direct.HExists(t.Context(), name, b.Owner()).Val() {
		if time.Now().After(deadline) {
			t.Fatalf("the paused release did not run: %v", direct.HGetAll(t.Context(), name).Val())
		}
		<-time.After(5 * time.Millisecond) // polls Redis for the state the test waits on
	}
	<-time.After(lease / 2) // lets the waiter's lease age before the release is sent again
	// The former holder's TryLock sends the release again first, then finds the lock taken.
	if ok, err := a.TryLock(t.Context()); ok || err != nil {
		t.Fatalf("the former holder's TryLock while the waiter holds the lock: %v, %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if held, err := b.IsHeld(ctx); err != nil || !held {
		t.Fatalf("b.IsHeld: %v, %v", held, err)
	}
	other := lockElsewhere(t, srv, name, b.Done())
	mustUnlock(t, other)
	if err := b.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("the waiter's Unlock after its lease ran out: %v, want ErrNotHeld", err)
	}
}

// TestEarlyHandoffFixedLeasesResent: with fixed leases no hold of the actor has a watchdog after the
// failed release, and the release is sent again all the same once Redis answers: the waiter's IsHeld,
// which waits for the confirmation, answers within a few seconds, not at the end of its lease.
func TestEarlyHandoffFixedLeasesResent(t *testing.T) {
	srv := redistest.Start(t)
	px, client := faultProxiedClient(t, srv)
	direct := srv.Client(t)
	c := newCoordinator(t, client, earlyWindow)
	name := t.Name()
	a, b := c.Mutex(name), c.Mutex(name)
	if ok, err := a.TryLock(t.Context(), coordinator.Lease(20*time.Second)); !ok || err != nil {
		t.Fatalf("a.TryLock: %v, %v", ok, err)
	}
	bLocked := make(chan error, 1)
	go func() {
		ok, err := b.TryLock(t.Context(), coordinator.Wait(20*time.Second), coordinator.Lease(20*time.Second))
		if err == nil && !ok {
			err = errors.New("not obtained")
		}
		bLocked <- err
	}()
	faultWaitSubscribed(t, direct, name, 1)
	px.Disable()
	var unlockErr *coordinator.UnlockError
	if err := a.Unlock(t.Context()); !errors.As(err, &unlockErr) {
		t.Fatalf("the holder's Unlock: %v, want an *UnlockError", err)
	}
	waitLocked(t, bLocked, 5*time.Second, "the waiter")
	px.Enable()
	faultWaitPing(t, client, 5*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	if held, err := b.IsHeld(ctx); err != nil || !held {
		t.Fatalf("b.IsHeld: %v, %v (the lock: %v)", held, err, direct.HGetAll(t.Context(), name).Val())
	}
	mustUnlock(t, b)
}

// TestEarlyHandoffUnlockKeepsItsDeadline: while the release that granted a waiter early has an unknown
// outcome and Redis still does not answer, the waiter's Unlock first has that release sent again, a
// Redis call; an Unlock whose ctx ends returns by then, as it does for its own release, rather than
// wait for that call on its own goroutine (here it would wait for the client's 1 s read timeout).
func TestEarlyHandoffUnlockKeepsItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	px := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	t.Cleanup(func() { px.Unstall() })
	c := newCoordinator(t, client, earlyWindow)
	name := t.Name()
	a, b := c.Mutex(name), c.Mutex(name)
	mustLock(t, a)
	bLocked := lockInBackground(t, b)
	faultWaitSubscribed(t, srv.Client(t), name, 1)
	px.Stall()
	var unlockErr *coordinator.UnlockError
	if err := a.Unlock(t.Context()); !errors.As(err, &unlockErr) {
		t.Fatalf("the holder's Unlock during a partition: %v, want an *UnlockError", err)
	}
	waitLocked(t, bLocked, 5*time.Second, "the waiter")

	const deadline = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	start := time.Now()
	err := b.Unlock(ctx)
	if took := time.Since(start); took > 6*deadline {
		t.Fatalf("the waiter's Unlock with a %v deadline returned after %v (%v)", deadline, took, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the waiter's Unlock: %v, want context.DeadlineExceeded", err)
	}
}

// TestEarlyHandoffNeedsRecentConfirmation: with the default window, a holder whose hold Redis last
// confirmed longer ago than the window (here its Lock, more than twice the window before its Unlock)
// hands the lock over only once Redis has answered: Redis might have lost that hold meanwhile (a
// restart, a failover) without the holder knowing, and the waiter must not get a lock that no longer
// protects it. Every round trip takes 500 ms more here.
func TestEarlyHandoffNeedsRecentConfirmation(t *testing.T) {
	srv := redistest.Start(t)
	px := redistest.NewProxy(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: px.Addr(), ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = client.Close() })
	c := newCoordinator(t, client)
	a, b := c.Mutex(t.Name()), c.Mutex(t.Name())
	mustLock(t, a)
	confirmed := time.Now() // at the latest
	bLocked := lockInBackground(t, b)
	faultWaitSubscribed(t, srv.Client(t), t.Name(), 1)
	<-time.After(time.Until(confirmed.Add(2 * coordinator.DefaultEarlyHandoffWindow))) // the hold ages past the window
	const latency = 250 * time.Millisecond
	px.AddLatency(latency)
	start := time.Now()
	go func() { _ = a.Unlock(context.Background()) }()
	waitLocked(t, bLocked, 5*time.Second, "the waiter")
	if took := time.Since(start); took < 2*latency {
		t.Fatalf("the waiter got the lock %v after the holder's Unlock started, before Redis' answer could come", took)
	}
	px.RemoveLatency()
	mustUnlock(t, b)
}

// TestEarlyGrantTokenNeverIssuedAgain: the token of a waiter granted early is never issued to another
// client, even when the release that hands it over never reaches Redis and the holder's field lapses
// there while the counter still lives (a 1 s watchdog, against the counter's 10 s): the holder's
// acquisition kept that token, and the next client's token is above it.
func TestEarlyGrantTokenNeverIssuedAgain(t *testing.T) {
	const watchdog = time.Second
	p := failedRelease(t, (*redistest.Proxy).Disable, coordinator.WithWatchdogTimeout(watchdog))
	early := p.b.Token()
	if early != p.a.Token()+1 {
		t.Fatalf("the early waiter's token %d, want the holder's %d plus one", early, p.a.Token())
	}
	waitFor(t, p.b.Done(), 3*watchdog, "the end of the waiter's unconfirmed hold")
	other := lockElsewhere(t, p.srv, p.name, p.b.Done()) // once the holder's field has lapsed
	if other.Token() <= early {
		t.Errorf("another process got token %d, not above the early waiter's %d", other.Token(), early)
	}
	mustUnlock(t, other)
}
