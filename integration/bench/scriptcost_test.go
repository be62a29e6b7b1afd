//go:build unix

package bench

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// scriptCostPairs is the least number of acquire+release pairs one side of BenchmarkScriptCost runs.
const scriptCostPairs = 20000

// scriptCostWorkers is how many goroutines run the pairs, each on a lock name of its own.
const scriptCostWorkers = 4

// BenchmarkScriptCost measures what an uncontended acquire+release costs Redis itself: the CPU time of
// redis-server (INFO cpu) per pair, and the commands it runs per pair (INFO commandstats, the calls
// made inside scripts included; EVALSHA itself not counted). The floor (SET NX PX + compare-and-delete)
// and lockwarden's reentrant lock scripts run directly through redisops, without actors, each on a
// server of its own, so that nothing else runs on it. After the pairs, each side waits until the
// server holds no key, so that what the pairs leave to expire (unlock latches, token counters) is
// counted too.
//
// Sides: floor; lockwarden, the calls the lock actor makes for an owner id of its own (the hold count
// is known); shared, the calls for an owner id that other processes may use (the count is not known,
// and every release goes through its latch).
//
//	go test -run '^$' -bench ScriptCost -count 3 ./integration/bench/
func BenchmarkScriptCost(b *testing.B) {
	var floor []float64
	side := func(name string, pair func(ops *redisops.Ops, c *redis.Client) func(ctx context.Context, key string, i int) error) {
		b.Run(name, func(b *testing.B) {
			srv := redistest.Start(b)
			client, _ := newClient(b, srv)
			op := pair(redisops.New(client), client)
			cpu, cmds, n, wall := scriptCost(b, srv, client, "bench:scriptcost:"+name+":", op)
			b.ReportMetric(float64(wall.Nanoseconds())/float64(n), "ns/op")
			perOp := us(cpu) / float64(n)
			b.ReportMetric(perOp, "redis-cpu-us/op")
			b.ReportMetric(float64(cmds)/float64(n), "redis-cmds/op")
			if name == "floor" {
				floor = append(floor, perOp)
			} else if base := median(floor); base > 0 {
				b.ReportMetric(perOp/base, "redis-cpu/floor")
			}
		})
	}
	side("floor", func(_ *redisops.Ops, c *redis.Client) func(context.Context, string, int) error {
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		return func(ctx context.Context, key string, i int) error {
			token := run + ":" + strconv.Itoa(i)
			ok, err := baselineAcquire(ctx, c, key, token)
			if err != nil {
				return err
			}
			if !ok {
				return errBaselineNotHeld
			}
			return baselineRelease(ctx, c, key, token)
		}
	})
	lockwarden := func(held int64) func(*redisops.Ops, *redis.Client) func(context.Context, string, int) error {
		release := held + 1
		if held == redisops.UnknownHoldCount {
			release = held
		}
		return func(ops *redisops.Ops, _ *redis.Client) func(context.Context, string, int) error {
			return func(ctx context.Context, key string, i int) error {
				got, err := ops.Acquire(ctx, key, "owner:"+key, 30*time.Second, held)
				if err != nil {
					return err
				}
				if !got.OK {
					return redisops.ErrNotHeld
				}
				// Request ids end in a number that grows with every release of the owner (the warm-up's i
				// is -1), as ReleaseHeld requires to sequence the owner's releases.
				_, err = ops.ReleaseHeld(ctx, key, "owner:"+key, key+":r"+strconv.Itoa(i+2), 30*time.Second, release, nil)
				return err
			}
		}
	}
	side("lockwarden", lockwarden(0))
	side("shared", lockwarden(redisops.UnknownHoldCount))
}

// scriptCost runs at least scriptCostPairs pairs op on scriptCostWorkers goroutines, each on key
// prefix+g, waits until srv holds no key, and returns the Redis CPU time and the commands run meanwhile,
// the number of pairs, and the time the pairs took.
func scriptCost(b *testing.B, srv *redistest.Server, client *redis.Client, prefix string,
	op func(ctx context.Context, key string, i int) error) (time.Duration, int64, int, time.Duration) {
	b.Helper()
	ctx := b.Context()
	per := max(b.N, scriptCostPairs) / scriptCostWorkers
	// One pair per worker before the measurement loads the scripts; its keys expire inside it.
	for g := range scriptCostWorkers {
		if err := op(ctx, prefix+strconv.Itoa(g), -1); err != nil {
			b.Fatal(err)
		}
	}
	calls0, cpu0 := commandCalls(b, srv.Addr()), redisCPU(b, srv)
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, scriptCostWorkers)
	for g := range scriptCostWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := prefix + strconv.Itoa(g)
			for i := range per {
				if err := op(ctx, key, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	// Wait for the keys the pairs left behind to expire, with a deadline well past their expiry.
	deadline := time.Now().Add(redisops.DefaultLatchExpiry + redisops.DefaultTokenExpiry + 10*time.Second)
	for {
		n, err := lockKeys(ctx, client)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d keys left %v after the last pair", n, time.Until(deadline))
		}
		select {
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	cpu := redisCPU(b, srv) - cpu0
	var cmds int64
	for name, n := range commandCalls(b, srv.Addr()) {
		if name == "evalsha" || name == "eval" || name == "info" || name == "dbsize" ||
			strings.HasPrefix(name, "client") || name == "hello" || name == "ping" {
			continue
		}
		cmds += n - calls0[name]
	}
	return cpu, cmds, per * scriptCostWorkers, wall
}
