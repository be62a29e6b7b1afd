//go:build unix

package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// costSide is what one side of BenchmarkLockCost (the floor or lockwarden) measured over all its slices.
type costSide struct {
	ops       int
	wall      time.Duration
	clientCPU time.Duration // user+system CPU of this process
	redisCPU  time.Duration // used_cpu_user+used_cpu_sys of redis-server
	allocs    uint64
	rt        int64
	lat       []time.Duration
}

func (s costSide) rate() float64 { return float64(s.ops) / s.wall.Seconds() }

func (s costSide) perOp(d time.Duration) float64 { return us(d) / float64(s.ops) }

// costCase is one configuration of BenchmarkLockCost.
type costCase struct {
	name    string
	workers int
	slice   int // acquire+release pairs per slice, all workers together
	total   int // minimum pairs per side
	// freshNames gives every lockwarden pair a lock name never used before, so that each one spawns (or
	// reuses) a lock actor that goes idle afterwards; the slice then goes on measuring CPU and
	// allocations (not wall time) for three idle timeouts, so that reaping idle actors is paid by
	// the slice that caused it.
	freshNames bool
	// cancellable gives lockwarden's calls a context that can end (as a request's does), rather than
	// context.Background(): the caller then does not make its Redis calls itself (see
	// actors.Ticket.OpenCarry), and the Redis call of each Lock and Unlock goes on another goroutine.
	cancellable bool
	// apart puts the redis-servers on the last CPU and this process on the others (placeApart).
	apart bool
}

// costIdleTimeout is the idle timeout of the coordinator of the fresh-names case: short, so that the
// benchmark runs well past it and pays for the idle actors.
const costIdleTimeout = 50 * time.Millisecond

// BenchmarkLockCost measures the uncontended Lock+Unlock of the plain lock against the floor, a bare
// SET NX PX to acquire and a compare-and-delete script to release on one go-redis client, in slices
// that alternate between the two (the first of each pair of slices alternating too), so that both see
// the same machine at the same time. Each side has a redis-server of its own, so that the Redis CPU of
// each is its own; after the last slice, the benchmark waits until lockwarden's server has expired
// every key the pairs left (unlock latches and token counters, 10 s) and counts that CPU too. It reports, for each side, ops/s, the p50 latency, the CPU time
// of this process and of redis-server per pair, the allocations per pair and the round trips per pair,
// and the ratios of lockwarden to the floor. Issue 16's targets: at 32 workers ops/s/floor >= 1.0,
// redis-cpu/floor <= 1.2, client-cpu/floor <= 1.5 and lw-allocs/op <= 50; at 1 worker p50/floor <= 1.2.
//
// Cases: workers=1 and workers=32 (each worker on its own lock name, one handle each), workers=1 with
// a context that can end for lockwarden's calls (cancellable-ctx: the Redis calls then go on another
// goroutine than the caller's), and
// workers=32/fresh-names, where every lockwarden pair is on a lock name never used before (a request
// id as the lock name), with a 50 ms idle timeout and each slice measured for three idle timeouts
// after its last pair; and workers=32/redis-apart, workers=32 with the redis-servers on the last CPU
// and this process on the others (placeApart), so that Redis does not take CPU from the client, as a
// Redis on another host would not; in the plain workers=32 case both sides' clients and servers share
// every CPU of the machine. The workers=1 cases run apart too, so that where the kernel puts the
// servers does not move their p50.
func BenchmarkLockCost(b *testing.B) {
	floorSrv, lwSrv := redistest.Start(b), redistest.Start(b)
	for _, cc := range []costCase{
		{name: "workers=1", workers: 1, slice: 300, total: 6000, apart: true},
		{name: "workers=1/cancellable-ctx", workers: 1, slice: 300, total: 6000, cancellable: true, apart: true},
		{name: "workers=32", workers: 32, slice: 2000, total: 40000},
		{name: "workers=32/fresh-names", workers: 32, slice: 2000, total: 20000, freshNames: true},
		{name: "workers=32/redis-apart", workers: 32, slice: 2000, total: 40000, apart: true},
	} {
		b.Run(cc.name, func(b *testing.B) {
			checkLeaks(b)
			if cc.apart {
				placeApart(b, floorSrv, lwSrv)
			}
			runLockCost(b, floorSrv, lwSrv, cc)
		})
	}
}

func runLockCost(b *testing.B, floorSrv, lwSrv *redistest.Server, cc costCase) {
	floorOp, floorRT := baselineCycle(b, floorSrv, "bench:cost:floor:"+cc.name+":")
	client, lwRT := newClient(b, lwSrv)
	var opts []coordinator.Option
	if cc.freshNames {
		opts = append(opts, coordinator.WithIdleTimeout(costIdleTimeout))
	}
	c := newCoordinator(b, client, opts...)
	prefix := "bench:cost:lw:" + cc.name + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	handles := make([]*coordinator.Mutex, cc.workers)
	for g := range handles {
		handles[g] = c.Mutex(prefix + strconv.Itoa(g))
	}
	lctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lwOp := func(ctx context.Context, g, i int) error {
		if cc.cancellable {
			ctx = lctx
		}
		m := handles[g]
		if cc.freshNames {
			m = c.Mutex(prefix + strconv.Itoa(g) + ":" + strconv.Itoa(i))
		}
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
	warm(b, cc.workers, floorOp)
	warm(b, cc.workers, lwOp)

	var floor, lw costSide
	next := 0 // the iteration number of the next slice, so that fresh names stay fresh
	run := func(side *costSide, srv *redistest.Server, op cycle, rt *rtCounter, drain time.Duration) {
		s := costSlice(b, srv, cc.workers, cc.slice, next, op, rt, drain)
		next += cc.slice
		side.ops += s.ops
		side.wall += s.wall
		side.clientCPU += s.clientCPU
		side.redisCPU += s.redisCPU
		side.allocs += s.allocs
		side.rt += s.rt
		side.lat = append(side.lat, s.lat...)
	}
	var drain time.Duration
	if cc.freshNames {
		drain = 3 * costIdleTimeout
	}
	b.ResetTimer()
	for i := 0; floor.ops < max(b.N, cc.total) || lw.ops < max(b.N, cc.total); i++ {
		if i%2 == 0 {
			run(&floor, floorSrv, floorOp, floorRT, 0)
			run(&lw, lwSrv, lwOp, lwRT, drain)
		} else {
			run(&lw, lwSrv, lwOp, lwRT, drain)
			run(&floor, floorSrv, floorOp, floorRT, 0)
		}
	}
	b.StopTimer()
	// What the pairs left in Redis to expire later (unlock latches, token counters) is lockwarden's
	// cost too: wait until its server has expired every key, and count the CPU that took, less what
	// the idle floor server spent meanwhile.
	floor0, lw0 := redisCPU(b, floorSrv), redisCPU(b, lwSrv)
	waitExpired(b, lwSrv)
	lw.redisCPU += (redisCPU(b, lwSrv) - lw0) - (redisCPU(b, floorSrv) - floor0)
	slices.Sort(floor.lat)
	slices.Sort(lw.lat)
	floorP50, lwP50 := percentile(floor.lat, 0.5), percentile(lw.lat, 0.5)

	b.ReportMetric(float64(lw.wall.Nanoseconds())/float64(lw.ops), "ns/op")
	b.ReportMetric(floor.rate(), "floor-ops/s")
	b.ReportMetric(lw.rate(), "lw-ops/s")
	b.ReportMetric(lw.rate()/floor.rate(), "ops/s/floor")
	b.ReportMetric(us(floorP50), "floor-p50-us")
	b.ReportMetric(us(lwP50), "lw-p50-us")
	b.ReportMetric(float64(lwP50)/float64(floorP50), "p50/floor")
	b.ReportMetric(floor.perOp(floor.clientCPU), "floor-client-cpu-us/op")
	b.ReportMetric(lw.perOp(lw.clientCPU), "lw-client-cpu-us/op")
	b.ReportMetric(lw.perOp(lw.clientCPU)/floor.perOp(floor.clientCPU), "client-cpu/floor")
	b.ReportMetric(floor.perOp(floor.redisCPU), "floor-redis-cpu-us/op")
	b.ReportMetric(lw.perOp(lw.redisCPU), "lw-redis-cpu-us/op")
	b.ReportMetric(lw.perOp(lw.redisCPU)/floor.perOp(floor.redisCPU), "redis-cpu/floor")
	b.ReportMetric(float64(floor.allocs)/float64(floor.ops), "floor-allocs/op")
	b.ReportMetric(float64(lw.allocs)/float64(lw.ops), "lw-allocs/op")
	b.ReportMetric(float64(floor.rt)/float64(floor.ops), "floor-rt/op")
	b.ReportMetric(float64(lw.rt)/float64(lw.ops), "lw-rt/op")
}

// costSlice runs n pairs of op spread over workers goroutines, the i-th pair of worker g numbered
// first+i, and measures them; with drain > 0 it goes on measuring CPU and allocations, not wall time,
// for drain after the last pair.
func costSlice(b *testing.B, srv *redistest.Server, workers, n, first int, op cycle, rt *rtCounter, drain time.Duration) costSide {
	ctx := context.Background()
	per := n / workers
	lats := make([][]time.Duration, workers)
	for g := range lats {
		lats[g] = make([]time.Duration, per)
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	allocs0, rt0 := mem.Mallocs, rt.rt.Load()
	redis0, cpu0, t0 := redisCPU(b, srv), processCPU(b), time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := lats[g]
			for i := range lat {
				start := time.Now()
				if err := op(ctx, g, first+i); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	rts := rt.rt.Load() - rt0
	if drain > 0 {
		// A measurement window, not a wait for an event: whatever the pairs left to do later (idle
		// actors to reap) is done in it, and its CPU and allocations are counted.
		time.Sleep(drain)
	}
	cpu, redis := processCPU(b)-cpu0, redisCPU(b, srv)-redis0
	runtime.ReadMemStats(&mem)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return costSide{ops: per * workers, wall: wall, clientCPU: cpu, redisCPU: redis, allocs: mem.Mallocs - allocs0,
		rt: rts, lat: slices.Concat(lats...)}
}

// redisCPU returns the CPU time redis-server has used (used_cpu_user + used_cpu_sys of INFO cpu), read
// on a fresh connection.
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	b.Helper()
	var total float64
	for _, line := range strings.Split(info(b, srv.Addr(), "cpu"), "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "used_cpu_user" && name != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("INFO cpu: %s: %v", line, err)
		}
		total += f
	}
	if total == 0 {
		b.Fatal(fmt.Errorf("INFO cpu reported no CPU time"))
	}
	return time.Duration(total * float64(time.Second))
}

// lockKeys counts the keys of the server other than the process registry's (see registryKeys: a
// coordinator keeps its key while it runs), with commands that cost the same however many keys the
// server holds: what the pairs left behind.
func lockKeys(ctx context.Context, client redis.Cmdable) (int64, error) {
	n, err := client.DBSize(ctx).Result()
	if err != nil {
		return 0, err
	}
	registryKeys.Lock()
	keys := slices.Clone(registryKeys.keys)
	registryKeys.Unlock()
	if len(keys) == 0 {
		return n, nil
	}
	registered, err := client.Exists(ctx, keys...).Result()
	if err != nil {
		return 0, err
	}
	return n - registered, nil
}

// waitExpired waits until the server srv holds no key but the process registry's, with a deadline well
// past the latch and token expiries.
func waitExpired(b *testing.B, srv *redistest.Server) {
	b.Helper()
	client := newAddrClient(b, srv.Addr())
	ctx := context.Background()
	deadline := time.Now().Add(redisops.DefaultLatchExpiry + redisops.DefaultTokenExpiry + 10*time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := lockKeys(ctx, client)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d keys left after the expiries", n)
		}
		<-tick.C
	}
}
