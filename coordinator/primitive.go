package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

// primitive is what the handles of a semaphore, a permit semaphore and a count-down latch share: the
// coordinator, the name and its kind, and the handle's owner id, which names it in events.
type primitive struct {
	c     *Coordinator
	kind  actors.Kind
	name  string
	owner string
	// err is the construction error (ErrEmptyName).
	err  error
	span telemetry.Lock
	// bound is the route to the name's actor once the guardian has told it (see
	// Coordinator.doRouted); shared by the copies of the handle.
	bound *atomic.Pointer[actors.Route]
}

func (c *Coordinator) primitive(kind actors.Kind, name string) primitive {
	p := primitive{c: c, kind: kind, name: name, owner: c.newOwner(), bound: new(atomic.Pointer[actors.Route])}
	if name == "" {
		p.err = ErrEmptyName
	}
	p.span = c.tel.Describe(name, kind.LockKind(), p.owner)
	return p
}

// usable returns the error that stops any call: a bad handle, a closed coordinator, an ended ctx.
func (p *primitive) usable(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	if p.c.isClosed() {
		return ErrClosed
	}
	return ctx.Err()
}

// take asks the name's actor for permits (or, on a latch, for the count to be zero): one attempt, or
// with wait until it succeeds or ctx ends. lease is a permit semaphore's fixed lease, 0 for watchdog
// permits. It reports false with a nil error when one attempt found too few permits. started is when
// the caller's wait began (zero: now), from which the wait is counted.
func (p *primitive) take(ctx context.Context, permits int64, lease time.Duration, wait bool, started time.Time) (o actors.Outcome, ok bool, err error) {
	if err := p.usable(ctx); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			return o, false, errors.Join(ErrNotObtained, err)
		}
		return o, false, err
	}
	ctx, op := p.c.tel.StartAcquire(ctx, p.span)
	defer func() { op.EndAcquire(acquireOutcome(ok, err), 0, o.Attempts, err) }()
	ticket := actors.NewTicket()
	if started.IsZero() {
		started = time.Now()
	}
	cmd := &actors.Take{Name: p.name, Kind: p.kind, Owner: p.owner, Permits: permits, Lease: lease, Wait: wait,
		Started: started, Span: op.Span(), Ticket: ticket, Inline: ctx.Done() == nil}
	o, err = p.send(ctx, cmd, ticket)
	if err != nil {
		if last := ticket.LastError(); last != nil {
			return o, false, errors.Join(ErrNotObtained, waitFailure{last}, errors.Unwrap(err))
		}
		return o, false, errors.Join(ErrNotObtained, errors.Unwrap(err))
	}
	switch o.Reason {
	case messages.ReasonNone:
		return o, true, nil
	case messages.ReasonNotObtained:
		return o, false, nil
	case messages.ReasonRedis:
		return o, false, errors.Join(ErrNotObtained, o.Err)
	default:
		return o, false, outcomeError(o)
	}
}

// send sends cmd to the name's actor itself and waits for its outcome. When ctx can never end, cmd is
// Inline: the actor may run it on this goroutine.
func (p *primitive) send(ctx context.Context, cmd actors.Routed, ticket *actors.Ticket) (actors.Outcome, error) {
	return p.c.doRouted(ctx, p.bound, cmd, ticket)
}

// tryTake is take for a TryAcquire or TryAwait with opts: one attempt without Wait, else a wait of up
// to the Wait given, which reports false with no error when it runs out. lease is the Lease given, 0
// for none.
func (p *primitive) tryTake(ctx context.Context, permits int64, opts []TryOption) (o actors.Outcome, ok bool, err error) {
	t := tryOptions{}
	if err := applyOptions(&t, opts); err != nil {
		return o, false, err
	}
	if p.kind != actors.KindPermitSemaphore && t.lease != 0 {
		return o, false, fmt.Errorf("%w: Lease applies to a permit semaphore only", ErrInvalidOption)
	}
	if !t.waitSet {
		return p.take(ctx, permits, t.lease, false, time.Time{})
	}
	// One reading of the clock for the wait's deadline and for its start, from which the take's events
	// count the wait.
	started := time.Now()
	waitCtx, cancel := context.WithDeadline(ctx, started.Add(t.wait))
	defer cancel()
	o, ok, err = p.take(waitCtx, permits, t.lease, true, started)
	ok, err = ownWaitRanOut(ctx)(ok, err)
	return o, ok, err
}

// operateRetryFor bounds how long an operation that fails on a connection error is sent again under
// its request id: well within the life of its retry latch in Redis (redisops.DefaultLatchExpiry), so
// that every run after one that took effect finds the latch.
const operateRetryFor = redisops.DefaultLatchExpiry / 2

// operate runs one operation on the name's actor and returns its outcome; a failed outcome is
// returned as its error. An operation that fails on a connection error (Redis restarting, a cut
// connection) is sent again under the same request id, with backoff, until it is answered, ctx ends,
// or operateRetryFor has passed: it takes effect once, however many times it was sent, when it returns
// nil. When it gives up, the error is the last Redis error, joined with ctx's when ctx ended.
func (p *primitive) operate(ctx context.Context, op actors.PrimitiveOp, n int64, ttl time.Duration, id string) (actors.Outcome, error) {
	if err := p.usable(ctx); err != nil {
		return actors.Outcome{}, err
	}
	reqID := p.c.newRequestID()
	var b backoff.BackOff
	start := time.Now()
	for resent := false; ; resent = true {
		ticket := actors.NewTicket()
		cmd := &actors.Operate{Name: p.name, Kind: p.kind, Op: op, N: n, TTL: ttl, ID: id, RequestID: reqID,
			Resent: resent, Owner: p.owner, Ticket: ticket, Inline: ctx.Done() == nil}
		if !(op == actors.OpRelease && p.kind == actors.KindPermitSemaphore) {
			// A permit's release is idempotent in Redis: a resend is harmless however late.
			cmd.NotAfter = start.Add(operateRetryFor)
		}
		o, err := p.send(ctx, cmd, ticket)
		if err != nil {
			return o, errors.Unwrap(err)
		}
		if o.Reason == messages.ReasonNone {
			return o, nil
		}
		err = outcomeError(o)
		if o.Reason != messages.ReasonRedis || !transient(o.Err) || time.Since(start) >= operateRetryFor {
			return o, err
		}
		if b == nil {
			b = actors.DefaultBackOff()
		}
		wait := b.NextBackOff()
		if left := operateRetryFor - time.Since(start); wait >= left {
			return o, err // the resend would come too late: the last Redis error stands
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return o, errors.Join(err, ctx.Err())
		case <-p.c.closed:
			timer.Stop()
			return o, errors.Join(err, ErrClosed)
		}
	}
}

// transient reports whether err, a Redis call's error, may pass if the call is sent again: a
// connection error, or a reply that says the server cannot serve for now.
func transient(err error) bool {
	if err == nil || errors.Is(err, ErrActorFailed) || errors.Is(err, ErrWrongType) {
		return false
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true // not an answer of the server: the connection failed
	}
	msg := reply.Error()
	for _, prefix := range []string{"LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// release runs a releasing operation (a semaphore's Release, a permit's, a latch's CountDown) inside
// a release span.
func (p *primitive) release(ctx context.Context, op actors.PrimitiveOp, n int64, id string) (actors.Outcome, error) {
	if err := p.usable(ctx); err != nil {
		return actors.Outcome{}, err
	}
	ctx, span := p.c.tel.StartRelease(ctx, p.span)
	o, err := p.operate(ctx, op, n, 0, id)
	span.End(err)
	return o, err
}

// checkPermits returns ErrInvalidPermits unless n is positive.
func checkPermits(n int64) error {
	if n <= 0 {
		return fmt.Errorf("%w: %d", ErrInvalidPermits, n)
	}
	return nil
}

// MaxPermitsAtOnce is the most permits that one acquisition of a [PermitSemaphore] takes: each permit
// has an id of its own, passed to Redis in one script call (Redisson's scripts fail above about 8,000).
const MaxPermitsAtOnce = 1000
