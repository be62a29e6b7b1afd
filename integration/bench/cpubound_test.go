//go:build unix

package bench

import (
	"strconv"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// BenchmarkClientCPUBound measures how the throughput of 32 goroutines on distinct names depends on
// the client CPU spent per Lock+Unlock, with the protocol held fixed: lockwarden's scripts through its
// batcher with no actor (as in BenchmarkProtocolFloor), and the same with the goroutine spinning on
// the CPU for 4 and for 8 µs more per pair, split after the two calls where a client settles their
// answers. The floor runs in the same rotation, each side on a redis-server of its own. The client
// and Redis share the machine's CPUs, so that CPU is taken from the round trips: the sides' ops/s
// over the floor's, next to their client CPU per pair, show what a client's CPU per pair costs in
// throughput, and so how much the Mutex's must drop to reach a throughput target.
//
//	go test -run '^$' -bench ClientCPUBound -benchtime 1x -count 2 ./integration/bench/
func BenchmarkClientCPUBound(b *testing.B) {
	var servers [4]*redistest.Server
	for i := range servers {
		servers[i] = redistest.Start(b)
	}
	const workers = 32
	checkLeaks(b)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	floorOp, floorRT := baselineCycle(b, servers[0], "bench:cpubound:floor:"+run+":")
	sides := []*peer{{name: "floor", srv: servers[0], op: floorOp, rt: floorRT}}
	for i, burn := range []time.Duration{0, 4 * time.Microsecond, 8 * time.Microsecond} {
		name := "scripts+" + strconv.Itoa(int(burn.Microseconds())) + "us"
		op, rt := scriptsCycle(b, servers[i+1], "bench:cpubound:"+name+":"+run+":", workers, burn)
		sides = append(sides, &peer{name: name, srv: servers[i+1], op: op, rt: rt})
	}
	runRotation(b, sides, workers)
	floor := sides[0].cost
	b.ReportMetric(float64(floor.wall.Nanoseconds())/float64(floor.ops), "ns/op")
	for _, s := range sides {
		if s.name != "floor" {
			b.ReportMetric(s.cost.rate()/floor.rate(), "ops/s/floor-"+s.name)
		}
		b.ReportMetric(s.cost.perOp(s.cost.clientCPU), "client-cpu-us/op-"+s.name)
		b.ReportMetric(s.cost.perOp(s.cost.redisCPU), "redis-cpu-us/op-"+s.name)
	}
}
