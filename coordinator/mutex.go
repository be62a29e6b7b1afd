package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

// Mutex is a handle on a reentrant distributed lock in Redisson's layout. A handle is one owner, the
// way a thread is one owner in Java: Lock on a handle that holds the lock re-enters it, and each Lock
// needs its own Unlock. Two handles on the same name are two owners and exclude each other, unless
// they were given the same id with [WithOwner].
//
// A Mutex is safe for concurrent use, but since the handle is one owner, concurrent Lock calls on it
// all succeed as re-entries. Give each goroutine that must exclude the others its own handle.
type Mutex struct {
	c    *Coordinator
	kind actors.Kind
	name string
	// mutexOptions are the handle's settings (owner, shared, lease), kept in the handle so that its
	// options apply to it in place, with no allocation of their own.
	mutexOptions
	// err is the construction error (see Err).
	err error

	// span describes the handle to the telemetry.
	span telemetry.Lock
	// route is the guardian's key of the lock's actor, built once for all the handle's commands.
	route string
	// bound is the route to the lock's actor once the guardian has told it: the handle sends its
	// commands there itself (see Coordinator.doRouted).
	bound atomic.Pointer[actors.Route]

	mu    sync.Mutex
	token int64
	done  <-chan struct{}
	// pending, when set, is Redis' pending confirmation of a hold granted from a local handoff before
	// Redis answered (see actors.Acquire.AcceptEarlyGrant).
	pending *actors.Confirmation
}

// MutexOption configures a Mutex, FairMutex or RWMutex handle. Like every option of the package (see
// [Option]), it applies its value and returns its validation error; the handle's constructor reports
// the first error through the handle's Err.
type MutexOption func(*mutexOptions) error

// mutexOptions are the settings of a handle that its options set.
type mutexOptions struct {
	owner string
	// shared is set when the owner id was given with WithOwner, and may be another handle's too.
	shared bool
	// lease is the fixed lease of every acquisition, 0 for watchdog holds.
	lease time.Duration
}

// WithOwner sets the owner id of the handle, to carry ownership across goroutines or processes: two
// handles with the same owner id are the same owner. The default is a fresh id, "<coordinator
// id>:<n>". An empty id is an error, [ErrEmptyOwner].
func WithOwner(id string) MutexOption {
	return func(o *mutexOptions) error {
		if id == "" {
			return ErrEmptyOwner
		}
		o.owner, o.shared = id, true
		return nil
	}
}

// WithLease gives every acquisition through the handle a fixed lease: the lock expires after d unless
// it is released first, and the watchdog does not renew it. d must be at least [MinLease] and at most
// [MaxDuration], or the option's error is [ErrInvalidLease]. By default there is no fixed lease and
// the watchdog renews the lock.
func WithLease(d time.Duration) MutexOption {
	return func(o *mutexOptions) error {
		if d < MinLease || d > MaxDuration {
			return fmt.Errorf("%w: %v", ErrInvalidLease, d)
		}
		o.lease = d
		return nil
	}
}

// Mutex returns a handle on the lock name. It does no I/O, and returns no error: an empty name
// ([ErrEmptyName]) or the first invalid option ([ErrEmptyOwner], [ErrInvalidLease]) is the handle's
// construction error, which [Mutex.Err] reports at once and every call on the handle returns.
func (c *Coordinator) Mutex(name string, opts ...MutexOption) *Mutex {
	return c.newMutex(actors.KindPlain, name, opts)
}

// FairMutex returns a handle on the fair lock name (Redisson's RFairLock): waiters get the lock in the
// order they asked for it, across processes. It has the API of [Mutex]; what differs is the order of
// waiters.
//
// Every waiter takes a place in a queue in Redis (redisson_lock_queue:{name}) when it starts to wait,
// with a deadline in a sorted set (redisson_lock_timeout:{name}), and is woken on a channel of its own
// when it reaches the head. A waiter that gives up leaves the queue: a TryLock whose [Wait] runs out
// returns once it has left (or, when Redis does not answer, after the stop release timeout at most,
// and the waiter leaves in the background); a call whose ctx ends returns at once, and the waiter leaves right
// after. A live waiter keeps its place alive; a waiter whose process died is purged by the other
// clients one wait window after it stopped ([WithFairWaitWindow], 5 minutes by default), however many
// dead waiters stand ahead. TryLock
// without [Wait] never queues: it gets the lock only if it is free and nobody is queued.
//
// A fair and a plain lock on the same name share the lock hash, as in Redisson: they exclude each
// other, but a plain Lock does not queue and may overtake fair waiters.
//
// Its invalid names and options are reported as for [Coordinator.Mutex].
func (c *Coordinator) FairMutex(name string, opts ...MutexOption) *Mutex {
	return c.newMutex(actors.KindFair, name, opts)
}

// newMutex returns a handle of kind on name with a fresh owner id and opts applied; its construction
// error is ErrEmptyName, or the first option's error.
func (c *Coordinator) newMutex(kind actors.Kind, name string, opts []MutexOption) *Mutex {
	m := &Mutex{c: c, kind: kind, name: name, mutexOptions: mutexOptions{owner: c.newOwner()}}
	if name == "" {
		m.err = ErrEmptyName
	} else {
		m.err = applyOptions(&m.mutexOptions, opts)
	}
	m.describe()
	return m
}

// handle returns a handle of kind on name with the settings o, and err as its construction error.
func (c *Coordinator) handle(kind actors.Kind, name string, o mutexOptions, err error) *Mutex {
	m := &Mutex{c: c, kind: kind, name: name, mutexOptions: o, err: err}
	m.describe()
	return m
}

// describe sets what the handle's settings determine: its telemetry description and its route.
func (m *Mutex) describe() {
	m.span = m.c.tel.Describe(m.name, m.kind.LockKind(), m.owner)
	m.route = actors.RouteKey(m.kind, m.name)
}

// Name returns the lock name.
func (m *Mutex) Name() string { return m.name }

// Owner returns the owner id of the handle.
func (m *Mutex) Owner() string { return m.owner }

// Err returns the handle's construction error: [ErrEmptyName] for an empty name, or the error of the
// first invalid option ([ErrEmptyOwner], [ErrInvalidLease]). Every call on the handle returns this
// same error, without I/O. It returns nil for a valid handle.
func (m *Mutex) Err() error { return m.err }

// usable returns the error that stops any call: a bad handle, a closed coordinator, an ended ctx.
func (m *Mutex) usable(ctx context.Context) error {
	if m.err != nil {
		return m.err
	}
	if m.c.isClosed() {
		return ErrClosed
	}
	return ctx.Err()
}

// Lock locks m. If another owner holds the lock, Lock waits until it is free or ctx ends. A waiter is
// woken by the unlock notice that Redis publishes, not by polling.
//
// Without [WithLease], the lock is taken for the watchdog timeout and the watchdog renews it for as
// long as it is held; if the process dies, the lock frees itself within about the watchdog timeout.
//
// When ctx ends first, the error matches both [ErrNotObtained] and ctx.Err(). Lock does not wait past
// ctx: if the lock was being obtained for the call at that moment, the lock actor releases it right
// after, so nothing stays held.
// It returns [ErrClosed] when the coordinator closes; with a ctx that can never end
// (context.Background()), an uncontended Lock makes its Redis call on the calling goroutine, which
// saves two goroutine handoffs, and sees Close only once that call has returned. While it waits, Redis errors are retried with
// backoff until ctx ends; if the latest attempt had failed on a Redis error when ctx ended, the error
// carries that Redis error too, or [ErrNoAnswer] when an attempt had gone unanswered for 200 ms or
// more, so that an unreachable Redis does not read as a lock held by another owner. A grant that Redis answers only after the lease has run out (a paused server, a slow network)
// is never reported: it is given back and the wait goes on ([ErrGrantTooLate]).
// It returns an error matching [ErrNotSynced], at once and without waiting on, when Redis gave the lock
// but too few replicas acknowledged it ([WithReplicaSync]); the hold was given back.
//
// A waiter that the holder hands the lock to in this process (another handle on the same name, on
// this coordinator) gets it as soon as the holder's Unlock starts, before Redis has answered the
// release that hands it over: the holder's hold is valid in Redis then, so no other client can take
// the lock in between. Its fencing token is the holder's plus one, which the token counter kept
// unissued when the holder's token was issued, and which the release raises the counter past. Redis' answer confirms the hold, normally within one round trip; [Mutex.IsHeld],
// [Mutex.HoldCount] and the other calls that read the lock in Redis wait for it. If Redis answers that
// the handoff did not take effect (the previous holder's lease had run out, or the lock was
// force-unlocked, or the token counter was already above its token), Done closes, as for a hold lost.
// If the release fails on a Redis error, the hold stays valid, unconfirmed: the release is sent again
// (by the previous holder's Unlock called again, before the next Lock or Unlock of either handle, or by
// the lock's actor a tenth of the watchdog timeout later), and its answer settles the hold (and the
// previous holder's: an Unlock of it called after that answers [ErrNotHeld]); if Redis does not answer
// before the previous holder's validity runs out, Done closes then. Only when Redis confirmed the
// holder's hold within [WithEarlyHandoffWindow] (3 ms by default), and not when replicas must
// acknowledge handoffs ([WithReplicaSync] with replicas), with [WithPersistentFencingTokens], at the
// end of a run of handoffs while other processes wait ([WithMaxHandoffs]), or with an owner id shared
// with other processes ([WithOwner]): the waiter then gets the lock once Redis has answered.
func (m *Mutex) Lock(ctx context.Context) error {
	_, err := m.acquire(ctx, m.lease, true, 0, nil)
	return err
}

// TryOption configures one TryLock call. Like every option of the package (see [Option]), it
// applies its value and returns its validation error; TryLock returns the first error before it does
// anything else.
type TryOption func(*tryOptions) error

// tryOptions are the settings of one TryLock call.
type tryOptions struct {
	// wait is the call's wait when waitSet; without it, the call makes one attempt.
	wait    time.Duration
	waitSet bool
	// lease is the fixed lease of the call, 0 for a watchdog hold.
	lease time.Duration
}

// Wait makes TryLock wait up to d for the lock before it reports false, like Redisson's
// tryLock(waitTime). d must be positive and at most [MaxDuration], or TryLock returns [ErrInvalidWait].
func Wait(d time.Duration) TryOption {
	return func(o *tryOptions) error {
		if d <= 0 || d > MaxDuration {
			return fmt.Errorf("%w: %v", ErrInvalidWait, d)
		}
		o.wait, o.waitSet = d, true
		return nil
	}
}

// Lease gives this acquisition a fixed lease with no watchdog, like Redisson's tryLock(waitTime,
// leaseTime), overriding the handle's [WithLease]. d must be at least [MinLease] and at most
// [MaxDuration], or TryLock returns [ErrInvalidLease].
func Lease(d time.Duration) TryOption {
	return func(o *tryOptions) error {
		if d < MinLease || d > MaxDuration {
			return fmt.Errorf("%w: %v", ErrInvalidLease, d)
		}
		o.lease = d
		return nil
	}
}

// TryLock tries to lock m and reports whether it succeeded. Without [Wait] it makes one attempt.
// With Wait(d) it waits up to d, and reports false, with a nil error, when d passes first while
// another owner holds the lock. When d passes while Redis fails (the latest attempt met a Redis error,
// or has gone unanswered for 200 ms or more), it reports false with an error that matches
// [ErrNotObtained] and wraps that Redis error (or [ErrNoAnswer]).
//
// If ctx ends first, it returns false and an error that matches [ErrNotObtained] and ctx.Err(). Other
// errors: the error of the first invalid option ([ErrInvalidWait], [ErrInvalidLease]), returned
// before anything else, even the handle's construction error ([Mutex.Err]); [ErrClosed],
// [ErrNotSynced] (as for Lock), and Redis errors joined with [ErrNotObtained]: a failed attempt, or
// [ErrGrantTooLate] when the only attempt's grant came back after its lease had run out.
func (m *Mutex) TryLock(ctx context.Context, opts ...TryOption) (bool, error) {
	o := tryOptions{lease: m.lease}
	if err := applyOptions(&o, opts); err != nil {
		return false, err
	}
	if !o.waitSet {
		return m.acquire(ctx, o.lease, false, 0, nil)
	}
	// One reading of the clock for the wait's deadline and for its start, from which the acquisition's
	// events count the wait.
	started := time.Now()
	waitCtx, cancel := context.WithDeadline(ctx, started.Add(o.wait))
	defer cancel()
	ok, _, err := m.take(waitCtx, o.lease, true, o.wait, ctx, started)
	return ownWaitRanOut(ctx)(ok, err)
}

// ownWaitRanOut turns the answer of an acquisition bounded by a TryLock's Wait into TryLock's answer:
// when the wait ran out, not the caller's ctx, it is false with no error.
func ownWaitRanOut(ctx context.Context) func(bool, error) (bool, error) {
	return func(ok bool, err error) (bool, error) {
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			var wf waitFailure
			if errors.As(err, &wf) {
				// Redis failed for the end of the wait: not a lock held by another owner.
				return false, errors.Join(ErrNotObtained, wf.err)
			}
			return false, nil
		}
		return ok, err
	}
}

// acquire asks the lock actor for one hold. lease 0 means a watchdog hold. window is the wait window of
// a fair lock's waiter, 0 for the coordinator's default. When leaveCtx is not nil and ctx ends while a
// fair waiter waits, acquire returns only once the waiter has left the Redis queue, or leaveCtx ends.
func (m *Mutex) acquire(ctx context.Context, lease time.Duration, wait bool, window time.Duration, leaveCtx context.Context) (bool, error) {
	ok, _, err := m.take(ctx, lease, wait, window, leaveCtx, time.Time{})
	return ok, err
}

// take is acquire that also returns the Done channel of the hold it got (nil when it got none). started
// is when the caller's wait began (zero: now), from which the acquisition's wait is counted.
func (m *Mutex) take(ctx context.Context, lease time.Duration, wait bool, window time.Duration, leaveCtx context.Context, started time.Time) (ok bool, done <-chan struct{}, err error) {
	if err := m.usable(ctx); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return false, nil, errors.Join(ErrNotObtained, err)
		}
		return false, nil, err
	}
	ctx, op := m.c.tel.StartAcquire(ctx, m.span)
	var o actors.Outcome
	defer func() { op.EndAcquire(acquireOutcome(ok, err), o.Token, o.Attempts, err) }()
	call := new(acquireCall) // the command and its ticket in one allocation
	cmd := m.acquireCommand(&call.cmd, lease, wait, window, call.ticket.Init())
	if !started.IsZero() {
		cmd.Started = started
	}
	cmd.Span = op.Span()
	// The calls that read the lock in Redis wait for the confirmation of a hold granted early
	// (settled), so the Lock itself need not.
	cmd.AcceptEarlyGrant = m.kind == actors.KindPlain
	o, err = m.c.doRouted(ctx, &m.bound, cmd, cmd.Ticket)
	if err != nil {
		if (m.kind == actors.KindFair || m.kind == actors.KindWrite) && leaveCtx != nil {
			// TryLock's wait ran out: leave the Redis queue (fair) or withdraw the write intent
			// before answering, so that an immediate TryLock anywhere finds no trace of this waiter.
			// The leave is waited for at most the stop release timeout (a paused or partitioned
			// Redis): past it, it finishes in the background and the caller is not kept waiting.
			leave, cancel := context.WithTimeout(leaveCtx, m.c.opts.stopReleaseTimeout)
			m.c.awaitAbandon(leave, err)
			cancel()
		}
		last := cmd.Ticket.LastError()
		if d := cmd.Ticket.Unanswered(); last == nil && d >= actors.NoAnswerAfter {
			last = fmt.Errorf("%w for %v", ErrNoAnswer, d.Round(time.Millisecond))
		}
		if last != nil {
			// The wait ended while Redis failed: say so, rather than "not obtained" alone, which
			// reads as another owner holding the lock.
			return false, nil, errors.Join(ErrNotObtained, waitFailure{last}, errors.Unwrap(err))
		}
		return false, nil, errors.Join(ErrNotObtained, errors.Unwrap(err))
	}
	switch o.Reason {
	case messages.ReasonNone:
		m.recordHold(o)
		return true, o.Done, nil
	case messages.ReasonNotObtained:
		return false, nil, nil
	case messages.ReasonRedis:
		return false, nil, errors.Join(ErrNotObtained, o.Err)
	default:
		return false, nil, outcomeError(o)
	}
}

// waitFailure is the Redis error that stood when a wait ended.
type waitFailure struct{ err error }

func (w waitFailure) Error() string { return w.err.Error() }
func (w waitFailure) Unwrap() error { return w.err }

// acquireCall and releaseCall are a command and its ticket, allocated together.
type (
	acquireCall struct {
		cmd    actors.Acquire
		ticket actors.Ticket
	}
	releaseCall struct {
		cmd    actors.Release
		ticket actors.Ticket
	}
)

// acquireCommand fills cmd with the command for one hold of m, and returns it: lease 0 means a
// watchdog hold; window is the wait window of a fair lock's waiter, 0 for the coordinator's default.
func (m *Mutex) acquireCommand(cmd *actors.Acquire, lease time.Duration, wait bool, window time.Duration, ticket *actors.Ticket) *actors.Acquire {
	if window == 0 {
		window = m.c.opts.fairWaitWindow
	}
	*cmd = actors.Acquire{
		Name: m.name, Kind: m.kind, Owner: m.owner, Lease: lease, Wait: wait, SharedOwner: m.shared,
		WaitWindow: window, Started: time.Now(), Ticket: ticket, Route: m.route,
	}
	if lease == 0 {
		cmd.Lease, cmd.Watchdog = m.c.opts.watchdogTimeout, true
	}
	return cmd
}

// recordHold keeps the token and Done channel of a hold m just got.
func (m *Mutex) recordHold(o actors.Outcome) {
	m.mu.Lock()
	m.token, m.done, m.pending = o.Token, o.Done, o.Pending
	m.mu.Unlock()
}

// settled waits, for at most as long as ctx lasts, until Redis records the handle's current hold, when
// it was granted from a local handoff before Redis answered (see [Mutex.Lock]): until Redis has
// confirmed it, or it has ended.
func (m *Mutex) settled(ctx context.Context) {
	m.mu.Lock()
	p, done := m.pending, m.done
	m.mu.Unlock()
	if p != nil {
		select {
		case <-p.Done():
		case <-done:
		case <-ctx.Done():
		}
	}
}

// outcomeError maps an unsuccessful outcome to the public error.
func outcomeError(o actors.Outcome) error {
	switch o.Reason {
	case messages.ReasonNone:
		return nil
	case messages.ReasonNotObtained:
		return ErrNotObtained
	case messages.ReasonNotHeld:
		return ErrNotHeld
	case messages.ReasonClosed:
		return ErrClosed
	case messages.ReasonUpgrade:
		return ErrUpgrade
	case messages.ReasonNotSynced:
		if o.Err != nil {
			return o.Err // matches ErrNotSynced, with the detail
		}
		return ErrNotSynced
	default:
		return o.Err
	}
}

// Unlock drops one hold of m; the lock is free once every Lock has its Unlock. When the lock becomes
// free, Redis publishes the unlock notice that wakes the waiters.
//
// It returns [ErrNotHeld] when m does not hold the lock, including after its lease ran out or after a
// force unlock, and on a second Unlock. It never touches a hold of another owner. It returns
// [ErrKindMismatch], and releases nothing, when the owner (an id given with [WithOwner]) holds the
// name as another kind of lock, or is acquiring it as another kind. If ctx ends before
// the answer arrives, it returns ctx.Err(), and the release may still take effect. With a ctx that can
// never end (context.Background()), an Unlock that finds the lock actor idle makes its Redis call on
// the calling goroutine, as Lock does, and sees Close only once that call has returned.
//
// A release that fails on a Redis error (a cut connection, a restarting server) returns an
// [*UnlockError] wrapping it: whether it took effect is unknown, and the Unlock counts as done all the
// same (as in Redisson). When it was the last hold, the hold is no longer renewed and the lock frees
// itself when its lease runs out (Done closes then), even if Unlock is never called again; calling
// Unlock again retries the same release safely: if the failed one took effect after all, Redis answers
// what it did, and no second hold is taken away. A Lock (or TryLock) of m after such an Unlock sends
// the same release again first and then takes a hold of its own; if Redis fails again, it waits and
// tries again as after a failed attempt (TryLock without a wait returns the error). When it was an inner hold of a re-entered lock, the
// outer holds stay held and renewed, and the last Unlock gives back whatever the failed one left.
func (m *Mutex) Unlock(ctx context.Context) (err error) {
	if err := m.usable(ctx); err != nil {
		return err
	}
	ctx, op := m.c.tel.StartRelease(ctx, m.span)
	defer func() { op.End(err) }()
	call := new(releaseCall) // the command and its ticket in one allocation
	cmd := &call.cmd
	*cmd = actors.Release{Name: m.name, Kind: m.kind, Owner: m.owner, Span: op.Span(), Route: m.route, Ticket: call.ticket.Init()}
	o, err := m.c.doRouted(ctx, &m.bound, cmd, cmd.Ticket)
	if err != nil {
		return errors.Unwrap(err)
	}
	return outcomeError(o)
}

// Extend sets the remaining lease of the handle's current hold to lease from now, for a hold taken
// with a fixed lease ([WithLease], or TryLock with [Lease]): afterwards the lock expires lease from
// now unless it is released first, and [Mutex.Done] closes at that new deadline rather than the
// former one. It is Redisson's re-acquisition with a new lease, minus the extra hold: the hold count
// stays, and the unlocks of the inner holds of a re-entered lock use the new lease. The lease may be
// shorter than what is left: the hold then ends sooner, and waiters in other processes, which wait
// for an unlock notice or for the lease they were told, may try again only then (an Unlock publishes
// the notice).
//
// lease must be at least [MinLease] and at most [MaxDuration], or Extend returns [ErrInvalidLease]
// before anything else. It returns [ErrNotHeld] when the owner holds nothing through this
// coordinator: it never took the lock, released it (a last Unlock that failed counts, as for
// Unlock), or lost it (its lease ran out, also while the extension was on its way, a force unlock, a
// release through a shared owner id elsewhere). It returns [ErrWatchdogHold], and changes nothing,
// for a hold that the watchdog renews (taken without a fixed lease, or re-entered once by a call
// without one): the watchdog keeps such a hold for as long as it is held.
//
// The new lease counts from when the call was sent, less the drift allowance, as an acquisition's.
// A Redis error leaves the hold with the deadline it had (cut to the new lease's, if that is
// shorter), since Redis may or may not have the new lease; when the hold then runs out, what Redis
// may keep of it is given back. With replica sync ([WithReplicaSync]), an extension that too few
// replicas acknowledged returns an error matching [ErrNotSynced], and the hold is treated the same
// way: it stays held, and Extend may be called again. If ctx ends before the answer, Extend returns
// ctx.Err(), and the extension may still take effect. [ErrClosed] after Close.
//
// On the read side of an [RWMutex], Extend sets the lease of each of the owner's read holds; the
// lock's own expiry in Redis is raised to the new lease if it is shorter, and never cut, as by a read
// acquisition (it follows the longest read hold, and comes forward when a read hold is released). On
// the write side, the owner's read holds (a downgrade) keep their leases, and so the lock's expiry,
// if longer. On a read-write lock, a shorter lease may thus leave the lock's key in Redis until its
// former expiry, with no live hold in it: other owners get the lock late, never early.
func (m *Mutex) Extend(ctx context.Context, lease time.Duration) error {
	if lease < MinLease || lease > MaxDuration {
		return fmt.Errorf("%w: %v", ErrInvalidLease, lease)
	}
	if err := m.usable(ctx); err != nil {
		return err
	}
	cmd := &actors.Extend{Name: m.name, Kind: m.kind, Owner: m.owner, Lease: lease, Route: m.route, Ticket: actors.NewTicket()}
	o, err := m.c.doRouted(ctx, &m.bound, cmd, cmd.Ticket)
	if err != nil {
		return errors.Unwrap(err)
	}
	return outcomeError(o)
}

// ForceUnlock frees the lock whoever holds it and wakes its waiters, like Redisson's forceUnlock. It
// reports whether the lock was held. It returns [ErrKindMismatch], and frees nothing, when the name is
// held as a lock of the other family (a read-write lock, for a plain or fair m; a plain or fair lock, for
// a side of a read-write lock). Local holders of the lock see their Done channels close.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.usable(ctx); err != nil {
		return false, err
	}
	cmd := &actors.ForceUnlock{Name: m.name, Kind: m.kind, Ticket: actors.NewTicket()}
	o, err := m.c.doRouted(ctx, &m.bound, cmd, cmd.Ticket)
	if err != nil {
		return false, errors.Unwrap(err)
	}
	return o.Deleted, outcomeError(o)
}

// IsLocked reports whether any owner holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	s, err := m.status(ctx)
	return s.Locked, err
}

// IsHeld reports whether this handle's owner holds the lock, like Redisson's isHeldByCurrentThread.
func (m *Mutex) IsHeld(ctx context.Context) (bool, error) {
	s, err := m.status(ctx)
	return s.HoldCount > 0, err
}

// HoldCount returns how many times this handle's owner holds the lock: 0 when it does not.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	s, err := m.status(ctx)
	return int(s.HoldCount), err
}

// TTL returns the remaining lease of the lock, whoever holds it. It returns 0 when the lock is free.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
	s, err := m.status(ctx)
	if s.TTL < 0 {
		return 0, err
	}
	return s.TTL, err
}

func (m *Mutex) status(ctx context.Context) (redisops.Status, error) {
	if err := m.usable(ctx); err != nil {
		return redisops.Status{}, err
	}
	m.settled(ctx) // a hold granted early is in Redis once confirmed
	return m.c.status(ctx, m.kind, m.name, m.owner)
}

// status reads the state of the lock name of kind in Redis, with owner's hold count.
func (c *Coordinator) status(ctx context.Context, kind actors.Kind, name, owner string) (redisops.Status, error) {
	if kind != actors.KindRead && kind != actors.KindWrite {
		return c.ops.Status(ctx, name, owner)
	}
	// A side of a read-write lock is locked when the lock is in its mode.
	st, err := c.ops.RWStatus(ctx, name, owner)
	mode, count := "read", st.ReadHolds
	if kind == actors.KindWrite {
		mode, count = "write", st.WriteHolds
	}
	return redisops.Status{Locked: st.Mode == mode, HoldCount: count, TTL: st.TTL}, err
}

// Token returns the fencing token of the handle's current hold: the token issued at the handle's latest
// acquisition. Tokens of one lock name strictly increase across acquisitions, so a resource that rejects
// writes carrying a token lower than the highest it has seen is safe from a holder that paused past its
// lease. By default tokens are large (counted from the Redis server's clock in microseconds);
// with [WithPersistentFencingTokens] they are 1, 2, 3, ... It returns 0 when the handle holds nothing.
func (m *Mutex) Token() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done == nil || isClosedChan(m.done) {
		return 0
	}
	return m.token
}

// Done returns a channel that is closed when the handle's current hold ends: fully released, lost
// (its lease ran out, a renewal found it gone, it was force-unlocked) or dropped by Close. When the
// handle holds nothing, the channel is already closed. Call Done again after each new Lock.
func (m *Mutex) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done == nil {
		return closedChan
	}
	return m.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func isClosedChan(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
