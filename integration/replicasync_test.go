package integration

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// replicaSyncTimeout is the WAIT timeout of these tests: short, so that a paused replica costs little.
const replicaSyncTimeout = 300 * time.Millisecond

// waitCounter counts the WAIT commands a client sends, pipelined or not.
type waitCounter struct{ n atomic.Int64 }

func (h *waitCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *waitCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *waitCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *waitCounter) count(cmd redis.Cmder) {
	if cmd.Name() == "wait" {
		h.n.Add(1)
	}
}

// replicated starts a master with one replica, waits until the replica acknowledges writes, and
// returns the replica and a client on the master whose WAITs are counted.
func replicated(t *testing.T) (*redistest.Server, *redis.Client, *waitCounter) {
	t.Helper()
	rs := redistest.StartReplicaSet(t, 1)
	probe := rs.Master.Client(t)
	// A replica that just went online acknowledges nothing for the better part of a second: poll
	// until a write is acknowledged.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := probe.Set(t.Context(), "replicasync:probe", "1", 0).Err(); err != nil {
			t.Fatalf("SET probe: %v", err)
		}
		if n, err := probe.Wait(t.Context(), 1, 50*time.Millisecond).Result(); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica acknowledged no write within 15s")
		}
	}
	client := rs.Master.Client(t)
	waits := &waitCounter{}
	client.AddHook(waits)
	return rs.Replicas[0], client, waits
}

// expectNotSynced runs call and fails unless it returns ErrNotSynced (and not ErrNotObtained) after
// about the sync timeout.
func expectNotSynced(t *testing.T, what string, call func() error) {
	t.Helper()
	start := time.Now()
	err := call()
	took := time.Since(start)
	if !errors.Is(err, coordinator.ErrNotSynced) || errors.Is(err, coordinator.ErrNotObtained) {
		t.Fatalf("%s with the replica paused = %v, want ErrNotSynced", what, err)
	}
	if took < replicaSyncTimeout || took > replicaSyncTimeout+2*time.Second {
		t.Errorf("%s failed after %v, want about %v", what, took, replicaSyncTimeout)
	}
}

// expectKeysGone fails unless none of keys exists.
func expectKeysGone(t *testing.T, client *redis.Client, keys ...string) {
	t.Helper()
	n, err := client.Exists(t.Context(), keys...).Result()
	if err != nil || n != 0 {
		t.Errorf("EXISTS %v = %d, %v; want none left", keys, n, err)
	}
}

// TestReplicaSyncHealthyReplica: by default, with a replica in sync, locks of every kind work and each
// acquisition is followed by a WAIT.
func TestReplicaSyncHealthyReplica(t *testing.T) {
	_, client, waits := replicated(t)
	c := newCoordinator(t, client)
	ctx := t.Context()
	const name = "replicasync:healthy"

	m := c.Mutex(name)
	mustLock(t, m)
	mustLock(t, m) // re-entry
	if ok, err := c.Mutex(name).TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock of a held lock = %v, %v; want false, nil", ok, err)
	}
	mustUnlock(t, m)
	mustUnlock(t, m)
	f := c.FairMutex(name + ":fair")
	mustLock(t, f)
	mustUnlock(t, f)
	rw := c.RWMutex(name + ":rw")
	if err := rw.RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	if err := rw.RUnlock(ctx); err != nil {
		t.Fatalf("RUnlock: %v", err)
	}
	if err := rw.Lock(ctx); err != nil {
		t.Fatalf("Lock (write): %v", err)
	}
	if err := rw.Unlock(ctx); err != nil {
		t.Fatalf("Unlock (write): %v", err)
	}
	// Five acquisitions (lock, re-entry, fair, read, write) and the failed TryLock, whose WAIT is
	// sent in the same pipeline before the answer is known.
	if n := waits.n.Load(); n < 5 {
		t.Errorf("%d WAITs sent, want at least 5", n)
	}
}

// TestReplicaSyncPausedReplica: with the replica paused, Lock and TryLock of every kind fail with
// ErrNotSynced after about the sync timeout, and nothing of the hold is left in Redis.
func TestReplicaSyncPausedReplica(t *testing.T) {
	replica, client, _ := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const name = "replicasync:paused"
	replica.Pause()
	t.Cleanup(replica.Resume)

	m := c.Mutex(name)
	expectNotSynced(t, "Lock", func() error { return m.Lock(ctx) })
	expectNotSynced(t, "TryLock", func() error {
		ok, err := m.TryLock(ctx, coordinator.Lease(time.Minute))
		if ok {
			t.Error("TryLock reported true")
		}
		return err
	})
	expectKeysGone(t, client, name)
	if held, err := m.IsHeld(ctx); held || err != nil {
		t.Errorf("IsHeld = %v, %v; want false", held, err)
	}

	f := c.FairMutex(name + ":fair")
	expectNotSynced(t, "fair Lock", func() error { return f.Lock(ctx) })
	expectKeysGone(t, client, name+":fair", redisops.FairQueueKey(name+":fair"), redisops.FairTimeoutKey(name+":fair"))

	rw := c.RWMutex(name + ":rw")
	expectNotSynced(t, "RLock", func() error { return rw.RLock(ctx) })
	expectNotSynced(t, "write Lock", func() error { return rw.Lock(ctx) })
	expectKeysGone(t, client, name+":rw", redisops.ReadTimeoutKey(name+":rw", rw.Read().Owner(), 1))

	// Once the replica is back, the same handle locks as usual.
	replica.Resume()
	mustLock(t, m)
	mustUnlock(t, m)
}

// TestReplicaSyncPausedReplicaFailsWaiter: a Lock that waits fails with ErrNotSynced, rather than
// waiting on, when the lock handed to it is not acknowledged; the holder's Unlock succeeds and the lock
// ends up free.
func TestReplicaSyncPausedReplicaFailsWaiter(t *testing.T) {
	replica, client, _ := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const name = "replicasync:waiter"
	holder, waiter := c.Mutex(name), c.Mutex(name)
	mustLock(t, holder)
	errc := lockAsync(ctx, waiter)
	// The lock actor subscribes the lock's channel once the waiter waits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		subs, err := client.PubSubNumSub(ctx, redisops.ChannelName(name)).Result()
		if err == nil && subs[redisops.ChannelName(name)] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not subscribe within 10s")
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
	replica.Pause()
	t.Cleanup(replica.Resume)
	start := time.Now()
	mustUnlock(t, holder)
	select {
	case err := <-errc:
		if !errors.Is(err, coordinator.ErrNotSynced) {
			t.Fatalf("waiting Lock = %v, want ErrNotSynced", err)
		}
		if took := time.Since(start); took > replicaSyncTimeout+2*time.Second {
			t.Errorf("waiting Lock failed after %v, want about %v", took, replicaSyncTimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Lock did not return within 10s")
	}
	expectKeysGone(t, client, name)
}

// TestReplicaSyncNoReplicas: a master without replicas gets no WAIT.
func TestReplicaSyncNoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	waits := &waitCounter{}
	client.AddHook(waits)
	c := newCoordinator(t, client)
	m := c.Mutex("replicasync:alone")
	mustLock(t, m)
	mustUnlock(t, m)
	rw := c.RWMutex("replicasync:alone:rw")
	if err := rw.RLock(t.Context()); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	if n := waits.n.Load(); n != 0 {
		t.Errorf("%d WAITs sent to a master without replicas, want 0", n)
	}
}

// TestReplicaSyncOff: WithoutReplicaSync sends no WAIT, even with a paused replica.
func TestReplicaSyncOff(t *testing.T) {
	replica, client, waits := replicated(t)
	c := newCoordinator(t, client, coordinator.WithoutReplicaSync())
	replica.Pause()
	t.Cleanup(replica.Resume)
	m := c.Mutex("replicasync:off")
	mustLock(t, m)
	mustUnlock(t, m)
	if n := waits.n.Load(); n != 0 {
		t.Errorf("%d WAITs sent with the safeguard off, want 0", n)
	}
}

// TestReplicaSyncMiniredis: the default coordinator works on miniredis (the examples' fallback), which
// reports no replicas.
func TestReplicaSyncMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	c := newCoordinator(t, client)
	m := c.Mutex("replicasync:miniredis")
	mustLock(t, m)
	if ok, err := c.Mutex("replicasync:miniredis").TryLock(t.Context()); ok || err != nil {
		t.Fatalf("TryLock of a held lock = %v, %v; want false, nil", ok, err)
	}
	mustUnlock(t, m)
}

// TestReplicaSyncFreshMasterPausedReplica: on a fresh master, whose only replica is in sync but has
// acknowledged offset 0 (nothing was written yet), a lock taken while that replica is frozen is not
// granted: the replica counts and the WAIT falls short.
func TestReplicaSyncFreshMasterPausedReplica(t *testing.T) {
	// No replication ping, so that the master's offset stays 0 until the lock's script writes.
	rs := redistest.StartReplicaSet(t, 1, redistest.WithArgs("--repl-ping-replica-period", "3600"))
	client := rs.Master.Client(t)
	info, err := client.Info(t.Context(), "replication").Result()
	if err != nil {
		t.Fatalf("INFO replication: %v", err)
	}
	if !strings.Contains(info, ",state=online,offset=0,") {
		t.Fatalf("want a fresh master whose online replica acknowledged offset 0, got %q", info)
	}
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout))
	rs.Replicas[0].Pause()
	t.Cleanup(rs.Replicas[0].Resume)
	m := c.Mutex("replicasync:fresh")
	expectNotSynced(t, "TryLock", func() error {
		ok, err := m.TryLock(t.Context())
		if ok {
			t.Error("TryLock reported true with the only replica frozen")
		}
		return err
	})
	expectKeysGone(t, client, m.Name())
}

// TestReplicaSyncFirstScriptUseOneTimeout: the first use of a script on a master (here the fair
// lock's, after plain locks loaded theirs and wrote on the connection) with the replica frozen fails
// after one sync timeout, not two: the WAIT only follows a script that ran.
func TestReplicaSyncFirstScriptUseOneTimeout(t *testing.T) {
	replica, master, _ := replicated(t)
	// One connection, so that the fair lock's call meets the connection that wrote the plain lock.
	client := redis.NewClient(&redis.Options{Addr: master.Options().Addr, PoolSize: 1})
	t.Cleanup(func() { _ = client.Close() })
	const timeout = 500 * time.Millisecond
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, timeout))
	const name = "replicasync:firstuse"
	m := c.Mutex(name)
	mustLock(t, m)
	mustUnlock(t, m)
	replica.Pause()
	t.Cleanup(replica.Resume)
	f := c.FairMutex(name + ":fair")
	start := time.Now()
	err := f.Lock(t.Context())
	took := time.Since(start)
	if !errors.Is(err, coordinator.ErrNotSynced) {
		t.Fatalf("fair Lock with the replica frozen = %v, want ErrNotSynced", err)
	}
	t.Logf("the first fair Lock failed after %v (sync timeout %v)", took.Round(time.Millisecond), timeout)
	if took < timeout || took >= timeout*3/2 {
		t.Errorf("the first fair Lock failed after %v, want about one sync timeout (%v), not two", took, timeout)
	}
}

// TestReplicaSyncFirstLockHealthyReplica: the first lock on a fresh master with a healthy replica
// takes far less than one sync timeout.
func TestReplicaSyncFirstLockHealthyReplica(t *testing.T) {
	_, client, waits := replicated(t)
	c := newCoordinator(t, client)
	for _, m := range []*coordinator.Mutex{c.Mutex("replicasync:first"), c.FairMutex("replicasync:first:fair")} {
		start := time.Now()
		mustLock(t, m)
		if took := time.Since(start); took >= coordinator.DefaultSyncTimeout/2 {
			t.Errorf("the first Lock of %s took %v, want well under the sync timeout %v", m.Name(), took, coordinator.DefaultSyncTimeout)
		}
		mustUnlock(t, m)
	}
	if n := waits.n.Load(); n < 2 {
		t.Errorf("%d WAITs sent, want at least 2", n)
	}
}

// TestReplicaSyncDefaultMajority: by default a lock must reach a majority of the master's replicas: 2
// of 2, so with one of two replicas frozen TryLock fails with ErrNotSynced; WithReplicaSync(1, ...)
// still asks for one and is granted.
func TestReplicaSyncDefaultMajority(t *testing.T) {
	rs := redistest.StartReplicaSet(t, 2)
	client := rs.Master.Client(t)
	waitAcknowledged(t, client)
	byDefault := newCoordinator(t, client)
	one := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout))
	const name = "replicasync:majority"
	// Both replicas healthy: granted.
	m := byDefault.Mutex(name)
	mustLock(t, m)
	mustUnlock(t, m)
	rs.Replicas[1].Pause()
	t.Cleanup(rs.Replicas[1].Resume)
	expectNotSynced(t, "TryLock by default with 1 of 2 replicas frozen", func() error {
		ok, err := m.TryLock(t.Context())
		if ok {
			t.Error("TryLock reported true")
		}
		return err
	})
	expectKeysGone(t, client, name)
	o := one.Mutex(name)
	if ok, err := o.TryLock(t.Context()); !ok || err != nil {
		t.Fatalf("TryLock with WithReplicaSync(1) and 1 of 2 replicas frozen = %v, %v; want true, nil", ok, err)
	}
	mustUnlock(t, o)
}

// TestReplicaSyncShortReentryUndone: a re-entry with a shorter lease than the hold's, given back because
// the paused replica did not acknowledge it, leaves no second owner. The re-entry and its undo cut the
// lock's expiry on the master (and perhaps on a replica) to the short lease; the hold's validity must
// not outlast that, so another coordinator gets the lock only after the holder's Done closed, and
// while the replica stays paused (no renewal counts) Done closes.
func TestReplicaSyncShortReentryUndone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fair  bool
		lease time.Duration // of the outer hold; 0 for a watchdog hold
	}{
		{name: "plain"},
		{name: "fair", fair: true},
		{name: "plain-fixed-lease", lease: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replica, client, _ := replicated(t)
			c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout))
			other := newCoordinator(t, client, coordinator.WithoutReplicaSync())
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			name := "replicasync:short-reentry:" + tc.name
			mutex := c.Mutex
			if tc.fair {
				mutex = c.FairMutex
			}
			m := mutex(name)
			if tc.lease > 0 {
				if ok, err := m.TryLock(ctx, coordinator.Lease(tc.lease)); !ok || err != nil {
					t.Fatalf("TryLock(Lease(%v)) = %v, %v", tc.lease, ok, err)
				}
			} else {
				mustLock(t, m)
			}
			replica.Pause()
			t.Cleanup(replica.Resume)
			expectNotSynced(t, "short re-entry", func() error {
				ok, err := m.TryLock(ctx, coordinator.Lease(500*time.Millisecond))
				if ok {
					t.Error("TryLock reported true")
				}
				return err
			})
			contender := other.Mutex(name)
			if tc.fair {
				contender = other.FairMutex(name)
			}
			ok, err := contender.TryLock(ctx, coordinator.Wait(3*time.Second))
			if err != nil && !errors.Is(err, coordinator.ErrNotObtained) {
				t.Fatalf("contender TryLock: %v", err)
			}
			select {
			case <-m.Done():
			default:
				if ok {
					t.Fatal("another coordinator got the lock while the holder's Done was still open")
				}
				t.Fatal("the holder's Done is open 3s after a 500ms re-entry was undone, with no renewal acknowledged")
			}
		})
	}
}

// TestReplicaSyncRenewalsOneWaitPerTick: the watchdog renews the holds of one name in one coordinator
// (here 5 readers of a read-write lock) in one pipeline followed by one WAIT, so a lagging replica
// costs a tick one sync timeout, not one per hold.
func TestReplicaSyncRenewalsOneWaitPerTick(t *testing.T) {
	replica, client, waits := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout),
		coordinator.WithWatchdogTimeout(3*time.Second))
	const name, readers = "replicasync:renewals-one-wait", 5
	for range readers {
		if err := c.RWMutex(name).RLock(t.Context()); err != nil {
			t.Fatalf("RLock: %v", err)
		}
	}
	sub := c.Subscribe(nil, 0)
	defer sub.Close()
	replica.Pause()
	t.Cleanup(replica.Resume)
	before := waits.n.Load()
	start := time.Now()
	deadline := time.After(10 * time.Second)
	for failed := 0; failed < readers; {
		select {
		case ev := <-sub.Events():
			if ev.Type == messages.EventRenewalFailed {
				failed++
			}
		case <-deadline:
			t.Fatalf("%d of %d renewals failed within 10s of the replica's pause", failed, readers)
		}
	}
	if n := waits.n.Load() - before; n != 1 {
		t.Errorf("%d WAITs for the first tick's %d renewals, want 1", n, readers)
	}
	took := time.Since(start)
	t.Logf("the first tick's %d renewals failed %v after the pause", readers, took.Round(time.Millisecond))
	if took > time.Second+2*replicaSyncTimeout {
		t.Errorf("the first tick's renewals failed %v after the pause, want within one tick (1s) and one sync timeout", took.Round(time.Millisecond))
	}
}

// TestReplicaSyncLateUnacknowledgedRenewalGivesBack: a renewal that the master carried out but the
// replicas did not acknowledge, answered after the hold's Done closed (its WAIT ran the whole sync
// timeout), is given back: the lock is free on the master at once rather than a watchdog timeout after
// that renewal, with nobody holding it.
func TestReplicaSyncLateUnacknowledgedRenewalGivesBack(t *testing.T) {
	const watchdog, syncTimeout = 6 * time.Second, 2 * time.Second
	replica, client, _ := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, syncTimeout),
		coordinator.WithWatchdogTimeout(watchdog))
	const name = "replicasync:late-unacked-renewal"
	m := c.Mutex(name)
	mustLock(t, m)
	replica.Pause()
	t.Cleanup(replica.Resume)
	// The first tick's renewal (at a third of the watchdog timeout) answers a sync timeout later, not
	// acknowledged; the next, a tenth of the watchdog timeout after that, is still waiting for its WAIT
	// when the validity of the acquisition runs out. It renewed the key on the master for a watchdog
	// timeout from when it ran.
	waitFor(t, m.Done(), 2*watchdog, "Done closing while the replica is paused")
	// Given back once the renewal in flight answered.
	gone := waitKeyGone(t, client, name, time.Now(), syncTimeout+watchdog/10, "Done closed")
	t.Logf("the lock was free on the master %v after Done closed", gone.Round(time.Millisecond))
}

// TestReplicaSyncExpiredHoldGivesBackUnacknowledgedRenewal: a watchdog hold whose renewals the master
// took but the replicas did not acknowledge runs out at the validity it had last acknowledged; the
// master's key, extended by those renewals, is given back then, not left to keep contenders out until
// the last renewal's lease ends. The sync timeout is short, so the renewals answer in time and the
// validity runs out between two of them.
func TestReplicaSyncExpiredHoldGivesBackUnacknowledgedRenewal(t *testing.T) {
	const watchdog, syncTimeout = 3 * time.Second, 20 * time.Millisecond
	replica, client, _ := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, syncTimeout),
		coordinator.WithWatchdogTimeout(watchdog))
	name := "replicasync:" + t.Name()
	m := c.Mutex(name)
	mustLock(t, m)
	replica.Pause()
	t.Cleanup(replica.Resume)
	waitFor(t, m.Done(), 2*watchdog, "Done closing while the replica is paused")
	gone := waitKeyGone(t, client, name, time.Now(), watchdog/3, "Done closed")
	t.Logf("the lock was free on the master %v after Done closed", gone.Round(time.Millisecond))
}

// TestReplicaSyncWaitWithinCallBound: on a client that honours context deadlines, a renewal is bounded
// by the stop release timeout (400 ms here), shorter than the sync timeout (1s): its WAIT ends within
// the time the call has left, so that a paused replica still reads as "not acknowledged"
// (ErrRenewalNotSynced, which marks the renewal for a give-back), not as a Redis timeout.
func TestReplicaSyncWaitWithinCallBound(t *testing.T) {
	replica, probe, _ := replicated(t)
	client := redis.NewClient(&redis.Options{Addr: probe.Options().Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, time.Second),
		coordinator.WithStopReleaseTimeout(400*time.Millisecond), coordinator.WithWatchdogTimeout(3*time.Second))
	m := c.Mutex(t.Name())
	mustLock(t, m)
	sub := c.Subscribe(coordinator.OfType(messages.EventRenewalFailed), 16)
	defer sub.Close()
	replica.Pause()
	t.Cleanup(replica.Resume)
	select {
	case ev := <-sub.Events():
		if !strings.Contains(ev.Reason, redisops.ErrRenewalNotSynced.Error()) {
			t.Fatalf("renewal failed with %q, want %q", ev.Reason, redisops.ErrRenewalNotSynced)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal failed within 10s of the replica's pause")
	}
}
