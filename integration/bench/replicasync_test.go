//go:build unix

package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

const (
	// replicaSyncFloor is the minimum number of acquire+release pairs per mode and run.
	replicaSyncFloor = 10000
	// replicaSyncSlice is how many pairs one slice of one mode runs before the other mode's turn.
	replicaSyncSlice = 500
)

// sliceCost is what one slice of acquire+release pairs cost.
type sliceCost struct {
	ops    int
	wall   time.Duration
	cpu    time.Duration // user+system CPU of this process (redis-server not included)
	allocs uint64
}

func (s *sliceCost) add(o sliceCost) {
	s.ops, s.wall, s.cpu, s.allocs = s.ops+o.ops, s.wall+o.wall, s.cpu+o.cpu, s.allocs+o.allocs
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplicaSync measures the cost of the replica-sync safeguard: uncontended acquire+release
// pairs on a master with one healthy replica, on two coordinators of the same client options, one
// with replica sync (the default: WAIT for a majority, 1 of 1) and one without (WithoutReplicaSync).
// The modes run in alternating slices of 500 pairs, the first mode of each slice pair alternating too,
// so that both see the same machine at the same time. workers goroutines each lock their own name.
// It reports, for each mode, ops/s, the CPU time of this process per pair and the allocations per
// pair, sync/off (the throughput with sync over the throughput without), and sync-waits/op, the WAIT
// commands the master ran per pair with sync (1: every acquisition was checked).
func BenchmarkReplicaSync(b *testing.B) {
	rs := redistest.StartReplicaSet(b, 1)
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			checkLeaks(b)
			offClient, _ := newClient(b, rs.Master)
			onClient, _ := newClient(b, rs.Master)
			modes := [2][]*coordinator.Mutex{} // 0: without sync, 1: with sync
			for mode, c := range []*coordinator.Coordinator{
				newCoordinator(b, offClient, coordinator.WithoutReplicaSync()),
				newCoordinator(b, onClient),
			} {
				for w := range workers {
					modes[mode] = append(modes[mode], c.Mutex(fmt.Sprintf("bench:replicasync:%d:%d:%d", workers, mode, w)))
				}
			}
			ctx := context.Background()
			slice := func(ms []*coordinator.Mutex, n int) sliceCost {
				var mem runtime.MemStats
				runtime.ReadMemStats(&mem)
				allocs0, cpu0, t0 := mem.Mallocs, processCPU(b), time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, len(ms))
				for _, m := range ms {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range n / len(ms) {
							if err := m.Lock(ctx); err != nil {
								errs <- err
								return
							}
							if err := m.Unlock(ctx); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				wall, cpu := time.Since(t0), processCPU(b)-cpu0
				runtime.ReadMemStats(&mem)
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				return sliceCost{ops: n / len(ms) * len(ms), wall: wall, cpu: cpu, allocs: mem.Mallocs - allocs0}
			}
			for mode := range modes { // warm both
				slice(modes[mode], 200)
			}
			n := ops(b, replicaSyncFloor)
			var cost [2]sliceCost
			waits0 := commandCalls(b, rs.Master.Addr())["wait"]
			b.ResetTimer()
			for i := 0; cost[0].ops < n; i++ {
				first := i % 2
				cost[first].add(slice(modes[first], replicaSyncSlice))
				cost[1-first].add(slice(modes[1-first], replicaSyncSlice))
			}
			b.StopTimer()
			waits := commandCalls(b, rs.Master.Addr())["wait"] - waits0
			rate := func(c sliceCost) float64 { return float64(c.ops) / c.wall.Seconds() }
			b.ReportMetric(float64(cost[0].wall+cost[1].wall)/float64(cost[0].ops+cost[1].ops), "ns/op")
			b.ReportMetric(rate(cost[0]), "off-ops/s")
			b.ReportMetric(rate(cost[1]), "sync-ops/s")
			b.ReportMetric(rate(cost[1])/rate(cost[0]), "sync/off")
			b.ReportMetric(us(cost[0].cpu)/float64(cost[0].ops), "off-cpu-us/op")
			b.ReportMetric(us(cost[1].cpu)/float64(cost[1].ops), "sync-cpu-us/op")
			b.ReportMetric(float64(cost[0].allocs)/float64(cost[0].ops), "off-allocs/op")
			b.ReportMetric(float64(cost[1].allocs)/float64(cost[1].ops), "sync-allocs/op")
			// 1 when every acquisition with sync sent its WAIT; the pairs without send none.
			b.ReportMetric(float64(waits)/float64(cost[1].ops), "sync-waits/op")
		})
	}
}
