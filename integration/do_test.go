package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

// doWatchdog is the watchdog timeout of the holders' coordinators: short, so that a holder whose
// hold another coordinator force-unlocked learns of it from its next renewal, a third of it later.
const doWatchdog = time.Second

// doLostWithin bounds how long a holder takes to learn that its hold was force-unlocked: at once in
// the coordinator that force-unlocked it, at its next renewal in another one.
const doLostWithin = 5 * doWatchdog

// doBody is what a function run by Do saw: its start, the end of its context and that context's
// cause.
type doBody struct {
	started   chan struct{}
	cancelled chan struct{}
	cause     error
}

// newDoBody returns a function for Do that signals its start, waits (at most doLostWithin) for its
// context to end, records the cause and returns ret.
func newDoBody(ret error) (*doBody, func(ctx context.Context) error) {
	b := &doBody{started: make(chan struct{}), cancelled: make(chan struct{})}
	return b, func(ctx context.Context) error {
		close(b.started)
		timer := time.NewTimer(doLostWithin)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			b.cause = context.Cause(ctx)
			close(b.cancelled)
		case <-timer.C:
		}
		return ret
	}
}

// doAsync runs do in a goroutine and returns the channel that receives its error.
func doAsync(do func() error) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- do() }()
	return errc
}

// doKeyGone fails the test when the key name exists in Redis.
func doKeyGone(t *testing.T, client redis.Cmdable, name, when string) {
	t.Helper()
	if n, err := client.Exists(t.Context(), name).Result(); err != nil || n != 0 {
		fields, _ := client.HGetAll(t.Context(), name).Result()
		t.Fatalf("EXISTS %s %s = %d, %v (HGETALL %v); want 0", name, when, n, err, fields)
	}
}

// TestDoLostHoldCancelsContext: while Do runs its function, the hold is force-unlocked (through the same
// coordinator, and through another one, which the holder learns of from its next renewal): the
// function's context is cancelled with a cause matching ErrLockLost, Do returns the function's error
// joined with ErrLockLost, and the handle holds nothing afterwards.
func TestDoLostHoldCancelsContext(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", remote), func(t *testing.T) {
			srv, client, c := setup(t, coordinator.WithWatchdogTimeout(doWatchdog))
			fc := c
			if remote {
				_, fc = semOther(t, srv)
			}
			name := t.Name()
			m := c.Mutex(name)
			errFn := errors.New("the function's own error")
			body, fn := newDoBody(errFn)
			errc := doAsync(func() error { return m.Do(t.Context(), fn) })
			waitFor(t, body.started, 5*time.Second, "the function starting")
			if fields := semHGetAll(t, client, name); fields[m.Owner()] != "1" {
				t.Fatalf("HGETALL %s while the function runs = %v, want %s: 1", name, fields, m.Owner())
			}
			if ok, err := fc.Mutex(name).ForceUnlock(t.Context()); !ok || err != nil {
				t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
			}
			waitFor(t, body.cancelled, doLostWithin, "the function's context ending after the force unlock")
			if !errors.Is(body.cause, coordinator.ErrLockLost) {
				t.Fatalf("context.Cause of the function's context = %v, want ErrLockLost", body.cause)
			}
			err := semRecv(t, errc, 5*time.Second, "Do")
			if !errors.Is(err, coordinator.ErrLockLost) || !errors.Is(err, errFn) {
				t.Fatalf("Do = %v, want ErrLockLost joined with the function's error", err)
			}
			if errors.Is(err, coordinator.ErrNotHeld) {
				t.Fatalf("Do = %v: the lost hold's Unlock (ErrNotHeld) is reported by ErrLockLost alone", err)
			}
			doKeyGone(t, client, name, "after Do")
			if semIsHeld(t, m) {
				t.Fatal("the handle holds the lock after Do")
			}
		})
	}
}

// TestDoRunsUnderTheLockAndUnlocks: Do's function runs while the handle holds the lock, with a context
// that is not cancelled; Do returns the function's error as it is (nil included) and the lock is
// released when it returns, so another owner gets it at once.
func TestDoRunsUnderTheLockAndUnlocks(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	m, other := c.Mutex(name), c.Mutex(name)
	errFn := errors.New("the function's own error")
	for _, ret := range []error{errFn, nil} {
		var done <-chan struct{}
		err := m.Do(t.Context(), func(ctx context.Context) error {
			if n := holdCount(t, m); n != 1 {
				t.Errorf("hold count inside Do = %d, want 1", n)
			}
			if fields := semHGetAll(t, client, name); fields[m.Owner()] != "1" {
				t.Errorf("HGETALL %s inside Do = %v, want %s: 1", name, fields, m.Owner())
			}
			if ok, err := other.TryLock(ctx); ok || err != nil {
				t.Errorf("another owner's TryLock inside Do = %v, %v; want false, nil", ok, err)
			}
			if ctx.Err() != nil {
				t.Errorf("the function's context ended while the lock is held: %v", context.Cause(ctx))
			}
			done = m.Done()
			return ret
		})
		if !errors.Is(err, ret) || (ret == nil) != (err == nil) || errors.Is(err, coordinator.ErrLockLost) {
			t.Fatalf("Do = %v, want %v", err, ret)
		}
		waitFor(t, done, time.Second, "the hold's Done closing when Do returned")
		doKeyGone(t, client, name, "after Do")
		if ok, err := other.TryLock(t.Context()); !ok || err != nil {
			t.Fatalf("another owner's TryLock after Do = %v, %v; want true, nil", ok, err)
		}
		mustUnlock(t, other)
	}
}

// TestDoReentersAndKeepsTheOuterHold: Do on a handle that holds the lock re-enters it, and drops only its
// own hold.
func TestDoReentersAndKeepsTheOuterHold(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	m := c.Mutex(name)
	mustLock(t, m)
	err := m.Do(t.Context(), func(context.Context) error {
		if n := holdCount(t, m); n != 2 {
			t.Errorf("hold count inside Do = %d, want 2", n)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	if n := holdCount(t, m); n != 1 {
		t.Fatalf("hold count after Do = %d, want 1 (the outer hold)", n)
	}
	semNotClosed(t, m.Done(), "the outer hold's Done after Do")
	mustUnlock(t, m)
	doKeyGone(t, client, name, "after the outer Unlock")
}

// TestDoUnlocksWhenContextEnds: when the caller's context ends while the function runs, Do still
// releases the lock (the Unlock is not cut short by that context) and returns the function's error.
func TestDoUnlocksWhenContextEnds(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	m := c.Mutex(name)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := m.Do(ctx, func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, coordinator.ErrLockLost) {
		t.Fatalf("Do = %v, want context.Canceled from the function, without ErrLockLost", err)
	}
	doKeyGone(t, client, name, "after Do whose context ended")
}

// TestDoPanicUnlocks: a panic in Do's function releases the lock, then goes on to the caller.
func TestDoPanicUnlocks(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	m := c.Mutex(name)
	type boom struct{}
	var done <-chan struct{}
	recovered := func() (r any) {
		defer func() { r = recover() }()
		_ = m.Do(t.Context(), func(context.Context) error {
			done = m.Done()
			panic(boom{})
		})
		return nil
	}()
	if _, ok := recovered.(boom); !ok {
		t.Fatalf("recovered %v from Do, want the function's panic", recovered)
	}
	waitFor(t, done, time.Second, "the hold's Done closing after the panic")
	doKeyGone(t, client, name, "after a panic in Do")
	if ok, err := c.Mutex(name).TryLock(t.Context()); !ok || err != nil {
		t.Fatalf("another owner's TryLock after the panic = %v, %v; want true, nil", ok, err)
	}
}

// TestDoNilFunc: Do with a nil function returns ErrNilFunc at once, without locking: not even waiting
// for a lock another owner holds. So do RWMutex.Do, RWMutex.RDo and Group.Do.
func TestDoNilFunc(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	holder := c.Mutex(name + ":held")
	mustLock(t, holder)
	// A context that has ended: a call that went on to lock would fail with it, not with ErrNilFunc.
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for what, do := range map[string]func(context.Context) error{
		"Mutex.Do (free)":   func(ctx context.Context) error { return c.Mutex(name).Do(ctx, nil) },
		"Mutex.Do (held)":   func(ctx context.Context) error { return c.Mutex(name+":held").Do(ctx, nil) },
		"RWMutex.Do":        func(ctx context.Context) error { return c.RWMutex(name+":rw").Do(ctx, nil) },
		"RWMutex.RDo":       func(ctx context.Context) error { return c.RWMutex(name+":rw").RDo(ctx, nil) },
		"Group.Do":          func(ctx context.Context) error { return c.MultiLock([]*coordinator.Mutex{c.Mutex(name)}).Do(ctx, nil) },
		"Mutex.Do (no ctx)": func(context.Context) error { return c.Mutex(name).Do(ended, nil) },
	} {
		errc := doAsync(func() error { return do(t.Context()) })
		if err := semRecv(t, errc, time.Second, what); !errors.Is(err, coordinator.ErrNilFunc) {
			t.Fatalf("%s with a nil function = %v, want ErrNilFunc", what, err)
		}
	}
	doKeyGone(t, client, name, "after Do with a nil function")
	doKeyGone(t, client, name+":rw", "after RWMutex.Do with a nil function")
	if fields := semHGetAll(t, client, name+":held"); len(fields) != 1 || fields[holder.Owner()] != "1" {
		t.Fatalf("HGETALL of the held lock = %v, want only its holder", fields)
	}
	mustUnlock(t, holder)
}

// TestDoNotObtained: when the lock is not obtained before ctx ends, Do returns Lock's error and does not
// run its function.
func TestDoNotObtained(t *testing.T) {
	_, _, c := setup(t)
	name := t.Name()
	holder := c.Mutex(name)
	mustLock(t, holder)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	ran := false
	err := c.Mutex(name).Do(ctx, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Do on a held lock = %v (ran %v), want ErrNotObtained and DeadlineExceeded, not run", err, ran)
	}
	mustUnlock(t, holder)
}

// TestRWMutexDoAndRDo: RDo runs its function under a read hold and Do under a write hold, and each
// releases its hold.
func TestRWMutexDoAndRDo(t *testing.T) {
	_, client, c := setup(t)
	name := t.Name()
	rw := c.RWMutex(name)
	for _, tc := range []struct {
		side string
		do   func(context.Context, func(context.Context) error) error
	}{{"read", rw.RDo}, {"write", rw.Do}} {
		err := tc.do(t.Context(), func(context.Context) error {
			if mode := client.HGet(t.Context(), name, "mode").Val(); mode != tc.side {
				return fmt.Errorf("mode %q inside the %s side's Do, want %q", mode, tc.side, tc.side)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s side: %v", tc.side, err)
		}
		doKeyGone(t, client, name, "after the "+tc.side+" side's Do")
	}
}

// TestGroupDoLostMember: while a MultiLock's Do runs its function, one member is force-unlocked from
// another coordinator: the group is lost, the function's context is cancelled with a cause matching
// ErrLockLost, Do says so, and every member is released.
func TestGroupDoLostMember(t *testing.T) {
	srv, client, c := setup(t, coordinator.WithWatchdogTimeout(doWatchdog))
	_, other := semOther(t, srv)
	names := groupNames(t, 2)
	members := []*coordinator.Mutex{c.Mutex(names[0]), c.Mutex(names[1])}
	group := c.MultiLock(members)
	body, fn := newDoBody(nil)
	errc := doAsync(func() error { return group.Do(t.Context(), fn) })
	waitFor(t, body.started, 5*time.Second, "the function starting")
	dones := []<-chan struct{}{members[0].Done(), members[1].Done()}
	for i, name := range names {
		if fields := semHGetAll(t, client, name); fields[members[i].Owner()] != "1" {
			t.Fatalf("member %d's HGETALL while the function runs = %v, want its owner", i, fields)
		}
	}
	if ok, err := other.Mutex(names[1]).ForceUnlock(t.Context()); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v; want true, nil", ok, err)
	}
	waitFor(t, body.cancelled, doLostWithin, "the function's context ending after a member was lost")
	if !errors.Is(body.cause, coordinator.ErrLockLost) {
		t.Fatalf("context.Cause of the function's context = %v, want ErrLockLost", body.cause)
	}
	if err := semRecv(t, errc, 5*time.Second, "group Do"); !errors.Is(err, coordinator.ErrLockLost) {
		t.Fatalf("group Do = %v, want ErrLockLost", err)
	}
	for i, done := range dones {
		waitFor(t, done, 5*time.Second, fmt.Sprintf("member %d's hold ending", i))
		doKeyGone(t, client, names[i], fmt.Sprintf("(member %d) after group Do", i))
	}
}

// TestGroupDoUnlocks: a MultiLock's Do runs its function while every member is held, returns its error
// and releases every member.
func TestGroupDoUnlocks(t *testing.T) {
	_, client, c := setup(t)
	names := groupNames(t, 2)
	members := []*coordinator.Mutex{c.Mutex(names[0]), c.Mutex(names[1])}
	group := c.MultiLock(members)
	errFn := errors.New("the function's own error")
	err := group.Do(t.Context(), func(context.Context) error {
		for i, name := range names {
			if fields := semHGetAll(t, client, name); fields[members[i].Owner()] != "1" {
				t.Errorf("member %d's HGETALL inside Do = %v, want its owner", i, fields)
			}
		}
		return errFn
	})
	if !errors.Is(err, errFn) || errors.Is(err, coordinator.ErrLockLost) {
		t.Fatalf("group Do = %v, want the function's error alone", err)
	}
	for i, name := range names {
		doKeyGone(t, client, name, fmt.Sprintf("(member %d) after group Do", i))
	}
}
