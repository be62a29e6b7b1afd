package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// placeApart puts the threads of each server's redis-server on the last CPU of the machine and the
// threads of this process on the others, until b's cleanup puts both back on every CPU. A benchmark
// with one client goroutine calls it, so that every side of it sees one placement: unpinned, the
// kernel runs each redis-server on the client's CPU or on another as it pleases, and the floor's
// 1-goroutine p50 alone then ranged from 43 to 132 µs between runs on a 2-CPU machine (the ratio of a
// side to the floor from 0.8 to 2.7). Apart, every round trip crosses CPUs, as one to a Redis on
// another host crosses the network. On a machine of one CPU it does nothing.
//
// It also sets GOMAXPROCS to the client's CPUs, as the Go runtime does for a process whose CPU
// affinity changes, until the same cleanup: the testing package sets GOMAXPROCS itself (for
// -test.cpu), which turns that off, and left at the machine's CPU count, the client's surplus
// processors contend for its CPUs. On 2 CPUs every goroutine handoff then woke a second thread on
// the client's one CPU: a Lock+Unlock whose ctx can end (its Redis calls on another goroutine) took
// a p50 1.35-1.49x the floor's, against 1.15x with GOMAXPROCS set, and one whose ctx never ends,
// which hands off less, 1.05-1.16x against 1.07-1.08x (BenchmarkLockCost/workers=1).
func placeApart(b *testing.B, servers ...*redistest.Server) {
	b.Helper()
	n := runtime.NumCPU()
	if n < 2 {
		return
	}
	var all, client, server unix.CPUSet
	for cpu := range n {
		all.Set(cpu)
		if cpu < n-1 {
			client.Set(cpu)
		}
	}
	server.Set(n - 1)
	pids := []int{os.Getpid()}
	for _, srv := range servers {
		pids = append(pids, serverPID(b, srv))
	}
	pin := func(pid int, set *unix.CPUSet) {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			b.Fatalf("threads of process %d: %v", pid, err)
		}
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				// A thread may exit meanwhile (ESRCH): nothing to place then.
				if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
					b.Fatalf("placing thread %d of process %d: %v", tid, pid, err)
				}
			}
		}
	}
	procs := runtime.GOMAXPROCS(0)
	b.Cleanup(func() {
		for _, pid := range pids {
			pin(pid, &all)
		}
		runtime.GOMAXPROCS(procs)
	})
	pin(pids[0], &client)
	runtime.GOMAXPROCS(client.Count())
	for _, pid := range pids[1:] {
		pin(pid, &server)
	}
}

// serverPID returns the process id of srv's redis-server, from INFO server.
func serverPID(b *testing.B, srv *redistest.Server) int {
	b.Helper()
	for _, line := range strings.Split(info(b, srv.Addr(), "server"), "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				b.Fatalf("INFO server: %s: %v", line, err)
			}
			return pid
		}
	}
	b.Fatal("INFO server reported no process_id")
	return 0
}
