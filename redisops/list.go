package redisops

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// auxiliaryPrefixes start the keys that lockwarden and Redisson keep beside a name's own key: they
// are not names of their own, and List leaves them out.
var auxiliaryPrefixes = []string{
	"redisson_lock_queue:", "redisson_lock_timeout:", "redisson_lock_token:", "redisson_unlock_latch:",
	"lockwarden_",
}

// isAuxiliary reports whether key is one that lockwarden or Redisson keep beside a name's own key: a
// fair lock's queue and timeouts, a token counter, a release latch, a read hold's timeout key
// ({N}:O:rwlock_timeout:k), lockwarden's own keys (retry latches, write intents, the process
// registry).
func isAuxiliary(key string) bool {
	for _, p := range auxiliaryPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return strings.Contains(key, rwTimeoutSuffix+":")
}

// scanCount is the COUNT hint of List's SCAN calls: how many keys Redis looks at per call.
const scanCount = 1000

// List returns, sorted, the names matching the glob-style pattern (as SCAN's MATCH takes it) under
// which a lock, semaphore or latch may be stored: the keys of type hash or string that are not one of
// the keys kept beside a name (a fair lock's queue, a token counter, release latches, read hold
// timeouts, lockwarden's own keys). A permit semaphore's name is listed while it has permits
// available; a name whose lock is free is not listed. On Redis Cluster it scans every master. It
// returns at most limit names (0: no limit), and reports whether it stopped at the limit. It uses SCAN,
// so a name stored or deleted while it runs may be listed or not.
func List(ctx context.Context, client redis.UniversalClient, pattern string, limit int) ([]string, bool, error) {
	if pattern == "" {
		pattern = "*"
	}
	var (
		names []string
		full  bool
	)
	err := scanKeys(ctx, client, pattern, func(ctx context.Context, node redis.Cmdable, keys []string) (bool, error) {
		var candidates []string
		for _, k := range keys {
			if !isAuxiliary(k) {
				candidates = append(candidates, k)
			}
		}
		if len(candidates) == 0 {
			return true, nil
		}
		types := make([]*redis.StatusCmd, len(candidates))
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range candidates {
				types[i] = p.Type(ctx, k)
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		for i, k := range candidates {
			if t := types[i].Val(); t == "hash" || t == "string" {
				if limit > 0 && len(names) >= limit {
					full = true
					return false, nil
				}
				names = append(names, k)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("lockwarden: list %q: %w", pattern, err)
	}
	sort.Strings(names)
	return names, full, nil
}

// scanKeys walks the keys matching pattern with SCAN, on every master of a Cluster (fn runs for one
// batch at a time),
// handing each batch to fn with the node it came from, until fn reports false or fails.
func scanKeys(ctx context.Context, client redis.UniversalClient, pattern string,
	fn func(ctx context.Context, node redis.Cmdable, keys []string) (bool, error)) error {
	var mu sync.Mutex // one node at a time: fn need not be safe for concurrent use
	scan := func(ctx context.Context, node redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := node.Scan(ctx, cursor, pattern, scanCount).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			more, err := fn(ctx, node, keys)
			mu.Unlock()
			if err != nil || !more {
				return err
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	if c, ok := client.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	}
	return scan(ctx, client)
}

// ProcessIDs returns, sorted, the coordinator ids registered in the process registry (see
// [RegisterProcess]), found with SCAN on every master.
func ProcessIDs(ctx context.Context, client redis.UniversalClient) ([]string, error) {
	var ids []string
	err := scanKeys(ctx, client, processPrefix+"*", func(_ context.Context, _ redis.Cmdable, keys []string) (bool, error) {
		for _, k := range keys {
			ids = append(ids, strings.TrimPrefix(k, processPrefix))
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("lockwarden: list processes: %w", err)
	}
	sort.Strings(ids)
	return ids, nil
}
