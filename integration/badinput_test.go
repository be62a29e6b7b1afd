package integration

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// badDump returns every key of the database with its type and its value (for hashes, its fields), so
// that a test can check that a call changed nothing in Redis.
func badDump(t *testing.T, client *redis.Client) map[string]string {
	t.Helper()
	ctx := t.Context()
	keys := dataKeys(t, client)
	dump := make(map[string]string, len(keys))
	for _, k := range keys {
		typ, err := client.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("TYPE %s: %v", k, err)
		}
		val := typ
		switch typ {
		case "string":
			v, err := client.Get(ctx, k).Result()
			if err != nil {
				t.Fatalf("GET %s: %v", k, err)
			}
			val += " " + v
		case "hash":
			fields, err := client.HGetAll(ctx, k).Result()
			if err != nil {
				t.Fatalf("HGETALL %s: %v", k, err)
			}
			for _, f := range slices.Sorted(maps.Keys(fields)) {
				val += " " + f + "=" + fields[f]
			}
		}
		dump[k] = val
	}
	return dump
}

// badUnchanged fails the test if Redis differs from before.
func badUnchanged(t *testing.T, client *redis.Client, before map[string]string, what string) {
	t.Helper()
	if after := badDump(t, client); !maps.Equal(before, after) {
		t.Fatalf("%s changed Redis: before %v, after %v", what, before, after)
	}
	if n := len(dataKeys(t, client)); n != len(before) {
		t.Fatalf("%s: %d keys; want %d", what, n, len(before))
	}
}

// badCall is one call on a handle, reduced to its error.
type badCall struct {
	name string
	call func(ctx context.Context, m *coordinator.Mutex) error
}

// badCalls are all the calls of a handle that return an error.
var badCalls = []badCall{
	{"Lock", func(ctx context.Context, m *coordinator.Mutex) error { return m.Lock(ctx) }},
	{"TryLock", func(ctx context.Context, m *coordinator.Mutex) error {
		ok, err := m.TryLock(ctx)
		return badFalse(ok, err)
	}},
	{"TryLock(Wait)", func(ctx context.Context, m *coordinator.Mutex) error {
		ok, err := m.TryLock(ctx, coordinator.Wait(time.Second))
		return badFalse(ok, err)
	}},
	{"TryLock(Lease)", func(ctx context.Context, m *coordinator.Mutex) error {
		ok, err := m.TryLock(ctx, coordinator.Lease(time.Second))
		return badFalse(ok, err)
	}},
	{"Unlock", func(ctx context.Context, m *coordinator.Mutex) error { return m.Unlock(ctx) }},
	{"ForceUnlock", func(ctx context.Context, m *coordinator.Mutex) error {
		ok, err := m.ForceUnlock(ctx)
		return badFalse(ok, err)
	}},
	{"IsLocked", func(ctx context.Context, m *coordinator.Mutex) error {
		ok, err := m.IsLocked(ctx)
		return badFalse(ok, err)
	}},
	{"IsHeld", func(ctx context.Context, m *coordinator.Mutex) error {
		ok, err := m.IsHeld(ctx)
		return badFalse(ok, err)
	}},
	{"HoldCount", func(ctx context.Context, m *coordinator.Mutex) error {
		n, err := m.HoldCount(ctx)
		if n != 0 {
			return errors.Join(err, errors.New("nonzero hold count with an error"))
		}
		return err
	}},
	{"TTL", func(ctx context.Context, m *coordinator.Mutex) error {
		d, err := m.TTL(ctx)
		if d != 0 {
			return errors.Join(err, errors.New("nonzero TTL with an error"))
		}
		return err
	}},
}

// badFalse checks that a boolean result that comes with an error is false.
func badFalse(ok bool, err error) error {
	if ok {
		return errors.Join(err, errors.New("true result with an error"))
	}
	return err
}

// badExpectAll checks that every call on m fails with want, changes nothing in Redis, and reports no
// hold.
func badExpectAll(t *testing.T, client *redis.Client, ctx context.Context, m *coordinator.Mutex, want error) {
	t.Helper()
	before := badDump(t, client)
	for _, c := range badCalls {
		err := c.call(ctx, m)
		if !errors.Is(err, want) {
			t.Errorf("%s = %v, want %v", c.name, err, want)
		}
	}
	if tok := m.Token(); tok != 0 {
		t.Errorf("Token = %d, want 0", tok)
	}
	select {
	case <-m.Done():
	default:
		t.Error("Done of a handle that holds nothing is not closed")
	}
	badUnchanged(t, client, before, "calls failing with "+want.Error())
}

func TestBadNilClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
	}{
		{"untyped nil", nil},
		{"nil *redis.Client", (*redis.Client)(nil)},
		{"nil *redis.ClusterClient", (*redis.ClusterClient)(nil)},
	} {
		c, err := coordinator.New(tc.client)
		if !errors.Is(err, coordinator.ErrNilClient) || c != nil {
			t.Errorf("New(%s) = %v, %v; want nil, ErrNilClient", tc.name, c, err)
		}
	}
}

func TestBadCoordinatorOptions(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	for _, tc := range []struct {
		name string
		opt  coordinator.Option
	}{
		{"WithWatchdogTimeout(0)", coordinator.WithWatchdogTimeout(0)},
		{"WithWatchdogTimeout(-1)", coordinator.WithWatchdogTimeout(-1)},
		{"WithWatchdogTimeout(-1s)", coordinator.WithWatchdogTimeout(-time.Second)},
		{"WithIdleTimeout(0)", coordinator.WithIdleTimeout(0)},
		{"WithStopReleaseTimeout(-1)", coordinator.WithStopReleaseTimeout(-1)},
		{"WithStopReleaseTimeout(6s)", coordinator.WithStopReleaseTimeout(6 * time.Second)},
		{"WithMaxHandoffs(-1)", coordinator.WithMaxHandoffs(-1)},
		{"WithWorkers(0)", coordinator.WithWorkers(0)},
		{"WithWorkers(-1)", coordinator.WithWorkers(-1)},
		{"WithWorkers(MaxWorkers+1)", coordinator.WithWorkers(coordinator.MaxWorkers + 1)},
		{"WithFairWaitWindow(0)", coordinator.WithFairWaitWindow(0)},
		{"WithFairWaitWindow(-1s)", coordinator.WithFairWaitWindow(-time.Second)},
		// Durations above MaxDuration: a watchdog timeout near math.MaxInt64 overflowed to a 1 ms lease.
		{"WithWatchdogTimeout(MaxInt64)", coordinator.WithWatchdogTimeout(math.MaxInt64)},
		{"WithWatchdogTimeout(MaxDuration+1)", coordinator.WithWatchdogTimeout(coordinator.MaxDuration + 1)},
		{"WithIdleTimeout(MaxInt64)", coordinator.WithIdleTimeout(math.MaxInt64)},
		{"WithFairWaitWindow(MaxInt64)", coordinator.WithFairWaitWindow(math.MaxInt64)},
		{"WithReplicaSync(1, MaxInt64)", coordinator.WithReplicaSync(1, math.MaxInt64)},
	} {
		c, err := coordinator.New(client, tc.opt)
		if !errors.Is(err, coordinator.ErrInvalidOption) || c != nil {
			if c != nil {
				_ = c.Close()
			}
			t.Errorf("New(client, %s) = %v, %v; want nil, ErrInvalidOption", tc.name, c, err)
		}
	}
	// Nil options are ignored.
	c := newCoordinator(t, client, nil, coordinator.WithLogger(nil))
	m := c.Mutex(t.Name(), nil)
	if ok, err := m.TryLock(t.Context(), nil); !ok || err != nil {
		t.Fatalf("TryLock with a nil option = %v, %v; want true, nil", ok, err)
	}
	mustUnlock(t, m)
}

func TestBadHandles(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	// A lock held by someone else, so that calls that reached Redis would have something to touch.
	other := c.Mutex(t.Name())
	mustLock(t, other)

	for _, tc := range []struct {
		name string
		m    *coordinator.Mutex
		want error
	}{
		{"empty name", c.Mutex(""), coordinator.ErrEmptyName},
		{"empty name and a valid lease", c.Mutex("", coordinator.WithLease(time.Second)), coordinator.ErrEmptyName},
		{"empty owner", c.Mutex(t.Name(), coordinator.WithOwner("")), coordinator.ErrEmptyOwner},
		{"zero lease", c.Mutex(t.Name(), coordinator.WithLease(0)), coordinator.ErrInvalidLease},
		{"negative lease", c.Mutex(t.Name(), coordinator.WithLease(-1)), coordinator.ErrInvalidLease},
		{"negative lease of seconds", c.Mutex(t.Name(), coordinator.WithLease(-time.Second)), coordinator.ErrInvalidLease},
		{"huge lease", c.Mutex(t.Name(), coordinator.WithLease(math.MaxInt64)), coordinator.ErrInvalidLease},
		{"lease above MaxDuration", c.Mutex(t.Name(), coordinator.WithLease(coordinator.MaxDuration+time.Millisecond)), coordinator.ErrInvalidLease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			badExpectAll(t, client, ctx, tc.m, tc.want)
			// A cancelled ctx does not hide the handle's own error.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := tc.m.Lock(cctx); !errors.Is(err, tc.want) {
				t.Errorf("Lock with a cancelled ctx = %v, want %v", err, tc.want)
			}
		})
	}
	if !semIsHeld(t, other) || holdCount(t, other) != 1 {
		t.Fatal("calls on invalid handles touched the lock of another owner")
	}
}

func TestBadTryOptions(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	m := c.Mutex(t.Name())
	rw := c.RWMutex(t.Name() + ":rw")
	before := badDump(t, client)
	for _, handle := range []struct {
		name string
		try  func(context.Context, ...coordinator.TryOption) (bool, error)
	}{
		{"Mutex.TryLock", m.TryLock},
		{"FairMutex.TryLock", c.FairMutex(t.Name() + ":fair").TryLock},
		{"RWMutex.TryRLock", rw.TryRLock},
		{"RWMutex.TryLock", rw.TryLock},
	} {
		for _, tc := range []struct {
			name string
			opts []coordinator.TryOption
			want error
		}{
			{"Wait(0)", []coordinator.TryOption{coordinator.Wait(0)}, coordinator.ErrInvalidWait},
			{"Wait(-1s)", []coordinator.TryOption{coordinator.Wait(-time.Second)}, coordinator.ErrInvalidWait},
			{"Lease(0)", []coordinator.TryOption{coordinator.Lease(0)}, coordinator.ErrInvalidLease},
			{"Lease(-1)", []coordinator.TryOption{coordinator.Lease(-1)}, coordinator.ErrInvalidLease},
			{"Wait(1s) Lease(-1)", []coordinator.TryOption{coordinator.Wait(time.Second), coordinator.Lease(-1)}, coordinator.ErrInvalidLease},
			// A lease near math.MaxInt64 used to overflow to a 1 ms lease: the lock was granted and
			// expired at once.
			{"Lease(MaxInt64)", []coordinator.TryOption{coordinator.Lease(math.MaxInt64)}, coordinator.ErrInvalidLease},
			{"Lease(MaxDuration+1)", []coordinator.TryOption{coordinator.Lease(coordinator.MaxDuration + 1)}, coordinator.ErrInvalidLease},
			{"Wait(MaxInt64)", []coordinator.TryOption{coordinator.Wait(math.MaxInt64)}, coordinator.ErrInvalidWait},
		} {
			ok, err := handle.try(ctx, tc.opts...)
			if ok || !errors.Is(err, tc.want) {
				t.Errorf("%s(%s) = %v, %v; want false, %v", handle.name, tc.name, ok, err, tc.want)
			}
		}
	}
	badUnchanged(t, client, before, "TryLock with invalid options")
	// A valid Lease on the call does not make a handle with an invalid lease usable.
	bad := c.Mutex(t.Name(), coordinator.WithLease(0))
	if ok, err := bad.TryLock(ctx, coordinator.Lease(time.Second)); ok || !errors.Is(err, coordinator.ErrInvalidLease) {
		t.Errorf("TryLock(Lease 1s) on a handle WithLease(0) = %v, %v; want false, ErrInvalidLease", ok, err)
	}
	badUnchanged(t, client, before, "TryLock on a handle with an invalid lease")
}

func TestBadUnlockNotHeld(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	m := c.Mutex(t.Name())
	if err := m.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock of a never-locked handle = %v, want ErrNotHeld", err)
	}
	if keys := dataKeys(t, client); len(keys) != 0 {
		t.Fatalf("keys after an Unlock of a never-locked handle: %v; want none", keys)
	}

	mustLock(t, m)
	mustUnlock(t, m)
	before := badDump(t, client)
	if err := m.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
	badUnchanged(t, client, before, "a second Unlock")

	// Re-entered twice, unlocked three times.
	mustLock(t, m)
	mustLock(t, m)
	mustUnlock(t, m)
	mustUnlock(t, m)
	if err := m.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("third Unlock after two Locks = %v, want ErrNotHeld", err)
	}
	if n, err := client.Exists(ctx, t.Name()).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s = %d, %v; want 0", t.Name(), n, err)
	}
}

func TestBadAfterClose(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	before := c.Mutex(t.Name())
	held := c.Mutex(t.Name() + ":held")
	mustLock(t, held)
	done := held.Done()
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	waitFor(t, done, time.Second, "Done of a hold dropped by Close")
	if n, err := client.Exists(ctx, t.Name()+":held").Result(); err != nil || n != 0 {
		t.Fatalf("a lock held at Close was not released: EXISTS = %d, %v", n, err)
	}
	for _, m := range []*coordinator.Mutex{before, held, c.Mutex(t.Name() + ":after")} {
		badExpectAll(t, client, ctx, m, coordinator.ErrClosed)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
}

func TestBadCancelledContext(t *testing.T) {
	_, client, c := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	free, held := c.Mutex(t.Name()+":free"), c.Mutex(t.Name()+":held")
	mustLock(t, held)
	before := badDump(t, client)

	for _, m := range []*coordinator.Mutex{free, held} {
		if err := m.Lock(ctx); !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Lock with a cancelled ctx = %v; want ErrNotObtained and context.Canceled", m.Name(), err)
		}
		if ok, err := m.TryLock(ctx); ok || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: TryLock with a cancelled ctx = %v, %v; want false, context.Canceled", m.Name(), ok, err)
		}
		if ok, err := m.TryLock(ctx, coordinator.Wait(time.Second)); ok || !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: TryLock(Wait) with a cancelled ctx = %v, %v; want false, ErrNotObtained and context.Canceled", m.Name(), ok, err)
		}
		if err := m.Unlock(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Unlock with a cancelled ctx = %v; want context.Canceled", m.Name(), err)
		}
		if ok, err := m.ForceUnlock(ctx); ok || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: ForceUnlock with a cancelled ctx = %v, %v; want false, context.Canceled", m.Name(), ok, err)
		}
		if _, err := m.IsLocked(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: IsLocked with a cancelled ctx = %v; want context.Canceled", m.Name(), err)
		}
	}
	badUnchanged(t, client, before, "calls with a cancelled ctx")
	if holdCount(t, held) != 1 {
		t.Fatal("the hold changed")
	}
	mustUnlock(t, held)
}

func TestBadCloseWakesWaiter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote bool
	}{{"holder in the same coordinator", false}, {"holder in another coordinator", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, client, c := setup(t)
			hc := newCoordinator(t, srv.Client(t))
			if !tc.remote {
				hc = c
			}
			holder, waiter := hc.Mutex(t.Name()), c.Mutex(t.Name())
			mustLock(t, holder)
			errc := lockAsync(t.Context(), waiter)
			tctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			res := semTryAsync(tctx, c.Mutex(t.Name()), coordinator.Wait(5*time.Second))
			faultWaitSubscribed(t, client, t.Name(), 1)

			start := time.Now()
			if err := c.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			if err := semRecv(t, errc, time.Second, "a waiting Lock after Close"); !errors.Is(err, coordinator.ErrClosed) {
				t.Fatalf("waiting Lock after Close = %v, want ErrClosed", err)
			}
			if r := semRecv(t, res, time.Second, "a waiting TryLock after Close"); r.ok || !errors.Is(r.err, coordinator.ErrClosed) {
				t.Fatalf("waiting TryLock after Close = %v, %v; want false, ErrClosed", r.ok, r.err)
			}
			if got := time.Since(start); got > time.Second {
				t.Fatalf("waiters returned %v after Close", got)
			}
			if tc.remote {
				if !semIsHeld(t, holder) {
					t.Fatal("closing the waiter's coordinator freed another coordinator's lock")
				}
				mustUnlock(t, holder)
			} else if n, err := client.Exists(t.Context(), t.Name()).Result(); err != nil || n != 0 {
				t.Fatalf("the holder's lock was not released at Close: EXISTS = %d, %v", n, err)
			}
		})
	}
}

// TestBadNameOfAnotherType: a lock named like another lock's internal key ("redisson_lock_token:{X}",
// X's token counter) or like data of another type fails every call at once with ErrWrongType, and
// leaves that key alone: ForceUnlock used to delete X's counter, and Lock retried until ctx ended.
func TestBadNameOfAnotherType(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	x := c.Mutex(t.Name())
	mustLock(t, x)
	first := x.Token()
	mustUnlock(t, x)
	// A release's latch (none for a Mutex's plain release) expires on its own; it is not what the
	// test watches.
	latches, err := client.Keys(ctx, "redisson_unlock_latch:*").Result()
	if err != nil || (len(latches) > 0 && client.Del(ctx, latches...).Err() != nil) {
		t.Fatalf("latch keys %v, %v", latches, err)
	}
	if err := client.RPush(ctx, t.Name()+":list", "a").Err(); err != nil {
		t.Fatal(err)
	}
	before := badDump(t, client)
	for _, name := range []string{"redisson_lock_token:{" + t.Name() + "}", t.Name() + ":list"} {
		for _, h := range []struct {
			kind string
			m    *coordinator.Mutex
		}{
			{"Mutex", c.Mutex(name)},
			{"FairMutex", c.FairMutex(name)},
			{"RWMutex.Write", c.RWMutex(name).Write()},
		} {
			lockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			start := time.Now()
			err := h.m.Lock(lockCtx)
			cancel()
			if !errors.Is(err, coordinator.ErrWrongType) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s(%q).Lock = %v, want ErrWrongType at once", h.kind, name, err)
			} else if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s(%q).Lock took %v to fail", h.kind, name, d)
			}
			if ok, err := h.m.TryLock(ctx); ok || !errors.Is(err, coordinator.ErrWrongType) {
				t.Errorf("%s(%q).TryLock = %v, %v; want false, ErrWrongType", h.kind, name, ok, err)
			}
			if ok, err := h.m.ForceUnlock(ctx); ok || !errors.Is(err, coordinator.ErrWrongType) {
				t.Errorf("%s(%q).ForceUnlock = %v, %v; want false, ErrWrongType", h.kind, name, ok, err)
			}
		}
		rw := c.RWMutex(name)
		lockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := rw.RLock(lockCtx)
		cancel()
		if !errors.Is(err, coordinator.ErrWrongType) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RWMutex(%q).RLock = %v, want ErrWrongType", name, err)
		}
		if ok, err := rw.Read().ForceUnlock(ctx); ok || !errors.Is(err, coordinator.ErrWrongType) {
			t.Errorf("RWMutex(%q).Read().ForceUnlock = %v, %v; want false, ErrWrongType", name, ok, err)
		}
	}
	badUnchanged(t, client, before, "calls on locks named like keys of another type")
	// X's counter is intact: its next token is higher.
	mustLock(t, x)
	if x.Token() <= first {
		t.Errorf("token after the calls: got %d, want above %d", x.Token(), first)
	}
	mustUnlock(t, x)
}

// TestBadHugeLeaseIsRefused: a lease near math.MaxInt64 used to overflow the conversion to milliseconds
// and became a 1 ms lease: TryLock succeeded and another owner got the lock at once. It is refused now,
// and the longest lease accepted, MaxDuration, is what Redis gets.
func TestBadHugeLeaseIsRefused(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	m := c.Mutex(t.Name())
	if ok, err := m.TryLock(ctx, coordinator.Lease(math.MaxInt64-1)); ok || !errors.Is(err, coordinator.ErrInvalidLease) {
		t.Fatalf("TryLock(Lease(MaxInt64-1)) = %v, %v; want false, ErrInvalidLease", ok, err)
	}
	if n := client.Exists(ctx, t.Name()).Val(); n != 0 {
		t.Fatalf("a refused TryLock left the lock in Redis")
	}
	if ok, err := m.TryLock(ctx, coordinator.Lease(coordinator.MaxDuration)); !ok || err != nil {
		t.Fatalf("TryLock(Lease(MaxDuration)) = %v, %v; want true, nil", ok, err)
	}
	if ttl := client.PTTL(ctx, t.Name()).Val(); ttl < coordinator.MaxDuration-time.Minute {
		t.Errorf("PTTL with a lease of MaxDuration: got %v, want about %v", ttl, coordinator.MaxDuration)
	}
	select {
	case <-m.Done():
		t.Fatal("Done of a hold with a lease of MaxDuration is closed")
	default:
	}
	mustUnlock(t, m)
}
