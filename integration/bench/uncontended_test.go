package bench

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

const (
	// uncontendedFloor is the minimum number of sequential acquire+release pairs per run.
	uncontendedFloor = 5000
	// parallelFloor is the minimum number of acquire+release pairs per parallel run, all goroutines
	// together.
	parallelFloor = 10000
	// parallelWorkers is the number of goroutines of BenchmarkUncontendedParallel.
	parallelWorkers = 32
)

// cycle is one acquire+release of worker g, iteration i.
type cycle func(ctx context.Context, g, i int) error

// latencyStats is what a run of acquire+release pairs measured.
type latencyStats struct {
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
	rt       int64
}

func (s latencyStats) report(b *testing.B) {
	b.ReportMetric(float64(s.elapsed.Nanoseconds())/float64(s.n), "ns/op")
	b.ReportMetric(us(s.p50), "p50-us")
	b.ReportMetric(us(s.p99), "p99-us")
	b.ReportMetric(float64(s.rt)/float64(s.n), "rt/op")
}

// runSequential times n calls of op on one goroutine.
func runSequential(b *testing.B, n int, rt *rtCounter, op cycle) latencyStats {
	b.Helper()
	ctx := context.Background()
	lat := make([]time.Duration, n)
	rt0 := rt.rt.Load()
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		if err := op(ctx, 0, i); err != nil {
			b.Fatalf("iteration %d: %v", i, err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	rts := rt.rt.Load() - rt0
	slices.Sort(lat)
	return latencyStats{n: n, elapsed: elapsed, p50: percentile(lat, 0.50), p99: percentile(lat, 0.99), rt: rts}
}

// runParallel times n calls of op spread evenly over workers goroutines, started together.
func runParallel(b *testing.B, n, workers int, rt *rtCounter, op cycle) latencyStats {
	b.Helper()
	ctx := context.Background()
	lats := make([][]time.Duration, workers)
	for g := range lats {
		share := n / workers
		if g < n%workers {
			share++
		}
		lats[g] = make([]time.Duration, share)
	}
	var ready, done sync.WaitGroup
	ready.Add(workers)
	gate := make(chan struct{})
	errs := make(chan error, workers)
	for g := range workers {
		done.Add(1)
		go func() {
			defer done.Done()
			lat := lats[g]
			ready.Done()
			<-gate
			for i := range lat {
				t0 := time.Now()
				if err := op(ctx, g, i); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	ready.Wait()
	rt0 := rt.rt.Load()
	b.ResetTimer()
	start := time.Now()
	close(gate)
	done.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	rts := rt.rt.Load() - rt0
	close(errs)
	for err := range errs {
		b.Fatalf("worker: %v", err)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return latencyStats{n: n, elapsed: elapsed, p50: percentile(all, 0.50), p99: percentile(all, 0.99), rt: rts}
}

// warm runs op a few times on every worker, concurrently, to load scripts, spawn lock actors and fill
// the connection pool before timing.
func warm(b *testing.B, workers int, op cycle) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 {
				if err := op(context.Background(), g, -1-i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("warm-up: %v", err)
	}
}

// baselineCycle returns an acquire+release of the baseline on key prefix+g, with a fresh token per
// iteration.
func baselineCycle(b *testing.B, srv *redistest.Server, prefix string) (cycle, *rtCounter) {
	client, rt := newClient(b, srv)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	return func(ctx context.Context, g, i int) error {
		key := prefix + strconv.Itoa(g)
		token := run + ":" + strconv.Itoa(g) + ":" + strconv.Itoa(i)
		ok, err := baselineAcquire(ctx, client, key, token)
		if err != nil {
			return err
		}
		if !ok {
			return errBaselineNotHeld
		}
		return baselineRelease(ctx, client, key, token)
	}, rt
}

// lockwardenCycle returns an m.Lock+m.Unlock on a handle per worker, on lock name prefix+g, all on one
// coordinator.
func lockwardenCycle(b *testing.B, srv *redistest.Server, prefix string, workers int) (cycle, *rtCounter) {
	client, rt := newClient(b, srv)
	c := newCoordinator(b, client)
	handles := make([]*coordinator.Mutex, workers)
	for g := range handles {
		handles[g] = c.Mutex(prefix + strconv.Itoa(g))
	}
	return func(ctx context.Context, g, _ int) error {
		m := handles[g]
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}, rt
}

// BenchmarkUncontended measures one acquire+release on one goroutine and one lock name.
func BenchmarkUncontended(b *testing.B) {
	srv := redistest.Start(b)
	var baseP50 []float64
	b.Run("baseline", func(b *testing.B) {
		checkLeaks(b)
		op, rt := baselineCycle(b, srv, "bench:uncontended:baseline:")
		warm(b, 1, op)
		s := runSequential(b, ops(b, uncontendedFloor), rt, op)
		s.report(b)
		baseP50 = append(baseP50, us(s.p50))
	})
	b.Run("lockwarden", func(b *testing.B) {
		checkLeaks(b)
		op, rt := lockwardenCycle(b, srv, "bench:uncontended:lockwarden:", 1)
		warm(b, 1, op)
		s := runSequential(b, ops(b, uncontendedFloor), rt, op)
		s.report(b)
		if base := median(baseP50); base > 0 {
			b.ReportMetric(us(s.p50)/base, "p50/baseline")
		}
	})
}

// BenchmarkUncontendedParallel measures acquire+release on 32 goroutines, each on its own lock name.
func BenchmarkUncontendedParallel(b *testing.B) {
	srv := redistest.Start(b)
	var baseP50, baseRate []float64
	report := func(b *testing.B, s latencyStats) float64 {
		s.report(b)
		rate := float64(s.n) / s.elapsed.Seconds()
		b.ReportMetric(rate, "ops/s")
		return rate
	}
	b.Run("baseline", func(b *testing.B) {
		checkLeaks(b)
		op, rt := baselineCycle(b, srv, "bench:parallel:baseline:")
		warm(b, parallelWorkers, op)
		s := runParallel(b, ops(b, parallelFloor), parallelWorkers, rt, op)
		baseRate = append(baseRate, report(b, s))
		baseP50 = append(baseP50, us(s.p50))
	})
	b.Run("lockwarden", func(b *testing.B) {
		checkLeaks(b)
		op, rt := lockwardenCycle(b, srv, "bench:parallel:lockwarden:", parallelWorkers)
		warm(b, parallelWorkers, op)
		s := runParallel(b, ops(b, parallelFloor), parallelWorkers, rt, op)
		rate := report(b, s)
		if base := median(baseRate); base > 0 {
			b.ReportMetric(rate/base, "ops/s/baseline")
		}
		if base := median(baseP50); base > 0 {
			b.ReportMetric(us(s.p50)/base, "p50/baseline")
		}
	})
}
