package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/redisops"
)

// The concurrency tests hammer one lock name from many goroutines and check, from the outside, that the
// lock really excludes: every critical section does a non-atomic read-modify-write (GET, then SET
// value+1) of a Redis counter, which loses updates as soon as two sections overlap, and an atomic
// "inside" gauge must never exceed 1. The counter value read inside a section is the section's position
// in the acquisition order; the fencing tokens must strictly increase in that order.

const (
	// concTestTimeout bounds every Lock and Unlock of a concurrency test, and the test's wait for its
	// workers.
	concTestTimeout = 25 * time.Second
	// concMaxErrors is how many worker errors are kept for the report.
	concMaxErrors = 20
)

// concErrors collects the errors of worker goroutines, which must not fail the test themselves; the
// test goroutine reports them.
type concErrors struct {
	mu    sync.Mutex
	errs  []error
	count int
}

func (e *concErrors) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count++
	if len(e.errs) < concMaxErrors {
		e.errs = append(e.errs, fmt.Errorf(format, args...))
	}
}

// report fails the test with the collected errors, if any.
func (e *concErrors) report(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range e.errs {
		t.Error(err)
	}
	if e.count > 0 {
		t.Fatalf("%d worker errors (%d shown)", e.count, len(e.errs))
	}
}

// concGauge counts the goroutines inside the critical section and remembers the most ever seen at once.
type concGauge struct {
	inside   atomic.Int32
	max      atomic.Int32
	overlaps atomic.Int64
}

func (g *concGauge) enter() {
	n := g.inside.Add(1)
	if n > 1 {
		g.overlaps.Add(1)
	}
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *concGauge) leave() { g.inside.Add(-1) }

func (g *concGauge) check(t *testing.T) {
	t.Helper()
	if m, o := g.max.Load(), g.overlaps.Load(); m != 1 || o != 0 {
		t.Errorf("critical sections overlapped: at most %d goroutines inside at once, %d overlapping entries", m, o)
	}
}

// concBump is the body of a critical section: a deliberately non-atomic increment of the Redis counter
// at key. It returns the value it read, which is the section's position in the acquisition order.
func concBump(ctx context.Context, rdb redis.Cmdable, key string, g *concGauge) (int64, error) {
	g.enter()
	defer g.leave()
	v, err := rdb.Get(ctx, key).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		v = 0
	case err != nil:
		return 0, fmt.Errorf("GET %s: %w", key, err)
	}
	// Widen the window between the read and the write, so that overlapping sections lose updates.
	runtime.Gosched()
	if err := rdb.Set(ctx, key, v+1, 0).Err(); err != nil {
		return 0, fmt.Errorf("SET %s: %w", key, err)
	}
	return v, nil
}

// concHold is one hold of the lock, as seen from inside it.
type concHold struct {
	// order is the counter value read by the hold's first critical section.
	order int64
	// more are the counter values read by further sections of the same hold (re-entry tests).
	more  []int64
	token int64
	coord int
	owner string
}

// concCheckHolds checks that the holds' sections account for every counter value in [0, total) exactly
// once, that the sections of one hold are consecutive (nobody got in between), and that fencing tokens
// strictly increase in acquisition order. It returns the holds sorted by acquisition order.
func concCheckHolds(t *testing.T, holds []concHold, total int) []concHold {
	t.Helper()
	seen := make([]int, total)
	bad := 0
	mark := func(v int64) {
		if v < 0 || v >= int64(total) {
			bad++
			if bad <= concMaxErrors {
				t.Errorf("a critical section read counter value %d, outside [0, %d)", v, total)
			}
			return
		}
		seen[v]++
	}
	for _, h := range holds {
		mark(h.order)
		for i, v := range h.more {
			mark(v)
			if want := h.order + int64(i) + 1; v != want {
				bad++
				if bad <= concMaxErrors {
					t.Errorf("owner %s: section %d of its hold read %d, want %d (someone got in while it held the lock)",
						h.owner, i+2, v, want)
				}
			}
		}
	}
	for v, n := range seen {
		if n != 1 {
			bad++
			if bad <= concMaxErrors {
				t.Errorf("counter value %d was read by %d critical sections, want 1 (lost or duplicated update)", v, n)
			}
		}
	}
	sorted := slices.Clone(holds)
	slices.SortFunc(sorted, func(a, b concHold) int { return int(a.order - b.order) })
	for i, h := range sorted {
		if h.token <= 0 {
			bad++
			if bad <= concMaxErrors {
				t.Errorf("hold at order %d (owner %s) has token %d, want > 0", h.order, h.owner, h.token)
			}
		}
		if i > 0 && h.token <= sorted[i-1].token {
			bad++
			if bad <= concMaxErrors {
				p := sorted[i-1]
				t.Errorf("fencing tokens not strictly increasing in acquisition order: order %d (owner %s, coordinator %d) has token %d, order %d (owner %s, coordinator %d) has token %d",
					p.order, p.owner, p.coord, p.token, h.order, h.owner, h.coord, h.token)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d violations of mutual exclusion or fencing order among %d holds", bad, len(holds))
	}
	return sorted
}

// concCheckCounter checks the final value of the Redis counter.
func concCheckCounter(t *testing.T, rdb redis.Cmdable, key string, want int) {
	t.Helper()
	got, err := rdb.Get(t.Context(), key).Int64()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if got != int64(want) {
		t.Fatalf("counter %s = %d after the run, want %d: updates were lost", key, got, want)
	}
}

// concWorker is one goroutine of a concurrency test.
type concWorker struct {
	m     *coordinator.Mutex
	rdb   redis.Cmdable
	coord int
	// reenter makes each round lock twice and do one critical section per hold level.
	reenter bool
}

// concRun runs every worker for rounds rounds and returns the holds they saw. It fails the test, from the
// test goroutine, on any worker error or if the workers do not finish in time.
func concRun(t *testing.T, workers []concWorker, rounds int, key string, g *concGauge) []concHold {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), concTestTimeout)
	defer cancel()
	var errs concErrors
	var finished atomic.Int64
	results := make(chan []concHold, len(workers))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			holds := make([]concHold, 0, rounds)
			defer func() { results <- holds }()
			for r := range rounds {
				h, err := w.round(ctx, key, g)
				if err != nil {
					errs.add("owner %s (coordinator %d), round %d: %w", w.m.Owner(), w.coord, r, err)
					return
				}
				holds = append(holds, h)
			}
			finished.Add(1)
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(concTestTimeout + 5*time.Second):
		cancel()
		t.Fatalf("workers did not finish within %v: %d of %d finished", concTestTimeout+5*time.Second,
			finished.Load(), len(workers))
	}
	errs.report(t)
	close(results)
	var all []concHold
	for hs := range results {
		all = append(all, hs...)
	}
	return all
}

// round takes the lock (twice when reentering), runs the critical sections and releases it.
func (w concWorker) round(ctx context.Context, key string, g *concGauge) (h concHold, err error) {
	h.coord, h.owner = w.coord, w.m.Owner()
	if err := w.m.Lock(ctx); err != nil {
		return h, fmt.Errorf("Lock: %w", err)
	}
	held := 1
	defer func() {
		// Leave nothing held behind a failed round, so that the other workers can finish and report.
		for ; held > 0; held-- {
			_ = w.m.Unlock(context.WithoutCancel(ctx))
		}
	}()
	first := w.m.Token()
	if w.reenter {
		if err := w.m.Lock(ctx); err != nil {
			return h, fmt.Errorf("re-entrant Lock: %w", err)
		}
		held++
		if n, err := w.m.HoldCount(ctx); err != nil || n != 2 {
			return h, fmt.Errorf("HoldCount after re-entry = %d, %v; want 2", n, err)
		}
	}
	h.token = w.m.Token()
	if w.reenter && h.token <= first {
		return h, fmt.Errorf("re-entry token %d not above the first token %d", h.token, first)
	}
	if h.order, err = concBump(ctx, w.rdb, key, g); err != nil {
		return h, err
	}
	if w.reenter {
		held--
		if err := w.m.Unlock(ctx); err != nil {
			return h, fmt.Errorf("first Unlock of a re-entered lock: %w", err)
		}
		if n, err := w.m.HoldCount(ctx); err != nil || n != 1 {
			return h, fmt.Errorf("HoldCount after the first Unlock = %d, %v; want 1", n, err)
		}
		select {
		case <-w.m.Done():
			return h, errors.New("Done closed after the first of two Unlocks")
		default:
		}
		// Still held: a second section must follow the first immediately in the counter's order.
		v, err := concBump(ctx, w.rdb, key, g)
		if err != nil {
			return h, err
		}
		h.more = append(h.more, v)
	}
	held--
	if err := w.m.Unlock(ctx); err != nil {
		return h, fmt.Errorf("Unlock: %w", err)
	}
	return h, nil
}

// concNames returns a lock name and a counter key unique to the test.
func concNames(t *testing.T) (lock, counter string) {
	return "lockwarden:conc:" + t.Name(), "lockwarden:conc-counter:" + t.Name()
}

// TestConcurrentHandlesOneCoordinator: 16 goroutines x 100 rounds on one coordinator, each goroutine
// with its own handle on the same name.
func TestConcurrentHandlesOneCoordinator(t *testing.T) {
	const goroutines, rounds = 16, 100
	_, client, c := setup(t)
	name, key := concNames(t)
	workers := make([]concWorker, goroutines)
	for i := range workers {
		workers[i] = concWorker{m: c.Mutex(name), rdb: client}
	}
	var g concGauge
	start := time.Now()
	holds := concRun(t, workers, rounds, key, &g)
	t.Logf("%d acquisitions in %v", len(holds), time.Since(start))
	g.check(t)
	concCheckCounter(t, client, key, goroutines*rounds)
	if len(holds) != goroutines*rounds {
		t.Fatalf("%d holds recorded, want %d", len(holds), goroutines*rounds)
	}
	concCheckHolds(t, holds, goroutines*rounds)
	concCheckLockFree(t, client, name)
}

// TestConcurrentCoordinators: 8 coordinators, each with its own go-redis client and connection pool, x 16
// goroutines each, on the same name: the coordinators exclude each other through Redis alone.
func TestConcurrentCoordinators(t *testing.T) {
	const coords, perCoord, rounds = 8, 16, 10
	srv, client, _ := setup(t)
	name, key := concNames(t)
	var workers []concWorker
	for ci := range coords {
		own := srv.Client(t)
		c := newCoordinator(t, own)
		for range perCoord {
			workers = append(workers, concWorker{m: c.Mutex(name), rdb: own, coord: ci})
		}
	}
	var g concGauge
	start := time.Now()
	holds := concRun(t, workers, rounds, key, &g)
	elapsed := time.Since(start)
	g.check(t)
	total := coords * perCoord * rounds
	concCheckCounter(t, client, key, total)
	if len(holds) != total {
		t.Fatalf("%d holds recorded, want %d", len(holds), total)
	}
	sorted := concCheckHolds(t, holds, total)

	perCoordinator := make([]int, coords)
	switches := 0
	for i, h := range sorted {
		perCoordinator[h.coord]++
		if i > 0 && h.coord != sorted[i-1].coord {
			switches++
		}
	}
	t.Logf("%d acquisitions in %v; per coordinator %v; the lock changed coordinator %d times", total, elapsed,
		perCoordinator, switches)
	for ci, n := range perCoordinator {
		if n == 0 {
			t.Errorf("coordinator %d never got the lock (starved)", ci)
		} else if n != perCoord*rounds {
			t.Errorf("coordinator %d got the lock %d times, want %d", ci, n, perCoord*rounds)
		}
	}
	if switches == 0 {
		t.Errorf("the lock never changed coordinator in %d acquisitions", total)
	}
	concCheckLockFree(t, client, name)
}

// TestConcurrentReentry: under contention, half of the goroutines lock twice and unlock twice. After the
// first Unlock the hold count is 1 and the lock still excludes everyone else.
func TestConcurrentReentry(t *testing.T) {
	const goroutines, rounds = 12, 40
	_, client, c := setup(t)
	name, key := concNames(t)
	workers := make([]concWorker, goroutines)
	want := 0
	for i := range workers {
		workers[i] = concWorker{m: c.Mutex(name), rdb: client, reenter: i%2 == 0}
		if workers[i].reenter {
			want += 2 * rounds
		} else {
			want += rounds
		}
	}
	var g concGauge
	start := time.Now()
	holds := concRun(t, workers, rounds, key, &g)
	t.Logf("%d holds, %d critical sections in %v", len(holds), want, time.Since(start))
	g.check(t)
	concCheckCounter(t, client, key, want)
	if len(holds) != goroutines*rounds {
		t.Fatalf("%d holds recorded, want %d", len(holds), goroutines*rounds)
	}
	concCheckHolds(t, holds, want)
	concCheckLockFree(t, client, name)
}

// concCheckLockFree checks that nobody holds the lock once every worker released it.
func concCheckLockFree(t *testing.T, client *redis.Client, name string) {
	t.Helper()
	fields, err := client.HGetAll(t.Context(), name).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", name, err)
	}
	if len(fields) != 0 {
		t.Fatalf("lock %s still held after every worker finished: %v", name, fields)
	}
	tok, err := client.Get(t.Context(), redisops.TokenKey(name)).Result()
	if errors.Is(err, redis.Nil) {
		return // the counter expired after the last acquisition (the default): nothing is left
	}
	if err != nil {
		t.Fatalf("GET token counter: %v", err)
	}
	if n, err := strconv.ParseInt(tok, 10, 64); err != nil || n <= 0 {
		t.Fatalf("token counter = %q, want a positive integer", tok)
	}
}

// TestConcurrentWatchdogStartStop: many watchdog locks taken and released at once, each held for a random
// part of two renewal intervals (and a few for twice the watchdog timeout, which only renewals survive),
// so that renewal ticks keep firing while the actors cancel and restart their watchdogs.
//
// The watchdog timeout is 750 ms (renewals every 250 ms). A hold survives as long as the renewal tick's
// delay plus the round trips of two renewals in a row stay under two intervals (the next renewal is
// armed an interval after the previous one answered). With a 120 ms timeout that was 80 ms; on a 2-CPU
// machine under -race, with the rest of the suite running, everything stalls now and then for 200 ms
// and more (renewals of dozens of names answering 200-240 ms after they were sent, ticks 170 ms late),
// and holds were then rightly reported lost: their lease estimate ran out before the renewal answered,
// and some had already expired in Redis. 500 ms is twice the worst stall seen.
func TestConcurrentWatchdogStartStop(t *testing.T) {
	const names, rounds = 64, 10
	const watchdog = 750 * time.Millisecond
	const interval = watchdog / 3
	_, client, c := setup(t, coordinator.WithWatchdogTimeout(watchdog))
	ctx, cancel := context.WithTimeout(t.Context(), concTestTimeout)
	defer cancel()
	var errs concErrors
	var renewedHolds atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	lockNames := make([]string, names)
	for i := range lockNames {
		lockNames[i] = fmt.Sprintf("lockwarden:conc:%s:%d", t.Name(), i)
		m := c.Mutex(lockNames[i])
		wg.Go(func() {
			for r := range rounds {
				if err := m.Lock(ctx); err != nil {
					errs.add("%s round %d: Lock: %w", m.Name(), r, err)
					return
				}
				// Simulated work inside the lock: a random part of two renewal intervals, and for a few
				// holds twice the watchdog timeout, which the lock survives only if it is renewed.
				work := time.Duration(rand.Int64N(int64(2 * interval)))
				if r == rounds-1 && i%8 == 0 {
					work = 2 * watchdog
					renewedHolds.Add(1)
				}
				timer := time.NewTimer(work)
				select {
				case <-m.Done():
					timer.Stop()
					errs.add("%s round %d: hold lost during %v of work", m.Name(), r, work)
					return
				case <-timer.C:
				}
				if err := m.Unlock(ctx); err != nil {
					errs.add("%s round %d: Unlock after %v of work: %w", m.Name(), r, work, err)
					return
				}
			}
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	waitFor(t, allDone, concTestTimeout+5*time.Second, "all workers finishing")
	t.Logf("%d holds on %d names in %v; %d held for 2x the watchdog timeout", names*rounds, names,
		time.Since(start), renewedHolds.Load())
	errs.report(t)
	n, err := client.Exists(t.Context(), lockNames...).Result()
	if err != nil || n != 0 {
		t.Fatalf("EXISTS on the lock names = %d, %v; want 0 once every lock was released", n, err)
	}
}
