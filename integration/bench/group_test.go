package bench

import (
	"context"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// groupFloor is the minimum number of sequential acquire+release pairs per loopback run of
// BenchmarkGroups; over the slow network a run does between groupSlowMin and groupSlowMax of them.
const (
	groupFloor   = 2000
	groupSlowMin = 200
	groupSlowMax = 500
)

// BenchmarkGroups measures one acquire+release, on one goroutine, of a single lock, of 3 locks on 3
// servers taken one after another (sequential=3, as Redisson's MultiLock does), of a MultiLock over 3
// servers and of a RedLock over 5, each server with its own client and coordinator. It reports
// p50/single for the others: the p50 over the single lock's median p50 of the same run (targets:
// MultiLock <= 1.5, RedLock <= 2.0). Members asked in parallel cost about the slowest member's time;
// asked one after another, about the sum.
//
// It runs twice: over loopback (net=loopback), where a round trip costs mostly CPU and 5 servers plus
// the client share the machine's cores, and through in-process proxies that add 500 µs each way
// (net=rtt1ms), like servers on other hosts, where a round trip costs mostly waiting.
func BenchmarkGroups(b *testing.B) {
	srvs := make([]*redistest.Server, 5)
	for i := range srvs {
		srvs[i] = redistest.Start(b)
	}
	for _, net := range []struct {
		name    string
		latency time.Duration
	}{{"loopback", 0}, {"rtt1ms", 500 * time.Microsecond}} {
		b.Run("net="+net.name, func(b *testing.B) {
			addrs := make([]string, len(srvs))
			for i, srv := range srvs {
				addrs[i] = srv.Addr()
				if net.latency > 0 {
					px := redistest.NewProxy(b, srv.Addr())
					px.AddLatency(net.latency)
					addrs[i] = px.Addr()
				}
			}
			n := func(b *testing.B) int {
				if net.latency > 0 {
					return max(min(b.N, groupSlowMax), groupSlowMin)
				}
				return ops(b, groupFloor)
			}
			runGroups(b, addrs, n)
		})
	}
}

// runGroups runs the sub-benchmarks of BenchmarkGroups against the servers at addrs.
func runGroups(b *testing.B, addrs []string, n func(*testing.B) int) {
	// coords starts a coordinator on each of the first k servers.
	coords := func(b *testing.B, k int) []*coordinator.Coordinator {
		cs := make([]*coordinator.Coordinator, k)
		for i := range cs {
			cs[i] = newCoordinator(b, newAddrClient(b, addrs[i]))
		}
		return cs
	}
	handles := func(cs []*coordinator.Coordinator, name string) []*coordinator.Mutex {
		ms := make([]*coordinator.Mutex, len(cs))
		for i, c := range cs {
			ms[i] = c.Mutex(name)
		}
		return ms
	}
	var singleP50 []float64
	run := func(b *testing.B, op cycle, single bool) latencyStats {
		warm(b, 1, op)
		s := runSequential(b, n(b), &rtCounter{}, op)
		b.ReportMetric(float64(s.elapsed.Nanoseconds())/float64(s.n), "ns/op")
		b.ReportMetric(us(s.p50), "p50-us")
		b.ReportMetric(us(s.p99), "p99-us")
		if base := median(singleP50); base > 0 && !single {
			b.ReportMetric(us(s.p50)/base, "p50/single")
		}
		return s
	}
	each := func(ms []*coordinator.Mutex) cycle {
		return func(ctx context.Context, _, _ int) error {
			for _, m := range ms {
				if err := m.Lock(ctx); err != nil {
					return err
				}
			}
			for _, m := range ms {
				if err := m.Unlock(ctx); err != nil {
					return err
				}
			}
			return nil
		}
	}
	b.Run("single", func(b *testing.B) {
		checkLeaks(b)
		s := run(b, each(handles(coords(b, 1), "bench:group:single")), true)
		singleP50 = append(singleP50, us(s.p50))
	})
	b.Run("sequential=3", func(b *testing.B) {
		checkLeaks(b)
		run(b, each(handles(coords(b, 3), "bench:group:sequential")), false)
	})
	for _, tc := range []struct {
		name    string
		k       int
		redLock bool
	}{{"multilock=3", 3, false}, {"redlock=5", 5, true}} {
		b.Run(tc.name, func(b *testing.B) {
			checkLeaks(b)
			cs := coords(b, tc.k)
			ms := handles(cs, "bench:group:"+tc.name)
			g := cs[0].MultiLock(ms)
			if tc.redLock {
				g = cs[0].RedLock(ms)
			}
			run(b, func(ctx context.Context, _, _ int) error {
				if err := g.Lock(ctx); err != nil {
					return err
				}
				return g.Unlock(ctx)
			}, false)
		})
	}
}
