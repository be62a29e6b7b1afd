package redisops

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed raise_token.lua
	raiseTokenSource string

	raiseTokenScript = redis.NewScript(withLib(raiseTokenSource))
)

// DefaultTokenExpiry is how long a fencing-token counter is kept past the moment the server's clock
// reaches its value, by default: as long as the unlock latch ([DefaultLatchExpiry]), so that a name that
// was locked and released leaves no key behind once its latch has expired.
const DefaultTokenExpiry = DefaultLatchExpiry

// SetTokenExpiry sets how fencing tokens are issued on the counter [TokenKey] of every lock. It is not
// safe to call while o is in use; call it right after [New].
//
// With d > 0 (the default, [DefaultTokenExpiry]), a live counter goes up by two (INCRBY) and the
// token is the value between: the one above it is kept for a local handoff granted before Redis
// answers the release that makes it, and no other client is issued it. A counter that is gone is set
// to the Redis server's clock in microseconds (TIME; the token) plus one, to expire d later. A name
// that is no longer locked so leaves no key behind (its counter expires at most d after the
// clock-based token that started it; a busy name's counter is set from the clock again every d), and
// tokens still strictly increase per name across acquisitions: the counter goes up by two per
// acquisition of the name (and by one at the release of a last hold through [Ops.ReleaseHeldFenced],
// which marks the release done), far fewer than the microseconds that pass before it expires, so it
// runs behind the clock (unless a RedLock floor, [Ops.RaiseToken], put it ahead, and then it is kept until
// the clock has passed it), and a token issued after it expired, taken from the clock, is above every
// earlier one. This holds as long as the Redis server's clock does not step back by more than d (a
// clock that steps back further, or a failover to a replica whose clock is behind by more, can issue
// a token below an earlier one). Tokens are large numbers (about 1.7e15).
//
// With d = 0 the counter is INCRed and kept forever, as Redisson's RFencedLock does: tokens are small
// and sequential (1, 2, 3, ...), and Redisson clients that use RFencedLock on the same names share them,
// at the cost of one key per name ever locked. All clients of one name must use the same mode: a
// counter that expires under an INCRing client starts again from 1. A negative d counts as 0.
func (o *Ops) SetTokenExpiry(d time.Duration) {
	o.tokenExpiry = max(d, 0)
	o.tokenMillisArg = o.tokenMillis()
}

// TokensFromClock reports whether fencing tokens come from the expiring counter, set from the server's
// clock (a token expiry above 0, the default), rather than from a counter kept forever
// ([Ops.SetTokenExpiry]). Only the expiring counter keeps the token above each one it issues
// unissued, for a local handoff granted before Redis answers the release that makes it.
func (o *Ops) TokensFromClock() bool { return o.tokenExpiry > 0 }

// tokenArg is tokenMillis() as a script argument.
func (o *Ops) tokenArg() any { return o.tokenMillisArg }

// tokenMillis is the token expiry the scripts take: whole milliseconds, 0 for a persistent counter.
func (o *Ops) tokenMillis() int64 {
	if o.tokenExpiry <= 0 {
		return 0
	}
	return millis(o.tokenExpiry)
}

// RaiseToken makes the fencing-token counter of the lock name at least floor, and returns its value
// afterwards. It never lowers the counter. A counter that expires ([Ops.SetTokenExpiry]) keeps a floor
// ahead of this server's clock (from another node) until the clock has passed it by the expiry.
func (o *Ops) RaiseToken(ctx context.Context, name string, floor int64) (int64, error) {
	n, err := o.do(ctx, raiseTokenScript, []string{TokenKey(name)}, floor, o.tokenMillis()).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: raise token %q: %w", name, typed(err))
	}
	return n, nil
}
