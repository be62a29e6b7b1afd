package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

const (
	// renewalHolds is how many holds the watchdog renews, each on its own lock name.
	renewalHolds = 10000
	// renewalWatchdog is the watchdog timeout: a tick every second.
	renewalWatchdog = 3 * time.Second
	// renewalWindow is how long the renewals are measured, after the holds were taken.
	renewalWindow = 4 * time.Second
)

// renewalFigures are the measurements of one run of BenchmarkWatchdogRenewals.
type renewalFigures struct {
	renewals, rt int64
	cpu, elapsed time.Duration
}

// measure counts what h and the server's CPU record over renewalWindow.
func measure(b *testing.B, srv *redistest.Server, h *redistest.RenewalCounter) renewalFigures {
	b.Helper()
	rt0, n0, cpu0, t0 := h.RoundTrips.Load(), h.Holds.Load(), redisCPU(b, srv), time.Now()
	time.Sleep(renewalWindow) // the measurement window: the watchdog ticks on its own meanwhile
	return renewalFigures{renewals: h.Holds.Load() - n0, rt: h.RoundTrips.Load() - rt0,
		cpu: redisCPU(b, srv) - cpu0, elapsed: time.Since(t0)}
}

func (f renewalFigures) report(b *testing.B) {
	s := f.elapsed.Seconds()
	b.ReportMetric(float64(f.renewals)/s, "renewals/s")
	b.ReportMetric(float64(f.rt)/s, "rt/s")
	if f.renewals > 0 {
		b.ReportMetric(float64(f.rt)/float64(f.renewals), "rt/renewal")
		b.ReportMetric(us(f.cpu)/float64(f.renewals), "redis-us/renewal")
	}
	b.ReportMetric(ms(f.cpu)/s, "redis-ms/s")
}

// BenchmarkWatchdogRenewals measures the watchdog's renewals of 10,000 holds on distinct names, with a
// 3 s watchdog timeout (a tick every second): renewals and round trips per second, round trips per
// renewal, and the Redis CPU they cost (INFO cpu), over 4 s. "per-hold" is the baseline: the per-hold
// renewal path (renew.lua for one hold, one script call and one round trip each, as each lock actor
// renewed its own holds), driven at the same rate from 64 goroutines. "lockwarden" is a
// coordinator holding the 10,000 locks, whose lock actors hand their renewals to the coordinator's
// renewal collector. Fencing-token counters are kept, so that no key expires in the window: the
// server's CPU is the renewals'. The 10,000 locks are released (at Close) after the window.
func BenchmarkWatchdogRenewals(b *testing.B) {
	srv := redistest.Start(b)
	var baseCPU []float64
	b.Run("per-hold", func(b *testing.B) {
		client := newAddrClient(b, srv.Addr())
		h := &redistest.RenewalCounter{}
		client.AddHook(h)
		o := redisops.New(client)
		o.SetTokenExpiry(0) // no token counter expires in the window
		ctx := context.Background()
		names := make([]string, renewalHolds)
		for i := range names {
			names[i] = fmt.Sprintf("bench:renewals:per-hold:%d", i)
			if _, err := o.Acquire(ctx, names[i], "owner", renewalWatchdog, 0); err != nil {
				b.Fatalf("Acquire: %v", err)
			}
		}
		// Each renewal is its own script call and round trip, as each lock actor renewed its own holds
		// (redisops.Ops.Renew), not through the Ops' batcher, which would pipeline them.
		renew := redisops.Scripts()["renew"]
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // a tick every third of the watchdog timeout renews every hold, one script each
			defer wg.Done()
			tick := time.NewTicker(renewalWatchdog / 3)
			defer tick.Stop()
			for {
				work := make(chan string, len(names))
				for _, n := range names {
					work <- n
				}
				close(work)
				var tw sync.WaitGroup
				for range 64 {
					tw.Add(1)
					go func() {
						defer tw.Done()
						for n := range work {
							if err := renew.Run(ctx, client, []string{n}, renewalWatchdog.Milliseconds(), "owner").Err(); err != nil {
								b.Errorf("renew %s: %v", n, err)
								return
							}
						}
					}()
				}
				tw.Wait()
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		f := measure(b, srv, h)
		close(stop)
		wg.Wait()
		// Deleted now, so that their expiry does not cost the server CPU in the next run's window.
		if err := client.Del(ctx, names...).Err(); err != nil {
			b.Fatalf("DEL: %v", err)
		}
		f.report(b)
		if f.renewals > 0 {
			baseCPU = append(baseCPU, us(f.cpu)/float64(f.renewals))
		}
	})
	b.Run("lockwarden", func(b *testing.B) {
		client := newAddrClient(b, srv.Addr())
		h := &redistest.RenewalCounter{}
		client.AddHook(h)
		c := newCoordinator(b, client, coordinator.WithWatchdogTimeout(renewalWatchdog),
			coordinator.WithPersistentFencingTokens()) // no token counter expires in the window
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= renewalHolds; i = next.Add(1) {
					if err := c.Mutex(fmt.Sprintf("bench:renewals:lockwarden:%d", i)).Lock(context.Background()); err != nil {
						b.Errorf("Lock: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		f := measure(b, srv, h)
		f.report(b)
		if base := median(baseCPU); base > 0 && f.renewals > 0 {
			b.ReportMetric(us(f.cpu)/float64(f.renewals)/base, "cpu/per-hold")
		}
	})
}
