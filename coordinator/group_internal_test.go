package coordinator

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// nodeRuns keeps a RedLock node out for the grace after a change of run id was seen, and trusts the
// first run id it sees.
func TestNodeRunsSee(t *testing.T) {
	const grace = 10 * time.Second
	t0 := time.Unix(1_000_000, 0)
	var n nodeRuns
	for _, step := range []struct {
		what  string
		runID string
		at    time.Duration
		until time.Duration // 0: not kept out
	}{
		{"first sight is trusted", "a", 0, 0},
		{"same run id", "a", time.Second, 0},
		{"restart seen", "b", 2 * time.Second, 12 * time.Second},
		{"still out", "b", 11 * time.Second, 12 * time.Second},
		{"back after the grace", "b", 12 * time.Second, 0},
		{"another restart", "c", 20 * time.Second, 30 * time.Second},
	} {
		got := n.see(step.runID, t0.Add(step.at), grace)
		want := time.Time{}
		if step.until > 0 {
			want = t0.Add(step.until)
		}
		if !got.Equal(want) {
			t.Errorf("%s: see(%q) at +%v = %v, want %v", step.what, step.runID, step.at, got, want)
		}
	}
}

// The run-id checks of a paused RedLock node are bounded by the node timeout (with a client that has
// ContextTimeoutEnabled), so Close, which waits for them, is not held up for the client's
// ReadTimeout; and attempts against the paused node skip the check while one runs, rather than
// piling up reads that each hold a connection.
func TestRedLockNodeChecksBounded(t *testing.T) {
	t.Parallel()
	var coords []*Coordinator
	var clients []*redis.Client
	var ms []*Mutex
	srvs := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	for _, srv := range srvs {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, ReadTimeout: 10 * time.Second})
		t.Cleanup(func() { _ = client.Close() })
		c, err := New(client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		coords, clients, ms = append(coords, c), append(clients, client), append(ms, c.Mutex(t.Name()))
	}
	group := coords[0].RedLock(ms, WithNodeTimeout(100*time.Millisecond))
	ctx := t.Context()
	if err := group.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := group.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	srvs[2].Pause()
	t.Cleanup(srvs[2].Resume)
	for range 5 {
		if ok, err := group.TryLock(ctx, Lease(time.Second)); !ok || err != nil {
			t.Fatalf("TryLock with node 2 paused = %v, %v", ok, err)
		}
		if err := group.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	checked := make(chan struct{})
	go func() {
		coords[2].stopping.Wait()
		close(checked)
	}()
	select {
	case <-checked:
		t.Logf("the paused node's checks ended %v after the last attempt", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Errorf("the paused node's run-id checks still running 2s after the last attempt (node timeout 100ms)")
	}
	if n := clients[2].PoolStats().TotalConns; n > 3 {
		t.Errorf("connections to the paused node after 5 attempts = %d, want at most 3", n)
	}
}

// A MultiLock's default node timeout is cut, for a call with a fixed lease, to the lease minus the
// drift allowance: a member answering later could only leave an expired hold. A node timeout set
// with WithNodeTimeout, and a call without a lease, keep theirs.
func TestMultiLockCallNodeTimeout(t *testing.T) {
	for _, tc := range []struct {
		what        string
		nodeTimeout time.Duration
		isDefault   bool
		lease, want time.Duration
	}{
		{"watchdog holds keep the default", 2 * time.Second, true, 0, 2 * time.Second},
		{"a long lease keeps the default", 2 * time.Second, true, 30 * time.Second, 2 * time.Second},
		{"a short lease caps the default", 2 * time.Second, true, 100 * time.Millisecond, 97 * time.Millisecond},
		{"a lease shorter than the drift", 2 * time.Second, true, time.Millisecond, time.Millisecond},
		{"a node timeout that was set", 2 * time.Second, false, 100 * time.Millisecond, 2 * time.Second},
	} {
		g := &Group{groupOptions: groupOptions{nodeTimeout: tc.nodeTimeout}, defaultTimeout: tc.isDefault}
		if got := g.callNodeTimeout(tc.lease); got != tc.want {
			t.Errorf("%s: callNodeTimeout(%v) = %v, want %v", tc.what, tc.lease, got, tc.want)
		}
	}
}

// Concurrent RedLock attempts of different groups against a paused node share one run-id read at a
// time: the reads do not pile up connections, every call still gets its majority from the healthy
// nodes, and the reads end within the node timeout after the last attempt.
func TestRedLockConcurrentChecksOfPausedNode(t *testing.T) {
	t.Parallel()
	var coords []*Coordinator
	var clients []*redis.Client
	srvs := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	for _, srv := range srvs {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, ReadTimeout: 10 * time.Second})
		t.Cleanup(func() { _ = client.Close() })
		c, err := New(client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		coords, clients = append(coords, c), append(clients, client)
	}
	const workers, rounds = 4, 3
	groups := make([]*Group, workers)
	for w := range groups {
		var ms []*Mutex
		for _, c := range coords {
			ms = append(ms, c.Mutex(fmt.Sprintf("%s:%d", t.Name(), w)))
		}
		groups[w] = coords[0].RedLock(ms, WithNodeTimeout(100*time.Millisecond))
	}
	srvs[2].Pause()
	t.Cleanup(srvs[2].Resume)
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				ok, err := g.TryLock(t.Context(), Lease(time.Second))
				if !ok {
					errs <- fmt.Errorf("TryLock with node 2 paused = %v, %v", ok, err)
					continue
				}
				if err := g.Unlock(t.Context()); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checked := make(chan struct{})
	go func() {
		coords[2].stopping.Wait()
		close(checked)
	}()
	select {
	case <-checked:
	case <-time.After(2 * time.Second):
		t.Errorf("the paused node's run-id checks still running 2s after the last attempt (node timeout 100ms)")
	}
	// One read at a time, each bounded by the node timeout, over about rounds node timeouts.
	if n := clients[2].PoolStats().TotalConns; n > rounds+2 {
		t.Errorf("connections to the paused node after %d concurrent attempts = %d, want at most %d", workers*rounds, n, rounds+2)
	}
	t.Logf("connections to the paused node after %d concurrent attempts: %d", workers*rounds, clients[2].PoolStats().TotalConns)
}
