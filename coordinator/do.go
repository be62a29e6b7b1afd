package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Do locks m, waiting as [Mutex.Lock] does, runs fn while the lock is held, and unlocks it.
//
// fn gets a context derived from ctx that is also cancelled as soon as the hold ends while fn runs:
// when [Mutex.Done] closes because a renewal found the hold gone, its lease ran out, it was
// force-unlocked, or the coordinator closed. Its cause, context.Cause(ctx), then matches
// [ErrLockLost]. fn should stop the work the lock protects when its context ends.
//
// Do returns fn's error. When the hold ended while fn ran, the error matches ErrLockLost too, joined
// with fn's error (which may be nil). Once fn returns, Do unlocks: also when ctx has ended meanwhile
// (the Unlock gets ctx's values, not its cancellation), and also when fn panics, after which the
// panic goes on. Do waits for the Unlock for at most the stop release timeout
// ([WithStopReleaseTimeout]); the release goes on after that. The Unlock's error (an
// [*UnlockError], ErrClosed, or the context error of that wait) is joined with the result, save
// [ErrNotHeld] after a hold that was lost, which ErrLockLost already reports.
//
// When the lock is not obtained, Do returns Lock's error and does not run fn. A nil fn returns
// [ErrNilFunc] at once: nothing is locked and nothing is run.
//
// Like Lock, Do re-enters a lock the handle already holds: its Unlock then drops the hold Do took,
// and the outer holds stay. The hold is a watchdog hold, renewed for as long as fn runs, unless the
// handle has a fixed lease ([WithLease]), which Do does not extend: fn can, with [Mutex.Extend].
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if fn == nil {
		return ErrNilFunc
	}
	_, done, err := m.take(ctx, m.lease, true, 0, nil, time.Time{})
	if err != nil {
		return err
	}
	return runHeld(ctx, strconv.Quote(m.name), done, m.c.opts.stopReleaseTimeout, fn, m.Unlock)
}

// Do takes a write hold, waiting as [RWMutex.Lock] does, runs fn while it is held, and drops the hold,
// as [Mutex.Do] does on the write side ([RWMutex.Write]).
func (rw *RWMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return rw.write.Do(ctx, fn)
}

// RDo takes a read hold, waiting as [RWMutex.RLock] does, runs fn while it is held, and drops the
// hold, as [Mutex.Do] does on the read side ([RWMutex.Read]).
func (rw *RWMutex) RDo(ctx context.Context, fn func(ctx context.Context) error) error {
	return rw.read.Do(ctx, fn)
}

// Do takes the group, waiting as [Group.Lock] does, runs fn while the group holds, and unlocks it, as
// [Mutex.Do] does: fn's context is cancelled, with a cause matching [ErrLockLost], as soon as
// [Group.Done] closes while fn runs (a MultiLock member lost, a RedLock below its majority, or the
// coordinator closed), and the error Do returns then matches ErrLockLost too. A nil fn returns
// [ErrNilFunc] at once.
func (g *Group) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if fn == nil {
		return ErrNilFunc
	}
	_, done, err := g.take(ctx, 0, true, time.Time{}, nil)
	if err != nil {
		return err
	}
	what := "multilock"
	if g.redLock {
		what = "redlock"
	}
	return runHeld(ctx, what, done, g.c.opts.stopReleaseTimeout, fn, g.Unlock)
}

// runHeld runs fn for Do, once a hold whose Done channel is done was taken on the lock that what
// names, and then releases the hold with unlock. fn's context is cancelled, with a cause matching
// ErrLockLost, when done closes while fn runs. unlock runs when fn returns, panics or exits its
// goroutine, with ctx's values but not its cancellation, bounded by release. runHeld returns fn's
// error, joined with ErrLockLost when the hold ended while fn ran, and with unlock's error.
func runHeld(ctx context.Context, what string, done <-chan struct{}, release time.Duration,
	fn func(context.Context) error, unlock func(context.Context) error) (err error) {
	lost := fmt.Errorf("%w: %s", ErrLockLost, what)
	fnCtx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-done:
			cancel(lost)
		case <-fnCtx.Done():
		}
	}()
	var fnErr error
	returned := false
	defer func() {
		// Whether fn returned, panicked or exited its goroutine, the hold it ran under is released.
		held := !isClosedChan(done)
		cancel(nil)
		<-watched
		unlockCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), release)
		unlockErr := unlock(unlockCtx)
		stop()
		if !returned {
			return // a panic goes on
		}
		var lostErr error
		if !held {
			lostErr = lost
			if errors.Is(unlockErr, ErrNotHeld) {
				unlockErr = nil
			}
		}
		err = errors.Join(lostErr, fnErr, unlockErr)
	}()
	fnErr = fn(fnCtx)
	returned = true
	return nil
}
