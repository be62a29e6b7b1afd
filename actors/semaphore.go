package actors

import (
	"context"
	"strconv"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// newPrimitiveStrategy makes the strategy of the primitive kind k for name.
func newPrimitiveStrategy(k Kind, name string, ops *redisops.Ops) primitiveStrategy {
	switch k {
	case KindPermitSemaphore:
		return &permitStrategy{counting{name: name, ops: ops, ch: redisops.SemaphoreChannel(name)}}
	case KindLatch:
		return &latchStrategy{counting{name: name, ops: ops, ch: redisops.LatchChannel(name)}}
	default:
		return &semaphoreStrategy{counting{name: name, ops: ops, ch: redisops.SemaphoreChannel(name)}}
	}
}

// counting is what the strategies share: the name, the Ops and the channel, and a semaphore's
// behaviour, which the latch overrides.
type counting struct {
	name string
	ops  *redisops.Ops
	ch   string
}

func (s *counting) channel() string { return s.ch }

func (s *counting) forget(t *Take)  { t.requestID, t.ids = "", nil }
func (s *counting) servesAll() bool { return false }

// wakes: the notice carries the permits available after a release; 0 lets nobody in.
func (s *counting) wakes(payload string) bool { return payload != "0" }

// semaphoreStrategy is Redisson's RSemaphore: a count of available permits, owned by nobody.
type semaphoreStrategy struct{ counting }

func (s *semaphoreStrategy) lockKind() messages.LockKind { return messages.LockSemaphore }

func (s *semaphoreStrategy) try(ctx context.Context, a *primitiveActor, t *Take) (bool, time.Time, error) {
	// An attempt that failed on an error may have taken the permits all the same: the next attempt
	// runs under the same request id, so that Redis answers what the first did rather than taking
	// them twice. A definite answer ends the request.
	if t.requestID == "" {
		t.requestID = a.env.NewRequestID()
	}
	ok, err := s.ops.SemaphoreTryAcquire(ctx, s.name, t.requestID, t.Permits)
	if err == nil || isNotSynced(err) {
		t.requestID = ""
	}
	return ok, time.Time{}, err
}

func (s *semaphoreStrategy) granted(_ *primitiveActor, t *Take) Outcome {
	return Outcome{HoldCount: t.Permits}
}

func (s *semaphoreStrategy) giveBack(ctx context.Context, a *primitiveActor, t *Take) error {
	_, err := s.ops.SemaphoreRelease(ctx, s.name, t.giveBackID, t.Permits)
	return err
}

func (s *semaphoreStrategy) operate(ctx context.Context, a *primitiveActor, m *Operate) Outcome {
	var (
		ok  bool
		v   int64
		err error
	)
	switch m.Op {
	case OpTrySet:
		ok, err = s.ops.SemaphoreTrySetPermits(ctx, s.name, requestID(a, m), m.N, m.TTL)
	case OpAdd:
		v, err = s.ops.SemaphoreAddPermits(ctx, s.name, requestID(a, m), m.N)
	case OpRelease:
		v, err = s.ops.SemaphoreRelease(ctx, s.name, requestID(a, m), m.N)
		if err == nil {
			a.emit(messages.Event{Type: messages.EventReleased, Owner: m.Owner, HoldCount: m.N, Reason: messages.ReleaseUnlocked})
		}
	case OpAvailable:
		v, err = s.ops.SemaphoreAvailable(ctx, s.name)
	case OpDrain:
		v, err = s.ops.SemaphoreDrain(ctx, s.name, requestID(a, m))
	default:
		return unsupported(m)
	}
	if err != nil {
		return redisOutcome(err)
	}
	return Outcome{OK: ok, Value: v}
}

// requestID is m's request id, or a fresh one.
func requestID(a *primitiveActor, m *Operate) string {
	if m.RequestID != "" {
		return m.RequestID
	}
	return a.env.NewRequestID()
}

// unsupported answers an operation that the kind has not.
func unsupported(m *Operate) Outcome {
	return Outcome{Reason: messages.ReasonRedis, Err: ErrUnsupportedOp{Op: m.Op, Kind: m.Kind}}
}

// ErrUnsupportedOp is the error of an [Operate] whose operation the kind has not.
type ErrUnsupportedOp struct {
	// Op is the operation asked for.
	Op PrimitiveOp
	// Kind is the kind of the semaphore or latch, which has no such operation.
	Kind Kind
}

// Error names the operation (by number) and the kind.
func (e ErrUnsupportedOp) Error() string {
	return "lockwarden: operation " + strconv.Itoa(int(e.Op)) + " is not one of a " + e.Kind.String()
}

// permitStrategy is Redisson's RPermitExpirableSemaphore: permits with ids and expiries. Permits
// taken without a lease are renewed by the actor's watchdog.
type permitStrategy struct{ counting }

func (s *permitStrategy) lockKind() messages.LockKind { return messages.LockPermitSemaphore }

func (s *permitStrategy) try(ctx context.Context, a *primitiveActor, t *Take) (bool, time.Time, error) {
	lease := t.Lease
	if lease == 0 {
		lease = a.env.WatchdogTimeout
	}
	if t.ambiguous && !t.sent.Before(validUntil(t.firstSent, lease)) {
		// Whatever the attempts that failed took has no validity left, and nothing renews it: it runs
		// out in Redis by itself. Go on under new ids, so that a retry never finds part of them.
		t.ids = nil
	}
	if t.ids == nil {
		t.ids = make([]string, t.Permits)
		for i := range t.ids {
			t.ids[i] = redisops.NewPermitID()
		}
	}
	r, err := s.ops.PermitsTryAcquire(ctx, s.name, t.ids, t.sent.Add(lease), t.sent)
	if err != nil || !r.OK {
		return false, r.NextExpiry, err
	}
	// An attempt that found its ids taken may be a resend of an earlier one that took them and whose
	// reply was lost: the permits' expiry in Redis is counted from that one's send at the earliest.
	// A grant with no validity left is given back, as a lock's late grant is, and the take goes on
	// under new ids.
	if !time.Now().Before(validUntil(t.firstSent, lease)) {
		// The first id last: a retry under these ids after a give-back that failed half way finds it,
		// and is answered as a retry rather than taking permits again.
		for i := len(t.ids) - 1; i >= 0; i-- {
			if _, err := s.ops.PermitsRelease(ctx, s.name, t.ids[i], time.Now()); err != nil {
				return false, time.Time{}, err
			}
		}
		t.ids = nil
		return false, time.Time{}, nil
	}
	return true, time.Time{}, nil
}

func (s *permitStrategy) granted(a *primitiveActor, t *Take) Outcome {
	ps := make([]Permit, len(t.ids))
	for i, id := range t.ids {
		ps[i] = a.addPermit(t, id, t.firstSent, t.Lease)
	}
	return Outcome{HoldCount: t.Permits, Permits: ps}
}

func (s *permitStrategy) giveBack(ctx context.Context, a *primitiveActor, t *Take) error {
	var first error
	for _, id := range t.ids {
		if p := a.permits[id]; p != nil {
			delete(a.permits, id)
			close(p.done)
		}
		if _, err := s.ops.PermitsRelease(ctx, s.name, id, time.Now()); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *permitStrategy) operate(ctx context.Context, a *primitiveActor, m *Operate) Outcome {
	var (
		ok  bool
		v   int64
		err error
	)
	now := time.Now()
	switch m.Op {
	case OpTrySet:
		ok, err = s.ops.PermitsTrySetPermits(ctx, s.name, requestID(a, m), m.N)
	case OpSet:
		err = s.ops.PermitsSetPermits(ctx, s.name, m.N, now)
	case OpAdd:
		err = s.ops.PermitsAddPermits(ctx, s.name, requestID(a, m), m.N)
	case OpRelease:
		return a.releasePermit(ctx, m)
	case OpAvailable:
		v, err = s.ops.PermitsAvailable(ctx, s.name, now)
	case OpAcquired:
		v, err = s.ops.PermitsAcquiredCount(ctx, s.name, now)
	default:
		return unsupported(m)
	}
	if err != nil {
		return redisOutcome(err)
	}
	return Outcome{OK: ok, Value: v}
}

// latchStrategy is Redisson's RCountDownLatch: a waiter gets in once the count is zero.
type latchStrategy struct{ counting }

func (s *latchStrategy) lockKind() messages.LockKind { return messages.LockLatch }
func (s *latchStrategy) servesAll() bool             { return true }

// wakes: only the zero notice; a new count ("1") lets nobody in.
func (s *latchStrategy) wakes(payload string) bool { return payload == redisops.LatchZeroMessage }

func (s *latchStrategy) try(ctx context.Context, _ *primitiveActor, _ *Take) (bool, time.Time, error) {
	n, err := s.ops.LatchCount(ctx, s.name)
	return err == nil && n <= 0, time.Time{}, err
}

func (s *latchStrategy) granted(*primitiveActor, *Take) Outcome { return Outcome{} }

func (s *latchStrategy) giveBack(context.Context, *primitiveActor, *Take) error { return nil }

func (s *latchStrategy) operate(ctx context.Context, a *primitiveActor, m *Operate) Outcome {
	var (
		ok  bool
		v   int64
		err error
	)
	switch m.Op {
	case OpTrySet:
		ok, err = s.ops.LatchTrySetCount(ctx, s.name, requestID(a, m), m.N)
	case OpCountDown:
		v, err = s.ops.LatchCountDown(ctx, s.name, requestID(a, m))
	case OpAvailable:
		v, err = s.ops.LatchCount(ctx, s.name)
	case OpDelete:
		ok, err = s.ops.LatchDelete(ctx, s.name)
	default:
		return unsupported(m)
	}
	if err != nil {
		return redisOutcome(err)
	}
	return Outcome{OK: ok, Value: v}
}
