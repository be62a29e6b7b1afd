//go:build unix

package bench

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// peer is one side of BenchmarkPeers or BenchmarkProtocolFloor: its acquire+release cycle on its own
// server, its round-trip counter, and what its slices measured.
type peer struct {
	name string
	srv  *redistest.Server
	op   cycle
	rt   *rtCounter
	cost costSide
}

// BenchmarkPeers measures the uncontended Lock+Unlock of lockwarden against the floor (SET NX PX and
// a compare-and-delete script) and two peers, bsm/redislock (Obtain+Release) and go-redsync (one
// node; Lock+Unlock with one try), each on a redis-server of its own, in slices that alternate between
// the four (the order rotating), at 1 and 32 goroutines, each goroutine on its own lock name. It
// reports, for each library, ops/s and p50 over the floor's (ops/s/floor-<name>, p50/floor-<name>),
// and its client CPU and allocations per pair. The README's comparison table comes from it.
func BenchmarkPeers(b *testing.B) { runFourSides(b, runPeers) }

// runFourSides starts four redis-servers, one per side, and runs run on them in sub-benchmarks
// workers=1 (server and benchmark placed apart: see placeApart) and workers=32.
func runFourSides(b *testing.B, run func(b *testing.B, servers [4]*redistest.Server, workers int)) {
	var servers [4]*redistest.Server
	for i := range servers {
		servers[i] = redistest.Start(b)
	}
	for _, workers := range []int{1, 32} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			checkLeaks(b)
			if workers == 1 {
				placeApart(b, servers[:]...)
			}
			run(b, servers, workers)
		})
	}
}

func runPeers(b *testing.B, servers [4]*redistest.Server, workers int) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	floorOp, floorRT := baselineCycle(b, servers[0], "bench:peers:floor:"+run+":")

	rlClient, rlRT := newClient(b, servers[1])
	locker := redislock.New(rlClient)
	rlOp := func(ctx context.Context, g, _ int) error {
		lock, err := locker.Obtain(ctx, "bench:peers:redislock:"+run+":"+strconv.Itoa(g), baselineLease*time.Millisecond, nil)
		if err != nil {
			return err
		}
		return lock.Release(ctx)
	}

	rsClient, rsRT := newClient(b, servers[2])
	rs := redsync.New(goredis.NewPool(rsClient))
	mutexes := make([]*redsync.Mutex, workers)
	for g := range mutexes {
		mutexes[g] = rs.NewMutex("bench:peers:redsync:"+run+":"+strconv.Itoa(g),
			redsync.WithExpiry(baselineLease*time.Millisecond), redsync.WithTries(1))
	}
	rsOp := func(ctx context.Context, g, _ int) error {
		if err := mutexes[g].LockContext(ctx); err != nil {
			return err
		}
		ok, err := mutexes[g].UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock reported not held")
		}
		return err
	}

	lwOp, lwRT := lockwardenCycle(b, servers[3], "bench:peers:lockwarden:"+run+":", workers)

	peers := []*peer{
		{name: "floor", srv: servers[0], op: floorOp, rt: floorRT},
		{name: "redislock", srv: servers[1], op: rlOp, rt: rlRT},
		{name: "redsync", srv: servers[2], op: rsOp, rt: rsRT},
		{name: "lockwarden", srv: servers[3], op: lwOp, rt: lwRT},
	}
	runRotation(b, peers, workers)
	floor := peers[0].cost
	sortDurations(floor.lat)
	floorP50 := percentile(floor.lat, 0.5)
	b.ReportMetric(float64(floor.wall.Nanoseconds())/float64(floor.ops), "ns/op")
	for _, p := range peers {
		sortDurations(p.cost.lat)
		if p.name != "floor" {
			b.ReportMetric(p.cost.rate()/floor.rate(), "ops/s/floor-"+p.name)
			b.ReportMetric(float64(percentile(p.cost.lat, 0.5))/float64(floorP50), "p50/floor-"+p.name)
		}
		b.ReportMetric(p.cost.perOp(p.cost.clientCPU), "client-cpu-us/op-"+p.name)
		b.ReportMetric(float64(p.cost.allocs)/float64(p.cost.ops), "allocs/op-"+p.name)
	}
}

// runRotation warms every peer up, then runs slices of pairs on workers goroutines, each peer in turn
// (the order rotating from one round to the next), until the first peer has run at least b.N pairs
// (and at least 3,000 with one worker, 20,000 with more), adding what each slice measured to its
// peer's cost. The i-th pair of worker g in the whole run is numbered uniquely across the peers.
func runRotation(b *testing.B, peers []*peer, workers int) {
	for _, p := range peers {
		warm(b, workers, p.op)
	}
	slice, total := 300, 3000
	if workers > 1 {
		slice, total = 2000, 20000
	}
	next := 0
	b.ResetTimer()
	for i := 0; peers[0].cost.ops < max(b.N, total); i++ {
		for j := range peers {
			p := peers[(i+j)%len(peers)]
			s := costSlice(b, p.srv, workers, slice, next, p.op, p.rt, 0)
			next += slice
			p.cost.ops += s.ops
			p.cost.wall += s.wall
			p.cost.clientCPU += s.clientCPU
			p.cost.redisCPU += s.redisCPU
			p.cost.allocs += s.allocs
			p.cost.rt += s.rt
			p.cost.lat = append(p.cost.lat, s.lat...)
		}
	}
	b.StopTimer()
}

// sortDurations sorts ds in place.
func sortDurations(ds []time.Duration) { slices.Sort(ds) }
