package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

// Probes: the children's load catches a fault at random moments; the parent's own coordinators make
// sure that each fault also catches the moments that matter, every time it is injected: an acquisition
// in flight when Redis pauses, a release cut off by a proxy reset, a TryLock that waits while Redis is
// down. Their failures go to the witness's events list like the children's.

// fsProbes are the parent's coordinators: one on the lock server directly, one through the proxy with
// a client that fails fast (no retries), as the failures of a cut connection then reach the caller.
type fsProbes struct {
	direct, proxied *coordinator.Coordinator
	n               int
}

func (r *fsRun) startProbes() {
	t := r.t
	direct := redis.NewClient(&redis.Options{Addr: r.lockSrv.Addr(), ContextTimeoutEnabled: true,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	proxied := redis.NewClient(&redis.Options{Addr: r.px.Addr(), ContextTimeoutEnabled: true,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = direct.Close(); _ = proxied.Close() })
	opts := []coordinator.Option{coordinator.WithWatchdogTimeout(fsWatchdog), coordinator.WithFairWaitWindow(fsFairWindow),
		coordinator.WithStopReleaseTimeout(fsStopRelease)}
	r.probes = &fsProbes{direct: newCoordinator(t, direct, opts...), proxied: newCoordinator(t, proxied, opts...)}
}

// violation records a failed check of the parent on the witness.
func (r *fsRun) violation(typ, name, detail string) {
	js, _ := json.Marshal(fsViolation{Type: typ, Name: name, Hold: "probe", Detail: detail, At: time.Now().UnixMilli()})
	ctx := r.t.Context()
	r.wc.RPush(ctx, fsEventsKey(r.prefix), js)
	r.wc.HIncrBy(ctx, fsStatsKey(r.prefix), typ, 1)
}

// probeHandles returns a fresh plain, fair and write handle of c on names never used before.
func (r *fsRun) probeHandles(c *coordinator.Coordinator) map[string]*coordinator.Mutex {
	r.probes.n++
	base := r.prefix + "probe:" + strconv.Itoa(r.probes.n) + ":"
	return map[string]*coordinator.Mutex{
		"plain": c.Mutex(base + "plain"),
		"fair":  c.FairMutex(base + "fair"),
		"write": c.RWMutex(base + "rw").Write(),
	}
}

// probeInFlight starts a Lock on a free plain, fair and write lock just before the fault, so that each
// is in flight while Redis cannot answer, with a deadline far past the fault. It returns a function to
// call once the fault has ended, which checks that no Lock returned success for a hold it had already
// lost (assertion a).
func (r *fsRun) probeInFlight(fault time.Duration) func() {
	type result struct {
		kind string
		m    *coordinator.Mutex
		err  error
		took time.Duration
		done bool
		tok  int64
	}
	handles := r.probeHandles(r.probes.direct)
	// Take and release each lock once first: the client then has its connections open and the
	// scripts loaded, so that what is in flight across the fault is the acquisition itself, not a dial
	// that fails and is retried after the fault.
	warm := make(chan error, len(handles))
	for _, m := range handles {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := m.Lock(ctx)
			if err == nil {
				err = m.Unlock(ctx)
			}
			warm <- err
		}()
	}
	for range handles {
		if err := <-warm; err != nil {
			r.t.Fatalf("probe warm-up before the fault: %v", err)
		}
	}
	results := make(chan result, len(handles))
	for kind, m := range handles {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*fault+5*time.Second)
			defer cancel()
			start := time.Now()
			err := m.Lock(ctx)
			res := result{kind: kind, m: m, err: err, took: time.Since(start), tok: m.Token()}
			select {
			case <-m.Done():
				res.done = true
			default:
			}
			results <- res
		}()
	}
	return func() {
		for range handles {
			var res result
			select {
			case res = <-results:
			case <-time.After(2*fault + 10*time.Second):
				r.t.Errorf("(d) a probe Lock in flight across the fault did not return within its deadline + 5s")
				return
			}
			switch {
			case res.err == nil && (res.done || res.tok == 0):
				r.violation("lostsuccess", res.m.Name(), fmt.Sprintf(
					"%s Lock in flight across the fault returned nil after %v, but Done was closed (%v) and Token %d",
					res.kind, res.took, res.done, res.tok))
			case res.err != nil && !errors.Is(res.err, coordinator.ErrNotObtained):
				r.t.Logf("probe %s Lock across the fault: %v", res.kind, res.err)
			}
			if res.err == nil {
				ctx, cancel := context.WithTimeout(r.t.Context(), time.Second)
				_ = res.m.Unlock(ctx)
				cancel()
			}
		}
	}
}

// probeCutRelease takes a plain, fair and write lock through the proxy before a proxy reset and
// returns a function to call while the proxy is down, which releases them (the releases fail), and a
// function to call once it is up again, which checks that each hold whose release failed ends within
// one lease (assertion c: a failed Unlock must not leave the hold renewed).
func (r *fsRun) probeCutRelease() (cut func(), check func()) {
	t := r.t
	handles := r.probeHandles(r.probes.proxied)
	for kind, m := range handles {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("probe %s Lock before the proxy reset: %v", kind, err)
		}
		cancel()
	}
	failed := make(map[string]error)
	cut = func() {
		for kind, m := range handles {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			if err := m.Unlock(ctx); err != nil {
				failed[kind] = err
			}
			cancel()
		}
	}
	check = func() {
		deadline := time.Now().Add(fsWatchdog + fsLeakMargin)
		for kind, err := range failed {
			m := handles[kind]
			select {
			case <-m.Done():
			case <-time.After(time.Until(deadline)):
				r.violation("leakedhold", m.Name(), fmt.Sprintf(
					"%s Unlock failed while the connection was cut (%v), and Done is still open %v after the reset ended: the hold is still renewed",
					kind, err, fsWatchdog+fsLeakMargin))
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				_ = m.Unlock(ctx) // a second Unlock must still work
				cancel()
			}
		}
	}
	return cut, check
}

// probeTryWhileDown runs a TryLock with a wait on a free lock while Redis is down for the whole wait:
// it must report the Redis error (joined with ErrNotObtained), not (false, nil), which reads as
// "another owner holds it".
func (r *fsRun) probeTryWhileDown(wait time.Duration) {
	for kind, m := range r.probeHandles(r.probes.direct) {
		ok, err := m.TryLock(r.t.Context(), coordinator.Wait(wait))
		if !ok && err == nil {
			r.violation("trydown", m.Name(), fmt.Sprintf(
				"%s TryLock(Wait(%v)) on a free lock while Redis was down returned (false, nil)", kind, wait))
		}
		if ok {
			r.t.Errorf("probe %s TryLock while Redis was down returned true", kind)
		}
	}
}
