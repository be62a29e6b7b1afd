package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redissontest"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// inspectUntil inspects name until ok accepts the result, for at most 5 s: for states that another
// goroutine is bringing about (a waiter joining a queue, a registration being written).
func inspectUntil(t *testing.T, c *coordinator.Coordinator, name string, ok func(coordinator.Inspection) bool) coordinator.Inspection {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		in, err := c.Inspect(t.Context(), name)
		if err != nil {
			t.Fatalf("Inspect(%q): %v", name, err)
		}
		if ok(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect(%q) did not reach the state wanted within 5s; last: %+v", name, in)
		}
		<-tick.C
	}
}

// registered reports whether every holder and waiter of in has its process.
func registered(in coordinator.Inspection) bool {
	for _, h := range in.Holders {
		if h.Process == nil {
			return false
		}
	}
	for _, w := range in.Queue {
		if w.Process == nil {
			return false
		}
	}
	return true
}

// checkThisProcess fails the test unless p is this test process, registered by coordinator c.
func checkThisProcess(t *testing.T, p *coordinator.Process, c *coordinator.Coordinator) {
	t.Helper()
	host, _ := os.Hostname()
	if p == nil || p.ID != c.ID() || p.PID != os.Getpid() || p.Host != host || p.Version != coordinator.Version ||
		p.Started.IsZero() || time.Since(p.Started) > time.Minute || p.Program == "" {
		t.Fatalf("process = %+v, want coordinator %s on %s pid %d, version %s", p, c.ID(), host, os.Getpid(), coordinator.Version)
	}
}

// TestInspectPlainLock: a lock held twice by one coordinator, inspected from another: the holder, its
// hold count, its process, the lease and the fencing token.
func TestInspectPlainLock(t *testing.T) {
	t.Parallel()
	srv, _, a := setup(t)
	b := newCoordinator(t, srv.Client(t), coordinator.WithoutProcessRegistry())
	name := t.Name()
	m := a.Mutex(name)
	locked := time.Now()
	mustLock(t, m)
	mustLock(t, m)
	in := inspectUntil(t, b, name, registered)
	if in.Kind != coordinator.ObjectLock || in.RedisType != "hash" || len(in.Holders) != 1 {
		t.Fatalf("Inspect = %+v, want a lock with one holder", in)
	}
	h := in.Holders[0]
	if h.Owner != m.Owner() || h.Count != 2 || h.Mode != "" {
		t.Fatalf("holder = %+v, want %s with count 2", h, m.Owner())
	}
	checkThisProcess(t, h.Process, a)
	if in.Lease <= 20*time.Second || in.Lease > coordinator.DefaultWatchdogTimeout || in.NoExpiry {
		t.Fatalf("lease = %v (no expiry %v), want about the watchdog timeout", in.Lease, in.NoExpiry)
	}
	if in.Token != m.Token() || in.Token == 0 {
		t.Fatalf("token = %d, want the holder's %d", in.Token, m.Token())
	}
	// The holder's process is found however the owner id was given, as long as it starts with a
	// registered coordinator's id.
	procs, err := b.Processes(t.Context(), a.ID(), "not-registered")
	if err != nil || len(procs) != 1 {
		t.Fatalf("Processes = %v, %v, want a's registration only", procs, err)
	}
	// Once the hold is older than a second, its process records since when it is held.
	in = inspectUntil(t, b, name, func(in coordinator.Inspection) bool { return !in.Holders[0].HeldSince.IsZero() })
	if since := in.Holders[0].HeldSince; since.Before(locked.Add(-time.Second)) || since.After(locked.Add(time.Second)) {
		t.Fatalf("held since %v, want about %v", since, locked)
	}
	token := m.Token()
	mustUnlock(t, m)
	mustUnlock(t, m)
	// The registration forgets the hold.
	heldFields := func() []string {
		fields, err := srv.Client(t).HKeys(t.Context(), redisops.ProcessKey(a.ID())).Result()
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(fields, func(f string) bool { return !strings.HasPrefix(f, "held:") })
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(heldFields()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the registration still records %v 5s after the unlocks", heldFields())
		}
		<-time.After(20 * time.Millisecond)
	}
	in, err = b.Inspect(t.Context(), name)
	// The Unlock of the last hold raised the counter by one (redisops.Inspection.Token).
	if err != nil || in.Kind != coordinator.ObjectNone || len(in.Holders) != 0 || in.Lease != 0 || in.Token != token+1 {
		t.Fatalf("after the unlocks: Inspect = %+v, %v, want nothing held and the last token plus one, %d", in, err, token+1)
	}
}

// TestInspectFairQueue: a fair lock with two waiters queued behind its holder shows the queue in
// order, each waiter with its deadline and process.
func TestInspectFairQueue(t *testing.T) {
	t.Parallel()
	srv, _, a := setup(t)
	b := newCoordinator(t, srv.Client(t))
	name := t.Name()
	holder := a.FairMutex(name)
	mustLock(t, holder)
	first, second := b.FairMutex(name), a.FairMutex(name)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got1 := lockAsync(ctx, first)
	inspectUntil(t, b, name, func(in coordinator.Inspection) bool { return len(in.Queue) == 1 })
	got2 := lockAsync(ctx, second)
	in := inspectUntil(t, b, name, func(in coordinator.Inspection) bool { return len(in.Queue) == 2 && registered(in) })
	if in.Kind != coordinator.ObjectFairLock || len(in.Holders) != 1 || in.Holders[0].Owner != holder.Owner() {
		t.Fatalf("Inspect = %+v, want a fair lock held by %s", in, holder.Owner())
	}
	if in.Queue[0].Owner != first.Owner() || in.Queue[1].Owner != second.Owner() {
		t.Fatalf("queue = %+v, want %s then %s", in.Queue, first.Owner(), second.Owner())
	}
	// Each waiter's deadline is in the future (a waiter that asks again moves its own on, so their
	// order need not follow the queue's).
	now := time.Now()
	if !in.Queue[0].Deadline.After(now) || !in.Queue[1].Deadline.After(now) {
		t.Fatalf("deadlines %v, %v: want both in the future", in.Queue[0].Deadline, in.Queue[1].Deadline)
	}
	checkThisProcess(t, in.Queue[0].Process, b)
	checkThisProcess(t, in.Queue[1].Process, a)
	mustUnlock(t, holder)
	if err := semRecv(t, got1, 5*time.Second, "first waiter"); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, first)
	if err := semRecv(t, got2, 5*time.Second, "second waiter"); err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, second)
}

// TestInspectReadWriteLock: readers of two coordinators, each with its read lease, then a writer.
func TestInspectReadWriteLock(t *testing.T) {
	t.Parallel()
	srv, _, a := setup(t)
	b := newCoordinator(t, srv.Client(t))
	name := t.Name()
	ra, rb := a.RWMutex(name), b.RWMutex(name)
	for _, rw := range []*coordinator.RWMutex{ra, rb} {
		if err := rw.RLock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ra.RLock(t.Context()); err != nil { // a second read hold of the same owner
		t.Fatal(err)
	}
	in := inspectUntil(t, a, name, registered)
	if in.Kind != coordinator.ObjectReadWriteLock || in.Mode != "read" || len(in.Holders) != 2 {
		t.Fatalf("Inspect = %+v, want a read-write lock in read mode with two readers", in)
	}
	want := map[string]int64{ra.Read().Owner(): 2, rb.Read().Owner(): 1}
	for _, h := range in.Holders {
		if h.Mode != "read" || want[h.Owner] != h.Count || h.Lease <= 20*time.Second {
			t.Fatalf("reader %+v, want counts %v, mode read and a read lease", h, want)
		}
	}
	for _, rw := range []*coordinator.RWMutex{rb, ra, ra} {
		if err := rw.RUnlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := rb.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rb.RLock(t.Context()); err != nil { // the writer takes a read hold too
		t.Fatal(err)
	}
	in = inspectUntil(t, a, name, registered)
	if in.Mode != "write" || len(in.Holders) != 2 || in.Holders[0].Mode != "write" ||
		in.Holders[0].Owner != rb.Write().Owner() || in.Holders[1].Mode != "read" {
		t.Fatalf("Inspect = %+v, want the writer first, then its read hold", in)
	}
	checkThisProcess(t, in.Holders[0].Process, b)
	if err := rb.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := rb.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestInspectPrimitives: a semaphore, a permit semaphore and a count-down latch.
func TestInspectPrimitives(t *testing.T) {
	t.Parallel()
	_, _, c := setup(t)
	ctx := t.Context()
	name := t.Name()

	sem := c.Semaphore(name + ":sem")
	if ok, err := sem.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	if err := sem.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	in, err := c.Inspect(ctx, sem.Name())
	if err != nil || in.Kind != coordinator.ObjectCounter || in.Count != 2 {
		t.Fatalf("semaphore: Inspect = %+v, %v, want a counter of 2", in, err)
	}
	// A waiter subscribed to the semaphore's channel tells it from a latch.
	waitCtx, cancel := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	go func() { waiting <- c.Semaphore(sem.Name()).Acquire(waitCtx, 3) }()
	in = inspectUntil(t, c, sem.Name(), func(in coordinator.Inspection) bool { return in.Subscribers > 0 })
	if in.Kind != coordinator.ObjectSemaphore {
		t.Fatalf("semaphore with a waiter: kind %v, want semaphore", in.Kind)
	}
	cancel()
	if err := semRecv(t, waiting, 5*time.Second, "cancelled semaphore waiter"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v", err)
	}

	ps := c.PermitSemaphore(name + ":permits")
	if ok, err := ps.TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	leased, err := ps.TryAcquire(ctx, coordinator.Lease(time.Minute))
	if err != nil || leased == nil {
		t.Fatalf("TryAcquire = %v, %v", leased, err)
	}
	watched, err := ps.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in, err = c.Inspect(ctx, ps.Name())
	if err != nil || in.Kind != coordinator.ObjectPermitSemaphore || in.Count != 1 || in.AcquiredPermits != 2 || len(in.Permits) != 2 {
		t.Fatalf("permit semaphore: Inspect = %+v, %v, want 1 available and 2 acquired", in, err)
	}
	ids := []string{in.Permits[0].ID, in.Permits[1].ID}
	if !slices.Contains(ids, leased.ID()) || !slices.Contains(ids, watched.ID()) {
		t.Fatalf("permit ids %v, want %s and %s", ids, leased.ID(), watched.ID())
	}
	for _, p := range in.Permits {
		if p.Expires.Before(time.Now()) {
			t.Fatalf("permit %+v: want an expiry in the future", p)
		}
	}

	latch := c.CountDownLatch(name + ":latch")
	if ok, err := latch.TrySetCount(ctx, 2); !ok || err != nil {
		t.Fatalf("TrySetCount = %v, %v", ok, err)
	}
	awaited := make(chan error, 1)
	go func() { awaited <- c.CountDownLatch(latch.Name()).Await(ctx) }()
	in = inspectUntil(t, c, latch.Name(), func(in coordinator.Inspection) bool { return in.Subscribers > 0 })
	if in.Kind != coordinator.ObjectLatch || in.Count != 2 {
		t.Fatalf("latch: Inspect = %+v, want a latch of 2", in)
	}
	for range 2 {
		if err := latch.CountDown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := semRecv(t, awaited, 5*time.Second, "latch awaiter"); err != nil {
		t.Fatal(err)
	}
}

// TestInspectOtherData: a key that no lock keeps is reported as other data, unchanged; bad input and
// use after Close get their sentinel errors.
func TestInspectOtherData(t *testing.T) {
	t.Parallel()
	srv, client, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	if err := client.RPush(ctx, name+":list", "a").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Set(ctx, name+":text", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, name+":hash", "field", "not a count").Err(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{name + ":list", name + ":text", name + ":hash"} {
		before, _ := client.Dump(ctx, key).Result()
		in, err := c.Inspect(ctx, key)
		if err != nil || in.Kind != coordinator.ObjectOther || len(in.Holders) != 0 {
			t.Fatalf("Inspect(%s) = %+v, %v, want other data", key, in, err)
		}
		if after, _ := client.Dump(ctx, key).Result(); after != before {
			t.Fatalf("Inspect(%s) changed the key", key)
		}
	}
	if in, err := c.Inspect(ctx, name+":text"); err != nil || !in.NoExpiry {
		t.Fatalf("Inspect = %+v, %v: want NoExpiry for a key without expiry", in, err)
	}
	if _, err := c.Inspect(ctx, ""); !errors.Is(err, coordinator.ErrEmptyName) {
		t.Fatalf("Inspect(\"\") = %v, want ErrEmptyName", err)
	}
	closed, err := coordinator.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	if _, err := closed.Inspect(ctx, name); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Inspect after Close = %v, want ErrClosed", err)
	}
	if _, err := closed.List(ctx, "*"); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("List after Close = %v, want ErrClosed", err)
	}
}

// TestProcessRegistry: a coordinator registers itself while it runs, with an expiry, renews the
// registration, and deletes it at Close; WithoutProcessRegistry keeps it out.
func TestProcessRegistry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	c, err := coordinator.New(srv.Client(t), coordinator.WithWatchdogTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	key := redisops.ProcessKey(c.ID())
	waitKey := func(want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			n, err := client.Exists(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if (n == 1) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the registration did not change within 5s", what)
			}
			<-tick.C
		}
	}
	waitKey(true, "after New")
	if ttl := client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("registration PTTL %v, want at most the watchdog timeout", ttl)
	}
	// Past its first expiry it is there: it was renewed (or, on a machine slow enough to let it
	// expire, written again).
	expired := time.NewTimer(600 * time.Millisecond)
	<-expired.C
	waitKey(true, "past the first expiry")
	procs, err := c.Processes(ctx, c.ID())
	if err != nil {
		t.Fatal(err)
	}
	p := procs[c.ID()]
	checkThisProcess(t, &p, c)
	_ = c.Close()
	if n := client.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("the registration outlived Close")
	}

	quiet := newCoordinator(t, srv.Client(t), coordinator.WithoutProcessRegistry())
	m := quiet.Mutex(t.Name())
	mustLock(t, m) // the coordinator has done Redis work: a registration would have been written
	if n := client.Exists(ctx, redisops.ProcessKey(quiet.ID())).Val(); n != 0 {
		t.Fatal("WithoutProcessRegistry: registered anyway")
	}
	mustUnlock(t, m)
}

// TestList: the names of locks, semaphores and latches matching a pattern, without the keys kept
// beside them; on a single server and on every master of a Cluster.
func TestList(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, client redis.UniversalClient, names func(string) []string) {
		c := newCoordinator(t, client)
		ctx := t.Context()
		prefix := t.Name()
		locks := names(prefix + ":lock")
		var want []string
		for _, name := range locks {
			m := c.FairMutex(name)
			mustLock(t, m)
			t.Cleanup(func() { _ = m.Unlock(context.Background()) })
			want = append(want, name)
		}
		rw := c.RWMutex(prefix + ":rw")
		if err := rw.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, rw.Read().Name())
		latch := c.CountDownLatch(prefix + ":latch")
		if ok, err := latch.TrySetCount(ctx, 1); !ok || err != nil {
			t.Fatal(ok, err)
		}
		want = append(want, latch.Name())
		free := c.Mutex(prefix + ":free") // taken and freed: its token counter is left, not its name
		mustLock(t, free)
		mustUnlock(t, free)
		slices.Sort(want)
		got, err := c.List(ctx, prefix+"*")
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("List = %q, %v, want %q", got, err, want)
		}
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		check(t, srv.Client(t), func(p string) []string { return []string{p + ":a", p + ":b"} })
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3)
		check(t, cl.Client(t), func(p string) []string { return clusterNames(t, cl, p) })
	})
}

// TestInspectSentinelAndCluster: Inspect through a Sentinel client and a Cluster client.
func TestInspectSentinelAndCluster(t *testing.T) {
	t.Parallel()
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		rs := redistest.StartReplicaSet(t, 2)
		s := redistest.StartSentinels(t, rs, 1)
		c := newCoordinator(t, s.FailoverClient(t))
		m := c.Mutex(t.Name())
		mustLock(t, m)
		in := inspectUntil(t, c, m.Name(), registered)
		if len(in.Holders) != 1 || in.Holders[0].Owner != m.Owner() {
			t.Fatalf("Inspect = %+v", in)
		}
		checkThisProcess(t, in.Holders[0].Process, c)
		mustUnlock(t, m)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3)
		c := newCoordinator(t, cl.Client(t))
		for _, name := range clusterNames(t, cl, t.Name()) {
			m := c.Mutex(name)
			mustLock(t, m)
			waiter := c.Mutex(name)
			ctx, cancel := context.WithCancel(t.Context())
			got := lockAsync(ctx, waiter)
			in := inspectUntil(t, c, name, func(in coordinator.Inspection) bool { return registered(in) && in.Subscribers > 0 })
			if len(in.Holders) != 1 || in.Holders[0].Owner != m.Owner() || in.Token != m.Token() {
				t.Fatalf("Inspect(%s) = %+v", name, in)
			}
			checkThisProcess(t, in.Holders[0].Process, c)
			cancel()
			<-got
			mustUnlock(t, m)
		}
	})
}

// TestLocal: a coordinator's own holds and waiters, read with no Redis call.
func TestLocal(t *testing.T) {
	t.Parallel()
	_, _, c := setup(t)
	name := t.Name()
	before := time.Now()
	holder, waiter := c.Mutex(name), c.Mutex(name)
	mustLock(t, holder)
	ctx, cancel := context.WithCancel(t.Context())
	got := lockAsync(ctx, waiter)
	find := func(owner string) (coordinator.LocalOwner, bool) {
		for _, o := range c.Local() {
			if o.Name == name && o.Owner == owner {
				return o, true
			}
		}
		return coordinator.LocalOwner{}, false
	}
	h, ok := find(holder.Owner())
	if !ok || !slices.Equal(h.Held, []messages.Kind{messages.KindPlain}) || h.HeldSince.Before(before) || len(h.Waiting) != 0 {
		t.Fatalf("holder: %+v (found %v), want a plain hold since the test began", h, ok)
	}
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		w, ok := find(waiter.Owner())
		if ok && w.Waiting[messages.KindPlain] == 1 && len(w.Held) == 0 && !w.WaitingSince.Before(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter: %+v (found %v), want one plain acquisition waiting", w, ok)
		}
		<-tick.C
	}
	cancel()
	<-got
	mustUnlock(t, holder)
	if _, ok := find(holder.Owner()); ok {
		t.Fatal("after the unlock: the holder is still listed")
	}
	if _, ok := find(waiter.Owner()); ok {
		t.Fatal("after its caller left: the waiter is still listed")
	}
	_ = c.Close()
	if l := c.Local(); l != nil {
		t.Fatalf("Local after Close = %v", l)
	}
}

// TestInspectRedissonHolders: locks taken by a foreign client with Redisson's own scripts (package
// redissontest) are shown with their holders, counts, leases and queue; their owners are not
// lockwarden processes.
func TestInspectRedissonHolders(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	javaID := redissontest.NewClientID()

	lock := redissontest.NewLock(client, name+":lock", javaID, 7)
	for range 2 {
		if ok, _, err := lock.TryLock(ctx, 20*time.Second); !ok || err != nil {
			t.Fatalf("Redisson TryLock = %v, %v", ok, err)
		}
	}
	in, err := c.Inspect(ctx, name+":lock")
	if err != nil || in.Kind != coordinator.ObjectLock || len(in.Holders) != 1 {
		t.Fatalf("Inspect = %+v, %v, want a lock with one holder", in, err)
	}
	if h := in.Holders[0]; h.Owner != javaID+":7" || h.Count != 2 || h.Process != nil {
		t.Fatalf("holder = %+v, want %s:7 with count 2 and no lockwarden process", h, javaID)
	}
	if in.Lease <= 15*time.Second || in.Lease > 20*time.Second {
		t.Fatalf("lease = %v, want the 20s lease Redisson set", in.Lease)
	}

	fair := redissontest.NewFairLock(client, name+":fair", javaID, 1)
	if ok, _, err := fair.TryLock(ctx, time.Minute, 20*time.Second); !ok || err != nil {
		t.Fatalf("Redisson fair TryLock = %v, %v", ok, err)
	}
	for thread := int64(2); thread <= 3; thread++ {
		if ok, _, err := redissontest.NewFairLock(client, name+":fair", javaID, thread).TryLock(ctx, time.Minute, 20*time.Second); ok || err != nil {
			t.Fatalf("Redisson fair TryLock of thread %d = %v, %v, want queued", thread, ok, err)
		}
	}
	in, err = c.Inspect(ctx, name+":fair")
	if err != nil || in.Kind != coordinator.ObjectFairLock || len(in.Holders) != 1 || in.Holders[0].Owner != javaID+":1" {
		t.Fatalf("Inspect = %+v, %v, want a fair lock held by %s:1", in, err, javaID)
	}
	if len(in.Queue) != 2 || in.Queue[0].Owner != javaID+":2" || in.Queue[1].Owner != javaID+":3" ||
		!in.Queue[0].Deadline.After(time.Now()) || !in.Queue[1].Deadline.After(in.Queue[0].Deadline) {
		t.Fatalf("queue = %+v, want threads 2 then 3 with later and later deadlines", in.Queue)
	}

	// A read-write lock read by a Redisson reader and a lockwarden reader together.
	reader := redissontest.NewReadLock(client, name+":rw", javaID, 1)
	if ok, _, err := reader.TryLock(ctx, 20*time.Second); !ok || err != nil {
		t.Fatalf("Redisson read TryLock = %v, %v", ok, err)
	}
	mine := c.RWMutex(name + ":rw")
	if err := mine.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	in = inspectUntil(t, c, name+":rw", func(in coordinator.Inspection) bool {
		for _, h := range in.Holders {
			if h.Owner == mine.Owner() && h.Process != nil {
				return true
			}
		}
		return false
	})
	if in.Kind != coordinator.ObjectReadWriteLock || in.Mode != "read" || len(in.Holders) != 2 {
		t.Fatalf("Inspect = %+v, want two readers", in)
	}
	for _, h := range in.Holders {
		switch h.Owner {
		case javaID + ":1":
			if h.Mode != "read" || h.Count != 1 || h.Lease <= 15*time.Second || h.Lease > 20*time.Second || h.Process != nil {
				t.Fatalf("Redisson reader = %+v", h)
			}
		case mine.Owner():
			if h.Mode != "read" || h.Count != 1 || h.Process == nil {
				t.Fatalf("lockwarden reader = %+v", h)
			}
		default:
			t.Fatalf("unexpected holder %+v", h)
		}
	}
	if err := mine.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A Redisson writer.
	writer := redissontest.NewWriteLock(client, name+":rw2", javaID, 4)
	if ok, _, err := writer.TryLock(ctx, 20*time.Second); !ok || err != nil {
		t.Fatalf("Redisson write TryLock = %v, %v", ok, err)
	}
	in, err = c.Inspect(ctx, name+":rw2")
	if err != nil || in.Mode != "write" || len(in.Holders) != 1 || in.Holders[0].Owner != javaID+":4" || in.Holders[0].Mode != "write" {
		t.Fatalf("Inspect = %+v, %v, want the Redisson writer %s:4", in, err, javaID)
	}
}

// TestInspectKindIsDecidedByAllFields: a hash is a read-write lock only when every field but a valid
// mode is a hold count, whatever order its fields were written in; a read-write lock with more readers
// than Inspect lists is still one, and says it was cut.
func TestInspectKindIsDecidedByAllFields(t *testing.T) {
	t.Parallel()
	_, client, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	for key, fields := range map[string][][2]string{
		name + ":mode-last":  {{"user", "alice"}, {"mode", "read"}},
		name + ":mode-first": {{"mode", "read"}, {"user", "alice"}},
		name + ":bad-mode":   {{"mode", "sideways"}, {"o:1", "1"}},
		name + ":zero":       {{"o:1", "0"}},
	} {
		for _, f := range fields {
			if err := client.HSet(ctx, key, f[0], f[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		in, err := c.Inspect(ctx, key)
		if err != nil || in.Kind != coordinator.ObjectOther || len(in.Holders) != 0 || in.Mode != "" {
			t.Fatalf("Inspect(%s) = %+v, %v, want other data", key, in, err)
		}
	}
	many := name + ":many-readers"
	args := []any{"mode", "read"}
	for i := range coordinator.InspectLimit + 500 {
		args = append(args, fmt.Sprintf("reader-%d:1", i), 1)
	}
	if err := client.HSet(ctx, many, args...).Err(); err != nil {
		t.Fatal(err)
	}
	in, err := c.Inspect(ctx, many)
	if err != nil || in.Kind != coordinator.ObjectReadWriteLock || in.Mode != "read" || !in.Truncated ||
		len(in.Holders) < coordinator.InspectLimit-1 || len(in.Holders) > coordinator.InspectLimit {
		t.Fatalf("Inspect(%s): kind %v, mode %q, truncated %v, %d holders, %v; want a read-write lock cut at the limit",
			many, in.Kind, in.Mode, in.Truncated, len(in.Holders), err)
	}
}

// TestInspectCountsFairWaiters: a fair lock's queued waiters listen on channels of their own, and
// are counted among its subscribers.
func TestInspectCountsFairWaiters(t *testing.T) {
	t.Parallel()
	srv, _, a := setup(t)
	b := newCoordinator(t, srv.Client(t))
	name := t.Name()
	holder := a.FairMutex(name)
	mustLock(t, holder)
	ctx, cancel := context.WithCancel(t.Context())
	got := lockAsync(ctx, b.FairMutex(name))
	in := inspectUntil(t, a, name, func(in coordinator.Inspection) bool { return len(in.Queue) == 1 && in.Subscribers > 0 })
	if in.Subscribers != 1 {
		t.Fatalf("subscribers = %d, want the one waiter's", in.Subscribers)
	}
	cancel()
	<-got
	mustUnlock(t, holder)
}

// TestInspectClusterUnsharedTag: on a Cluster, a name whose hash tag is empty or unclosed does not
// share a slot with the keys kept beside it; Inspect reads its own key, and List goes on.
func TestInspectClusterUnsharedTag(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	c := newCoordinator(t, cc)
	ctx := t.Context()
	prefix := t.Name()
	for _, key := range []string{prefix + ":{}:session", prefix + ":a{b"} {
		if err := cc.HSet(ctx, key, "user", "alice").Err(); err != nil {
			t.Fatal(err)
		}
		in, err := c.Inspect(ctx, key)
		if err != nil || in.Kind != coordinator.ObjectOther || in.RedisType != "hash" {
			t.Fatalf("Inspect(%s) = %+v, %v, want other data", key, in, err)
		}
	}
	if err := cc.Set(ctx, prefix+":{}:n", 5, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if in, err := c.Inspect(ctx, prefix+":{}:n"); err != nil || in.Kind != coordinator.ObjectCounter || in.Count != 5 || !in.NoExpiry {
		t.Fatalf("Inspect of a counter = %+v, %v", in, err)
	}
}
