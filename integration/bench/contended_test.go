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

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

const (
	// contendedHold is how long each acquisition holds the lock (time.Sleep; the actual hold is measured).
	contendedHold = time.Millisecond
	// contendedFloor is the minimum number of acquisitions in the measured window.
	contendedFloor = 200
	// contendedPerWaiter is the minimum number of acquisitions in the window per waiter, so that the
	// fairness figure has enough samples per goroutine.
	contendedPerWaiter = 10
	// pollInterval is the retry interval of the polling baseline.
	pollInterval = time.Millisecond
)

// contender is one owner of the contended lock, used by one goroutine.
type contender interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// pollingLock is the redsync-style baseline: SET NX PX, retried every pollInterval while it fails.
type pollingLock struct {
	client *redis.Client
	key    string
	id     string
	n      int
	token  string
	timer  *time.Timer
}

func (p *pollingLock) lock(ctx context.Context) error {
	p.n++
	p.token = p.id + ":" + strconv.Itoa(p.n)
	for {
		ok, err := baselineAcquire(ctx, p.client, p.key, p.token)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if ok {
			return nil
		}
		if p.timer == nil {
			p.timer = time.NewTimer(pollInterval)
		} else {
			p.timer.Reset(pollInterval)
		}
		select {
		case <-ctx.Done():
			p.timer.Stop()
			return ctx.Err()
		case <-p.timer.C:
		}
	}
}

func (p *pollingLock) unlock(ctx context.Context) error {
	return baselineRelease(ctx, p.client, p.key, p.token)
}

// waiterStats is what one goroutine measured in the window. It is padded so that goroutines don't
// share cache lines.
type waiterStats struct {
	waits []time.Duration
	hold  time.Duration
	count int
	_     [64]byte
}

// runContended runs one goroutine per contender on one lock, each looping Lock, hold, Unlock, and
// reports the metrics of a steady-state window of acquisitions (see the package documentation).
func runContended(b *testing.B, srv *redistest.Server, rt *rtCounter, ls []contender) {
	b.Helper()
	waiters := len(ls)
	n := ops(b, max(contendedFloor, contendedPerWaiter*waiters))
	warmN := int64(2 * waiters)
	last := warmN + int64(n)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats := make([]waiterStats, waiters)
	// acquiredAt[s] and releasingAt[s] are when acquisition s returned from Lock and when its holder
	// called Unlock, for the handoff gaps of the window.
	acquiredAt := make([]time.Time, last+2)
	releasingAt := make([]time.Time, last+2)
	var (
		seq, overlaps  atomic.Int64
		inside         atomic.Int32
		tStart, tEnd   time.Time // written by the goroutines that took acquisitions warmN and last
		rtStart, rtEnd int64
		wg             sync.WaitGroup
	)
	errs := make(chan error, 2*waiters)
	calls0 := commandCalls(b, srv.Addr())

	b.ResetTimer()
	for g := range waiters {
		stats[g].waits = make([]time.Duration, 0, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, l := &stats[g], ls[g]
			for {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("lock: %w", err)
					}
					return
				}
				t1 := time.Now()
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				s := seq.Add(1)
				switch s {
				case warmN:
					tStart, rtStart = t1, rt.rt.Load()
				case last:
					tEnd, rtEnd = t1, rt.rt.Load()
				}
				time.Sleep(contendedHold)
				t2 := time.Now()
				if s < int64(len(acquiredAt)) {
					acquiredAt[s], releasingAt[s] = t1, t2
				}
				if s > warmN && s <= last {
					st.waits = append(st.waits, t1.Sub(t0))
					st.hold += t2.Sub(t1)
					st.count++
				}
				inside.Add(-1)
				if s == last {
					// The window is complete: release the waiters.
					cancel()
				}
				if err := l.unlock(context.Background()); err != nil {
					errs <- fmt.Errorf("unlock: %w", err)
					return
				}

			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	calls1 := commandCalls(b, srv.Addr())
	close(errs)
	for err := range errs {
		b.Error(err)
	}
	if o := overlaps.Load(); o > 0 {
		b.Errorf("mutual exclusion violated %d times", o)
	}
	if b.Failed() {
		return
	}

	var (
		hold       time.Duration
		count      int
		minN, maxN = n, 0
		waits      = make([]time.Duration, 0, n)
	)
	for _, st := range stats {
		hold += st.hold
		count += st.count
		minN, maxN = min(minN, st.count), max(maxN, st.count)
		waits = append(waits, st.waits...)
	}
	if count != n {
		b.Fatalf("%d acquisitions in the window, want %d", count, n)
	}
	slices.Sort(waits)
	// The handoff gap is the time from a holder's Unlock call to the next holder's Lock return: the
	// lock's dead time, what separates the rate from the ideal.
	gaps := make([]time.Duration, 0, n)
	for s := warmN; s < last; s++ {
		gaps = append(gaps, acquiredAt[s+1].Sub(releasingAt[s]))
	}
	slices.Sort(gaps)
	window := tEnd.Sub(tStart)
	meanHold := hold / time.Duration(n)
	rate := float64(n) / window.Seconds()
	ideal := 1 / meanHold.Seconds()
	p99 := percentile(waits, 0.99)

	b.ReportMetric(float64(window.Nanoseconds())/float64(n), "ns/op")
	b.ReportMetric(rate, "acq/s")
	b.ReportMetric(us(meanHold), "hold-us")
	b.ReportMetric(ideal, "ideal-acq/s")
	b.ReportMetric(rate/ideal, "rate/ideal")
	b.ReportMetric(us(mean(gaps)), "gap-us")
	b.ReportMetric(us(percentile(gaps, 0.50)), "gap-p50-us")
	b.ReportMetric(us(percentile(gaps, 0.99)), "gap-p99-us")
	b.ReportMetric(float64(rtEnd-rtStart)/float64(n), "rt/acq")
	b.ReportMetric(float64(calls1["publish"]-calls0["publish"])/float64(seq.Load()), "pub/acq")
	b.ReportMetric(float64(minN)/float64(max(maxN, 1)), "fair-min/max")
	b.ReportMetric(ms(percentile(waits, 0.50)), "wait-p50-ms")
	b.ReportMetric(ms(p99), "wait-p99-ms")
	b.ReportMetric(float64(p99)/(float64(waiters)*float64(meanHold)), "p99wait/(N*hold)")
}

// BenchmarkContended measures 16 and 128 goroutines taking turns on one lock name, holding it 1 ms
// each time: lockwarden (one handle per goroutine on one coordinator) against redsync-style polling.
func BenchmarkContended(b *testing.B) {
	srv := redistest.Start(b)
	for _, waiters := range []int{16, 128} {
		b.Run("waiters="+strconv.Itoa(waiters), func(b *testing.B) {
			b.Run("lockwarden", func(b *testing.B) {
				checkLeaks(b)
				client, rt := newClient(b, srv)
				c := newCoordinator(b, client)
				name := "bench:contended:lockwarden:" + strconv.Itoa(waiters)
				ls := make([]contender, waiters)
				for g := range ls {
					ls[g] = mutexContender{c.Mutex(name)}
				}
				// Load the scripts and spawn the lock actor before timing.
				if err := ls[0].lock(context.Background()); err != nil {
					b.Fatal(err)
				}
				if err := ls[0].unlock(context.Background()); err != nil {
					b.Fatal(err)
				}
				runContended(b, srv, rt, ls)
			})
			b.Run("polling", func(b *testing.B) {
				checkLeaks(b)
				client, rt := newClient(b, srv)
				key := "bench:contended:polling:" + strconv.Itoa(waiters)
				run := strconv.FormatInt(time.Now().UnixNano(), 36)
				ls := make([]contender, waiters)
				for g := range ls {
					ls[g] = &pollingLock{client: client, key: key, id: run + ":" + strconv.Itoa(g)}
				}
				if err := ls[0].lock(context.Background()); err != nil {
					b.Fatal(err)
				}
				if err := ls[0].unlock(context.Background()); err != nil {
					b.Fatal(err)
				}
				runContended(b, srv, rt, ls)
			})
		})
	}
}

// mutexContender adapts a lockwarden handle.
type mutexContender struct {
	m interface {
		Lock(context.Context) error
		Unlock(context.Context) error
	}
}

func (c mutexContender) lock(ctx context.Context) error   { return c.m.Lock(ctx) }
func (c mutexContender) unlock(ctx context.Context) error { return c.m.Unlock(ctx) }
