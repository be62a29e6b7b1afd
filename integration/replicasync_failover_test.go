package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// TestReplicaSyncConcurrentLocksAfterFailover: right after a Sentinel failover to a master with fewer
// replicas than the old one (the calls start as soon as the Sentinels agree on the new master), 32 concurrent TryLock calls on distinct names and 32 on one name (each
// holding it briefly) are all granted: every call whose WAIT asked for the old count compares against
// a count read after its WAIT, and is tried again against it, none fails with ErrNotSynced.
func TestReplicaSyncConcurrentLocksAfterFailover(t *testing.T) {
	t.Parallel()
	// With 1 replica the new master has none until the old master joins it, about 10 s later; with 2
	// it has at most the other one, fewer than the default majority of 2 asked for on the old master.
	for _, replicas := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d replicas", replicas), func(t *testing.T) {
			t.Parallel()
			concurrentLocksAfterFailover(t, replicas)
		})
	}
}

func concurrentLocksAfterFailover(t *testing.T, replicas int) {
	rs := redistest.StartReplicaSet(t, replicas)
	waitAcknowledged(t, rs.Master.Client(t))
	s := redistest.StartSentinels(t, rs, 3)
	c := newCoordinator(t, s.FailoverClient(t)) // replica sync by default, within 1 s
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The coordinator counts the old master's replicas.
	before := c.Mutex(t.Name() + ":before")
	mustLock(t, before)
	mustUnlock(t, before)

	next := s.Failover(t)
	failedOver := time.Now()
	t.Logf("new master %s", next.Addr())

	const n = 32
	type result struct {
		what string
		took time.Duration
		at   time.Duration // from the failover to the return of the call
		err  error
	}
	results := make(chan result, 2*n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(2)
		go func() { // distinct names
			defer wg.Done()
			m := c.Mutex(fmt.Sprintf("%s:distinct:%d", t.Name(), i))
			<-start
			t0 := time.Now()
			ok, err := m.TryLock(ctx, coordinator.Wait(30*time.Second))
			r := result{what: m.Name(), took: time.Since(t0), at: time.Since(failedOver), err: err}
			if err == nil && !ok {
				r.err = errors.New("not obtained")
			}
			if ok {
				if uerr := m.Unlock(ctx); uerr != nil && r.err == nil {
					r.err = fmt.Errorf("Unlock: %w", uerr)
				}
			}
			results <- r
		}()
		go func() { // one name, 32 handles
			defer wg.Done()
			m := c.Mutex(t.Name() + ":same")
			<-start
			t0 := time.Now()
			ok, err := m.TryLock(ctx, coordinator.Wait(30*time.Second))
			r := result{what: fmt.Sprintf("%s#%d", m.Name(), i), took: time.Since(t0), at: time.Since(failedOver), err: err}
			if err == nil && !ok {
				r.err = errors.New("not obtained")
			}
			if ok {
				if uerr := m.Unlock(ctx); uerr != nil && r.err == nil {
					r.err = fmt.Errorf("Unlock: %w", uerr)
				}
			}
			results <- r
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	first := time.Hour
	tooks := make(map[bool][]time.Duration) // by same name
	for r := range results {
		if r.err != nil {
			t.Errorf("TryLock %s after the failover: %v (after %v)", r.what, r.err, r.took.Round(time.Millisecond))
			continue
		}
		first = min(first, r.at)
		same := strings.Contains(r.what, ":same#")
		tooks[same] = append(tooks[same], r.took)
	}
	t.Logf("first lock returned %v after the failover", first.Round(time.Millisecond))
	// About one sync timeout: the first WAITs still ask for the old master's count.
	if first > 5*coordinator.DefaultSyncTimeout {
		t.Errorf("the first lock returned %v after the failover, want about one sync timeout (%v)", first, coordinator.DefaultSyncTimeout)
	}
	for _, same := range []bool{false, true} {
		ts := tooks[same]
		if len(ts) == 0 {
			continue
		}
		slices.Sort(ts)
		t.Logf("same name %v: %d of %d granted, median call %v, slowest %v", same, len(ts), n,
			ts[len(ts)/2].Round(time.Millisecond), ts[len(ts)-1].Round(time.Millisecond))
	}
}
