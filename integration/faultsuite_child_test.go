package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/coordinator"
)

// This file is the child process of the fault suite (see faultsuite_test.go): TestFaultSuiteChild runs
// only when the parent re-executes the test binary with faultSuiteChildEnv set. It runs one
// coordinator with several goroutines per lock name, and checks every critical section on the witness
// redis-server, which the parent never faults.

// faultSuiteChildEnv names the environment variable that carries a child's configuration, as JSON.
const faultSuiteChildEnv = "LOCKWARDEN_FAULTSUITE_CHILD"

// Lock kinds of the suite's names.
const (
	fsPlain = "plain"
	fsFair  = "fair"
	fsRW    = "rw"
)

// fsName is one lock name of the suite and how many goroutines of each child use it.
type fsName struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Writers int    `json:"writers"` // plain and fair: lockers; rw: writers
	Readers int    `json:"readers"` // rw only
}

// fsChildConfig is what the parent tells a child.
type fsChildConfig struct {
	ID          string        `json:"id"`
	LockAddr    string        `json:"lock_addr"`
	WitnessAddr string        `json:"witness_addr"`
	Prefix      string        `json:"prefix"` // of every witness key of the phase
	Names       []fsName      `json:"names"`
	Watchdog    time.Duration `json:"watchdog"`
	FairWindow  time.Duration `json:"fair_window"`
	StopRelease time.Duration `json:"stop_release"`
	MaxRun      time.Duration `json:"max_run"` // a child that is never told to stop stops after this
	// FailFast makes the child's client give up at the first network error (no retries), so that the
	// coordinator sees the failures of a cut connection.
	FailFast bool `json:"fail_fast"`
}

// Margins of the child's own checks.
const (
	// fsLateMargin is how late a Lock, TryLock or Unlock may return after its deadline.
	fsLateMargin = 500 * time.Millisecond
	// fsLeakMargin is how long after one lease a hold whose Unlock failed may keep its Done open.
	fsLeakMargin = time.Second
	// fsLeaveAllowance is how long past its Wait a TryLock's ctx lets it leave the queue.
	fsLeaveAllowance = time.Second
)

// Witness key names. Every key of one phase starts with the phase's prefix.
func fsInsideKey(p, name string) string  { return p + "inside:" + name }
func fsMaxTokKey(p, name string) string  { return p + "maxtok:" + name }
func fsCounterKey(p, name string) string { return p + "counter:" + name }
func fsFirstKey(p, name string) string   { return p + "first:" + name }
func fsSinceKey(p, name string) string   { return p + "since:" + name }
func fsEventsKey(p string) string        { return p + "events" }
func fsStatsKey(p string) string         { return p + "stats" }
func fsFlaggedKey(p string) string       { return p + "flagged" }
func fsReadyKey(p string) string         { return p + "ready" }
func fsReportKey(p string) string        { return p + "report" }
func fsStopKey(p, child string) string   { return p + "stop:" + child }
func fsLogKey(p string) string           { return p + "log" }
func fsLeftKey(p string) string          { return p + "left" }

// fsEnter records that a hold enters its critical section. It flags as an overlap every conflicting
// hold already inside (any hold for a writer; a writer for a reader), and as a regression a write
// token not above the highest seen for the name; it records the entry time (the witness's clock) and
// returns the shared counter's value.
//
// KEYS[1] inside hash (hold id -> JSON), KEYS[2] highest token (JSON {token, acq}), KEYS[3] counter,
// KEYS[4] time of the first entry after KEYS[7], KEYS[5] events list, KEYS[6] stats hash, KEYS[7] the
// end of the latest fault (ms), set by the parent, KEYS[8] the log of entries and leaves (for the
// parent's report on a violation).
// ARGV[1] hold id, ARGV[2] mode (w or r), ARGV[3] token, ARGV[4] time Lock returned (ms), ARGV[5]
// child id, ARGV[6] lock name, ARGV[7] kind.
var fsEnter = redis.NewScript(`
local prev = redis.call('HGET', KEYS[1], ARGV[1])
if prev then
	-- A call that go-redis ran again (its reply was lost): the hold entered already, and must not
	-- overlap with itself nor count its token twice.
	return cjson.decode(prev).c
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = tonumber(redis.call('GET', KEYS[7]) or '0')
if now > since then redis.call('SET', KEYS[4], now, 'NX') end
redis.call('HINCRBY', KEYS[6], 'entries:' .. ARGV[7], 1)
-- Tokens stay strings in the JSON: cjson writes numbers with 14 digits, and tokens have 16.
local me = {hold = ARGV[1], mode = ARGV[2], token = ARGV[3], acq = tonumber(ARGV[4]),
	child = ARGV[5], entered = now}
local others = {}
local inside = redis.call('HGETALL', KEYS[1])
for i = 1, #inside, 2 do
	local v = cjson.decode(inside[i + 1])
	if ARGV[2] == 'w' or v.mode == 'w' then
		v.overlapped = true
		redis.call('HSET', KEYS[1], inside[i], cjson.encode(v))
		table.insert(others, v)
	end
end
if #others > 0 then
	redis.call('HINCRBY', KEYS[6], 'overlap', 1)
	redis.call('RPUSH', KEYS[5], cjson.encode({type = 'overlap', name = ARGV[6], at = now, entrant = me, others = others}))
end
if ARGV[2] == 'w' and tonumber(me.token) > 0 then
	local raw = redis.call('GET', KEYS[2])
	local mx = {token = '0', acq = 0}
	if raw then mx = cjson.decode(raw) end
	if tonumber(me.token) <= tonumber(mx.token) then
		redis.call('HINCRBY', KEYS[6], 'regression', 1)
		redis.call('RPUSH', KEYS[5], cjson.encode({type = 'regression', name = ARGV[6], at = now, entrant = me, max = mx}))
	else
		redis.call('SET', KEYS[2], cjson.encode({token = me.token, acq = me.acq, hold = me.hold}))
	end
end
local c = tonumber(redis.call('GET', KEYS[3]) or '0')
me.c = c
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(me))
redis.call('RPUSH', KEYS[8], cjson.encode({ev = 'in', name = ARGV[6], hold = ARGV[1], mode = ARGV[2],
	token = ARGV[3], acq = tonumber(ARGV[4]), t = now, c = c}))
return c
`)

// fsLeave records that a hold leaves its critical section. A writer checks that the shared counter
// still has the value it read on entry (else an update was lost) and increments it. It returns 1 when
// another hold entered while this one was inside (the parent then wants the hold's outcome).
//
// KEYS[1] inside hash, KEYS[2] counter, KEYS[3] events list, KEYS[4] stats hash, KEYS[5] log, KEYS[6]
// the holds that left (hold id -> what the call returned), so that a call run again answers the same.
// ARGV[1] hold id, ARGV[2] mode, ARGV[3] counter value read on entry, ARGV[4] lock name, ARGV[5] time
// Lock returned (ms), ARGV[6] when the holder saw Done close (ms), 0 if it did not.
var fsLeave = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
	-- A call that go-redis ran again (its reply was lost): the hold left already, and must not
	-- increment the counter twice. (Only a hold inside at its process's kill is taken off by the
	-- parent, and it never leaves.)
	return tonumber(redis.call('HGET', KEYS[6], ARGV[1]) or '0')
end
redis.call('HDEL', KEYS[1], ARGV[1])
local flagged = 0
if raw and cjson.decode(raw).overlapped then flagged = 1 end
if ARGV[2] == 'w' then
	local c = tonumber(redis.call('GET', KEYS[2]) or '0')
	if c ~= tonumber(ARGV[3]) then
		redis.call('HINCRBY', KEYS[4], 'lostupdate', 1)
		redis.call('RPUSH', KEYS[3], cjson.encode({type = 'lostupdate', name = ARGV[4], hold = ARGV[1],
			acq = tonumber(ARGV[5]), want = tonumber(ARGV[3]), got = c}))
	end
	redis.call('SET', KEYS[2], c + 1)
	redis.call('RPUSH', KEYS[5], cjson.encode({ev = 'out', name = ARGV[4], hold = ARGV[1], mode = ARGV[2],
		acq = tonumber(ARGV[5]), t = now, c = c, done = tonumber(ARGV[6])}))
else
	redis.call('RPUSH', KEYS[5], cjson.encode({ev = 'out', name = ARGV[4], hold = ARGV[1], mode = ARGV[2],
		acq = tonumber(ARGV[5]), t = now, done = tonumber(ARGV[6])}))
end
redis.call('HSET', KEYS[6], ARGV[1], flagged)
return flagged
`)

// fsOutcome is how a hold that another hold overlapped ended, as the parent needs it to judge the
// overlap.
type fsOutcome struct {
	// DoneAt is when the holder saw Done closed (ms), 0 if it did not during its critical section.
	DoneAt int64 `json:"done_at"`
	// Unlock is what Unlock returned: "ok", "notheld" or the error.
	Unlock string `json:"unlock"`
}

// fsLogEntry is an entry of the witness's log: a hold entering ("in") or leaving ("out") its critical
// section, on the witness's clock, with the counter it read (and, leaving, incremented); or what its
// Unlock returned ("unlock", on the child's clock).
type fsLogEntry struct {
	Ev     string `json:"ev"`
	Name   string `json:"name"`
	Hold   string `json:"hold"`
	Mode   string `json:"mode,omitempty"`
	Token  string `json:"token,omitempty"`
	Acq    int64  `json:"acq,omitempty"`
	T      int64  `json:"t"`
	C      *int64 `json:"c,omitempty"`
	Done   int64  `json:"done,omitempty"`
	Unlock string `json:"unlock,omitempty"`
}

// fsViolation is a failed check made by a child, pushed to the events list.
type fsViolation struct {
	Type   string `json:"type"` // lostsuccess, late, leakedhold
	Name   string `json:"name"`
	Hold   string `json:"hold"`
	Detail string `json:"detail"`
	At     int64  `json:"at"`
}

// fsChildReport is what a child that was told to stop reports before it exits.
type fsChildReport struct {
	CloseMS int64  `json:"close_ms"`
	Leak    string `json:"leak,omitempty"`
	Stuck   string `json:"stuck,omitempty"`
}

// TestFaultSuiteChild is a child process of TestFaultSuite; run by itself, it does nothing.
func TestFaultSuiteChild(t *testing.T) {
	raw := os.Getenv(faultSuiteChildEnv)
	if raw == "" {
		t.Skip("runs only as a child process of TestFaultSuite")
	}
	var cfg fsChildConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("%s: %v", faultSuiteChildEnv, err)
	}
	witness := redis.NewClient(&redis.Options{Addr: cfg.WitnessAddr})
	defer witness.Close()
	if err := witness.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("witness PING: %v", err)
	}
	ignore := goleak.IgnoreCurrent()

	lockOpts := &redis.Options{
		Addr: cfg.LockAddr, ContextTimeoutEnabled: true,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
	}
	if cfg.FailFast {
		lockOpts.MaxRetries, lockOpts.DialerRetries = -1, 1
	}
	lockClient := redis.NewClient(lockOpts)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	c, err := coordinator.New(lockClient,
		coordinator.WithWatchdogTimeout(cfg.Watchdog),
		coordinator.WithFairWaitWindow(cfg.FairWindow),
		coordinator.WithStopReleaseTimeout(cfg.StopRelease),
		coordinator.WithLogger(logger))
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	ch := &fsChild{cfg: cfg, c: c, w: witness}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	n := 0
	for _, nm := range cfg.Names {
		for i := range nm.Writers + nm.Readers {
			mode, id := "w", n
			if i >= nm.Writers {
				mode = "r"
			}
			n++
			wg.Go(func() { ch.worker(ctx, nm, mode, id) })
		}
	}
	if err := witness.RPush(context.Background(), fsReadyKey(cfg.Prefix), cfg.ID).Err(); err != nil {
		t.Fatalf("witness RPUSH ready: %v", err)
	}
	// Run until the parent says stop (or MaxRun passes, should the parent be gone).
	_ = witness.BLPop(context.Background(), cfg.MaxRun, fsStopKey(cfg.Prefix, cfg.ID)).Err()
	cancel()

	var report fsChildReport
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		report.Stuck = "workers still running 10s after they were told to stop"
	}
	start := time.Now()
	_ = c.Close()
	report.CloseMS = time.Since(start).Milliseconds()
	_ = lockClient.Close()
	if report.Stuck == "" {
		if err := goleak.Find(ignore); err != nil {
			report.Leak = err.Error()
		}
	}
	js, _ := json.Marshal(report)
	if err := witness.HSet(context.Background(), fsReportKey(cfg.Prefix), cfg.ID, js).Err(); err != nil {
		t.Fatalf("witness HSET report: %v", err)
	}
}

// fsChild is the state of a child process.
type fsChild struct {
	cfg fsChildConfig
	c   *coordinator.Coordinator
	w   *redis.Client
}

// violation records a failed check on the witness.
func (ch *fsChild) violation(typ, name, hold, detail string) {
	js, _ := json.Marshal(fsViolation{Type: typ, Name: name, Hold: hold, Detail: detail, At: time.Now().UnixMilli()})
	p := ch.cfg.Prefix
	pipe := ch.w.Pipeline()
	pipe.RPush(context.Background(), fsEventsKey(p), js)
	pipe.HIncrBy(context.Background(), fsStatsKey(p), typ, 1)
	_, _ = pipe.Exec(context.Background())
}

func (ch *fsChild) count(field string) {
	_ = ch.w.HIncrBy(context.Background(), fsStatsKey(ch.cfg.Prefix), field, 1).Err()
}

// worker takes and releases the lock nm in a loop until ctx ends, as a writer (mode "w": plain and
// fair lockers, rw writers) or a reader (mode "r").
func (ch *fsChild) worker(ctx context.Context, nm fsName, mode string, n int) {
	var m *coordinator.Mutex
	kind := nm.Kind
	switch nm.Kind {
	case fsPlain:
		m = ch.c.Mutex(nm.Name)
	case fsFair:
		m = ch.c.FairMutex(nm.Name)
	case fsRW:
		rw := ch.c.RWMutex(nm.Name)
		if m = rw.Write(); mode == "r" {
			m, kind = rw.Read(), "read"
		} else {
			kind = "write"
		}
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(n)))
	for seq := 0; ctx.Err() == nil; seq++ {
		hold := fmt.Sprintf("%s/%d/%d", ch.cfg.ID, n, seq)
		// Waits longer than a pause, so that some acquisitions are in flight across one.
		wait := 500*time.Millisecond + time.Duration(rnd.Int64N(int64(4*time.Second)))
		deadline := time.Now().Add(wait)
		var err error
		ok, op := true, "Lock"
		if rnd.IntN(3) == 0 {
			// A fair waiter or a writer whose Wait runs out leaves the Redis queue, or withdraws its
			// write intent, before TryLock answers; its ctx bounds that.
			op = "TryLock"
			deadline = deadline.Add(fsLeaveAllowance)
			tctx, cancel := context.WithDeadline(ctx, deadline)
			ok, err = m.TryLock(tctx, coordinator.Wait(wait))
			cancel()
		} else {
			lctx, cancel := context.WithDeadline(ctx, deadline)
			err = m.Lock(lctx)
			cancel()
		}
		returned := time.Now()
		if late := returned.Sub(deadline); late > fsLateMargin {
			ch.violation("late", nm.Name, hold, fmt.Sprintf("%s %s returned %v after its deadline (ok=%v err=%v)",
				kind, op, late, ok, err))
		}
		switch {
		case err == nil && ok:
			ch.critical(m, nm, mode, kind, hold, returned, rnd)
		case err == nil:
			ch.count("lock:notobtained")
		case errors.Is(err, coordinator.ErrNotObtained) && errors.Is(err, context.DeadlineExceeded):
			ch.count("lock:timeout")
		case ctx.Err() != nil:
			return
		default:
			ch.count("lock:error")
			pause := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-pause.C:
			}
			pause.Stop()
		}
	}
}

// critical runs one critical section of a hold Lock just returned, and releases it.
func (ch *fsChild) critical(m *coordinator.Mutex, nm fsName, mode, kind, hold string,
	returned time.Time, rnd *rand.Rand) {
	p, name := ch.cfg.Prefix, nm.Name
	bg := context.Background()
	done, token := m.Done(), m.Token()
	select {
	case <-done:
		ch.violation("lostsuccess", name, hold, fmt.Sprintf("%s Lock returned nil, but Done was already closed (token %d)", kind, token))
	default:
		if token == 0 && mode == "w" {
			ch.count("notoken")
		}
	}
	acq := returned.UnixMilli()
	c0, err := fsEnter.Run(bg, ch.w,
		[]string{fsInsideKey(p, name), fsMaxTokKey(p, name), fsCounterKey(p, name), fsFirstKey(p, name), fsEventsKey(p), fsStatsKey(p),
			fsSinceKey(p, name), fsLogKey(p)},
		hold, mode, token, acq, ch.cfg.ID, name, kind).Int64()
	if err != nil {
		ch.violation("witness", name, hold, "enter: "+err.Error())
		return
	}
	// Mostly a few ms; one hold in 10 lasts long enough to see renewals and faults.
	d := 2*time.Millisecond + time.Duration(rnd.Int64N(int64(8*time.Millisecond)))
	if rnd.IntN(10) == 0 {
		d = 200*time.Millisecond + time.Duration(rnd.Int64N(int64(400*time.Millisecond)))
	}
	var doneAt int64
	work := time.NewTimer(d)
	select {
	case <-done: // a holder that is told it lost the lock stops working at once
		doneAt = time.Now().UnixMilli()
	case <-work.C:
	}
	work.Stop()
	flagged, err := fsLeave.Run(bg, ch.w,
		[]string{fsInsideKey(p, name), fsCounterKey(p, name), fsEventsKey(p), fsStatsKey(p), fsLogKey(p), fsLeftKey(p)},
		hold, mode, c0, name, acq, doneAt).Int64()
	if err != nil {
		ch.violation("witness", name, hold, "leave: "+err.Error())
	}

	uctx, cancel := context.WithTimeout(bg, time.Second)
	udeadline := time.Now().Add(time.Second)
	err = m.Unlock(uctx)
	cancel()
	if late := time.Since(udeadline); late > fsLateMargin {
		ch.violation("late", name, hold, fmt.Sprintf("%s Unlock returned %v after its deadline: %v", kind, late, err))
	}
	unlock := "ok"
	switch {
	case err == nil:
		ch.count("unlock:ok")
	case errors.Is(err, coordinator.ErrNotHeld):
		unlock = "notheld"
		ch.count("unlock:notheld")
	default:
		unlock = err.Error()
		ch.count("unlock:error")
		// A failed Unlock must not leave the hold renewed: the lock frees itself, and Done closes,
		// within one lease.
		leak := time.NewTimer(ch.cfg.Watchdog + fsLeakMargin)
		select {
		case <-done:
			if doneAt == 0 {
				doneAt = time.Now().UnixMilli() // told after all, though after its critical section
			}
		case <-leak.C:
			ch.violation("leakedhold", name, hold, fmt.Sprintf(
				"%s Unlock failed (%v) and Done is still open %v later: the hold is still renewed", kind, err, ch.cfg.Watchdog+fsLeakMargin))
			// A second Unlock must still work; it lets the rest of the run measure the other faults.
			uctx, cancel := context.WithTimeout(bg, time.Second)
			_ = m.Unlock(uctx)
			cancel()
		}
		leak.Stop()
	}
	ulog, _ := json.Marshal(fsLogEntry{Ev: "unlock", Name: name, Hold: hold, T: time.Now().UnixMilli(), Done: doneAt, Unlock: unlock})
	_ = ch.w.RPush(bg, fsLogKey(p), ulog).Err()
	if flagged == 1 {
		js, _ := json.Marshal(fsOutcome{DoneAt: doneAt, Unlock: unlock})
		_ = ch.w.HSet(bg, fsFlaggedKey(p), hold, js).Err()
	}
}
