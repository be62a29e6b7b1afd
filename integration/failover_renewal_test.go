package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// laggedFailover describes one run of runLaggedFailover: n watchdog holds in one coordinator, a replica
// whose replication stream is held back for lag before the master is killed and the replica promoted,
// and contenders for the same names in another coordinator.
type laggedFailover struct {
	n        int
	watchdog time.Duration
	lag      time.Duration
	// down is how long the master stays dead before the Sentinels are told to fail over: the time they
	// take to notice (down-after-milliseconds) and agree. With auto, they are not told: they notice
	// the master died and fail over on their own.
	down time.Duration
	auto bool
	// sync is the holders' replica-sync timeout; 0 turns replica sync off for them.
	sync time.Duration
}

// failoverFigures is what runLaggedFailover measured.
type failoverFigures struct {
	holds int
	// heldBack counts the holds whose copy on the replica was older than the master's when the master
	// was killed: at least one renewal of theirs never reached the replica.
	heldBack int
	// survived counts the holds still held (Done open, no contender got them) a watchdog timeout after
	// the failover; lost counts those whose Done closed.
	survived, lost int
	// doubles counts the names a contender obtained while the holder's Done was still open: two owners.
	doubles int
	// failover is the time from the kill to the Sentinels agreeing on the new master (down included).
	failover time.Duration
	// lead is the shortest time by which a holder's Done closed before a contender obtained its name,
	// among the names contenders obtained after Done closed.
	lead time.Duration
}

func (f failoverFigures) String() string {
	return fmt.Sprintf("%d holds (%d with a renewal held back): %d survived, %d signalled lost, %d double owners; failover took %v; Done closed at least %v before a contender got the name",
		f.holds, f.heldBack, f.survived, f.lost, f.doubles, f.failover.Round(time.Millisecond), f.lead.Round(time.Millisecond))
}

// runLaggedFailover takes p.n watchdog holds on a master with one replica and 3 Sentinels, holds the
// replication stream back for p.lag, kills the master (what it had not sent is lost with it), has the
// Sentinels promote the replica, and counts what became of the holds. Contenders in another
// coordinator, on their own failover client, wait for every name from before the stall; a contender
// that obtains a name while its holder's Done is still open is a double owner.
func runLaggedFailover(t *testing.T, p laggedFailover) failoverFigures {
	t.Helper()
	master := redistest.Start(t)
	replica, link := redistest.StartReplicaVia(t, master)
	s := redistest.StartSentinels(t, &redistest.ReplicaSet{Master: master, Replicas: []*redistest.Server{replica}}, 3)
	// Keep the replica on its proxy for the whole test (see SetFailoverTimeout); the failover is forced.
	s.SetFailoverTimeout(t, time.Minute)
	masterClient, replicaClient := master.Client(t), replica.Client(t)

	syncOpt := coordinator.WithoutReplicaSync()
	if p.sync > 0 {
		syncOpt = coordinator.WithReplicaSync(1, p.sync)
	}
	holders := newCoordinator(t, s.FailoverClient(t), syncOpt, coordinator.WithWatchdogTimeout(p.watchdog))
	contenders := newCoordinator(t, s.FailoverClient(t), coordinator.WithoutReplicaSync())

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	names := make([]string, p.n)
	held := make([]*coordinator.Mutex, p.n)
	// The holds are taken spread over one renewal period, so that their renewals are too, as holds
	// taken at different times are: whenever the stall begins, the holds' last renewals on the replica
	// are spread over the period before it.
	start := time.Now()
	for i := range held {
		names[i] = t.Name() + ":" + strconv.Itoa(i)
		held[i] = holders.Mutex(names[i])
		<-time.After(time.Until(start.Add(time.Duration(i) * p.watchdog / 3 / time.Duration(p.n))))
		if err := held[i].Lock(ctx); err != nil {
			t.Fatalf("Lock %s: %v", names[i], err)
		}
	}
	// Every hold is on the replica before the stall: the holds start out safe, whatever the mode.
	redistest.WaitReplicated(t, master)

	// Contenders wait for every name; their waits end a watchdog timeout and a margin after the
	// failover, by which time every hold has either been renewed on the new master or expired there.
	var (
		mu      sync.Mutex
		doubles = make(map[string]time.Duration) // name -> how long before Done closed
		got     = make(map[string]time.Time)
		doneAt  = make([]time.Time, p.n)
		wg      sync.WaitGroup
	)
	waitCtx, stopWaits := context.WithCancel(ctx)
	defer stopWaits()
	for i := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-held[i].Done():
				mu.Lock()
				doneAt[i] = time.Now()
				mu.Unlock()
			case <-waitCtx.Done():
			}
		}()
	}
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := contenders.Mutex(name)
			if err := m.Lock(waitCtx); err != nil {
				return
			}
			at := time.Now()
			double := false
			select {
			case <-held[i].Done():
			default:
				// The holder still believes it holds the lock: wait (bounded) to see for how long.
				double = true
				select {
				case <-held[i].Done():
				case <-time.After(p.watchdog):
				}
			}
			mu.Lock()
			defer mu.Unlock()
			got[name] = at
			if double {
				doubles[name] = time.Since(at)
			}
		}()
	}

	if _, port, _ := net.SplitHostPort(link.Addr()); replicaMasterPort(t, replicaClient) != port {
		t.Fatalf("the replica no longer replicates through its proxy %s", link.Addr())
	}
	link.Stall()
	cut := time.Now()
	<-time.After(p.lag)

	// How many holds had a renewal held back: the master's expiry is later than the replica's.
	heldBack := 0
	for _, name := range names {
		mt, err1 := masterClient.PTTL(ctx, name).Result()
		rt, err2 := replicaClient.PTTL(ctx, name).Result()
		if err1 != nil || err2 != nil {
			t.Fatalf("PTTL %s on the master, the replica: %v, %v", name, err1, err2)
		}
		if mt-rt > p.watchdog/10 {
			heldBack++
		}
	}
	master.Kill()
	link.Disable() // what the proxy held back dies with the master
	killed := time.Now()
	var next *redistest.Server
	if p.auto {
		// The master is gone, so no Sentinel points the replica back at it any more; with the
		// harness's failover-timeout, a Sentinel that lost an election tries again 6 s later.
		s.SetFailoverTimeout(t, redistest.SentinelFailoverTimeout*time.Millisecond)
		next = s.WaitFailover(t, master.Addr())
	} else {
		<-time.After(p.down)
		next = s.Failover(t)
	}
	if next != replica {
		t.Fatalf("the Sentinels promoted %s, want the replica %s", next.Addr(), replica.Addr())
	}
	failedOver := time.Now()
	t.Logf("replication held back for %v; new master %v after the kill", killed.Sub(cut).Round(time.Millisecond),
		failedOver.Sub(killed).Round(time.Millisecond))

	// A hold not renewed on the new master by now has expired there: its copy was at most a watchdog
	// timeout old at the kill.
	<-time.After(p.watchdog + time.Second)
	stopWaits()
	wg.Wait()

	f := failoverFigures{holds: p.n, heldBack: heldBack, failover: failedOver.Sub(killed), doubles: len(doubles)}
	for i, name := range names {
		if _, double := doubles[name]; double {
			continue
		}
		if at := got[name]; !at.IsZero() && !doneAt[i].IsZero() && (f.lead == 0 || at.Sub(doneAt[i]) < f.lead) {
			f.lead = at.Sub(doneAt[i])
		}
		select {
		case <-held[i].Done():
			f.lost++
		default:
			if got[name].IsZero() {
				f.survived++
			}
		}
	}
	for name, d := range doubles {
		t.Logf("%s: the contender obtained it while the holder's Done stayed open for %v more", name, d.Round(time.Millisecond))
	}
	for i := range held {
		_ = held[i].Unlock(ctx)
	}
	return f
}

// replicaMasterPort returns the master_port the replica behind client reports.
func replicaMasterPort(t *testing.T, client *redis.Client) string {
	t.Helper()
	info, err := client.Info(t.Context(), "replication").Result()
	if err != nil {
		t.Fatalf("INFO replication on the replica: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_port:"); ok {
			return v
		}
	}
	return ""
}

// TestFailoverLaggedRenewals: holders with replica sync on keep their promise across a failover to a
// replica that missed their latest renewals. A renewal is acknowledged by the replicas before it counts,
// so every hold either survives on the new master or has its Done closed before the copy the replica
// kept expires, that is before any other owner can take it: no contender obtains a name while its
// holder's Done is open.
//
// LOCKWARDEN_FAILOVER_MEASURE=1 runs the scenario instead (90 holds, a 6 s watchdog, a replica
// 1.5 s behind, the default 1 s sync timeout), with and without replica sync, with a failover forced
// 1 s after the master died or left to the Sentinels, and logs the figures.
func TestFailoverLaggedRenewals(t *testing.T) {
	t.Parallel()
	if os.Getenv("LOCKWARDEN_FAILOVER_MEASURE") != "" {
		for _, auto := range []bool{false, true} {
			for _, sync := range []time.Duration{time.Second, 0} {
				t.Run(fmt.Sprintf("auto=%v/sync=%v", auto, sync), func(t *testing.T) {
					f := runLaggedFailover(t, laggedFailover{n: 90, watchdog: 6 * time.Second,
						lag: 1500 * time.Millisecond, down: time.Second, auto: auto, sync: sync})
					t.Logf("failover by the Sentinels themselves %v, replica sync %v: %v", auto, sync, f)
				})
			}
		}
		return
	}
	f := runLaggedFailover(t, laggedFailover{n: 30, watchdog: 3 * time.Second, lag: 1500 * time.Millisecond, sync: replicaSyncTimeout})
	t.Logf("%v", f)
	if f.heldBack == 0 {
		t.Fatalf("no hold had a renewal held back from the replica: the scenario tests nothing (%v)", f)
	}
	if f.doubles != 0 {
		t.Errorf("%d of %d names had two owners after the failover, want 0 (%v)", f.doubles, f.holds, f)
	}
	if f.survived+f.lost+f.doubles != f.holds {
		t.Errorf("figures do not add up: %v", f)
	}
}

// TestReplicaSyncRenewalNotAcknowledged: a renewal that the replica does not acknowledge does not count.
// With the replica paused after the acquisition, the master renews the hold at every try, but Done
// closes when the validity of the acquisition (the last write the replica acknowledged) runs out, each
// failed renewal reporting ErrRenewalNotSynced, and the lock the master kept renewing is given back.
// Once the replica answers again, the next renewal (tried
// again after a tenth of the watchdog timeout) counts, and the hold lives on.
func TestReplicaSyncRenewalNotAcknowledged(t *testing.T) {
	t.Parallel()
	const watchdog = 2 * time.Second
	replica, client, _ := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout),
		coordinator.WithWatchdogTimeout(watchdog))
	name := t.Name()
	sub := c.Subscribe(coordinator.OfType(messages.EventRenewed, messages.EventRenewalFailed), 64)
	defer sub.Close()

	// (1) The replica stays paused: Done closes at the end of the acquisition's validity, for holds of
	// every family (plain, fair, write, read).
	lost := []*coordinator.Mutex{c.Mutex(name + ":lost"), c.FairMutex(name + ":lost:fair"),
		c.RWMutex(name + ":lost:w").Write(), c.RWMutex(name + ":lost:r").Read()}
	sent := make([]time.Time, len(lost))
	for i, m := range lost {
		sent[i] = time.Now()
		mustLock(t, m)
	}
	replica.Pause()
	for i, m := range lost {
		select {
		case <-m.Done():
		case <-time.After(2 * watchdog):
			replica.Resume()
			t.Fatalf("%s: Done still open %v after the acquisition, with no renewal acknowledged", m.Name(), 2*watchdog)
		}
		if closed := time.Since(sent[i]); closed > watchdog || closed < watchdog*3/4 {
			t.Errorf("%s: Done closed %v after the acquisition was sent, want just before the watchdog timeout %v",
				m.Name(), closed.Round(time.Millisecond), watchdog)
		}
	}
	replica.Resume()
	failures := make(map[string]int)
	for len(sub.Events()) > 0 {
		ev := <-sub.Events()
		switch {
		case ev.Type == messages.EventRenewed:
			t.Errorf("%s: renewed while the replica was paused: %+v", ev.Name, ev)
		case !strings.Contains(ev.Reason, redisops.ErrRenewalNotSynced.Error()):
			t.Errorf("%s: renewal failed with %q, want ErrRenewalNotSynced", ev.Name, ev.Reason)
		default:
			failures[ev.Name]++
		}
	}
	for _, m := range lost {
		if failures[m.Name()] < 2 {
			t.Errorf("%s: %d failed renewals before the validity ran out, want at least 2 (tried again soon)",
				m.Name(), failures[m.Name()])
		}
		// The master renewed it all the same, for a watchdog timeout from the last try: the holder,
		// whose loss was announced first, gives it back rather than leave it to keep contenders out
		// that long.
		waitKeyGone(t, client, m.Name(), time.Now(), watchdog/2, "the loss")
	}

	// (2) The replica is paused across one renewal and then answers again: the hold lives on.
	kept := c.Mutex(name + ":kept")
	mustLock(t, kept)
	replica.Pause()
	var ev messages.Event
	for ev.Name != kept.Name() || ev.Type != messages.EventRenewalFailed {
		select {
		case ev = <-sub.Events():
		case <-time.After(watchdog):
			replica.Resume()
			t.Fatalf("%s: no renewal failed within %v with the replica paused", kept.Name(), watchdog)
		}
	}
	replica.Resume()
	for ev.Name != kept.Name() || ev.Type != messages.EventRenewed {
		select {
		case ev = <-sub.Events():
		case <-kept.Done():
			t.Fatalf("%s: lost although the replica answered again", kept.Name())
		}
	}
	select {
	case <-kept.Done():
		t.Fatalf("%s: Done closed after an acknowledged renewal", kept.Name())
	case <-time.After(watchdog):
	}
	mustUnlock(t, kept)
}

// TestReplicaSyncInnerUnlockNotAcknowledged: the release of an inner hold resets the lock's expiry on
// the master, like a renewal, but is not waited for: it does not raise the hold's validity either. With
// the replica paused after a re-entry, Done closes within the watchdog timeout of the re-entry, however
// late the inner Unlock came.
func TestReplicaSyncInnerUnlockNotAcknowledged(t *testing.T) {
	t.Parallel()
	const watchdog = 2 * time.Second
	replica, client, _ := replicated(t)
	c := newCoordinator(t, client, coordinator.WithReplicaSync(1, replicaSyncTimeout),
		coordinator.WithWatchdogTimeout(watchdog))
	m := c.Mutex(t.Name())
	sub := c.Subscribe(coordinator.OfType(messages.EventRenewalFailed), 16)
	defer sub.Close()
	mustLock(t, m)
	sent := time.Now()
	mustLock(t, m) // the re-entry, acknowledged: the last write the replica has
	replica.Pause()
	defer replica.Resume()
	// Unlock the inner hold once a renewal has failed, well into the hold's validity.
	select {
	case <-sub.Events():
	case <-time.After(watchdog):
		t.Fatalf("no renewal failed within %v with the replica paused", watchdog)
	}
	mustUnlock(t, m)
	if ttl, err := client.PTTL(t.Context(), m.Name()).Result(); err != nil || ttl < watchdog*3/4 {
		t.Fatalf("PTTL on the master after the inner Unlock = %v, %v; want about %v", ttl, err, watchdog)
	}
	select {
	case <-m.Done():
	case <-time.After(2 * watchdog):
		t.Fatalf("Done still open %v after the re-entry, with nothing acknowledged since", 2*watchdog)
	}
	if closed := time.Since(sent); closed > watchdog {
		t.Errorf("Done closed %v after the re-entry was sent, want within the watchdog timeout %v",
			closed.Round(time.Millisecond), watchdog)
	}
}
