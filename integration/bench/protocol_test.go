//go:build unix

package bench

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// redissonLockScript is the acquire of Redisson's RLock (3.x), as redisson-protocol.md describes it:
// take the hash when it is free or already O's, add one to O's count and set the lease; else answer
// the lock's PTTL.
var redissonLockScript = redis.NewScript(`
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])`)

// redissonUnlockScript is the release of Redisson's RLock (3.20 and later), with its unlock latch
// redisson_unlock_latch:{N}:<request id> read first and written last, so that a retried release
// answers what the first run did.
var redissonUnlockScript = redis.NewScript(`
local val = redis.call('get', KEYS[3])
if val ~= false then
    return tonumber(val)
end
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1`)

// BenchmarkProtocolFloor measures what the lock protocol alone costs, with no client of any library
// around it, against the floor (SET NX PX and a compare-and-delete script) and against lockwarden's
// Mutex, in slices that alternate between the sides (the order rotating), each side on a redis-server
// of its own, at 1 and 32 goroutines, each goroutine on its own lock name:
//
//   - floor: SET NX PX, then the compare-and-delete script;
//   - redisson-scripts: Redisson's RLock acquire and release scripts (3 and 6 Redis calls, a latch key
//     per release), called directly with EVALSHA;
//   - lockwarden-scripts: lockwarden's acquire.lua and release_fenced.lua (fencing token, kind and type
//     checks, retry-safe release), called directly through redisops with the hold counts and tokens
//     known, as the lock actor calls them for a Mutex;
//   - lockwarden: Mutex.Lock and Mutex.Unlock.
//
// It reports, for each side, p50 and ops/s over the floor's, the client and Redis CPU per pair, and the
// allocations and round trips per pair;
// the Redis CPU includes the expiry of the keys the pairs leave (latches, token counters), waited for
// after the last slice. A script side's p50 is the least that any client of that protocol can reach
// on this machine: it has no actor, queue or batcher, only go-redis.
//
//	go test -run '^$' -bench ProtocolFloor -benchtime 1x -count 2 ./integration/bench/
func BenchmarkProtocolFloor(b *testing.B) { runFourSides(b, runProtocolFloor) }

// chargeExpiry waits until every side's server has expired the keys its pairs left (latches, token
// counters), and adds the Redis CPU each spent meanwhile to its cost, less what the floor's (sides[0],
// which has nothing left to expire) spent idle.
func chargeExpiry(b *testing.B, sides []*peer) {
	cpu0 := make([]time.Duration, len(sides))
	for i, s := range sides {
		cpu0[i] = redisCPU(b, s.srv)
	}
	for _, s := range sides {
		waitExpired(b, s.srv)
	}
	floorIdle := redisCPU(b, sides[0].srv) - cpu0[0]
	for i, s := range sides {
		s.cost.redisCPU += redisCPU(b, s.srv) - cpu0[i] - floorIdle
	}
}

func runProtocolFloor(b *testing.B, servers [4]*redistest.Server, workers int) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	key := func(side string, g int) string { return "bench:protocol:" + side + ":" + run + ":" + strconv.Itoa(g) }
	lease := strconv.Itoa(baselineLease)
	latchExpiry := strconv.FormatInt(redisops.DefaultLatchExpiry.Milliseconds(), 10)

	floorOp, floorRT := baselineCycle(b, servers[0], "bench:protocol:floor:"+run+":")

	rsClient, rsRT := newClient(b, servers[1])
	redissonOp := func(ctx context.Context, g, i int) error {
		name := key("redisson", g)
		owner := "owner-" + run + ":" + strconv.Itoa(g)
		err := redissonLockScript.Run(ctx, rsClient, []string{name}, lease, owner).Err()
		if !errors.Is(err, redis.Nil) {
			if err == nil {
				err = errors.New("redisson lock script: not taken")
			}
			return err
		}
		keys := []string{name, "redisson_lock__channel:{" + name + "}",
			"redisson_unlock_latch:{" + name + "}:" + run + ":" + strconv.Itoa(g) + ":" + strconv.Itoa(i)}
		n, err := redissonUnlockScript.Run(ctx, rsClient, keys, "0", lease, owner, latchExpiry).Int64()
		if err == nil && n != 1 {
			err = errors.New("redisson unlock script: not released")
		}
		return err
	}

	scriptsOp, lsRT := scriptsCycle(b, servers[2], "bench:protocol:lockwarden-scripts:"+run+":", workers, 0)

	lwOp, lwRT := lockwardenCycle(b, servers[3], "bench:protocol:lockwarden:"+run+":", workers)

	sides := []*peer{
		{name: "floor", srv: servers[0], op: floorOp, rt: floorRT},
		{name: "redisson-scripts", srv: servers[1], op: redissonOp, rt: rsRT},
		{name: "lockwarden-scripts", srv: servers[2], op: scriptsOp, rt: lsRT},
		{name: "lockwarden", srv: servers[3], op: lwOp, rt: lwRT},
	}
	runRotation(b, sides, workers)
	// The keys the pairs left to expire (latches, token counters) are each side's cost too.
	chargeExpiry(b, sides)

	floor := sides[0].cost
	sortDurations(floor.lat)
	floorP50 := percentile(floor.lat, 0.5)
	b.ReportMetric(float64(floor.wall.Nanoseconds())/float64(floor.ops), "ns/op")
	b.ReportMetric(us(floorP50), "p50-us-floor")
	for _, s := range sides {
		sortDurations(s.cost.lat)
		if s.name != "floor" {
			b.ReportMetric(float64(percentile(s.cost.lat, 0.5))/float64(floorP50), "p50/floor-"+s.name)
			b.ReportMetric(s.cost.rate()/floor.rate(), "ops/s/floor-"+s.name)
			b.ReportMetric(s.cost.perOp(s.cost.redisCPU)/floor.perOp(floor.redisCPU), "redis-cpu/floor-"+s.name)
		}
		b.ReportMetric(s.cost.perOp(s.cost.clientCPU), "client-cpu-us/op-"+s.name)
		b.ReportMetric(s.cost.perOp(s.cost.redisCPU), "redis-cpu-us/op-"+s.name)
		b.ReportMetric(float64(s.cost.allocs)/float64(s.cost.ops), "allocs/op-"+s.name)
		b.ReportMetric(float64(s.cost.rt)/float64(s.cost.ops), "rt/op-"+s.name)
	}
}

// scriptsCycle returns a cycle that runs lockwarden's acquire.lua and release_fenced.lua directly
// through redisops (its batcher, no actor) on the name prefix+<goroutine>, with the hold counts and the
// token known, as the lock actor calls them for a Mutex, and its round-trip counter. With burn > 0 the cycle also spins its goroutine
// on the CPU for burn/2 after each of the two calls, where a client would settle the answer.
func scriptsCycle(b *testing.B, srv *redistest.Server, prefix string, workers int, burn time.Duration) (cycle, *rtCounter) {
	client, rt := newClient(b, srv)
	ops := redisops.New(client)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	// The release request ids of each worker's owner end in a number that grows with every release,
	// as ReleaseHeld requires.
	releases := make([]int, workers)
	spin := func() {
		for start := time.Now(); burn > 0 && time.Since(start) < burn/2; {
		}
	}
	return func(ctx context.Context, g, _ int) error {
		name := prefix + strconv.Itoa(g)
		owner := "owner-" + run + ":" + strconv.Itoa(g)
		got, err := ops.Acquire(ctx, name, owner, baselineLease*time.Millisecond, 0)
		if err != nil {
			return err
		}
		if !got.OK {
			return redisops.ErrNotHeld
		}
		spin()
		releases[g]++
		names := redisops.NamesOf(name)
		_, err = ops.ReleaseHeldFenced(ctx, &names, owner, run+":"+strconv.Itoa(g)+":r"+strconv.Itoa(releases[g]),
			baselineLease*time.Millisecond, 1, got.Token)
		spin()
		return err
	}, rt
}
