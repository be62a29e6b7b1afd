package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/lockwarden/lockwarden/actors"
)

// Semaphore is a handle on a counting semaphore shared across processes: Redisson's RSemaphore, with
// its layout in Redis (a string key, the name, holding the number of available permits) and its
// notices (the new count, published on redisson_sc:{name} when permits are released), so that Java
// services on Redisson and Go services on lockwarden share it.
//
// Its permits belong to nobody: any process may release permits that another acquired, and permits
// that a process acquired stay taken if it dies. For permits that come back when their holder dies,
// use a [PermitSemaphore].
//
// A waiter is woken by the notice of a release (should notices be lost, it tries again every third of
// the watchdog timeout); the waiters of one coordinator wait in
// one queue, in order, and only the first of them asks Redis at a time. A Semaphore is safe for
// concurrent use.
type Semaphore struct{ primitive }

// Semaphore returns a handle on the semaphore name. It does no I/O; an empty name is the handle's
// construction error ([ErrEmptyName]), which [Semaphore.Err] reports and every call returns.
//
// A semaphore has no permits until they are set ([Semaphore.TrySetPermits]) or added
// ([Semaphore.AddPermits], [Semaphore.Release]); until then Acquire waits.
func (c *Coordinator) Semaphore(name string) *Semaphore {
	return &Semaphore{c.primitive(actors.KindSemaphore, name)}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Err returns the handle's construction error, nil for a valid handle.
func (s *Semaphore) Err() error { return s.err }

// Owner returns the handle's owner id, which names it in events ("<coordinator id>:<n>"). Permits
// belong to nobody: it checks nothing.
func (s *Semaphore) Owner() string { return s.owner }

// TrySetPermits sets the number of available permits to permits if the semaphore has none set yet, and
// reports whether it did; it then publishes the count, which wakes waiters. permits must be positive
// ([ErrInvalidPermits]).
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	return s.TrySetPermitsFor(ctx, permits, 0)
}

// TrySetPermitsFor is TrySetPermits with an expiry of the semaphore's count: after ttl the key is
// gone, and the semaphore has no permits (Redisson's trySetPermits(permits, duration)). ttl 0 means
// none; a negative ttl or one above [MaxDuration] is [ErrInvalidOption].
func (s *Semaphore) TrySetPermitsFor(ctx context.Context, permits int64, ttl time.Duration) (bool, error) {
	if err := checkPermits(permits); err != nil {
		return false, err
	}
	if ttl < 0 || ttl > MaxDuration {
		return false, fmt.Errorf("%w: ttl %v", ErrInvalidOption, ttl)
	}
	o, err := s.operate(ctx, actors.OpTrySet, permits, ttl, "")
	return o.OK, err
}

// AddPermits adds delta permits to the available ones; a negative delta takes them away (the count
// may go below zero, as in Redisson). It publishes the new count. delta 0 is [ErrInvalidPermits].
// If ctx ends before the answer, the addition may still take effect; a call that go-redis retries
// after a lost reply takes effect once.
func (s *Semaphore) AddPermits(ctx context.Context, delta int64) error {
	if delta == 0 {
		return fmt.Errorf("%w: 0", ErrInvalidPermits)
	}
	_, err := s.operate(ctx, actors.OpAdd, delta, 0, "")
	return err
}

// Acquire takes permits permits, waiting until that many are available or ctx ends. permits must be
// positive ([ErrInvalidPermits]). When ctx ends first, the error matches [ErrNotObtained] and
// ctx.Err(), and nothing stays taken: permits obtained for the call at that moment are given back
// (an attempt that failed on an error is settled first; only one that Redis cannot answer for more than
// 5 s may leave its permits taken, as the README's "Retries take effect once" says).
// While it waits, Redis errors are retried with backoff; if ctx ends while they last, the error
// carries the last of them too. It returns [ErrClosed] when the coordinator closes.
func (s *Semaphore) Acquire(ctx context.Context, permits int64) error {
	if err := checkPermits(permits); err != nil {
		return err
	}
	_, _, err := s.take(ctx, permits, 0, true, time.Time{})
	return err
}

// TryAcquire tries to take permits permits and reports whether it did. Without [Wait] it makes one
// attempt; with Wait(d) it waits up to d, and reports false with a nil error when d passes first.
// [Lease] is [ErrInvalidOption] here. Other errors are as for Acquire.
func (s *Semaphore) TryAcquire(ctx context.Context, permits int64, opts ...TryOption) (bool, error) {
	if err := checkPermits(permits); err != nil {
		return false, err
	}
	_, ok, err := s.tryTake(ctx, permits, opts)
	return ok, err
}

// Release gives back permits permits (any process may release permits, as in Redisson: nothing checks
// that they were acquired) and publishes the new count, which wakes as many waiters as it can serve.
// When the waiters at the head of this coordinator's queue take exactly that many permits, the permits
// go to them with no Redis call (they stay taken in Redis), at most min([WithMaxHandoffs], 4) times in
// a row, after which a release goes to Redis so that other processes get their chance.
// permits must be positive ([ErrInvalidPermits]). A release that fails on a connection error is sent
// again under the same request id, with backoff, for up to 5 s, and takes effect once however many
// times it was sent (go-redis' own resends included); when it gives up it returns the last Redis
// error, or [ErrResendTooLate] for a resend that reached the actor too late. If ctx ends before the
// answer, the release may still take effect. Calling Release again after an error releases again.
func (s *Semaphore) Release(ctx context.Context, permits int64) error {
	if err := checkPermits(permits); err != nil {
		return err
	}
	_, err := s.release(ctx, actors.OpRelease, permits, "")
	return err
}

// AvailablePermits returns the number of available permits (0 when none are set).
func (s *Semaphore) AvailablePermits(ctx context.Context) (int64, error) {
	o, err := s.operate(ctx, actors.OpAvailable, 0, 0, "")
	return o.Value, err
}

// DrainPermits takes every available permit and returns how many it took.
func (s *Semaphore) DrainPermits(ctx context.Context) (int64, error) {
	o, err := s.operate(ctx, actors.OpDrain, 0, 0, "")
	return o.Value, err
}
