package redisops

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed raise_token.lua
	raiseTokenSource string

	raiseTokenScript = redis.NewScript(raiseTokenSource)
)

// RaiseToken makes the fencing-token counter of the lock name at least floor, and returns its value
// afterwards. It never lowers the counter.
func (o *Ops) RaiseToken(ctx context.Context, name string, floor int64) (int64, error) {
	n, err := raiseTokenScript.Run(ctx, o.client, []string{TokenKey(name)}, floor).Int64()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: raise token %q: %w", name, typed(err))
	}
	return n, nil
}
