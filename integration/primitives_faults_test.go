package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// TestFaultSemaphoreKeepsItsPermits runs 16 workers on two coordinators, each reaching Redis through a
// proxy, against a 4-permit semaphore, while Redis is paused, the connections are stalled and cut, and
// Redis is killed and restarted (with its append-only file fsynced on every write, so that what it
// acknowledged survives), in turn. The clients retry lost replies (go-redis' default retries, 200 ms timeouts): no permit may be
// counted twice or lost, so that once the faults end the count is 4 again, and never more than 4
// workers are inside at once.
func TestFaultSemaphoreKeepsItsPermits(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	name := "test:fault:sem:" + t.Name()
	var proxies []*redistest.Proxy
	var coords []*coordinator.Coordinator
	for range 2 {
		px := redistest.NewProxy(t, srv.Addr())
		client := redis.NewClient(&redis.Options{Addr: px.Addr(), DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
		t.Cleanup(func() { _ = client.Close() })
		t.Cleanup(func() { px.Unstall(); px.Enable() })
		proxies = append(proxies, px)
		coords = append(coords, newCoordinator(t, client))
	}
	ctx := t.Context()
	if ok, err := coords[0].Semaphore(name).TrySetPermits(ctx, 4); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	var inside, most, acquired, releaseErrs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := coords[w%2].Semaphore(name)
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Half the workers wait, half make one attempt at a time: an attempt that fails on an
				// error may have taken a permit either way, which the actor gives back.
				var ok bool
				var err error
				if w%4 < 2 {
					ok, err = s.TryAcquire(ctx, 1, coordinator.Wait(time.Second))
				} else if ok, err = s.TryAcquire(ctx, 1); !ok {
					time.Sleep(time.Millisecond) // pacing between attempts
				}
				if err != nil || !ok {
					continue
				}
				acquired.Add(1)
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inside.Add(-1)
				rctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				if err := s.Release(rctx, 1); err != nil {
					releaseErrs.Add(1)
					t.Errorf("Release: %v", err)
				}
				cancel()
			}
		}()
	}
	faults := []struct {
		name     string
		do, undo func()
	}{
		{"pause", srv.Pause, srv.Resume},
		{"stall", func() { proxies[0].Stall(); proxies[1].Stall() }, func() { proxies[0].Unstall(); proxies[1].Unstall() }},
		{"cut", func() { proxies[0].Disable() }, func() { proxies[0].Enable() }},
		{"cut other", func() { proxies[1].Disable() }, func() { proxies[1].Enable() }},
		{"restart", srv.Kill, func() { srv.Restart(t) }},
	}
	for round := range 3 {
		for _, f := range faults {
			before := acquired.Load()
			f.do()
			if f.name != "restart" {
				time.Sleep(time.Duration(400+250*round) * time.Millisecond) // the fault's length, not a wait for an event
			}
			f.undo()
			// Let the workers make progress before the next fault.
			deadline := time.Now().Add(10 * time.Second)
			for acquired.Load() < before+8 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	close(stop)
	wg.Wait()
	if most.Load() > 4 {
		t.Fatalf("%d workers inside at once, want at most 4", most.Load())
	}
	if acquired.Load() == 0 {
		t.Fatal("no acquisition at all")
	}
	// The unsettled attempts of the last faults give their permits back within a few retries.
	client := srv.Client(t)
	deadline := time.Now().Add(15 * time.Second)
	var got string
	for {
		got = client.Get(ctx, name).Val()
		if got == "4" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "4" {
		t.Fatalf("permits after the faults = %s, want 4 (%d acquisitions, %d failed releases)", got, acquired.Load(), releaseErrs.Load())
	}
	t.Logf("%d acquisitions through the faults", acquired.Load())
}
