package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
)

// TestRenewalsShareRoundTrips: the watchdog renewals of many lock actors of one coordinator share
// script calls and round trips: 60 holds on distinct names, renewed a few times each, cost a few round
// trips per tick, not one per hold.
func TestRenewalsShareRoundTrips(t *testing.T) {
	const holds, watchdog = 60, 900 * time.Millisecond
	srv := redistest.Start(t)
	client := srv.Client(t)
	h := &redistest.RenewalCounter{}
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
	rt := h.RoundTrips.Load()
	t.Logf("%d renewals in %d round trips (%d script calls)", renewed, rt, h.Scripts.Load())
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

// TestRenewalsBoundedFromWhenSent: the collector's renewals are bounded by the stop release timeout
// from when they are sent, not from when they were handed in: with a linger (a thirtieth of the
// watchdog timeout, 100 ms here) longer than the stop release timeout (40 ms), a bound counted from the
// hand-in had passed before the renewal was sent, every renewal failed, and the hold was lost.
func TestRenewalsBoundedFromWhenSent(t *testing.T) {
	const watchdog = 3 * time.Second
	_, _, c := setup(t, coordinator.WithWatchdogTimeout(watchdog), coordinator.WithStopReleaseTimeout(40*time.Millisecond))
	sub := c.Subscribe(coordinator.ForLock(t.Name()), 64)
	defer sub.Close()
	m := c.Mutex(t.Name())
	mustLock(t, m)
	renewed := 0
	deadline := time.After(3 * watchdog)
	for renewed < 2 {
		select {
		case ev := <-sub.Events():
			switch ev.Type {
			case messages.EventRenewed:
				renewed++
			case messages.EventLost:
				t.Fatalf("the hold was lost (%s) after %d renewals", ev.Reason, renewed)
			}
		case <-m.Done():
			t.Fatalf("the hold ended after %d renewals", renewed)
		case <-deadline:
			t.Fatalf("%d renewals within %v, want 2", renewed, 3*watchdog)
		}
	}
	mustUnlock(t, m)
}
