package redisops

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The count-down latch N (Redisson's RCountDownLatch) is a STRING at key N holding the decimal count;
// an absent key counts 0 (the key is deleted when the count reaches 0 or less). Messages go to
// [LatchChannel]: [LatchZeroMessage] when a count-down reaches exactly 0 (it opens the awaiters'
// latches), [LatchNewCountMessage] when a count is set or the latch deleted (it closes them again).
// Redisson's awaiters read the count again after each message, so a deleted latch does not release
// them until a later zero message.

// Messages published on [LatchChannel], Redisson's CountDownLatchPubSub codes.
const (
	// LatchZeroMessage is published when a count-down brings the count to 0.
	LatchZeroMessage = "0"
	// LatchNewCountMessage is published when a count is set, and when the latch is deleted.
	LatchNewCountMessage = "1"
)

var (
	//go:embed latch_try_set.lua
	latchTrySetSource string
	//go:embed latch_count_down.lua
	latchCountDownSource string
	//go:embed latch_count.lua
	latchCountSource string
	//go:embed latch_delete.lua
	latchDeleteSource string

	latchTrySetScript    = redis.NewScript(withLib(latchTrySetSource))
	latchCountDownScript = redis.NewScript(latchCountDownSource)
	latchCountScript     = redis.NewScript(latchCountSource)
	latchDeleteScript    = redis.NewScript(withLib(latchDeleteSource))
)

// LatchScripts returns the scripts of the count-down latch, so that tests and warm-up code can load
// them all. The names do not clash with those of [Scripts].
func LatchScripts() map[string]*redis.Script {
	return map[string]*redis.Script{
		"latch_try_set":    latchTrySetScript,
		"latch_count_down": latchCountDownScript,
		"latch_count":      latchCountScript,
		"latch_delete":     latchDeleteScript,
	}
}

// LatchChannel returns the channel of the count-down latch name, Redisson's
// redisson_countdownlatch__channel__{N}: the braces are always added, also when N carries a hash tag
// (the channel then has another slot than N on Redis Cluster, where a call on such a name fails, as
// Redisson's does).
func LatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// LatchTrySetCount sets the count of the latch name to count if it has none (Redisson's trySetCount)
// and reports whether it did; it then publishes [LatchNewCountMessage] on [LatchChannel]. A retry after
// a lost reply answers false when the first run set the count.
func (o *Ops) LatchTrySetCount(ctx context.Context, name string, count int64) (bool, error) {
	if count <= 0 {
		return false, badArgument("latch try set count", name, "count %d, want > 0", count)
	}
	n, err := o.do(ctx, latchTrySetScript, []string{name, LatchChannel(name)},
		LatchNewCountMessage, count, o.publishArg).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: latch try set count %q: %w", name, typed(err))
	}
	return n == 1, nil
}

// LatchCountDown takes one from the count of the latch name (Redisson's countDown: DECR, and DEL when
// that leaves 0 or less) and returns the count left, 0 when the latch reached 0 or was absent. It
// publishes [LatchZeroMessage] on [LatchChannel] when the count reached exactly 0, and nothing
// otherwise. It is retry-safe with a request id (see [RetryLatchKey]): a second call with the same id
// within the latch expiry returns the first answer and does not count down again.
func (o *Ops) LatchCountDown(ctx context.Context, name, requestID string) (int64, error) {
	latch, latchArg := o.retryLatch(name, requestID)
	n, err := o.do(ctx, latchCountDownScript, []string{name, LatchChannel(name), latch},
		LatchZeroMessage, o.publishArg, latchArg).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: latch count down %q: %w", name, typed(err))
	}
	return n, nil
}

// LatchCount returns the count of the latch name, 0 when it has none. It changes nothing.
func (o *Ops) LatchCount(ctx context.Context, name string) (int64, error) {
	n, err := o.do(ctx, latchCountScript, []string{name}).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: latch count %q: %w", name, typed(err))
	}
	return n, nil
}

// LatchDelete deletes the latch name (Redisson's delete) and reports whether it existed; it then
// publishes [LatchNewCountMessage] on [LatchChannel], as Redisson does, which does not release
// Redisson's awaiters. Idempotent: a retry deletes nothing and answers false.
func (o *Ops) LatchDelete(ctx context.Context, name string) (bool, error) {
	n, err := o.do(ctx, latchDeleteScript, []string{name, LatchChannel(name)},
		LatchNewCountMessage, o.publishArg).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: latch delete %q: %w", name, typed(err))
	}
	return n == 1, nil
}
