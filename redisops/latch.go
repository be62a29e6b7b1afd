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
// redisson_countdownlatch__channel__{N}: the braces are always added, also when N carries a hash tag.
// The channel then has another slot than N on Redis Cluster, where a script cannot publish on it
// (Redisson's calls on such a name fail with CROSSSLOT): lockwarden's scripts then leave the notice to
// the client, which publishes it with SPUBLISH right after the script (see latchTarget).
func LatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// latchTarget returns the channel key and the publish argument of a latch script on name: the
// channel and o's publish command, or, when the channel is in another Cluster slot than name, name
// again (a key of the script's own slot, not used) and "" (the script does not publish), with
// outside set: the caller publishes after the script.
func (o *Ops) latchTarget(name string) (channel string, publish any, outside bool) {
	ch := LatchChannel(name)
	if o.cluster && Slot(ch) != Slot(name) {
		return name, "", true
	}
	return ch, o.publishArg, false
}

// publishOutside publishes msg on the latch name's channel from the client, for a script that could
// not (see latchTarget). A failure is returned: the script's change stands, but awaiters elsewhere
// learn of it only when they next read the count.
func (o *Ops) publishOutside(ctx context.Context, name, msg string) error {
	p, ok := o.client.(interface {
		SPublish(ctx context.Context, channel string, message any) *redis.IntCmd
	})
	if !ok {
		return fmt.Errorf("lockwarden: latch %q: the client cannot publish with SPUBLISH", name)
	}
	return p.SPublish(ctx, LatchChannel(name), msg).Err()
}

// LatchTrySetCount sets the count of the latch name to count if it has none (Redisson's trySetCount)
// and reports whether it did; it then publishes [LatchNewCountMessage] on [LatchChannel]. A retry after
// a lost reply answers false when the first run set the count.
func (o *Ops) LatchTrySetCount(ctx context.Context, name, requestID string, count int64) (bool, error) {
	if count <= 0 {
		return false, badArgument("latch try set count", name, "count %d, want > 0", count)
	}
	ch, publish, outside := o.latchTarget(name)
	latch, latchArg := o.retryLatch(name, requestID)
	n, err := o.do(ctx, latchTrySetScript, []string{name, ch, latch}, LatchNewCountMessage, count, publish, latchArg).Int64()
	if err == nil && n == 1 && outside {
		err = o.publishOutside(ctx, name, LatchNewCountMessage)
	}
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
	ch, publish, _ := o.latchTarget(name)
	n, err := o.do(ctx, latchCountDownScript, []string{name, ch, latch}, LatchZeroMessage, publish, latchArg).Int64()
	if err == nil && n == -1 { // reached zero, and the channel is in another slot (see latchTarget)
		n, err = 0, o.publishOutside(ctx, name, LatchZeroMessage)
	}
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
	ch, publish, outside := o.latchTarget(name)
	n, err := o.do(ctx, latchDeleteScript, []string{name, ch}, LatchNewCountMessage, publish).Int64()
	if err == nil && n == 1 && outside {
		err = o.publishOutside(ctx, name, LatchNewCountMessage)
	}
	if err != nil {
		return false, fmt.Errorf("lockwarden: latch delete %q: %w", name, typed(err))
	}
	return n == 1, nil
}
