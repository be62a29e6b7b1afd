package coordinator

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockwarden/lockwarden/messages"
)

// onPrimitive carries out a Primitive message through the handle of its kind, on a goroutine of its
// own, so that the gateway never waits on Redis nor on a waiting acquisition; Close waits for it (its
// context ends when Close starts).
func (g *gateway) onPrimitive(ctx actor.Context, m messages.Primitive) {
	sender := ctx.Sender()
	fail := func(err error) {
		g.reply(ctx, sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: err})
	}
	if m.Name == "" {
		fail(ErrEmptyName)
		return
	}
	if err := checkPrimitive(m); err != nil {
		fail(err)
		return
	}
	if g.c.isClosed() {
		fail(ErrClosed)
		return
	}
	c, root := g.c, g.root
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		reply, err := c.runPrimitive(m)
		if err != nil {
			root.Send(sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: err})
			return
		}
		root.Send(sender, reply)
	}()
}

// checkPrimitive validates m's kind, operation and durations.
func checkPrimitive(m messages.Primitive) error {
	valid := map[messages.Kind][]messages.PrimitiveOp{
		messages.KindSemaphore: {messages.OpAcquire, messages.OpRelease, messages.OpTrySet, messages.OpAdd,
			messages.OpAvailable, messages.OpDrain},
		messages.KindPermitSemaphore: {messages.OpAcquire, messages.OpRelease, messages.OpTrySet, messages.OpAdd,
			messages.OpAvailable},
		messages.KindLatch: {messages.OpTrySet, messages.OpCountDown, messages.OpAvailable, messages.OpAwait,
			messages.OpDelete},
	}
	ops, ok := valid[m.Kind]
	if !ok {
		return fmt.Errorf("%w: %v is not a semaphore or a latch", ErrInvalidKind, m.Kind)
	}
	found := false
	for _, op := range ops {
		found = found || op == m.Op
	}
	if !found {
		return fmt.Errorf("%w: operation %d on a %v", ErrInvalidMessage, m.Op, m.Kind)
	}
	if m.Op == messages.OpAcquire && m.N <= 0 {
		return fmt.Errorf("%w: %d", ErrInvalidPermits, m.N)
	}
	if m.Op == messages.OpAcquire && m.Kind == messages.KindPermitSemaphore && m.N > MaxPermitsAtOnce {
		return fmt.Errorf("%w: %d, at most %d at once", ErrInvalidPermits, m.N, MaxPermitsAtOnce)
	}
	if m.Wait < 0 || (m.Wait > MaxDuration && m.Wait != messages.WaitForever) {
		return fmt.Errorf("%w: %v", ErrInvalidWait, m.Wait)
	}
	if m.Lease != 0 && (m.Lease < MinLease || m.Lease > MaxDuration) {
		return fmt.Errorf("%w: %v", ErrInvalidLease, m.Lease)
	}
	return nil
}

// runPrimitive carries out m with the coordinator's handles, bounded by the coordinator's lifetime
// and m's Wait.
func (c *Coordinator) runPrimitive(m messages.Primitive) (*messages.PrimitiveReply, error) {
	ctx := c.lifetime
	var tries []TryOption
	if m.Wait > 0 && m.Wait != messages.WaitForever {
		tries = append(tries, Wait(m.Wait))
	}
	reply := &messages.PrimitiveReply{Name: m.Name, Kind: m.Kind, Op: m.Op}
	var err error
	switch m.Kind {
	case messages.KindSemaphore:
		s := c.Semaphore(m.Name)
		switch m.Op {
		case messages.OpAcquire:
			reply.OK, err = acquireFor(ctx, m, tries, func(ctx context.Context, opts []TryOption) (bool, error) {
				return s.TryAcquire(ctx, m.N, opts...)
			})
		case messages.OpRelease:
			err = s.Release(ctx, m.N)
		case messages.OpTrySet:
			reply.OK, err = s.TrySetPermits(ctx, m.N)
		case messages.OpAdd:
			err = s.AddPermits(ctx, m.N)
		case messages.OpAvailable:
			reply.Value, err = s.AvailablePermits(ctx)
		case messages.OpDrain:
			reply.Value, err = s.DrainPermits(ctx)
		}
	case messages.KindPermitSemaphore:
		s := c.PermitSemaphore(m.Name)
		switch m.Op {
		case messages.OpAcquire:
			var ps []*Permit
			if m.Lease > 0 {
				tries = append(tries, Lease(m.Lease))
			}
			reply.OK, err = acquireFor(ctx, m, tries, func(ctx context.Context, opts []TryOption) (bool, error) {
				o, ok, err := s.tryTake(ctx, m.N, opts)
				ps = s.permits(o)
				return ok, err
			})
			for _, p := range ps {
				reply.PermitIDs = append(reply.PermitIDs, p.ID())
			}
		case messages.OpRelease:
			err = s.Release(ctx, m.ID)
		case messages.OpTrySet:
			reply.OK, err = s.TrySetPermits(ctx, m.N)
		case messages.OpAdd:
			err = s.AddPermits(ctx, m.N)
		case messages.OpAvailable:
			reply.Value, err = s.AvailablePermits(ctx)
		}
	case messages.KindLatch:
		l := c.CountDownLatch(m.Name)
		switch m.Op {
		case messages.OpTrySet:
			reply.OK, err = l.TrySetCount(ctx, m.N)
		case messages.OpCountDown:
			err = l.CountDown(ctx)
		case messages.OpAvailable:
			reply.Value, err = l.Count(ctx)
		case messages.OpAwait:
			reply.OK, err = acquireFor(ctx, m, tries, func(ctx context.Context, opts []TryOption) (bool, error) {
				return l.TryAwait(ctx, opts...)
			})
		case messages.OpDelete:
			reply.OK, err = l.Delete(ctx)
		}
	}
	if err != nil && c.isClosed() {
		err = ErrClosed
	}
	return reply, err
}

// acquireFor runs try with m's wait: one attempt for Wait 0, a wait of up to Wait (tries carries it),
// or, for WaitForever, a wait until it succeeds or ctx (the coordinator's lifetime) ends.
func acquireFor(ctx context.Context, m messages.Primitive, tries []TryOption, try func(context.Context, []TryOption) (bool, error)) (bool, error) {
	if m.Wait == messages.WaitForever {
		tries = append(tries, Wait(MaxDuration))
	}
	return try(ctx, tries)
}
