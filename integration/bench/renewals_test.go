package bench

import (
	"context"
	"fmt"
	"github.com/redis/go-redis/v9"
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

// renewalFloorKeys is how many holds BenchmarkRenewalFloor renews per round, renewalFloorPerCall of
// them in each script call.
const renewalFloorKeys, renewalFloorPerCall = 10000, 100

// BenchmarkRenewalFloor measures what renewing one hold inside a script costs redis-server, with the
// per-call costs spread over 100 holds per call, so that what remains is the cost per hold: an empty
// loop over the keys (the floor of passing them), the ownership check and expiry every renewal needs
// (HEXISTS then PEXPIRE, what Redisson's renewal script does per hold), and lockwarden's renew_many.lua.
// It reports the Redis CPU per hold of each, and of renew.lua called once per hold (one call and
// round trip each, from one goroutine: BenchmarkWatchdogRenewals' baseline calls it so from 64, which
// costs Redis less per call), the kind of call against which issue 16 set its target (a tenth of it).
//
//	go test -run '^$' -bench RenewalFloor -benchtime 1x -count 2 ./integration/bench/
func BenchmarkRenewalFloor(b *testing.B) {
	srv := redistest.Start(b)
	client := newAddrClient(b, srv.Addr())
	ctx := context.Background()
	const owner = "0123456789abcdef0123456789abcdef:17"
	keys := make([]string, renewalFloorKeys)
	pipe := client.Pipeline()
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:renewalfloor:%d", i)
		pipe.HSet(ctx, keys[i], owner, 1)
		pipe.PExpire(ctx, keys[i], time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatalf("setup: %v", err)
	}
	b.Cleanup(func() { _ = client.Del(context.Background(), keys...).Err() })
	lease := time.Hour.Milliseconds()
	manyArgs := []any{lease, renewalFloorPerCall, 0}
	for range renewalFloorPerCall {
		manyArgs = append(manyArgs, owner)
	}
	cases := []struct {
		name   string
		script *redis.Script
		args   []any
		perKey bool // one call per hold instead of renewalFloorPerCall
	}{
		{"empty-loop", redis.NewScript(`for i = 1, #KEYS do end return 1`), []any{lease, owner}, false},
		{"hexists+pexpire", redis.NewScript(`for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[2]) == 1 then redis.call('pexpire', KEYS[i], ARGV[1]) end
end
return 1`), []any{lease, owner}, false},
		{"renew_many", redisops.Scripts()["renew_many"], manyArgs, false},
		{"script-per-hold", redisops.Scripts()["renew"], []any{lease, owner}, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := c.script.Load(ctx, client).Err(); err != nil {
				b.Fatalf("SCRIPT LOAD: %v", err)
			}
			step := renewalFloorPerCall
			if c.perKey {
				step = 1
			}
			cpu0 := redisCPU(b, srv)
			for i := 0; i < renewalFloorKeys; i += step {
				if err := c.script.EvalSha(ctx, client, keys[i:i+step], c.args...).Err(); err != nil {
					b.Fatalf("%s: %v", c.name, err)
				}
			}
			b.ReportMetric(us(redisCPU(b, srv)-cpu0)/renewalFloorKeys, "redis-us/hold")
		})
	}
}
