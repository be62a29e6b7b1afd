//go:build unix

package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// BenchmarkSemaphoreCost measures one permit's uncontended Acquire+Release against the plain lock's
// Lock+Unlock, in the same run:
//
//   - floor: SET NX PX, then the compare-and-delete script (the floor of BenchmarkLockCost, for scale);
//   - mutex: Mutex.Lock and Mutex.Unlock;
//   - semaphore: Semaphore.Acquire(ctx, 1) and Semaphore.Release(ctx, 1);
//   - permits: PermitSemaphore.Acquire (a watchdog permit: no Lease) and Permit.Release.
//
// Each side has a redis-server of its own; each worker goroutine has its own name (each semaphore set
// to 1 permit, its handle on one coordinator per side), and every call gets context.Background(). The
// sides run in slices that alternate between them (the order rotating: runFourSides and runRotation,
// the machinery of BenchmarkPeers), at 1 goroutine (servers and benchmark placed apart) and at 32.
// After the last slice it checks that every semaphore is back at 1 permit, deletes them, and waits
// until every server has expired the keys the pairs left (the mutex's unlock latches and token
// counters, the semaphores' retry latches, 10 s), counting that Redis CPU too.
//
// It reports, for each side (suffix -floor, -mutex, -semaphore, -permits), ops/s, the p50 latency,
// the CPU time of this process and of redis-server per pair, the allocations and the round trips per
// pair; and the ratios of each semaphore to the mutex (suffix -semaphore/mutex, -permits/mutex) of
// p50, ops/s, client CPU and Redis CPU. Targets: one permit's Acquire+Release within 1.2x of the
// lock's Lock+Unlock, i.e. p50-semaphore/mutex and p50-permits/mutex <= 1.2, and
// ops/s-semaphore/mutex and ops/s-permits/mutex >= 1/1.2 (0.83).
//
//	go test -run '^$' -bench 'SemaphoreCost|SemaphoreBusy' -benchtime 1x -count 2 ./integration/bench/
func BenchmarkSemaphoreCost(b *testing.B) { runFourSides(b, runSemaphoreCost) }

func runSemaphoreCost(b *testing.B, servers [4]*redistest.Server, workers int) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	prefix := func(side string) string { return "bench:semcost:" + side + ":" + run + ":" }

	floorOp, floorRT := baselineCycle(b, servers[0], prefix("floor"))
	mutexOp, mutexRT := lockwardenCycle(b, servers[1], prefix("mutex"), workers)

	sems, semRT := onePermitHandles(b, servers[2], prefix("semaphore"), workers, (*coordinator.Coordinator).Semaphore)
	semOp := func(ctx context.Context, g, _ int) error {
		if err := sems[g].Acquire(ctx, 1); err != nil {
			return err
		}
		return sems[g].Release(ctx, 1)
	}

	pss, psRT := onePermitHandles(b, servers[3], prefix("permits"), workers, (*coordinator.Coordinator).PermitSemaphore)
	psOp := func(ctx context.Context, g, _ int) error {
		p, err := pss[g].Acquire(ctx)
		if err != nil {
			return err
		}
		return p.Release(ctx)
	}

	sides := []*peer{
		{name: "floor", srv: servers[0], op: floorOp, rt: floorRT},
		{name: "mutex", srv: servers[1], op: mutexOp, rt: mutexRT},
		{name: "semaphore", srv: servers[2], op: semOp, rt: semRT},
		{name: "permits", srv: servers[3], op: psOp, rt: psRT},
	}
	runRotation(b, sides, workers)

	// Every permit must be back; then the semaphores' counts go, so that the servers can empty.
	ctx := context.Background()
	for _, side := range sides[2:] {
		client := newAddrClient(b, side.srv.Addr())
		names := make([]string, workers)
		for g := range names {
			names[g] = prefix(side.name) + strconv.Itoa(g)
		}
		counts, err := client.MGet(ctx, names...).Result()
		if err != nil {
			b.Fatal(err)
		}
		for g, c := range counts {
			if c != "1" {
				b.Fatalf("%s: %v permits available after the run, want 1", names[g], c)
			}
		}
		keys := names
		if side.name == "permits" {
			for _, n := range names {
				keys = append(keys, redisops.PermitTimeoutKey(n))
			}
		}
		if err := client.Del(ctx, keys...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	// The keys the pairs left to expire are each side's cost too.
	chargeExpiry(b, sides)

	p50 := make(map[string]time.Duration, len(sides))
	for _, s := range sides {
		sortDurations(s.cost.lat)
		p50[s.name] = percentile(s.cost.lat, 0.5)
	}
	sem := sides[2].cost
	b.ReportMetric(float64(sem.wall.Nanoseconds())/float64(sem.ops), "ns/op")
	for _, s := range sides {
		c := s.cost
		b.ReportMetric(c.rate(), "ops/s-"+s.name)
		b.ReportMetric(us(p50[s.name]), "p50-us-"+s.name)
		b.ReportMetric(c.perOp(c.clientCPU), "client-cpu-us/op-"+s.name)
		b.ReportMetric(c.perOp(c.redisCPU), "redis-cpu-us/op-"+s.name)
		b.ReportMetric(float64(c.allocs)/float64(c.ops), "allocs/op-"+s.name)
		b.ReportMetric(float64(c.rt)/float64(c.ops), "rt/op-"+s.name)
	}
	mutex := sides[1].cost
	for _, s := range sides[2:] {
		c, vs := s.cost, "-"+s.name+"/mutex"
		b.ReportMetric(float64(p50[s.name])/float64(p50["mutex"]), "p50"+vs)
		b.ReportMetric(c.rate()/mutex.rate(), "ops/s"+vs)
		b.ReportMetric(c.perOp(c.clientCPU)/mutex.perOp(mutex.clientCPU), "client-cpu"+vs)
		b.ReportMetric(c.perOp(c.redisCPU)/mutex.perOp(mutex.redisCPU), "redis-cpu"+vs)
	}
}

// onePermitHandles returns a handle per worker, made by handle on one coordinator of a new client on
// srv, on name prefix+g, each semaphore set to 1 permit, and the client's round-trip counter.
func onePermitHandles[H interface {
	TrySetPermits(context.Context, int64) (bool, error)
}](b *testing.B, srv *redistest.Server, prefix string, workers int, handle func(*coordinator.Coordinator, string) H) ([]H, *rtCounter) {
	b.Helper()
	client, rt := newClient(b, srv)
	c := newCoordinator(b, client)
	hs := make([]H, workers)
	for g := range hs {
		hs[g] = handle(c, prefix+strconv.Itoa(g))
		ok, err := hs[g].TrySetPermits(context.Background(), 1)
		if err != nil {
			b.Fatalf("TrySetPermits: %v", err)
		}
		if !ok {
			b.Fatalf("%s%d: permits were set already", prefix, g)
		}
	}
	return hs, rt
}
