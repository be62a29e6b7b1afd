package redisops

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed rw_set_intent.lua
	rwSetIntentSource string

	rwSetIntentScript = redis.NewScript(rwSetIntentSource)
)

// SetWriteIntent leaves owner's write intent on the read-write lock name, or refreshes it, while the
// lock is in read mode, with an expiry of intent: the intent that [Ops.WriteAcquire] leaves when it is
// refused, for a writer that waits behind readers of its own process and so does not ask Redis for the
// lock. Another writer's intent is left alone. It reports whether the intent holds owner afterwards.
func (o *Ops) SetWriteIntent(ctx context.Context, name, owner string, intent time.Duration) (bool, error) {
	n, err := o.do(ctx, rwSetIntentScript, []string{LockKey(name), WriteIntentKey(name)}, owner, millis(intent)).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: set write intent %q: %w", name, err)
	}
	return n == 1, nil
}
