package redistest

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// RenewalCounter is a go-redis hook that counts the watchdog's renewals a client sends: the round
// trips that carry at least one renewal script (RoundTrips), the script calls (Scripts: renew.lua or
// renew_many.lua, by EVALSHA or EVAL) and the holds they renew (Holds: one per renew.lua call, the
// holds listed in each renew_many.lua call).
type RenewalCounter struct {
	RoundTrips, Scripts, Holds atomic.Int64
}

var (
	renewSha     = redisops.Scripts()["renew"].Hash()
	renewManySha = redisops.Scripts()["renew_many"].Hash()
)

// DialHook implements redis.Hook.
func (h *RenewalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *RenewalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *RenewalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds)
		return next(ctx, cmds)
	}
}

func (h *RenewalCounter) count(cmds []redis.Cmder) {
	var scripts, holds int64
	for _, c := range cmds {
		args := c.Args()
		if len(args) < 3 || (c.Name() != "evalsha" && c.Name() != "eval") {
			continue
		}
		sha, _ := args[1].(string)
		if c.Name() == "eval" {
			sha = fmt.Sprintf("%x", sha1.Sum([]byte(sha)))
		}
		switch sha {
		case renewSha:
			scripts, holds = scripts+1, holds+1
		case renewManySha:
			keys, _ := args[2].(int)
			// ARGV: the lease, two counts, an owner per hold.
			scripts, holds = scripts+1, holds+int64(len(args)-3-keys-3)
		}
	}
	if scripts > 0 {
		h.RoundTrips.Add(1)
		h.Scripts.Add(scripts)
		h.Holds.Add(holds)
	}
}
