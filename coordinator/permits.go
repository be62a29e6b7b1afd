package coordinator

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/actors"
)

// PermitSemaphore is a handle on a semaphore whose permits have ids and expire: Redisson's
// RPermitExpirableSemaphore, with its layout in Redis (the available count in the key name, the
// permits taken in the sorted set {name}:timeout, scored by their expiry) and its notices, so that
// Java services on Redisson and Go services on lockwarden share it.
//
// Beyond Redisson: a permit taken without a [Lease] is renewed by the coordinator's watchdog for as
// long as the coordinator lives, and comes back within one watchdog timeout when the process dies; a
// holder learns that a permit was lost (its lease ran out before a renewal succeeded, or a renewal
// found it gone) when [Permit.Done] closes, and from a Lost event. A permit taken with a Lease is not
// renewed, and comes back when the lease runs out, as in Redisson.
//
// Expired permits come back when a client next looks at the semaphore (every operation reclaims
// them first, as in Redisson); a waiter whose attempt finds permits that will expire tries again when
// the first of them does. A PermitSemaphore is safe for concurrent use.
type PermitSemaphore struct{ primitive }

// Permit is one permit taken from a [PermitSemaphore].
type Permit struct {
	s       *PermitSemaphore
	id      string
	done    <-chan struct{}
	expires time.Time
}

// PermitSemaphore returns a handle on the permit semaphore name. It does no I/O; an empty name is the
// handle's construction error ([ErrEmptyName]), which [PermitSemaphore.Err] reports and every call
// returns.
func (c *Coordinator) PermitSemaphore(name string) *PermitSemaphore {
	return &PermitSemaphore{c.primitive(actors.KindPermitSemaphore, name)}
}

// Name returns the semaphore's name.
func (s *PermitSemaphore) Name() string { return s.name }

// Err returns the handle's construction error, nil for a valid handle.
func (s *PermitSemaphore) Err() error { return s.err }

// Owner returns the handle's owner id, which names it in its acquired events ("<coordinator id>:<n>");
// the events about one permit name its id instead.
func (s *PermitSemaphore) Owner() string { return s.owner }

// TrySetPermits sets the number of permits if none is set yet, and reports whether it did. permits
// must be positive ([ErrInvalidPermits]).
func (s *PermitSemaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	if err := checkPermits(permits); err != nil {
		return false, err
	}
	o, err := s.operate(ctx, actors.OpTrySet, permits, 0, "")
	return o.OK, err
}

// SetPermits sets the number of permits, those taken included: the available count moves by the
// difference (Redisson's setPermits). permits must be positive ([ErrInvalidPermits]).
func (s *PermitSemaphore) SetPermits(ctx context.Context, permits int64) error {
	if err := checkPermits(permits); err != nil {
		return err
	}
	_, err := s.operate(ctx, actors.OpSet, permits, 0, "")
	return err
}

// AddPermits adds delta permits (negative takes them away). delta 0 is [ErrInvalidPermits].
func (s *PermitSemaphore) AddPermits(ctx context.Context, delta int64) error {
	if delta == 0 {
		return fmt.Errorf("%w: 0", ErrInvalidPermits)
	}
	_, err := s.operate(ctx, actors.OpAdd, delta, 0, "")
	return err
}

// Acquire takes one permit, waiting until one is available or ctx ends. With [Lease] the permit
// expires after the lease; without it, the watchdog renews it until it is released or the coordinator
// closes. [Wait] is [ErrInvalidOption] here. When ctx ends first, the error matches [ErrNotObtained]
// and ctx.Err(), and a permit obtained for the call at that moment is given back.
func (s *PermitSemaphore) Acquire(ctx context.Context, opts ...TryOption) (*Permit, error) {
	ps, err := s.AcquireMany(ctx, 1, opts...)
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// AcquireMany takes n permits at once (each with an id of its own), waiting until n are available or
// ctx ends, as Acquire does. n must be positive and at most [MaxPermitsAtOnce] ([ErrInvalidPermits]).
func (s *PermitSemaphore) AcquireMany(ctx context.Context, n int64, opts ...TryOption) ([]*Permit, error) {
	if err := checkPermits(n); err != nil {
		return nil, err
	}
	if n > MaxPermitsAtOnce {
		return nil, fmt.Errorf("%w: %d, at most %d at once", ErrInvalidPermits, n, MaxPermitsAtOnce)
	}
	t := tryOptions{}
	if err := applyOptions(&t, opts); err != nil {
		return nil, err
	}
	if t.waitSet {
		return nil, fmt.Errorf("%w: Wait applies to TryAcquire", ErrInvalidOption)
	}
	o, _, err := s.take(ctx, n, t.lease, true, time.Time{})
	if err != nil {
		return nil, err
	}
	return s.permits(o), nil
}

// TryAcquire tries to take one permit. Without [Wait] it makes one attempt; with Wait(d) it waits up
// to d. It returns a nil permit and a nil error when none was available in time. [Lease] gives the
// permit a fixed lease, as for Acquire. Other errors are as for Acquire.
func (s *PermitSemaphore) TryAcquire(ctx context.Context, opts ...TryOption) (*Permit, error) {
	o, ok, err := s.tryTake(ctx, 1, opts)
	if !ok || err != nil {
		return nil, err
	}
	return s.permits(o)[0], nil
}

func (s *PermitSemaphore) permits(o actors.Outcome) []*Permit {
	ps := make([]*Permit, len(o.Permits))
	for i, p := range o.Permits {
		ps[i] = &Permit{s: s, id: p.ID, done: p.Done, expires: p.Expires}
	}
	return ps
}

// Release gives back the permit id, which any process may hold (the id a [Permit] shows, or one that a
// Redisson client got), and publishes the new count. It returns [ErrNotHeld] when there is no such
// permit: an unknown id, one released before, or one whose lease ran out (its permit came back
// already, or comes back now); and [ErrInvalidPermitID] for an id that is not 32 hexadecimal
// characters (upper-case hexadecimal is taken as lower-case). An unknown or released id changes nothing
// in Redis; a permit whose lease ran out and that nobody took back yet is taken back now, its count
// returned, and the call still returns ErrNotHeld. A release that fails on a connection error is sent
// again (see [Semaphore.Release]); when the resent one finds the permit gone, the release counts as
// done, since the run that failed most likely removed it.
func (s *PermitSemaphore) Release(ctx context.Context, id string) error {
	if err := checkPermitID(id); err != nil {
		return err
	}
	_, err := s.release(ctx, actors.OpRelease, 0, strings.ToLower(id))
	return err
}

// AvailablePermits returns the number of available permits, after reclaiming the expired ones.
func (s *PermitSemaphore) AvailablePermits(ctx context.Context) (int64, error) {
	o, err := s.operate(ctx, actors.OpAvailable, 0, 0, "")
	return o.Value, err
}

// AcquiredPermits returns the number of permits taken and not expired.
func (s *PermitSemaphore) AcquiredPermits(ctx context.Context) (int64, error) {
	o, err := s.operate(ctx, actors.OpAcquired, 0, 0, "")
	return o.Value, err
}

// ID returns the permit's id: 32 lower-case hexadecimal characters, as Redisson shows permit ids.
func (p *Permit) ID() string { return p.id }

// Done returns a channel that is closed when the permit ends: released, its lease ran out, a renewal
// found it gone, or the coordinator closed.
func (p *Permit) Done() <-chan struct{} { return p.done }

// Expires returns when a permit taken with a [Lease] stops being valid (less a margin for clock
// drift); zero for a watchdog permit.
func (p *Permit) Expires() time.Time { return p.expires }

// Release gives the permit back, as [PermitSemaphore.Release] of its id. A second Release returns
// [ErrNotHeld].
func (p *Permit) Release(ctx context.Context) error { return p.s.Release(ctx, p.id) }

// checkPermitID returns ErrInvalidPermitID unless id is 32 hexadecimal characters.
func checkPermitID(id string) error {
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		return fmt.Errorf("%w: %q", ErrInvalidPermitID, id)
	}
	return nil
}
