package integration

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// renewalCounter is a go-redis hook that counts the round trips that carry renewal scripts, and the
// holds they renew.
type renewalCounter struct {
	rt, scripts atomic.Int64
}

var renewShas = map[string]bool{
	redisops.Scripts()["renew"].Hash():      true,
	redisops.Scripts()["renew_many"].Hash(): true,
}

func (h *renewalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *renewalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *renewalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds)
		return next(ctx, cmds)
	}
}

func (h *renewalCounter) count(cmds []redis.Cmder) {
	n := int64(0)
	for _, c := range cmds {
		if args := c.Args(); len(args) > 1 && (c.Name() == "evalsha" || c.Name() == "eval") {
			arg, _ := args[1].(string)
			if c.Name() == "eval" {
				arg = fmt.Sprintf("%x", sha1.Sum([]byte(arg)))
			}
			if renewShas[arg] {
				n++
			}
		}
	}
	if n > 0 {
		h.rt.Add(1)
		h.scripts.Add(n)
	}
}

// TestRenewalsShareRoundTrips: the watchdog renewals of many lock actors of one coordinator share
// script calls and round trips: 60 holds on distinct names, renewed a few times each, cost a few round
// trips per tick, not one per hold.
func TestRenewalsShareRoundTrips(t *testing.T) {
	const holds, watchdog = 60, 900 * time.Millisecond
	srv := redistest.Start(t)
	client := srv.Client(t)
	h := &renewalCounter{}
	client.AddHook(h)
	c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	sub := c.Subscribe(nil, 0)
	defer sub.Close()
	for i := range holds {
		mustLock(t, c.Mutex(fmt.Sprintf("renewals:share:%d", i)))
	}
	renewed := 0
	deadline := time.After(10 * time.Second)
	for renewed < 3*holds {
		select {
		case ev := <-sub.Events():
			if ev.Type == messages.EventRenewed {
				renewed++
			}
		case <-deadline:
			t.Fatalf("%d renewals within 10s, want %d", renewed, 3*holds)
		}
	}
	rt := h.rt.Load()
	t.Logf("%d renewals in %d round trips (%d script calls)", renewed, rt, h.scripts.Load())
	if rt*10 > int64(renewed) {
		t.Errorf("%d round trips for %d renewals, want at most a tenth", rt, renewed)
	}
}

// TestRenewalsLostHoldOnlyItsOwn: a hold whose key is gone is reported lost to its own holder only; the
// holds renewed with it stay held and renewed.
func TestRenewalsLostHoldOnlyItsOwn(t *testing.T) {
	const watchdog = 900 * time.Millisecond
	srv := redistest.Start(t)
	client := srv.Client(t)
	c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	gone, kept := c.Mutex("renewals:lost:gone"), c.Mutex("renewals:lost:kept")
	mustLock(t, gone)
	mustLock(t, kept)
	// Deleted behind the coordinator's back (no unlock notice): only the watchdog can find out.
	if err := client.Del(t.Context(), "renewals:lost:gone").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gone.Done(), 2*watchdog, "Done of the hold whose key was deleted")
	// The other hold outlives several of its leases.
	select {
	case <-kept.Done():
		t.Fatal("Done of the hold renewed with the lost one closed")
	case <-time.After(2 * watchdog):
	}
	if ttl, err := client.PTTL(t.Context(), "renewals:lost:kept").Result(); err != nil || ttl <= 0 {
		t.Errorf("PTTL of the kept hold = %v, %v; want it held", ttl, err)
	}
	mustUnlock(t, kept)
}

// TestRenewalsPausedMasterDelaysOnlyItsHolds: on Redis Cluster, a master that stops answering delays
// only the renewals of its own holds: a hold on another master, renewed by the same coordinator at the
// same time, stays held, while the paused master's hold is lost when its validity runs out.
func TestRenewalsPausedMasterDelaysOnlyItsHolds(t *testing.T) {
	const watchdog = 1500 * time.Millisecond
	// Three masters, so that the two that answer are a majority and keep serving their slots.
	cl := redistest.StartCluster(t, 3, redistest.WithArgs("--cluster-require-full-coverage", "no"))
	client := cl.Client(t)
	c := newCoordinator(t, client, coordinator.WithWatchdogTimeout(watchdog))
	paused, healthy := cl.Nodes()[0], cl.Nodes()[1]
	var onPaused, onHealthy string
	for i := 0; onPaused == "" || onHealthy == ""; i++ {
		name := fmt.Sprintf("renewals:paused-master:%d", i)
		switch cl.NodeForKey(t, name) {
		case paused:
			onPaused = name
		case healthy:
			onHealthy = name
		}
	}
	lost, kept := c.Mutex(onPaused), c.Mutex(onHealthy)
	mustLock(t, lost)
	mustLock(t, kept)
	paused.Pause()
	t.Cleanup(paused.Resume)
	waitFor(t, lost.Done(), 2*watchdog, "Done of the hold on the paused master")
	select {
	case <-kept.Done():
		t.Fatal("Done of the hold on the healthy master closed while the other master was paused")
	case <-time.After(2 * watchdog):
	}
	if ttl, err := client.PTTL(t.Context(), onHealthy).Result(); err != nil || ttl <= 0 {
		t.Errorf("PTTL of the hold on the healthy master = %v, %v; want it held", ttl, err)
	}
}
