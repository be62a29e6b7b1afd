package bench

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// fairWaiters is the number of goroutines of BenchmarkFairContended, spread over fairCoordinators.
const (
	fairWaiters      = 16
	fairCoordinators = 2
)

// BenchmarkFairContended runs 16 goroutines on one fair lock from 2 coordinators (separate clients),
// each holding it for 1 ms, and reports the same figures as BenchmarkContended: rate/ideal (target
// >= 0.8) and p99wait/(N*hold) (target <= 1.5).
func BenchmarkFairContended(b *testing.B) {
	srv := redistest.Start(b)
	checkLeaks(b)
	rt := &rtCounter{}
	ls := make([]contender, fairWaiters)
	for i := range fairCoordinators {
		client, _ := newClient(b, srv)
		client.AddHook(rtForward{rt})
		c := newCoordinator(b, client)
		for g := i; g < fairWaiters; g += fairCoordinators {
			ls[g] = mutexContender{c.FairMutex("bench:fair")}
		}
	}
	for _, l := range ls[:fairCoordinators] {
		// Load the scripts and spawn the lock actors before timing.
		if err := l.lock(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := l.unlock(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	runContended(b, srv, rt, ls)
}

// rwReaders is the number of reader goroutines of BenchmarkRWReaders.
const rwReaders = 32

// BenchmarkRWReaders measures read throughput of a read-write lock with 32 reader goroutines (one
// handle each) and one writer that takes the write lock every 50 ms for 1 ms, against the uncontended
// plain lock on 32 goroutines (distinct names) in the same run. It reports reads/s, the ratio
// plain/read ops per second (target <= 1.25: reads at 0.8x the plain lock or more), the Redis CPU per
// pair (the writer's included, and what the pairs leave to expire later not) and the writer's mean
// and p99 wait.
func BenchmarkRWReaders(b *testing.B) {
	srv := redistest.Start(b)
	var plainRate []float64
	b.Run("plain", func(b *testing.B) {
		checkLeaks(b)
		op, rt := lockwardenCycle(b, srv, "bench:rw:plain:", rwReaders)
		warm(b, rwReaders, op)
		m := startMeter(b, srv)
		s := runParallel(b, ops(b, parallelFloor), rwReaders, rt, op)
		m.report(b, s.n)
		s.report(b)
		rate := float64(s.n) / s.elapsed.Seconds()
		b.ReportMetric(rate, "ops/s")
		plainRate = append(plainRate, rate)
	})
	b.Run("rwlock", func(b *testing.B) {
		checkLeaks(b)
		client, rt := newClient(b, srv)
		c := newCoordinator(b, client)
		const name = "bench:rw:lock"
		readers := make([]*coordinator.RWMutex, rwReaders)
		for g := range readers {
			readers[g] = c.RWMutex(name)
		}
		op := func(ctx context.Context, g, _ int) error {
			if err := readers[g].RLock(ctx); err != nil {
				return err
			}
			return readers[g].RUnlock(ctx)
		}
		warm(b, rwReaders, op)

		// The writer runs alongside, from another coordinator, until the readers are done.
		wclient, _ := newClient(b, srv)
		writer := newCoordinator(b, wclient).RWMutex(name)
		stop := make(chan struct{})
		var (
			wg      sync.WaitGroup
			waits   []time.Duration
			werr    atomic.Value
			tick    = time.NewTicker(50 * time.Millisecond)
			started = make(chan struct{})
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer tick.Stop()
			close(started)
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				t0 := time.Now()
				if err := writer.Lock(context.Background()); err != nil {
					werr.Store(err)
					return
				}
				waits = append(waits, time.Since(t0))
				time.Sleep(time.Millisecond)
				if err := writer.Unlock(context.Background()); err != nil {
					werr.Store(err)
					return
				}
			}
		}()
		<-started
		m := startMeter(b, srv)
		s := runParallel(b, ops(b, parallelFloor), rwReaders, rt, op)
		m.report(b, s.n)
		close(stop)
		wg.Wait()
		if err, _ := werr.Load().(error); err != nil {
			b.Fatalf("writer: %v", err)
		}
		s.report(b)
		rate := float64(s.n) / s.elapsed.Seconds()
		b.ReportMetric(rate, "reads/s")
		if base := median(plainRate); base > 0 {
			b.ReportMetric(base/rate, "plain/read")
		}
		if len(waits) > 0 {
			var sum time.Duration
			for _, w := range waits {
				sum += w
			}
			slices.Sort(waits)
			b.ReportMetric(ms(sum/time.Duration(len(waits))), "writer-wait-ms")
			b.ReportMetric(ms(percentile(waits, 0.99)), "writer-wait-p99-ms")
			b.ReportMetric(float64(len(waits)), "writes")
		}
	})
}

// rtForward is a hook that counts round trips into a shared counter, so that several clients add up.
type rtForward struct{ to *rtCounter }

func (h rtForward) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h rtForward) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return h.to.ProcessHook(next)
}

func (h rtForward) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return h.to.ProcessPipelineHook(next)
}

// meter measures what a run costs: Redis' CPU, this process' CPU (the client's) and its allocations.
type meter struct {
	srv             *redistest.Server
	redis0, client0 time.Duration
	allocs0         uint64
}

// startMeter starts measuring.
func startMeter(b *testing.B, srv *redistest.Server) meter {
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	return meter{srv: srv, redis0: redisCPU(b, srv), client0: processCPU(b), allocs0: mem.Mallocs}
}

// report reports the costs of the n operations run since the start, per operation: redis-cpu-us/op,
// client-cpu-us/op and client-allocs/op.
func (m meter) report(b *testing.B, n int) {
	client, redis := processCPU(b)-m.client0, redisCPU(b, m.srv)-m.redis0
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	b.ReportMetric(us(redis)/float64(n), "redis-cpu-us/op")
	b.ReportMetric(us(client)/float64(n), "client-cpu-us/op")
	b.ReportMetric(float64(mem.Mallocs-m.allocs0)/float64(n), "client-allocs/op")
}
