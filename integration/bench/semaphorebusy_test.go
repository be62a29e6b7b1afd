package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

const (
	// busyWaiters is the number of goroutines of BenchmarkSemaphoreBusy, spread over busyCoordinators.
	busyWaiters      = 64
	busyCoordinators = 2
	// busyPermits is the number of permits of the semaphore.
	busyPermits = 4
	// busyHold is how long each acquisition holds its permit (time.Sleep; the actual hold is measured).
	busyHold = time.Millisecond
	// busyFloor is the minimum number of acquisitions in the measured window.
	busyFloor = 4000
)

// span is one hold of a permit: from Acquire's return to the Release call.
type span struct{ from, to time.Time }

// busyWaiter is what one goroutine of BenchmarkSemaphoreBusy measured. It is padded so that goroutines
// don't share cache lines.
type busyWaiter struct {
	holds []span          // every hold up to the end of the window
	waits []time.Duration // Acquire's wait, for the acquisitions in the window
	hold  time.Duration   // the holds of the acquisitions in the window
	count int             // acquisitions in the window
	_     [64]byte
}

// BenchmarkSemaphoreBusy measures how busy a contended semaphore keeps its permits: 64 goroutines, on
// 2 coordinators (separate clients, 32 goroutines and handles each), take turns on one Semaphore of 4
// permits, each looping Acquire(ctx, 1), hold for time.Sleep(time.Millisecond) (the work simulated),
// Release(ctx, 1), with context.Background().
//
// The run is a fixed number of acquisitions: the first 2*64 are a warm-up, the window runs from the
// return of the last of them to the return of the max(b.N, 4000)-th after it (about 1.2 s at 4 permits
// of about 1.1 ms), and every acquisition after the window gives its permit back at once and ends
// its goroutine. Every hold is measured (Sleep overshoots). Metrics:
//
//	util                 the time the permits were held within the window (each hold clipped to it)
//	                     over 4 times the window: how busy the 4 permits were; target >= 0.9
//	acq/s                acquisitions per second in the window
//	hold-us              mean actual hold of the acquisitions in the window
//	ideal-acq/s          4 / mean hold: the rate if every permit passed from holder to holder instantly
//	rt/acq               Redis round trips of both coordinators per acquisition (acquire and release
//	                     together) in the window, counted by go-redis hooks (pub/sub traffic, the release
//	                     notices, is not counted: see rtCounter)
//	wait-p50-ms,
//	wait-p99-ms          time from the Acquire call to its return, for the acquisitions in the window
//	fair-min/max         fewest over most acquisitions of one goroutine in the window
//
// It fails if more than 4 goroutines ever held a permit at once, or if the semaphore does not have its
// 4 permits back at the end.
//
//	go test -run '^$' -bench 'SemaphoreCost|SemaphoreBusy' -benchtime 1x -count 2 ./integration/bench/
func BenchmarkSemaphoreBusy(b *testing.B) {
	srv := redistest.Start(b)
	checkLeaks(b)
	rt := &rtCounter{}
	name := "bench:semaphore:busy:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sems := make([]*coordinator.Semaphore, busyWaiters)
	for i := range busyCoordinators {
		client, _ := newClient(b, srv)
		client.AddHook(rtForward{rt})
		c := newCoordinator(b, client)
		for g := i; g < busyWaiters; g += busyCoordinators {
			sems[g] = c.Semaphore(name)
		}
	}
	ctx := context.Background()
	if ok, err := sems[0].TrySetPermits(ctx, busyPermits); err != nil || !ok {
		b.Fatalf("TrySetPermits: %v, %v", ok, err)
	}
	for _, s := range sems[:busyCoordinators] {
		// Load the scripts and spawn the semaphore actors before timing.
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}

	n := ops(b, busyFloor)
	warmN := int64(2 * busyWaiters)
	last := warmN + int64(n)
	stats := make([]busyWaiter, busyWaiters)
	var (
		seq, overlaps  atomic.Int64
		inside         atomic.Int32
		w0, w1         time.Time // written by the goroutines that took acquisitions warmN and last
		rtStart, rtEnd int64
		wg             sync.WaitGroup
	)
	errs := make(chan error, 2*busyWaiters)
	b.ResetTimer()
	for g := range busyWaiters {
		st, s := &stats[g], sems[g]
		st.holds = make([]span, 0, 2*int(last)/busyWaiters)
		st.waits = make([]time.Duration, 0, 2*n/busyWaiters)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				if err := s.Acquire(ctx, 1); err != nil {
					errs <- fmt.Errorf("acquire: %w", err)
					return
				}
				t1 := time.Now()
				k := seq.Add(1)
				if k > last {
					// The window is complete: give the permit back and stop, which lets the others
					// through to stop too.
					if err := s.Release(ctx, 1); err != nil {
						errs <- fmt.Errorf("release: %w", err)
					}
					return
				}
				if inside.Add(1) > busyPermits {
					overlaps.Add(1)
				}
				switch k {
				case warmN:
					w0, rtStart = t1, rt.rt.Load()
				case last:
					w1, rtEnd = t1, rt.rt.Load()
				}
				time.Sleep(busyHold)
				t2 := time.Now()
				inside.Add(-1)
				st.holds = append(st.holds, span{t1, t2})
				if k > warmN {
					st.waits = append(st.waits, t1.Sub(t0))
					st.hold += t2.Sub(t1)
					st.count++
				}
				if err := s.Release(ctx, 1); err != nil {
					errs <- fmt.Errorf("release: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Error(err)
	}
	if o := overlaps.Load(); o > 0 {
		b.Errorf("more than %d permits held at once %d times", busyPermits, o)
	}
	if avail, err := sems[0].AvailablePermits(ctx); err != nil || avail != busyPermits {
		b.Errorf("%d permits available after the run (%v), want %d", avail, err, busyPermits)
	}
	if b.Failed() {
		return
	}

	var (
		busy, hold time.Duration
		count      int
		minN, maxN = n, 0
		waits      = make([]time.Duration, 0, n)
	)
	for _, st := range stats {
		for _, h := range st.holds {
			from, to := h.from, h.to
			if from.Before(w0) {
				from = w0
			}
			if to.After(w1) {
				to = w1
			}
			if to.After(from) {
				busy += to.Sub(from)
			}
		}
		hold += st.hold
		count += st.count
		minN, maxN = min(minN, st.count), max(maxN, st.count)
		waits = append(waits, st.waits...)
	}
	if count != n {
		b.Fatalf("%d acquisitions in the window, want %d", count, n)
	}
	slices.Sort(waits)
	window := w1.Sub(w0)
	meanHold := hold / time.Duration(n)

	b.ReportMetric(float64(window.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(float64(busy)/(busyPermits*float64(window)), "util")
	b.ReportMetric(float64(n)/window.Seconds(), "acq/s")
	b.ReportMetric(us(meanHold), "hold-us")
	b.ReportMetric(busyPermits/meanHold.Seconds(), "ideal-acq/s")
	b.ReportMetric(float64(rtEnd-rtStart)/float64(n), "rt/acq")
	b.ReportMetric(ms(percentile(waits, 0.50)), "wait-p50-ms")
	b.ReportMetric(ms(percentile(waits, 0.99)), "wait-p99-ms")
	b.ReportMetric(float64(minN)/float64(max(maxN, 1)), "fair-min/max")
}
