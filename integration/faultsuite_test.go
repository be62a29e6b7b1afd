package integration

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/internal/serverproc"
)

// The fault suite: many processes take plain, fair and read-write locks on one redis-server while the
// test injects real faults on it, and a second redis-server that is never faulted (the witness) checks
// every critical section.
//
// The test binary re-executes itself as child processes (TestFaultSuiteChild, configured through
// faultSuiteChildEnv). Each child runs one coordinator with several goroutines per lock name: plain
// and fair lockers, writers and a reader of a read-write lock. On entering a critical section a
// goroutine checks on the witness, in one script, that nobody it conflicts with is inside and that its
// fencing token is above the highest seen for the name, and reads a shared counter; it works a few ms
// (one hold in 10 a few hundred ms), stopping at once if Done closes; on leaving, it checks that the
// counter still has the value it read, and increments it. Some children reach Redis through a proxy,
// so that a proxy fault cuts off some processes while the others go on.
//
// Faults (on the lock server only): SIGSTOP/SIGCONT, a proxy that resets every connection and one that
// blackholes them, kill -9 of a child process that holds locks, and kill -9 of redis-server followed by
// a restart, without persistence (phase "volatile") and with AOF fsynced on every write (phase "aof").
//
// What the suite asserts, and which part of the contract each assertion stands for:
//
//	(a) lostsuccess  Lock/TryLock never returns success for a hold whose Done is already closed.
//	(b) overlap      No two conflicting holds are inside at once unless the earlier holder's Done closed
//	                 before the later one's Lock returned ("Done signalled first"). A kill -9 and restart
//	                 of redis-server without persistence loses every key, so a new owner may take a lock
//	                 an old owner still thinks it has: an overlap between a hold taken before such a data
//	                 loss and one taken after it is inherent, and there the assertion is only that the
//	                 earlier holder was told (its Done closed, or its Unlock said ErrNotHeld). The same
//	                 rule judges fencing token regressions (the token counter is lost with the data; the
//	                 witness forgets the highest token at each loss) and lost counter updates (a lost
//	                 update is only allowed to a hold that is part of an allowed overlap).
//	(c) recovery     After a fault ends, every lock name is taken again within one lease (the watchdog
//	                 timeout; for the fair lock, plus one fair wait window) plus fsRecoveryMargin; and a
//	                 hold whose Unlock failed closes its Done within one lease plus fsLeakMargin.
//	(d) late         No Lock, TryLock or Unlock returns later than its deadline plus fsLateMargin.
//	(e) leak         A child leaves no goroutine behind once it has closed its coordinator and client
//	                 (goleak), and Close returns within twice the stop release timeout plus a margin.
//
// The assertions count events; none depends on the luck of timing beyond the margins named above. The
// short version runs in `go test ./integration/`; LOCKWARDEN_SOAK=10m makes it a soak of that length
// that prints its figures (run it with -v).
const faultSuiteSoakEnv = "LOCKWARDEN_SOAK"

// Settings of the suite.
const (
	fsWatchdog    = 1500 * time.Millisecond
	fsFairWindow  = 2 * time.Second
	fsStopRelease = 500 * time.Millisecond
	// fsRecoveryMargin is added to the lease when a lock name must be usable again after a fault that
	// made Redis unreachable: the waiters' retry backoff meanwhile (up to 3 s between attempts) is the
	// most of it. fsKillMargin is the margin after the kill of a process, which leaves Redis reachable.
	fsRecoveryMargin = 3 * time.Second
	fsKillMargin     = time.Second
	// fsCloseMargin is added to twice the stop release timeout for a child's Close.
	fsCloseMargin = time.Second
)

// fsFault is a fault the parent injects; inject returns when the fault has ended, and the time from
// which the lock names must recover.
type fsFault struct {
	name   string
	inject func() time.Time
	margin time.Duration
}

// fsRun is one phase of the suite: its servers, children and the faults it injected.
type fsRun struct {
	t        *testing.T
	prefix   string
	names    []fsName
	witness  *redistest.Server
	wc       *redis.Client
	lockSrv  *redistest.Server
	px       *redistest.Proxy
	children map[string]*fsProc
	nextID   int
	// losses are the times (ms) at which Redis lost its data.
	losses []int64
	// faults counts the faults injected, by name; recovery is the worst recovery seen, by fault.
	faults   map[string]int
	recovery map[string]time.Duration
	killed   map[string]bool
	killedAt map[string]int64 // ms
	// deadHolds are the holds a killed child was inside when it died (taken off the witness).
	deadHolds map[string]bool
	probes    *fsProbes
	// timeline is every fault injected, in order, for the report on a violation.
	timeline []fsSpan
}

// fsSpan is a fault as injected: from start to end (ms).
type fsSpan struct {
	name       string
	start, end int64
}

// fsProc is a child process.
type fsProc struct {
	id      string
	proxied bool
	cmd     *exec.Cmd
	out     *serverproc.Output // the last 16 KiB of the child's output
	done    chan struct{}
	err     error
	killed  bool
}

// TestFaultSuite runs the fault suite: see the comment on faultSuiteSoakEnv.
func TestFaultSuite(t *testing.T) {
	soak := time.Duration(0)
	if v := os.Getenv(faultSuiteSoakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 10m", faultSuiteSoakEnv, v)
		}
		soak = d
	}
	procs := 3
	if soak > 0 {
		procs = 4
	}
	t.Run("volatile", func(t *testing.T) {
		r := fsStart(t, procs, false)
		r.loop(soak*2/3, []fsFault{
			{"pause 2s", r.pause(2 * time.Second), fsRecoveryMargin},
			{"proxy reset 1s", r.proxyReset(time.Second), fsRecoveryMargin},
			{"proxy reset 300ms under 100ms latency", r.slowReset(100*time.Millisecond, 300*time.Millisecond), fsRecoveryMargin},
			{"proxy blackhole 2.5s", r.blackhole(2500 * time.Millisecond), fsRecoveryMargin},
			{"kill -9 holder process", r.killHolder, fsKillMargin},
			{"pause 3s", r.pause(3 * time.Second), fsRecoveryMargin},
			{"kill -9 redis, restart empty", r.restart(0, true), fsRecoveryMargin},
		})
		r.finish()
	})
	t.Run("aof", func(t *testing.T) {
		r := fsStart(t, procs, true)
		r.loop(soak/3, []fsFault{
			{"kill -9 redis, restart from AOF", r.restart(0, false), fsRecoveryMargin},
			{"kill -9 redis, 2s down, restart from AOF", r.restart(2*time.Second, false), fsRecoveryMargin},
			{"pause 2s", r.pause(2 * time.Second), fsRecoveryMargin},
		})
		r.finish()
	})
}

// fsStart starts the servers of a phase and its children, and waits until every name has been locked.
func fsStart(t *testing.T, procs int, aof bool) *fsRun {
	witness := redistest.Start(t)
	var opts []redistest.Option
	if aof {
		opts = append(opts, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	}
	lockSrv := redistest.Start(t, opts...)
	px := redistest.NewProxy(t, lockSrv.Addr())
	t.Cleanup(func() { px.Unstall(); px.Enable() })
	base := "fs:" + t.Name() + ":"
	r := &fsRun{
		t: t, prefix: base + "w:", witness: witness, wc: witness.Client(t), lockSrv: lockSrv, px: px,
		children: make(map[string]*fsProc), faults: make(map[string]int),
		recovery: make(map[string]time.Duration), killed: make(map[string]bool), killedAt: make(map[string]int64), deadHolds: make(map[string]bool),
		names: []fsName{
			{Name: base + "plain:0", Kind: fsPlain, Writers: 2},
			{Name: base + "plain:1", Kind: fsPlain, Writers: 2},
			// One goroutine per child: often free, so that a fault is likely to catch an acquisition
			// in flight.
			{Name: base + "plain:2", Kind: fsPlain, Writers: 1},
			{Name: base + "fair:0", Kind: fsFair, Writers: 4},
			{Name: base + "rw:0", Kind: fsRW, Writers: 2, Readers: 1},
		},
	}
	t.Cleanup(r.killAll)
	for i := range procs {
		r.spawn(i%2 == 1)
	}
	r.waitReady(procs)
	r.startProbes()
	start := time.Now()
	r.markEnd(start)
	r.waitUsable("start", start, 0, 20*time.Second)
	return r
}

// spawn starts a child, reaching Redis through the proxy or directly.
func (r *fsRun) spawn(proxied bool) {
	t := r.t
	id := "c" + strconv.Itoa(r.nextID)
	r.nextID++
	addr := r.lockSrv.Addr()
	if proxied {
		addr = r.px.Addr()
	}
	cfg, _ := json.Marshal(fsChildConfig{
		ID: id, LockAddr: addr, WitnessAddr: r.witness.Addr(), Prefix: r.prefix, Names: r.names,
		Watchdog: fsWatchdog, FairWindow: fsFairWindow, StopRelease: fsStopRelease, MaxRun: time.Hour,
		FailFast: proxied,
	})
	p := &fsProc{id: id, proxied: proxied, out: serverproc.NewOutput(16 << 10), done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestFaultSuiteChild$", "-test.count=1", "-test.timeout=2h")
	p.cmd.Env = append(os.Environ(), faultSuiteChildEnv+"="+string(cfg), faultSuiteSoakEnv+"=")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = fsSysProcAttr()
	p.cmd.WaitDelay = time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting child %s: %v", id, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	r.children[id] = p
}

// killAll kills the children still running (a cleanup, for a test that failed half way).
func (r *fsRun) killAll() {
	for _, p := range r.children {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// waitReady waits until n more children have their coordinator and workers running.
func (r *fsRun) waitReady(n int) {
	t := r.t
	for range n {
		if err := r.wc.BLPop(t.Context(), 60*time.Second, fsReadyKey(r.prefix)).Err(); err != nil {
			t.Fatalf("waiting for a child to be ready: %v\n%s", err, r.outputs())
		}
	}
}

// bound is how long the name may stay unusable after a fault ends.
func (r *fsRun) bound(n fsName, margin time.Duration) time.Duration {
	if n.Kind == fsFair {
		return fsWatchdog + fsFairWindow + margin
	}
	return fsWatchdog + margin
}

// markEnd records the end of a fault on the witness: from then on, it keeps the time of each name's
// first entry.
func (r *fsRun) markEnd(end time.Time) {
	ctx := r.t.Context()
	for _, n := range r.names {
		if err := r.wc.Set(ctx, fsSinceKey(r.prefix, n.Name), end.UnixMilli(), 0).Err(); err != nil {
			r.t.Fatalf("witness SET: %v", err)
		}
		r.wc.Del(ctx, fsFirstKey(r.prefix, n.Name))
	}
}

// waitUsable waits until every name has been entered after end (see markEnd), and records the time it
// took the slowest one under fault. A name not entered within its bound fails the test (assertion c);
// the wait goes on up to limit so that the report says how long it really took.
func (r *fsRun) waitUsable(fault string, end time.Time, margin, limit time.Duration) {
	t := r.t
	endMS := end.UnixMilli()
	first := make(map[string]int64)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	stop := time.NewTimer(time.Until(end.Add(limit)))
	defer stop.Stop()
	for len(first) < len(r.names) {
		for _, n := range r.names {
			if _, ok := first[n.Name]; ok {
				continue
			}
			v, err := r.wc.Get(t.Context(), fsFirstKey(r.prefix, n.Name)).Int64()
			if err != nil && err != redis.Nil {
				t.Fatalf("witness GET: %v", err)
			}
			if v > 0 {
				first[n.Name] = v
			}
		}
		if len(first) == len(r.names) {
			break
		}
		select {
		case <-tick.C:
		case <-stop.C:
			for _, n := range r.names {
				if _, ok := first[n.Name]; !ok {
					t.Errorf("(c) recovery: after %q, %s (%s) was not locked again within %v (bound %v)\n%s",
						fault, n.Name, n.Kind, limit, r.bound(n, margin), r.outputs())
				}
			}
			return
		}
	}
	if fault == "start" {
		return
	}
	worst := time.Duration(0)
	for _, n := range r.names {
		took := time.Duration(first[n.Name]-endMS) * time.Millisecond
		worst = max(worst, took)
		if took > r.bound(n, margin) {
			t.Errorf("(c) recovery: after %q, %s (%s) was not locked again for %v; bound one lease (+ fair window) + margin = %v: issue 14 #2, #5, #6",
				fault, n.Name, n.Kind, took, r.bound(n, margin))
		}
	}
	r.recovery[fault] = max(r.recovery[fault], worst)
	t.Logf("after %q every name was locked again within %v", fault, worst)
}

// loop injects the faults one after the other, each once, or over and over for soak.
func (r *fsRun) loop(soak time.Duration, faults []fsFault) {
	start := time.Now()
	for round := 0; round == 0 || time.Since(start) < soak; round++ {
		for _, f := range faults {
			// Some load between faults: every name taken again a few times.
			r.steady()
			start := time.Now()
			end := f.inject()
			r.timeline = append(r.timeline, fsSpan{f.name, start.UnixMilli(), end.UnixMilli()})
			r.faults[f.name]++
			r.waitUsable(f.name, end, f.margin, 30*time.Second)
		}
	}
}

// steady waits until the children have made 40 more acquisitions.
func (r *fsRun) steady() {
	t := r.t
	from := r.entries()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for r.entries() < from+40 {
		if time.Now().After(deadline) {
			t.Errorf("the children made fewer than 40 acquisitions in 20s of calm\n%s", r.outputs())
			return
		}
		<-tick.C
	}
}

func (r *fsRun) entries() int64 {
	stats, err := r.wc.HGetAll(r.t.Context(), fsStatsKey(r.prefix)).Result()
	if err != nil {
		r.t.Fatalf("witness HGETALL: %v", err)
	}
	var n int64
	for k, v := range stats {
		if strings.HasPrefix(k, "entries:") {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
	}
	return n
}

// ended marks the end of a fault now, and returns it.
func (r *fsRun) ended() time.Time {
	end := time.Now()
	r.markEnd(end)
	return end
}

// hold keeps the fault on for d.
func hold(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	<-timer.C
}

func (r *fsRun) pause(d time.Duration) func() time.Time {
	return func() time.Time {
		check := r.probeInFlight(d)
		r.lockSrv.Pause()
		hold(d)
		r.lockSrv.Resume()
		end := r.ended()
		check()
		return end
	}
}

func (r *fsRun) proxyReset(d time.Duration) func() time.Time {
	return func() time.Time {
		r.waitInside(r.proxiedChild(), "")
		r.px.Disable()
		hold(d)
		r.px.Enable()
		return r.ended()
	}
}

// slowReset slows the proxy down by latency each way, so that the calls of the proxied children are in
// flight most of the time, then resets every connection: calls in flight, releases among them, fail
// with EOF. The reset is shorter than a lease, so that a hold whose release failed is still there when
// the proxy is up again.
func (r *fsRun) slowReset(latency, d time.Duration) func() time.Time {
	return func() time.Time {
		cut, check := r.probeCutRelease()
		r.px.AddLatency(latency)
		hold(5 * latency)
		r.px.Disable()
		r.px.RemoveLatency()
		start := time.Now()
		cut()
		hold(d - time.Since(start))
		r.px.Enable()
		end := r.ended()
		check()
		return end
	}
}

func (r *fsRun) blackhole(d time.Duration) func() time.Time {
	return func() time.Time {
		r.waitInside(r.proxiedChild(), "")
		r.px.Stall()
		hold(d)
		r.px.Unstall()
		return r.ended()
	}
}

// restart kills redis-server with SIGKILL, keeps it down for down, and restarts it. Without AOF every
// key is lost: the witness then forgets the highest token of every name, since the token counters are
// gone too, and the loss is recorded to judge overlaps.
func (r *fsRun) restart(down time.Duration, volatile bool) func() time.Time {
	return func() time.Time {
		t := r.t
		r.lockSrv.Kill()
		if volatile {
			r.losses = append(r.losses, time.Now().UnixMilli())
			for _, n := range r.names {
				if err := r.wc.Del(t.Context(), fsMaxTokKey(r.prefix, n.Name)).Err(); err != nil {
					t.Fatalf("witness DEL: %v", err)
				}
			}
		}
		if down > 0 {
			start := time.Now()
			r.probeTryWhileDown(down / 5)
			hold(down - time.Since(start))
		}
		r.lockSrv.Restart(t)
		return r.ended()
	}
}

// killHolder kills, with SIGKILL, a child that is inside a critical section (so it holds a lock), and
// starts another in its place. Its holds stay in Redis until their lease runs out: the names must be
// usable again within one lease of the kill. The victim's entries are taken off the witness.
func (r *fsRun) killHolder() time.Time {
	t := r.t
	var victim *fsProc
	for _, p := range r.children {
		if !p.killed && !p.proxied {
			victim = p
			break
		}
	}
	if victim == nil {
		t.Fatal("no child to kill")
	}
	// Inside the fair lock, so that its other fair goroutines are likely queued: dead waiters in the
	// fair queue must not hold up the live ones for more than about one wait window.
	r.waitInside(victim, fsFair)
	_ = victim.cmd.Process.Kill()
	killed := r.ended()
	victim.killed = true
	r.killed[victim.id] = true
	r.killedAt[victim.id] = killed.UnixMilli()
	<-victim.done
	for _, n := range r.names {
		inside, err := r.wc.HGetAll(t.Context(), fsInsideKey(r.prefix, n.Name)).Result()
		if err != nil {
			t.Fatalf("witness HGETALL: %v", err)
		}
		for hold := range inside {
			if strings.HasPrefix(hold, victim.id+"/") {
				r.deadHolds[hold] = true
				r.wc.HDel(t.Context(), fsInsideKey(r.prefix, n.Name), hold)
			}
		}
	}
	r.spawn(false)
	r.waitReady(1)
	return killed
}

// proxiedChild returns a live child that reaches Redis through the proxy.
func (r *fsRun) proxiedChild() *fsProc {
	for _, p := range r.children {
		if !p.killed && p.proxied {
			return p
		}
	}
	r.t.Fatal("no proxied child")
	return nil
}

// waitInside waits until the child p is inside a critical section (of a name of that kind, if kind is
// not empty), so that a fault then hits a holder.
func (r *fsRun) waitInside(p *fsProc, kind string) {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !r.inside(p.id, kind) {
		if time.Now().After(deadline) {
			r.t.Fatalf("child %s was not inside a critical section within 10s", p.id)
		}
		<-tick.C
	}
}

// inside reports whether the child id is inside a critical section of some name of kind ("" for any).
func (r *fsRun) inside(id, kind string) bool {
	for _, n := range r.names {
		if kind != "" && n.Kind != kind {
			continue
		}
		inside, err := r.wc.HKeys(r.t.Context(), fsInsideKey(r.prefix, n.Name)).Result()
		if err != nil {
			r.t.Fatalf("witness HKEYS: %v", err)
		}
		if slices.ContainsFunc(inside, func(h string) bool { return strings.HasPrefix(h, id+"/") }) {
			return true
		}
	}
	return false
}

func (r *fsRun) outputs() string {
	var b strings.Builder
	ids := make([]string, 0, len(r.children))
	for id := range r.children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if out := strings.TrimSpace(r.children[id].out.String()); out != "" {
			fmt.Fprintf(&b, "--- child %s output (tail) ---\n%s\n", id, out)
		}
	}
	return b.String()
}

// fsRecord is an entry of the witness's events list.
type fsRecord struct {
	Type    string    `json:"type"`
	Name    string    `json:"name"`
	At      int64     `json:"at"`
	Entrant fsEntry   `json:"entrant"`
	Others  []fsEntry `json:"others"`
	Max     fsEntry   `json:"max"`
	Hold    string    `json:"hold"`
	Acq     int64     `json:"acq"`
	Want    int64     `json:"want"`
	Got     int64     `json:"got"`
	Detail  string    `json:"detail"`
}

// fsEntry is a hold as the witness saw it enter.
type fsEntry struct {
	Hold  string `json:"hold"`
	Mode  string `json:"mode"`
	Token int64  `json:"token,string"`
	Acq   int64  `json:"acq"`
	Child string `json:"child"`
}

// acrossLoss reports whether a data loss happened between the acquisitions at before and after (ms).
func (r *fsRun) acrossLoss(before, after int64) bool {
	return slices.ContainsFunc(r.losses, func(l int64) bool { return before < l && l <= after })
}

// finish stops the children, then judges what the witness recorded and reports the figures.
func (r *fsRun) finish() {
	t := r.t
	ctx := t.Context()
	for id, p := range r.children {
		if !p.killed {
			r.wc.RPush(ctx, fsStopKey(r.prefix, id), "stop")
		}
	}
	for id, p := range r.children {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Errorf("child %s did not exit within 30s of being told to stop\n%s", id, p.out.String())
			continue
		}
		if !p.killed && p.err != nil {
			t.Errorf("child %s failed: %v\n%s", id, p.err, p.out.String())
		}
	}

	reports, err := r.wc.HGetAll(ctx, fsReportKey(r.prefix)).Result()
	if err != nil {
		t.Fatalf("witness HGETALL: %v", err)
	}
	var closeMax time.Duration
	for id, p := range r.children {
		if p.killed {
			continue
		}
		var rep fsChildReport
		if err := json.Unmarshal([]byte(reports[id]), &rep); err != nil {
			t.Errorf("(e) child %s left no report: %v", id, err)
			continue
		}
		if rep.Stuck != "" {
			t.Errorf("(e) child %s: %s", id, rep.Stuck)
		}
		if rep.Leak != "" {
			t.Errorf("(e) child %s leaked goroutines after Close:\n%s", id, rep.Leak)
		}
		closeTook := time.Duration(rep.CloseMS) * time.Millisecond
		closeMax = max(closeMax, closeTook)
		if limit := 2*fsStopRelease + fsCloseMargin; closeTook > limit {
			t.Errorf("(e) child %s: Close took %v, more than twice the stop release timeout + margin, %v", id, closeTook, limit)
		}
	}

	flagged, err := r.wc.HGetAll(ctx, fsFlaggedKey(r.prefix)).Result()
	if err != nil {
		t.Fatalf("witness HGETALL: %v", err)
	}
	outcome := func(hold string) (fsOutcome, bool) {
		var o fsOutcome
		raw, ok := flagged[hold]
		if ok {
			_ = json.Unmarshal([]byte(raw), &o)
		}
		return o, ok
	}
	raw, err := r.wc.LRange(ctx, fsEventsKey(r.prefix), 0, -1).Result()
	if err != nil {
		t.Fatalf("witness LRANGE: %v", err)
	}
	var (
		signalled, inherent, deadInherent, inherentRegressions, inherentLostUpdates int
		violations                                                                  = make(map[string][]string)
	)
	allowed := make(map[string]bool) // holds in allowed overlaps
	var lostUpdates, regressions []fsRecord
	for _, js := range raw {
		var rec fsRecord
		if err := json.Unmarshal([]byte(js), &rec); err != nil {
			t.Fatalf("witness record %s: %v", js, err)
		}
		switch rec.Type {
		case "overlap":
			e := rec.Entrant
			for _, o := range rec.Others {
				// Only the hold a child was inside when it was killed is judged apart: its outcome died
				// with it. Every other hold of a child killed later ran to its end and reported it, and
				// is judged as any other (skipping them all, as this once did, left the data-loss
				// overlaps of such holds unexplained, so their lost updates counted as violations).
				if r.deadHolds[o.Hold] {
					if r.acrossLoss(o.Acq, e.Acq) {
						deadInherent++ // whether it was told died with it
						continue
					}
					violations["overlap"] = append(violations["overlap"], fmt.Sprintf(
						"%s: %s (%s, token %d, Lock returned at %d) entered while %s (%s, token %d, Lock returned at %d) was inside; its process was killed inside (at %d)",
						rec.Name, e.Hold, e.Mode, e.Token, e.Acq, o.Hold, o.Mode, o.Token, o.Acq, r.killedAt[o.Child]))
					continue
				}
				out, told := outcome(o.Hold)
				switch {
				case r.acrossLoss(o.Acq, e.Acq):
					if !told || (out.DoneAt == 0 && out.Unlock != "notheld") {
						violations["overlap"] = append(violations["overlap"], fmt.Sprintf(
							"%s: %s (acquired before Redis lost its data) was never told it lost the lock that %s took after (outcome %+v)",
							rec.Name, o.Hold, e.Hold, out))
						continue
					}
					inherent++
				case told && out.DoneAt > 0 && out.DoneAt <= e.Acq:
					signalled++
				default:
					violations["overlap"] = append(violations["overlap"], fmt.Sprintf(
						"%s: %s (%s, token %d, Lock returned at %d) entered while %s (%s, token %d, Lock returned at %d) was inside, and its Done had not closed first (outcome %+v, found %v)",
						rec.Name, e.Hold, e.Mode, e.Token, e.Acq, o.Hold, o.Mode, o.Token, o.Acq, out, told))
					continue
				}
				allowed[o.Hold], allowed[e.Hold] = true, true
			}
		case "regression":
			if r.acrossLoss(rec.Max.Acq, rec.Entrant.Acq) {
				inherentRegressions++
				continue
			}
			regressions = append(regressions, rec)
		case "lostupdate":
			lostUpdates = append(lostUpdates, rec)
		default:
			violations[rec.Type] = append(violations[rec.Type], fmt.Sprintf("%s %s: %s", rec.Name, rec.Hold, rec.Detail))
		}
	}
	var (
		log     *fsLog
		details []string
		shown   = make(map[string]int)
	)
	detail := func(typ string, f func() string) {
		if shown[typ] >= 5 {
			return
		}
		shown[typ]++
		if log == nil {
			log = r.readLog()
		}
		details = append(details, f())
	}
	for _, rec := range lostUpdates {
		if allowed[rec.Hold] {
			inherentLostUpdates++
			continue
		}
		msg := fmt.Sprintf("%s: %s read the counter at %d on entry and found %d on leaving", rec.Name, rec.Hold, rec.Want, rec.Got)
		violations["lostupdate"] = append(violations["lostupdate"], msg)
		detail("lostupdate", func() string { return "    " + msg + "\n" + r.explainLostUpdate(log, rec.Name, rec.Hold, allowed) })
	}
	for _, rec := range regressions {
		msg := fmt.Sprintf("%s: %s got token %d, not above %d (%s, taken at %d)", rec.Name, rec.Entrant.Hold, rec.Entrant.Token, rec.Max.Token, cmp.Or(rec.Max.Hold, "?"), rec.Max.Acq)
		violations["regression"] = append(violations["regression"], msg)
		detail("regression", func() string {
			return "    " + msg + "\n" + r.explainRegression(log, rec.Name, rec.Entrant.Hold, rec.Max.Hold, fmt.Sprint(rec.Max.Token), allowed)
		})
	}

	stats, err := r.wc.HGetAll(ctx, fsStatsKey(r.prefix)).Result()
	if err != nil {
		t.Fatalf("witness HGETALL: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fault suite %s: %d processes (%d killed), %d lock names\n", t.Name(), len(r.children), len(r.killed), len(r.names))
	fmt.Fprintf(&b, "  acquisitions: plain %s, fair %s, write %s, read %s\n",
		stat(stats, "entries:plain"), stat(stats, "entries:fair"), stat(stats, "entries:write"), stat(stats, "entries:read"))
	fmt.Fprintf(&b, "  waits: timed out %s, TryLock false %s, Redis errors %s; unlocks: ok %s, not held %s, failed %s\n",
		stat(stats, "lock:timeout"), stat(stats, "lock:notobtained"), stat(stats, "lock:error"),
		stat(stats, "unlock:ok"), stat(stats, "unlock:notheld"), stat(stats, "unlock:error"))
	fmt.Fprintf(&b, "  faults:")
	for _, f := range slices.Sorted(maps.Keys(r.faults)) {
		fmt.Fprintf(&b, " [%s] x%d, worst recovery %v;", f, r.faults[f], r.recovery[f])
	}
	fmt.Fprintf(&b, "\n  overlaps: %d signalled by Done first, %d inherent to data loss (earlier holder told; %d more whose earlier holder was killed inside), %d violating\n",
		signalled, inherent, deadInherent, len(violations["overlap"]))
	fmt.Fprintf(&b, "  token regressions: %d inherent, %d violating; lost updates: %d inherent, %d violating\n",
		inherentRegressions, len(violations["regression"]), inherentLostUpdates, len(violations["lostupdate"]))
	fmt.Fprintf(&b, "  lost holds reported as success: %d; late returns: %d; leaked holds after a failed Unlock: %d; TryLock (false, nil) while Redis was down: %d; worst Close %v",
		len(violations["lostsuccess"]), len(violations["late"]), len(violations["leakedhold"]), len(violations["trydown"]), closeMax)
	t.Log(b.String())
	if len(details) > 0 {
		t.Logf("the witness's log around the first violations (=> the hold in question; times in ms):\n%s", strings.Join(details, ""))
	}

	// Which defect of issue 14 each kind of failure points to, to read a failing run quickly.
	hint := map[string]string{
		"lostsuccess": "(a) success returned for a lost hold: issue 14 #1",
		"overlap":     "(b) overlap Done did not signal first: issue 14 #1, #7 (Done's margin), #8",
		"regression":  "(b) fencing token regression: issue 14 #1, #7",
		"lostupdate":  "(b) lost update: issue 14 #1, #7",
		"late":        "(d) returned after its deadline",
		"leakedhold":  "(c) hold still renewed after a failed Unlock: issue 14 #2",
		"trydown":     "TryLock with a wait returned (false, nil) while Redis was down: issue 14 #3",
		"witness":     "witness call failed",
	}
	for _, typ := range slices.Sorted(maps.Keys(violations)) {
		list := violations[typ]
		shown := list[:min(len(list), 10)]
		t.Errorf("%s: %d times, e.g.\n  %s", cmp.Or(hint[typ], typ), len(list), strings.Join(shown, "\n  "))
	}
}

func stat(stats map[string]string, k string) string { return cmp.Or(stats[k], "0") }
