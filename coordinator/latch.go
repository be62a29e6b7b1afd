package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/lockwarden/lockwarden/actors"
)

// CountDownLatch is a handle on a count-down latch shared across processes: Redisson's
// RCountDownLatch, with its layout in Redis (a string key, the name, holding the count) and its
// notices on redisson_countdownlatch__channel__{name} (0 when the count reaches zero, 1 when a new
// count is set), so that Java services on Redisson and Go services on lockwarden share it.
//
// Await waits until the count is zero; it is woken by the zero notice (should notices be lost, the
// count is read again every third of the watchdog timeout), and reads the count once its subscription
// is confirmed, so that a count that reached zero just before is not missed. A latch that was never set, or whose count reached zero (the key is then deleted), has the
// count 0. A CountDownLatch is safe for concurrent use.
type CountDownLatch struct{ primitive }

// CountDownLatch returns a handle on the count-down latch name. It does no I/O; an empty name is the
// handle's construction error ([ErrEmptyName]), which [CountDownLatch.Err] reports and every call
// returns.
func (c *Coordinator) CountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{c.primitive(actors.KindLatch, name)}
}

// Name returns the latch's name.
func (l *CountDownLatch) Name() string { return l.name }

// Err returns the handle's construction error, nil for a valid handle.
func (l *CountDownLatch) Err() error { return l.err }

// Owner returns the handle's owner id, which names it in its wait events ("<coordinator id>:<n>").
func (l *CountDownLatch) Owner() string { return l.owner }

// TrySetCount sets the count to count if the latch has none (its count is 0), and reports whether it
// did; it then publishes the new-count notice. count must be positive ([ErrInvalidCount]).
func (l *CountDownLatch) TrySetCount(ctx context.Context, count int64) (bool, error) {
	if count <= 0 {
		return false, fmt.Errorf("%w: %d", ErrInvalidCount, count)
	}
	o, err := l.operate(ctx, actors.OpTrySet, count, 0, "")
	return o.OK, err
}

// CountDown takes one off the count; when it reaches zero the latch is deleted and the zero notice
// wakes every waiter. Counting down a latch at 0 does nothing. A count-down that go-redis retries
// after a lost reply counts once; calling CountDown again after an error counts again.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	_, err := l.release(ctx, actors.OpCountDown, 0, "")
	return err
}

// Count returns the count (0 when the latch is not set).
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	o, err := l.operate(ctx, actors.OpAvailable, 0, 0, "")
	return o.Value, err
}

// Await waits until the count is zero, or ctx ends: then the error matches [ErrNotObtained] and
// ctx.Err(). It returns at once when the count is zero already.
func (l *CountDownLatch) Await(ctx context.Context) error {
	_, _, err := l.take(ctx, 0, 0, true, time.Time{})
	return err
}

// TryAwait reports whether the count is zero: at once without [Wait], or within the wait with Wait(d)
// (false, with a nil error, when d passes first).
func (l *CountDownLatch) TryAwait(ctx context.Context, opts ...TryOption) (bool, error) {
	_, ok, err := l.tryTake(ctx, 0, opts)
	return ok, err
}

// Delete deletes the latch and reports whether there was one; it publishes the new-count notice, as
// Redisson does, which wakes nobody. A deleted latch has the count 0, so its awaiters return at their
// next reading of the count (within a third of the watchdog timeout), where Redisson's wait for a
// later zero notice.
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	o, err := l.operate(ctx, actors.OpDelete, 0, 0, "")
	return o.OK, err
}
