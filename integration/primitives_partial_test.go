package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// partialHook fails every permits_acquire call (without running it) for failFor after the first one,
// and fails the failRelease-th permits_release call (without running it).
type partialHook struct {
	acq, rel    string
	mu          sync.Mutex
	until       time.Time
	failFor     time.Duration
	releases    int
	failRelease int
}

func (h *partialHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *partialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *partialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 {
			h.mu.Lock()
			fail := false
			switch args[1] {
			case h.acq:
				if h.until.IsZero() {
					h.until = time.Now().Add(h.failFor)
				}
				fail = time.Now().Before(h.until)
			case h.rel:
				h.releases++
				fail = h.releases == h.failRelease
			}
			h.mu.Unlock()
			if fail {
				err := errors.New("injected: connection refused")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// TestPermitLateGrantPartialGiveBack: a late grant of 2 permits whose give-back fails half way, after
// acquisitions that failed for longer than the lease: no permit is lost (the retry never finds part of
// its ids, nor takes permits afresh under them).
func TestPermitLateGrantPartialGiveBack(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ctx := t.Context()
	scripts := redisops.PermitsScripts()
	for _, s := range []string{"permits_acquire", "permits_release"} {
		if err := scripts[s].Load(ctx, client).Err(); err != nil {
			t.Fatal(err)
		}
	}
	client.AddHook(&partialHook{acq: scripts["permits_acquire"].Hash(), rel: scripts["permits_release"].Hash(),
		failFor: 1200 * time.Millisecond, failRelease: 2})
	c1 := newCoordinator(t, client)
	c2 := newCoordinator(t, srv.Client(t))
	name := "test:prim:partial:" + t.Name()
	if ok, err := c2.PermitSemaphore(name).TrySetPermits(ctx, 3); !ok || err != nil {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ps, err := c1.PermitSemaphore(name).AcquireMany(actx, 2, coordinator.Lease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// What the failed attempts took has no lease left: reading the counts reclaims it.
	avail, _ := c2.PermitSemaphore(name).AvailablePermits(ctx)
	acq, _ := c2.PermitSemaphore(name).AcquiredPermits(ctx)
	if avail+acq != 3 {
		t.Fatalf("available %d + acquired %d != 3: permits lost", avail, acq)
	}
}
