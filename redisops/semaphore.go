package redisops

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The semaphore N (Redisson's RSemaphore) is a STRING at key N holding the decimal count of available
// permits; an absent key is a semaphore not set up yet (an acquisition fails). Whoever gives permits
// back is not checked. Changes of the count are published on [SemaphoreChannel] as the decimal new
// count (trySetPermits: the permits set); a waiter wakes on a message and tries again (Redisson's
// SemaphorePubSub wakes up to that many of its local waiters). Acquisitions publish nothing.
//
// The calls that change the count by a relative amount ([Ops.SemaphoreAddPermits],
// [Ops.SemaphoreTryAcquire], [Ops.SemaphoreRelease], [Ops.SemaphoreDrain]) are retry-safe when given a
// request id: the script first reads the retry latch [RetryLatchKey](N, request id); when it is there,
// the call ran before (go-redis sent it again after a lost reply) and the script answers what is
// stored there and changes nothing; otherwise it runs and stores its answer there for the latch
// expiry ([DefaultLatchExpiry]). That key is lockwarden's own: Redisson clients never read it. An
// empty request id makes the call run as Redisson's does, with no latch. The same latch serves the
// permit-expirable semaphore ([Ops.PermitsAddPermits]) and the count-down latch
// ([Ops.LatchCountDown]).

// ErrBadArgument is returned, with nothing sent to Redis, when an argument of a semaphore or latch call
// is out of its range: permits or a count of 0 or less, a delta of 0, no permit ids, a permit id that is
// not 32 hex characters, or the same id twice.
var ErrBadArgument = errors.New("lockwarden: bad argument")

var (
	//go:embed sem_try_set.lua
	semTrySetSource string
	//go:embed sem_add.lua
	semAddSource string
	//go:embed sem_acquire.lua
	semAcquireSource string
	//go:embed sem_release.lua
	semReleaseSource string
	//go:embed sem_drain.lua
	semDrainSource string
	//go:embed sem_available.lua
	semAvailableSource string

	semTrySetScript    = redis.NewScript(semTrySetSource)
	semAddScript       = redis.NewScript(semAddSource)
	semAcquireScript   = redis.NewScript(semAcquireSource)
	semReleaseScript   = redis.NewScript(semReleaseSource)
	semDrainScript     = redis.NewScript(semDrainSource)
	semAvailableScript = redis.NewScript(semAvailableSource)
)

// SemaphoreScripts returns the scripts of the semaphore, so that tests and warm-up code can load them
// all. The names do not clash with those of [Scripts].
func SemaphoreScripts() map[string]*redis.Script {
	return map[string]*redis.Script{
		"sem_try_set":   semTrySetScript,
		"sem_add":       semAddScript,
		"sem_acquire":   semAcquireScript,
		"sem_release":   semReleaseScript,
		"sem_drain":     semDrainScript,
		"sem_available": semAvailableScript,
	}
}

// SemaphoreChannel returns the channel on which the changes of the semaphore name are published,
// Redisson's redisson_sc:{N}. The permit-expirable semaphore of the same name publishes there too.
func SemaphoreChannel(name string) string { return prefixed("redisson_sc", name) }

// RetryLatchKey returns the key that keeps, for the latch expiry, the answer of the retry-safe call
// with the given request id on the semaphore or count-down latch name:
// lockwarden_retry_latch:{N}:<request id>. Redisson does not know this key.
func RetryLatchKey(name, requestID string) string {
	return prefixed("lockwarden_retry_latch", name) + ":" + requestID
}

// noLatchArg is the latch expiry argument of a call without a request id: the scripts then keep no
// latch.
var noLatchArg any = int64(0)

// retryLatch returns the retry latch key and the latch expiry argument of a call with requestID on
// name: o's latch expiry, or 0 (no latch) when requestID is empty. The key goes into KEYS either way.
func (o *Ops) retryLatch(name, requestID string) (string, any) {
	if requestID == "" {
		return RetryLatchKey(name, ""), noLatchArg
	}
	return RetryLatchKey(name, requestID), o.latchArg
}

// badArgumentError is an argument refused by the call what on name; it matches [ErrBadArgument].
type badArgumentError struct{ what, name, detail string }

func (e badArgumentError) Error() string {
	return fmt.Sprintf("lockwarden: %s %q: bad argument: %s", e.what, e.name, e.detail)
}

func (e badArgumentError) Unwrap() error { return ErrBadArgument }

// badArgument returns the error of the call what on name that refuses an argument: it matches
// [ErrBadArgument].
func badArgument(what, name, format string, args ...any) error {
	return badArgumentError{what: what, name: name, detail: fmt.Sprintf(format, args...)}
}

// SemaphoreTrySetPermits sets the permits of the semaphore name to permits if it has none yet
// (Redisson's trySetPermits), with an expiry of ttl when ttl > 0 (rounded up to whole milliseconds).
// It reports whether it set them; it then publishes permits on [SemaphoreChannel]. A semaphore that
// exists is left as it is. A retry after a lost reply answers false when the first run set the
// permits.
func (o *Ops) SemaphoreTrySetPermits(ctx context.Context, name, requestID string, permits int64, ttl time.Duration) (bool, error) {
	if permits <= 0 {
		return false, badArgument("semaphore try set permits", name, "permits %d, want > 0", permits)
	}
	var ttlArg int64
	if ttl > 0 {
		ttlArg = millis(ttl)
	}
	latch, latchArg := o.retryLatch(name, requestID)
	n, err := o.do(ctx, semTrySetScript, []string{name, SemaphoreChannel(name), latch},
		permits, o.publishArg, ttlArg, latchArg).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: semaphore try set permits %q: %w", name, typed(err))
	}
	return n == 1, nil
}

// SemaphoreAddPermits adds delta (which may be negative, not 0) to the permits of the semaphore name,
// from 0 when it has none, and returns the new count, which it publishes on [SemaphoreChannel] (as
// Redisson does, whatever the count). Like Redisson's addPermits it rewrites the key, which drops an
// expiry set by [Ops.SemaphoreTrySetPermits]. It is retry-safe with a request id (see
// [RetryLatchKey]): a second call with the same id within the latch expiry returns the first answer
// and adds nothing.
func (o *Ops) SemaphoreAddPermits(ctx context.Context, name, requestID string, delta int64) (int64, error) {
	if delta == 0 {
		return 0, badArgument("semaphore add permits", name, "delta 0")
	}
	latch, latchArg := o.retryLatch(name, requestID)
	n, err := o.do(ctx, semAddScript, []string{name, SemaphoreChannel(name), latch},
		delta, o.publishArg, latchArg).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: semaphore add permits %q: %w", name, typed(err))
	}
	return n, nil
}

// SemaphoreTryAcquire takes permits permits of the semaphore name if that many are available (DECRBY)
// and reports whether it did; a semaphore with no permits set has none. It publishes nothing. It is
// retry-safe with a request id (see [RetryLatchKey]): a second call with the same id within the latch
// expiry returns the first answer and takes nothing (a retried acquisition does not take the permits
// twice; a retried refusal stays a refusal).
func (o *Ops) SemaphoreTryAcquire(ctx context.Context, name, requestID string, permits int64) (bool, error) {
	if permits <= 0 {
		return false, badArgument("semaphore acquire", name, "permits %d, want > 0", permits)
	}
	latch, latchArg := o.retryLatch(name, requestID)
	var undo *grant
	if o.syncsGrants(ctx, name) { // else no WAIT follows, and the undo is never needed
		undo = &grant{granted: func(r *redis.Cmd) bool { n, _ := r.Int64(); return n == 1 },
			undo: func(ctx context.Context) error {
				_, err := o.SemaphoreRelease(ctx, name, undoRequestID(), permits)
				return err
			}}
	}
	reply, syncErr := o.runScript(ctx, undo, semAcquireScript, []string{name, latch}, permits, latchArg)
	n, err := reply.Int64()
	if err == nil {
		err = syncErr
	}
	if err != nil {
		return false, fmt.Errorf("lockwarden: semaphore acquire %q: %w", name, typed(err))
	}
	return n == 1, nil
}

// SemaphoreRelease gives permits permits back to the semaphore name (INCRBY, from 0 when it has none;
// as in Redisson, nothing checks that the caller took them), publishes the new count on
// [SemaphoreChannel] and returns it. It is retry-safe with a request id (see [RetryLatchKey]): a
// second call with the same id within the latch expiry returns the first answer and gives nothing back.
func (o *Ops) SemaphoreRelease(ctx context.Context, name, requestID string, permits int64) (int64, error) {
	if permits <= 0 {
		return 0, badArgument("semaphore release", name, "permits %d, want > 0", permits)
	}
	latch, latchArg := o.retryLatch(name, requestID)
	n, err := o.do(ctx, semReleaseScript, []string{name, SemaphoreChannel(name), latch},
		permits, o.publishArg, latchArg).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: semaphore release %q: %w", name, typed(err))
	}
	return n, nil
}

// SemaphoreAvailable returns the available permits of the semaphore name, 0 when it has none set. It
// changes nothing.
func (o *Ops) SemaphoreAvailable(ctx context.Context, name string) (int64, error) {
	n, err := o.do(ctx, semAvailableScript, []string{name}).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: semaphore available permits %q: %w", name, typed(err))
	}
	return n, nil
}

// SemaphoreDrain takes every available permit of the semaphore name and returns how many it took: it
// sets the count to 0 (which, as in Redisson, drops the key's expiry), or leaves an absent semaphore
// absent and returns 0. It publishes nothing. It is retry-safe with a request id (see
// [RetryLatchKey]): a second call with the same id within the latch expiry returns the first answer
// and changes nothing.
func (o *Ops) SemaphoreDrain(ctx context.Context, name, requestID string) (int64, error) {
	latch, latchArg := o.retryLatch(name, requestID)
	n, err := o.do(ctx, semDrainScript, []string{name, latch}, latchArg).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: semaphore drain %q: %w", name, typed(err))
	}
	return n, nil
}
