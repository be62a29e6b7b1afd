// Package bench holds benchmarks of lockwarden against a real redis-server, each measured in the same
// run as a raw go-redis baseline. It has no non-test code; run it with
//
//	go test -run '^$' -bench . -benchtime 2000x -count 3 ./integration/bench/
//
// Every top-level benchmark function starts ONE redis-server (redistest.Start) and runs its
// sub-benchmarks against it, baseline first. Each sub-benchmark run builds its own go-redis clients and
// coordinator and closes them before it returns; a goleak check at the end of every run fails the
// benchmark if a goroutine of the run outlives it, so nothing leaks from one benchmark into the next.
//
// # Baseline
//
// The baseline is the classic redislock approach on a raw go-redis client: SET key token NX PX 30000 to
// acquire, and a compare-and-delete Lua script (if GET key == token then DEL key) run with
// redis.NewScript (EVALSHA) to release. Both take one round trip; the script is loaded before timing.
//
// # Iteration counts
//
// A run performs max(b.N, floor) operations, where the floor keeps the statistics meaningful when b.N
// is small (run1 of the testing package always calls a benchmark with b.N == 1). Because of that floor,
// every benchmark reports ns/op itself (b.ReportMetric overrides the framework's value) as the measured
// time divided by the operations actually performed.
//
// # BenchmarkUncontended
//
// One goroutine, one lock name, one handle reused for every iteration: acquire then release,
// sequentially (baseline: SET NX PX + compare-and-delete; lockwarden: m.Lock then m.Unlock with the
// default watchdog lease). Floor: 5000 iterations. Metrics:
//
//	ns/op                mean time of one acquire+release
//	p50-us, p99-us       median and 99th percentile of one acquire+release, in microseconds
//	rt/op                Redis round trips per acquire+release, counted by a go-redis hook
//	p50/baseline         (lockwarden only) its p50 over the median baseline p50 of the same process;
//	                     target <= 1.15
//
// # BenchmarkUncontendedParallel
//
// 32 goroutines, each with its own lock name (and its own handle, all on one coordinator), each doing
// an equal share of the iterations of acquire+release. Floor: 10000 iterations in total. Metrics:
//
//	ops/s                acquire+release pairs per second, all goroutines together
//	p50-us, p99-us       latency of one acquire+release
//	ops/s/baseline       (lockwarden only) throughput over the median baseline throughput; target >= 1.0
//	p50/baseline         (lockwarden only) p50 over the median baseline p50
//
// # BenchmarkContended
//
// N goroutines (N = 16 and 128) fight for ONE lock name. Each has its own handle on one shared
// coordinator and loops: Lock, hold for time.Sleep(time.Millisecond), Unlock. Because Sleep overshoots,
// the actual hold of every acquisition is measured and the ideal rate is derived from it.
//
// The run is a fixed number of acquisitions, max(b.N, 200, 10*N), measured in a steady-state window:
// the first 2*N acquisitions are a warm-up (every goroutine has started and is queued), the window is
// the next max(b.N, 200, 10*N) acquisitions, and the run stops (the waiters' context is cancelled) as
// soon as the last acquisition of the window happens. A fixed count rather than a fixed wall time was
// chosen so that every run has the same sample size for the percentile and fairness figures; at about
// 1.1 ms per acquisition, 2000 acquisitions take about 2.3 s. Metrics:
//
//	acq/s                acquisitions per second in the window
//	hold-us              mean actual hold (the measured Sleep) in microseconds
//	ideal-acq/s          1 / mean hold: the rate if the lock passed from holder to holder instantly
//	rate/ideal           acq/s over ideal-acq/s; target >= 0.9
//	gap-us, gap-p50-us,
//	gap-p99-us           handoff dead time: from a holder's Unlock call to the next holder's Lock return
//	                     (mean, median, 99th percentile); rate/ideal is about hold/(hold+gap-us)
//	rt/acq               Redis round trips per acquisition (acquire and release together) in the window,
//	                     counted by a go-redis hook (ProcessHook + ProcessPipelineHook) on the client the
//	                     coordinator (or the polling baseline) uses. Pub/sub traffic does NOT go through
//	                     go-redis hooks (PubSub writes SUBSCRIBE/UNSUBSCRIBE on its own connection
//	                     directly, and pushed messages are read, not sent), so subscriptions and unlock
//	                     notices are not counted here.
//	pub/acq              PUBLISH commands executed by Redis per acquisition (from INFO commandstats, which
//	                     counts the PUBLISH calls of scripts too), over the whole run including warm-up;
//	                     shows how often a release woke waiters through pub/sub instead of a handoff
//	fair-min/max         fewest over most acquisitions of one goroutine in the window; target >= 0.8
//	wait-p50-ms,
//	wait-p99-ms          time from the Lock call to its return, for the acquisitions in the window
//	p99wait/(N*hold)     wait-p99 over N times the mean hold, what a FIFO queue of N owners costs; target
//	                     <= 1.5
//
// Sub-benchmarks: waiters=16/lockwarden, waiters=16/polling, waiters=128/lockwarden, waiters=128/polling.
// The polling baseline is redsync-style: SET NX PX, and on failure retry every 1 ms until it succeeds,
// then release with the compare-and-delete script.
//
// Every contended run also checks mutual exclusion (an atomic counter of goroutines inside the critical
// section) and fails if two owners ever held the lock at once.
//
// # The other benchmarks
//
// Each one's doc comment says what it runs and what it reports:
//
//	BenchmarkFairContended   the fair lock: 16 goroutines on 2 coordinators, 1 ms hold; the figures of
//	                         BenchmarkContended (targets: rate/ideal >= 0.8, p99wait/(N*hold) <= 1.5)
//	BenchmarkRWReaders       32 readers (RLock+RUnlock) on one name, alone and with a writer every 50 ms,
//	                         against the plain lock on 32 goroutines, in alternating slices;
//	                         plain/read-alone (target <= 1.25: reads at 0.8x the plain lock's
//	                         throughput), plain/read, each side's CPU and allocations per pair, and
//	                         the writer's wait
//	BenchmarkGroups          MultiLock over 3 servers and RedLock over 5 against a single lock
//	BenchmarkTelemetry       telemetry on against off, iterations interleaved (target <= 1.10)
//	BenchmarkEvents          a blocked event subscriber against none
//	BenchmarkReplicaSync     replica sync (the default) against WithoutReplicaSync on a master with one
//	                         replica, in alternating slices: ops/s, CPU time and allocations per pair
//	BenchmarkScriptCost      the reentrant lock's scripts called directly (no actors) against the floor,
//	                         each on its own server: Redis CPU and commands per acquire+release, keys
//	                         left to expire included
//	BenchmarkLockCost        issue 16's uncontended figures: Lock+Unlock against the floor in
//	                         alternating slices, each on its own server, at 1 and 32 goroutines, with
//	                         a fresh name per pair, and with Redis on a CPU apart from the client's:
//	                         ops/s, p50, client and Redis CPU (the expiry of the keys left behind
//	                         included), allocations and round trips per pair
//	BenchmarkPeers           lockwarden, bsm/redislock and go-redsync against the floor in rotating
//	                         slices, at 1 and 32 goroutines: ops/s and p50 over the floor's, client CPU
//	                         and allocations per pair
//	BenchmarkContendedProcesses  4 processes x 32 goroutines on one lock, 1 ms hold: util, fewest over
//	                         most acquisitions of one process, handoff gaps (all, within a process,
//	                         across two, and the share across); fails on two owners
//	BenchmarkWatchdogRenewals  10,000 watchdog holds: renewals/s, round trips per renewal and Redis CPU
//	                         per renewal against a script per hold, in the same run
//	BenchmarkDistinctNames   a new lock name per Lock+Unlock, with a short idle timeout
//	BenchmarkSemaphoreCost   one permit's Acquire+Release (Semaphore, and PermitSemaphore with a watchdog
//	                         permit) against Mutex Lock+Unlock and the floor in rotating slices, at 1 and
//	                         32 goroutines: ops/s, p50, client and Redis CPU, allocations and round trips
//	                         per pair (target: p50 and ops/s within 1.2x of the mutex's)
//	BenchmarkSemaphoreBusy   64 goroutines on 2 coordinators on one 4-permit Semaphore, 1 ms hold: util,
//	                         the share of the window the 4 permits were held (target >= 0.9), acq/s, rt/acq
//
// # Reading the numbers
//
// The ratios to the baseline are only meaningful from one process on one otherwise idle host: run the
// baseline and lockwarden sub-benchmarks together (the ratio metrics are absent when the baseline was
// filtered out). Both redis-server and the benchmark run on the same machine, so on small VMs the
// figures depend heavily on the scheduler: a Redis round trip that follows an idle period (as after every
// 1 ms hold) has to wake a halted vCPU, and every goroutine handoff may wake another. To separate the
// library's cost from that effect, compare with a run pinned to one CPU (redis-server inherits the
// affinity):
//
//	go test -c -o /tmp/bench.test ./integration/bench/
//	taskset -c 0 /tmp/bench.test -test.run '^$' -test.bench . -test.benchtime 2000x -test.count 3
package bench
