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

// rwReaders is the number of reader goroutines of BenchmarkRWReaders, and rwSlices the number of
// slices of each side it runs, alternating.
const (
	rwReaders = 32
	rwSlices  = 8
)

// BenchmarkRWReaders measures read throughput of a read-write lock with 32 reader goroutines (one
// handle each) on one name against the uncontended plain lock on 32 goroutines (distinct names), in
// alternating slices of each side (the side that goes first alternating too), so that all see the
// same machine at the same time. The readers run twice: alone (read-alone), as the target says, and on
// another name with one writer that takes the write lock every 50 ms for 1 ms while they run (read). It reports
// reads/s, reads/s-alone and ops/s-plain, the ratios plain/read-alone (target <= 1.25: 32 readers on
// one name at 0.8x the plain lock or more) and plain/read, per pair of each side the Redis CPU (the
// writer's included, and what the pairs leave to expire later not), the client's CPU and
// allocations, and the writer's mean and p99 wait while the readers run.
func BenchmarkRWReaders(b *testing.B) {
	srv := redistest.Start(b)
	checkLeaks(b)
	plainOp, plainRT := lockwardenCycle(b, srv, "bench:rw:plain:", rwReaders)
	warm(b, rwReaders, plainOp)

	client, readRT := newClient(b, srv)
	c := newCoordinator(b, client)
	const name = "bench:rw:lock"
	readers := make([]*coordinator.RWMutex, rwReaders)
	for g := range readers {
		readers[g] = c.RWMutex(name)
	}
	readOp := readCycle(readers)
	warm(b, rwReaders, readOp)
	aloneClient, aloneRT := newClient(b, srv)
	alone := newCoordinator(b, aloneClient)
	aloneReaders := make([]*coordinator.RWMutex, rwReaders)
	for g := range aloneReaders {
		aloneReaders[g] = alone.RWMutex("bench:rw:alone")
	}
	aloneOp := readCycle(aloneReaders)
	warm(b, rwReaders, aloneOp)

	// The writer runs alongside the readers of name, from another coordinator, in their slices only:
	// a tick that comes during another side's slice is skipped.
	wclient, _ := newClient(b, srv)
	writer := newCoordinator(b, wclient).RWMutex(name)
	wctx, stop := context.WithCancel(context.Background())
	var (
		wg      sync.WaitGroup
		reading atomic.Bool
		waitsMu sync.Mutex
		waits   []time.Duration
		werr    atomic.Value
		tick    = time.NewTicker(50 * time.Millisecond)
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			if !reading.Load() {
				continue
			}
			t0 := time.Now()
			if err := writer.Lock(wctx); err != nil {
				if wctx.Err() == nil {
					werr.Store(err)
				}
				return
			}
			waitsMu.Lock()
			waits = append(waits, time.Since(t0))
			waitsMu.Unlock()
			time.Sleep(time.Millisecond) // the write lock's hold, not a wait for an event
			if err := writer.Unlock(context.Background()); err != nil {
				werr.Store(err)
				return
			}
		}
	}()
	defer func() {
		stop()
		wg.Wait()
	}()

	per := max(ops(b, parallelFloor)/rwSlices, rwReaders)
	var plain, read, readAlone rwSide
	for i := range rwSlices {
		for j := range 3 {
			switch (i + j) % 3 {
			case 0:
				plain.run(b, srv, per, plainRT, plainOp)
			case 1:
				readAlone.run(b, srv, per, aloneRT, aloneOp)
			default:
				reading.Store(true)
				read.run(b, srv, per, readRT, readOp)
				reading.Store(false)
			}
		}
	}
	if err, _ := werr.Load().(error); err != nil {
		b.Fatalf("writer: %v", err)
	}

	b.ReportMetric(float64(read.elapsed.Nanoseconds())/float64(read.n), "ns/op")
	b.ReportMetric(plain.rate(), "ops/s-plain")
	b.ReportMetric(read.rate(), "reads/s")
	b.ReportMetric(readAlone.rate(), "reads/s-alone")
	b.ReportMetric(plain.rate()/readAlone.rate(), "plain/read-alone")
	b.ReportMetric(plain.rate()/read.rate(), "plain/read")
	plain.report(b, "plain")
	readAlone.report(b, "read-alone")
	read.report(b, "read")
	waitsMu.Lock()
	defer waitsMu.Unlock()
	if len(waits) > 0 {
		b.ReportMetric(ms(mean(waits)), "writer-wait-ms")
		slices.Sort(waits)
		b.ReportMetric(ms(percentile(waits, 0.99)), "writer-wait-p99-ms")
		b.ReportMetric(float64(len(waits)), "writes")
	}
}

// readCycle is RLock+RUnlock on reader g's handle.
func readCycle(readers []*coordinator.RWMutex) cycle {
	return func(ctx context.Context, g, _ int) error {
		if err := readers[g].RLock(ctx); err != nil {
			return err
		}
		return readers[g].RUnlock(ctx)
	}
}

// rwSide adds up the slices of one side of BenchmarkRWReaders.
type rwSide struct {
	n                      int
	elapsed, client, redis time.Duration
	allocs                 uint64
	rt                     int64
	p50s                   []time.Duration
}

// run runs one slice of n pairs of op on rwReaders goroutines and adds up what it cost.
func (s *rwSide) run(b *testing.B, srv *redistest.Server, n int, rt *rtCounter, op cycle) {
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	allocs0, redis0, client0 := mem.Mallocs, redisCPU(b, srv), processCPU(b)
	st := runParallel(b, n, rwReaders, rt, op)
	s.client += processCPU(b) - client0
	s.redis += redisCPU(b, srv) - redis0
	runtime.ReadMemStats(&mem)
	s.allocs += mem.Mallocs - allocs0
	s.n += st.n
	s.elapsed += st.elapsed
	s.rt += st.rt
	s.p50s = append(s.p50s, st.p50)
}

func (s *rwSide) rate() float64 { return float64(s.n) / s.elapsed.Seconds() }

// report reports the side's costs per pair, and the median of its slices' p50 latencies.
func (s *rwSide) report(b *testing.B, side string) {
	b.ReportMetric(us(s.redis)/float64(s.n), "redis-cpu-us/op-"+side)
	b.ReportMetric(us(s.client)/float64(s.n), "client-cpu-us/op-"+side)
	b.ReportMetric(float64(s.allocs)/float64(s.n), "client-allocs/op-"+side)
	b.ReportMetric(float64(s.rt)/float64(s.n), "rt/op-"+side)
	slices.Sort(s.p50s)
	b.ReportMetric(us(s.p50s[len(s.p50s)/2]), "p50-us-"+side)
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
