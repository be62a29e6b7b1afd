package integration

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// Watchdog timeouts of TestSentinelFailoverWhileHeld.
const (
	// failoverLostWatchdog is the watchdog timeout of the hold the failover loses: renewed every
	// third of a second, so the first renewal on the new master finds it gone soon after the switch.
	failoverLostWatchdog = time.Second
	// failoverKeptWatchdog is the watchdog timeout of the holds that survive. Once the replication link
	// is cut, their renewals reach only the old master, so on the replica each lives on the lease it had
	// at the cut (they are taken just before it, so about 9 s): the first renewal after the clients
	// switch to the new master (1 to 2.5 s after the cut, then within 3 s) must come before that ends.
	failoverKeptWatchdog = 9 * time.Second
)

// lossLog is a slog.Handler that keeps, by owner, the reason of every "lock lost" diagnostic.
type lossLog struct {
	mu      sync.Mutex
	reasons map[string]string
}

func (l *lossLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *lossLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "lock lost" {
		return nil
	}
	var owner, reason string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "owner":
			owner = a.Value.String()
		case "reason":
			reason = a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reasons == nil {
		l.reasons = make(map[string]string)
	}
	l.reasons[owner] = reason
	return nil
}

func (l *lossLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lossLog) WithGroup(string) slog.Handler      { return l }

func (l *lossLog) reason(owner string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reasons[owner]
}

// waitAcknowledged waits until the master's replica has acknowledged a write, as INFO replication
// reports it (an offset above 0), so that it answers the WAITs of the test at once. SET and WAIT go in
// one pipeline, because WAIT waits for its own connection's
// writes; it answers at once on a connection that wrote nothing, or while the master's replication
// offset is still 0.
func waitAcknowledged(t *testing.T, master *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pipe := master.Pipeline()
		pipe.Set(t.Context(), t.Name()+":probe", "1", 0)
		pipe.Do(t.Context(), "wait", 1, 50)
		info := pipe.Info(t.Context(), "replication")
		if _, err := pipe.Exec(t.Context()); err != nil {
			t.Fatalf("SET, WAIT and INFO on the master: %v", err)
		}
		if text := info.Val(); strings.Contains(text, ",state=online,") && !strings.Contains(text, ",offset=0,") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica acknowledged no write within 15s: %s", info.Val())
		}
	}
}

// exists reports whether key exists on the server behind client.
func exists(t *testing.T, client *redis.Client, key string) bool {
	t.Helper()
	n, err := client.Exists(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("EXISTS %s on %s: %v", key, client.Options().Addr, err)
	}
	return n == 1
}

// TestSentinelFailoverWhileHeld forces a Sentinel failover while locks are held, on coordinators on
// redis.NewFailoverClient over a master, a replica and 3 Sentinels, and shows what the replica-sync
// safeguard is for:
//
//   - holds taken with replica sync on (the default) were acknowledged by the replica, so they survive
//     on the new master: Done stays open, the renewals go on there, and another coordinator cannot take
//     them;
//   - a hold taken with replica sync off while the replication link was cut never reached the replica,
//     which the Sentinels promote all the same: it is lost on the new master, and its holder is told
//     (Done closes at the first renewal there, which finds it gone), never silently kept, and another
//     owner takes the lock;
//   - with replica sync on, the same acquisition fails with ErrNotSynced instead.
//
// The replica replicates through a proxy, and stalling the proxy cuts the replication stream while both
// servers stay up and answer the Sentinels: the master still lists the replica as online (so WAIT
// counts it), and the Sentinels, which reach the replica directly and last saw it in sync, promote it.
// A replica paused with SIGSTOP would not do: the write is already in its socket and is applied as soon
// as it resumes, and the Sentinels do not promote a replica that stopped answering them for a second.
func TestSentinelFailoverWhileHeld(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	link := redistest.NewProxy(t, master.Addr())
	_, linkPort, err := net.SplitHostPort(link.Addr())
	if err != nil {
		t.Fatal(err)
	}
	replica := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", linkPort))
	masterClient, replicaClient := master.Client(t), replica.Client(t)
	waitAcknowledged(t, masterClient)
	s := redistest.StartSentinels(t, &redistest.ReplicaSet{Master: master, Replicas: []*redistest.Server{replica}}, 3)
	// A Sentinel points a replica that replicates another address than the master's at the master
	// itself (+fix-slave-config) once failover-timeout has passed since it saw that address (3 s in
	// the harness): that would bypass the proxy. A minute outlasts the test.
	for _, addr := range s.Addrs() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		err := sc.Set(t.Context(), redistest.MasterName, "failover-timeout", "60000").Err()
		_ = sc.Close()
		if err != nil {
			t.Fatalf("SENTINEL SET failover-timeout on %s: %v", addr, err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	losses := &lossLog{}
	safe := newCoordinator(t, s.FailoverClient(t), coordinator.WithWatchdogTimeout(failoverKeptWatchdog))
	unsafe := newCoordinator(t, s.FailoverClient(t), coordinator.WithoutReplicaSync(),
		coordinator.WithWatchdogTimeout(failoverLostWatchdog), coordinator.WithLogger(slog.New(losses)))
	synced := newCoordinator(t, s.FailoverClient(t), coordinator.WithReplicaSync(1, replicaSyncTimeout),
		coordinator.WithWatchdogTimeout(failoverLostWatchdog))
	other := newCoordinator(t, s.FailoverClient(t))
	name := t.Name()

	// (a) Holds taken with replica sync on, with the replica in sync: on the replica once granted.
	kept := []*coordinator.Mutex{safe.Mutex(name + ":kept"), safe.FairMutex(name + ":kept:fair")}
	for _, m := range kept {
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock %s: %v", m.Name(), err)
		}
		if !exists(t, replicaClient, m.Name()) {
			t.Fatalf("%s was granted with replica sync on but is not on the replica", m.Name())
		}
	}

	link.Stall()
	cut := time.Now()

	// (b) A hold taken with replica sync off: granted on the master, never on the replica.
	lost := unsafe.Mutex(name + ":lost")
	if err := lost.Lock(ctx); err != nil {
		t.Fatalf("Lock %s without replica sync: %v", lost.Name(), err)
	}
	if !exists(t, masterClient, lost.Name()) || exists(t, replicaClient, lost.Name()) {
		t.Fatalf("%s should be on the master only", lost.Name())
	}
	if ok, err := other.Mutex(lost.Name()).TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock %s while held = %v, %v; want false, nil", lost.Name(), ok, err)
	}

	// (c) The same acquisition with replica sync on fails, and leaves nothing on the master.
	refused := synced.Mutex(name + ":refused")
	if err := refused.Lock(ctx); !errors.Is(err, coordinator.ErrNotSynced) {
		t.Fatalf("Lock %s with replica sync on and the replication link cut = %v, want ErrNotSynced", refused.Name(), err)
	}
	if exists(t, masterClient, refused.Name()) {
		t.Fatalf("%s is on the master after ErrNotSynced", refused.Name())
	}

	next := s.Failover(t)
	failedOver := time.Now()
	if next != replica {
		t.Fatalf("the Sentinels promoted %s, want the replica %s", next.Addr(), replica.Addr())
	}
	t.Logf("failover done %v after the replication link was cut", failedOver.Sub(cut).Round(time.Millisecond))
	// The replica left the stalled link when it was promoted; what the proxy still holds is dropped.
	link.Unstall()

	// A coordinator with replica sync on that counted the old master's replica moments ago takes a new
	// lock on the new master, which has no replica: its WAIT gets no acknowledgement, the replica count
	// is read again at once, and the lock is granted rather than refused with ErrNotSynced.
	after := safe.Mutex(name + ":after")
	if err := after.Lock(ctx); err != nil {
		t.Fatalf("Lock %s on the new master with replica sync on = %v, want it granted", after.Name(), err)
	}
	mustUnlock(t, after)

	// (b) The holder learns of the loss at its first renewal on the new master.
	within := failoverLostWatchdog
	select {
	case <-lost.Done():
		t.Logf("%s: Done closed %v after the failover", lost.Name(), time.Since(failedOver).Round(time.Millisecond))
	case <-time.After(within):
		t.Fatalf("%s: Done still open %v after the failover, although the new master does not have it", lost.Name(), within)
	}
	if got, want := losses.reason(lost.Owner()), "renewal found the hold gone"; got != want {
		t.Errorf("%s was reported lost with reason %q, want %q", lost.Name(), got, want)
	}
	if held, err := lost.IsHeld(ctx); held || err != nil {
		t.Errorf("IsHeld %s after the loss = %v, %v; want false, nil", lost.Name(), held, err)
	}
	if err := lost.Unlock(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Errorf("Unlock %s after the loss = %v, want ErrNotHeld", lost.Name(), err)
	}
	taker := other.Mutex(lost.Name())
	if ok, err := taker.TryLock(ctx); !ok || err != nil {
		t.Fatalf("TryLock %s by another owner after the loss = %v, %v; want true, nil", lost.Name(), ok, err)
	}
	if !exists(t, next.Client(t), lost.Name()) {
		t.Errorf("%s, taken again, is not on the new master", lost.Name())
	}
	mustUnlock(t, taker)

	// (c) Nothing was granted, so nothing is lost: the lock is free on the new master.
	if ok, err := other.Mutex(refused.Name()).TryLock(ctx); !ok || err != nil {
		t.Errorf("TryLock %s after the failover = %v, %v; want true, nil", refused.Name(), ok, err)
	}

	// (a) The acknowledged holds are on the new master, renewed there, and still exclusive. A hold's
	// expiry only goes down, until a renewal on the new master sets it back to the full watchdog timeout.
	nextClient := next.Client(t)
	last := make(map[string]time.Duration)
	for _, m := range kept {
		ttl, err := nextClient.PTTL(ctx, m.Name()).Result()
		if err != nil || ttl <= 0 {
			t.Fatalf("%s on the new master: PTTL %v, %v; want the hold, with an expiry", m.Name(), ttl, err)
		}
		last[m.Name()] = ttl
	}
	renewed := make(map[string]bool)
	waitUntil(ctx, failoverKeptWatchdog, func() bool {
		for _, m := range kept {
			now, err := nextClient.PTTL(ctx, m.Name()).Result()
			if err != nil || now <= 0 {
				continue
			}
			renewed[m.Name()] = renewed[m.Name()] || now > last[m.Name()]
			last[m.Name()] = now
		}
		return len(renewed) == len(kept) && !slices.Contains(slices.Collect(maps.Values(renewed)), false)
	})
	for _, m := range kept {
		if !renewed[m.Name()] {
			t.Fatalf("%s: no renewal reached the new master within %v (PTTL now %v)", m.Name(), failoverKeptWatchdog, last[m.Name()])
		}
		select {
		case <-m.Done():
			t.Fatalf("%s: Done closed, but the hold survived the failover", m.Name())
		default:
		}
		if ok, err := other.Mutex(m.Name()).TryLock(ctx); ok || err != nil {
			t.Fatalf("TryLock %s by another coordinator after the failover = %v, %v; want false, nil", m.Name(), ok, err)
		}
	}
	t.Logf("the acknowledged holds were renewed on the new master within %v of the failover",
		time.Since(failedOver).Round(time.Millisecond))
	for _, m := range kept {
		mustUnlock(t, m)
		if exists(t, nextClient, m.Name()) {
			t.Errorf("%s is still on the new master after Unlock", m.Name())
		}
	}
}

// waitUntil polls cond every 20 ms until it reports true, and reports false if that does not happen
// within d or ctx ends first.
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}
