package redisops

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The permit-expirable semaphore N (Redisson's RPermitExpirableSemaphore, 3.23.4 and later: one id per
// permit) keeps the available permits as a STRING at key N, as the semaphore does, and the acquired
// ones in the ZSET [PermitTimeoutKey](N): member the permit id as 16 raw bytes (shown to callers as 32
// lower-case hex characters, [NewPermitID]), score the lease expiry in client epoch milliseconds, or
// [NonExpirableTimeout] for a permit without a lease. Nothing happens when a lease ends: the calls
// take back the permits whose lease ended before they do anything else (ZREM, INCRBY N, and the new
// count published on [SemaphoreChannel] when above 0), the acquisition at most as many as it asks
// for. All times are the caller's clock (Redisson passes System.currentTimeMillis()), never Redis'
// TIME, so the clients sharing a semaphore need synchronised clocks.

// NonExpirableTimeout is the score Redisson gives a permit acquired without a lease.
const NonExpirableTimeout = 922337203685477

var (
	//go:embed permits_try_set.lua
	permitsTrySetSource string
	//go:embed permits_set.lua
	permitsSetSource string
	//go:embed permits_add.lua
	permitsAddSource string
	//go:embed permits_acquire.lua
	permitsAcquireSource string
	//go:embed permits_release.lua
	permitsReleaseSource string
	//go:embed permits_renew.lua
	permitsRenewSource string
	//go:embed permits_available.lua
	permitsAvailableSource string
	//go:embed permits_acquired.lua
	permitsAcquiredSource string

	permitsTrySetScript    = redis.NewScript(permitsTrySetSource)
	permitsSetScript       = redis.NewScript(withLib(permitsSetSource))
	permitsAddScript       = redis.NewScript(permitsAddSource)
	permitsAcquireScript   = redis.NewScript(withLib(permitsAcquireSource))
	permitsReleaseScript   = redis.NewScript(withLib(permitsReleaseSource))
	permitsRenewScript     = redis.NewScript(withLib(permitsRenewSource))
	permitsAvailableScript = redis.NewScript(withLib(permitsAvailableSource))
	permitsAcquiredScript  = redis.NewScript(withLib(permitsAcquiredSource))
)

// PermitsScripts returns the scripts of the permit-expirable semaphore, so that tests and warm-up code
// can load them all. The names do not clash with those of [Scripts].
func PermitsScripts() map[string]*redis.Script {
	return map[string]*redis.Script{
		"permits_try_set":   permitsTrySetScript,
		"permits_set":       permitsSetScript,
		"permits_add":       permitsAddScript,
		"permits_acquire":   permitsAcquireScript,
		"permits_release":   permitsReleaseScript,
		"permits_renew":     permitsRenewScript,
		"permits_available": permitsAvailableScript,
		"permits_acquired":  permitsAcquiredScript,
	}
}

// PermitTimeoutKey returns the key of the ZSET of the acquired permits of the permit-expirable
// semaphore name, Redisson's suffixName(N, "timeout"): {N}:timeout, or N:timeout when N already
// carries a hash tag.
func PermitTimeoutKey(name string) string {
	if strings.Contains(name, "{") {
		return name + ":timeout"
	}
	return "{" + name + "}:timeout"
}

// NewPermitID returns a new random permit id: 16 random bytes as 32 lower-case hex characters, as
// Redisson's ServiceManager.generateId makes them.
func NewPermitID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// permitBytes returns the 16 raw bytes of the permit id (32 hex characters), as the scripts store them.
func permitBytes(id string) (string, bool) {
	if len(id) != 32 {
		return "", false
	}
	b, err := hex.DecodeString(id)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// permitArgs appends the raw bytes of ids to args; it fails with [ErrBadArgument] on no ids, an id that
// is not 32 hex characters, or the same id twice.
func permitArgs(what, name string, ids []string, args []any) ([]any, error) {
	if len(ids) == 0 {
		return nil, badArgument(what, name, "no permit ids")
	}
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		raw, ok := permitBytes(id)
		if !ok {
			return nil, badArgument(what, name, "permit id %q is not 32 hex characters", id)
		}
		if _, dup := seen[raw]; dup {
			return nil, badArgument(what, name, "permit id %q given twice", id)
		}
		seen[raw] = struct{}{}
		args = append(args, raw)
	}
	return args, nil
}

// expiryScore returns the score of a permit whose lease ends at expiresAt: its epoch milliseconds, or
// [NonExpirableTimeout] for the zero time (no lease).
func expiryScore(expiresAt time.Time) int64 {
	if expiresAt.IsZero() {
		return NonExpirableTimeout
	}
	return expiresAt.UnixMilli()
}

// permitsKeys returns the keys of the permit scripts that take N, the ZSET and the channel in that
// order.
func permitsKeys(name string) []string {
	return []string{name, PermitTimeoutKey(name), SemaphoreChannel(name)}
}

// PermitsTrySetPermits sets the available permits of the permit-expirable semaphore name to permits
// if it has none yet (Redisson's trySetPermits) and reports whether it did; it then publishes permits
// on [SemaphoreChannel]. A retry after a lost reply answers false when the first run set them.
func (o *Ops) PermitsTrySetPermits(ctx context.Context, name, requestID string, permits int64) (bool, error) {
	if permits <= 0 {
		return false, badArgument("permits try set permits", name, "permits %d, want > 0", permits)
	}
	latch, latchArg := o.retryLatch(name, requestID)
	n, err := o.do(ctx, permitsTrySetScript, []string{name, SemaphoreChannel(name), latch},
		permits, o.publishArg, latchArg).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: permits try set permits %q: %w", name, typed(err))
	}
	return n == 1, nil
}

// PermitsSetPermits makes permits the total of the permit-expirable semaphore name, available and
// acquired (Redisson's setPermits): it sets the available count when the semaphore has none, and
// otherwise adds the difference between permits and the current total to it (which may leave it
// negative while more permits are acquired than the new total), and publishes permits on
// [SemaphoreChannel] unless the total was already permits. It first takes back the permits whose
// lease ended at now, which leaves the total unchanged. Running it twice sets the same total: it is
// retry-safe as it is.
func (o *Ops) PermitsSetPermits(ctx context.Context, name string, permits int64, now time.Time) error {
	if permits <= 0 {
		return badArgument("permits set permits", name, "permits %d, want > 0", permits)
	}
	err := o.do(ctx, permitsSetScript, []string{name, SemaphoreChannel(name), PermitTimeoutKey(name)},
		permits, o.publishArg, now.UnixMilli()).Err()
	if err != nil && !errors.Is(err, redis.Nil) { // the script answers nothing, as Redisson's
		return fmt.Errorf("lockwarden: permits set permits %q: %w", name, typed(err))
	}
	return nil
}

// PermitsAddPermits adds delta (which may be negative, not 0) to the available permits of the
// permit-expirable semaphore name, from 0 when it has none (Redisson's addPermits, which also drops
// the key's expiry), and publishes delta on [SemaphoreChannel] when delta > 0: Redisson's message is
// the delta, not the new count. It is retry-safe with a request id (see [RetryLatchKey]): a second
// call with the same id within the latch expiry adds nothing.
func (o *Ops) PermitsAddPermits(ctx context.Context, name, requestID string, delta int64) error {
	if delta == 0 {
		return badArgument("permits add permits", name, "delta 0")
	}
	latch, latchArg := o.retryLatch(name, requestID)
	err := o.do(ctx, permitsAddScript, []string{name, SemaphoreChannel(name), latch},
		delta, o.publishArg, latchArg).Err()
	if err != nil {
		return fmt.Errorf("lockwarden: permits add permits %q: %w", name, typed(err))
	}
	return nil
}

// PermitsAcquired is the answer of [Ops.PermitsTryAcquire].
type PermitsAcquired struct {
	// OK reports whether the permits were acquired, under the ids given.
	OK bool
	// NextExpiry, when not OK, is the lowest lease expiry among the acquired permits when that is a
	// lease (not [NonExpirableTimeout]): a permit may come back then, and the waiter should try again
	// then at the latest (Redisson's ':' answer). It is the zero time otherwise: only a message on
	// [SemaphoreChannel] tells of permits coming back.
	NextExpiry time.Time
}

// PermitsTryAcquire acquires len(ids) permits of the permit-expirable semaphore name, one under each id
// (from [NewPermitID]), with the lease ending at expiresAt, or no lease for the zero time (Redisson's
// tryAcquire(n, lease) since 3.23.4). It first takes back up to len(ids) permits whose lease ended at
// now, publishing the new count when above 0, as Redisson does; when enough permits are then
// available, it takes them (DECRBY) and adds the ids to [PermitTimeoutKey], whose expiry it sets to
// the semaphore key's when that has one. The acquisition itself publishes nothing.
//
// It is retry-safe without a latch: a call that finds ids[0] already acquired is taken for a retry of
// a call that acquired the permits (go-redis sent it again after a lost reply), answers OK and
// changes nothing. Ids must be fresh for each acquisition.
func (o *Ops) PermitsTryAcquire(ctx context.Context, name string, ids []string, expiresAt, now time.Time) (PermitsAcquired, error) {
	args, err := permitArgs("permits acquire", name, ids, make([]any, 5, 5+len(ids)))
	if err != nil {
		return PermitsAcquired{}, err
	}
	args[0], args[1], args[2], args[3], args[4] = int64(len(ids)), expiryScore(expiresAt), now.UnixMilli(),
		nonExpirableArg, o.publishArg
	var undo *grant
	if o.syncsGrants(ctx, name) { // else no WAIT follows, and the undo is never needed
		undo = &grant{granted: grantedFirst, undo: func(ctx context.Context) error {
			for _, id := range ids {
				if _, err := o.PermitsRelease(ctx, name, id, time.Now()); err != nil {
					return err
				}
			}
			return nil
		}}
	}
	reply, syncErr := o.runScript(ctx, undo, permitsAcquireScript, permitsKeys(name), args...)
	vals, err := reply.Int64Slice()
	if err == nil {
		err = syncErr
	}
	if err != nil {
		return PermitsAcquired{}, fmt.Errorf("lockwarden: permits acquire %q: %w", name, typed(err))
	}
	if len(vals) != 3 {
		return PermitsAcquired{}, fmt.Errorf("lockwarden: permits acquire %q: unexpected reply %v", name, vals)
	}
	if vals[0] == 1 {
		return PermitsAcquired{OK: true}, nil
	}
	if vals[1] == 1 {
		return PermitsAcquired{NextExpiry: time.UnixMilli(vals[2])}, nil
	}
	return PermitsAcquired{}, nil
}

// nonExpirableArg is [NonExpirableTimeout] as the script argument, spelt as Redis spells the score
// (the acquisition compares the lowest score with it as text, as Redisson's script does).
var nonExpirableArg any = strconv.FormatInt(NonExpirableTimeout, 10)

// PermitReleased is the answer of [Ops.PermitsRelease].
type PermitReleased struct {
	// Removed reports whether the id was an acquired permit, which is now back among the available
	// ones.
	Removed bool
	// Expired reports, when Removed, that the permit's lease had ended at now: it was given back all
	// the same (Redisson's tryRelease then answers false, and its release throws).
	Expired bool
}

// PermitsRelease gives back the permit id of the permit-expirable semaphore name (Redisson's
// release(id)): when id is acquired it removes it from [PermitTimeoutKey], adds 1 to the available
// count and publishes the new count on [SemaphoreChannel], also when the lease had ended. An id that
// is not acquired (never was, released, or taken back after its lease ended) changes nothing. It is
// idempotent: a second run, as a retry after a lost reply, removes nothing (and answers not Removed).
func (o *Ops) PermitsRelease(ctx context.Context, name, id string, now time.Time) (PermitReleased, error) {
	raw, ok := permitBytes(id)
	if !ok {
		return PermitReleased{}, badArgument("permits release", name, "permit id %q is not 32 hex characters", id)
	}
	vals, err := o.do(ctx, permitsReleaseScript,
		[]string{name, SemaphoreChannel(name), PermitTimeoutKey(name)},
		raw, 1, now.UnixMilli(), o.publishArg).Int64Slice()
	if err != nil {
		return PermitReleased{}, fmt.Errorf("lockwarden: permits release %q: %w", name, typed(err))
	}
	if len(vals) != 2 {
		return PermitReleased{}, fmt.Errorf("lockwarden: permits release %q: unexpected reply %v", name, vals)
	}
	return PermitReleased{Removed: vals[0] == 1, Expired: vals[1] == 1}, nil
}

// PermitsRenew extends the leases of the permits ids of the permit-expirable semaphore name to end at
// expiresAt (no lease for the zero time), in one call, as Redisson's updateLeaseTime does for one id:
// it first takes back every permit whose lease ended at now (publishing the new count when above 0),
// then sets the expiry of each id still acquired. It answers, per id in order, whether it was renewed;
// false means the permit is gone (its lease ended and it was taken back, or it was released) and its
// holder lost it. A retry renews again, to the same expiry.
func (o *Ops) PermitsRenew(ctx context.Context, name string, ids []string, expiresAt, now time.Time) ([]bool, error) {
	args, err := permitArgs("permits renew", name, ids, make([]any, 3, 3+len(ids)))
	if err != nil {
		return nil, err
	}
	args[0], args[1], args[2] = expiryScore(expiresAt), now.UnixMilli(), o.publishArg
	vals, err := o.do(ctx, permitsRenewScript, permitsKeys(name), args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("lockwarden: permits renew %q: %w", name, typed(err))
	}
	if len(vals) != len(ids) {
		return nil, fmt.Errorf("lockwarden: permits renew %q: unexpected reply %v", name, vals)
	}
	renewed := make([]bool, len(vals))
	for i, v := range vals {
		renewed[i] = v == 1
	}
	return renewed, nil
}

// PermitsAvailable returns the available permits of the permit-expirable semaphore name (0 when it has
// none set), after taking back the permits whose lease ended at now (publishing the new count when
// above 0), as Redisson's availablePermits does. A retry finds nothing more to take back.
func (o *Ops) PermitsAvailable(ctx context.Context, name string, now time.Time) (int64, error) {
	n, err := o.do(ctx, permitsAvailableScript, permitsKeys(name), now.UnixMilli(), o.publishArg).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: permits available %q: %w", name, typed(err))
	}
	return n, nil
}

// PermitsAcquiredCount returns the number of acquired permits of the permit-expirable semaphore name,
// after taking back the permits whose lease ended at now (publishing the new count when above 0), as
// Redisson's acquiredPermits does. A retry finds nothing more to take back.
func (o *Ops) PermitsAcquiredCount(ctx context.Context, name string, now time.Time) (int64, error) {
	n, err := o.do(ctx, permitsAcquiredScript, permitsKeys(name), now.UnixMilli(), o.publishArg).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: permits acquired %q: %w", name, typed(err))
	}
	return n, nil
}
