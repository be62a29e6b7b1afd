package redisops_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// cmdCounter is a go-redis hook that counts round trips (a command or a pipeline) and the EVAL and
// EVALSHA commands in them.
type cmdCounter struct{ rt, scripts atomic.Int64 }

func (h *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds)
		return next(ctx, cmds)
	}
}

func (h *cmdCounter) count(cmds []redis.Cmder) {
	h.rt.Add(1)
	for _, c := range cmds {
		if n := c.Name(); n == "eval" || n == "evalsha" {
			h.scripts.Add(1)
		}
	}
}

// TestRenewHoldsMixed: one RenewHolds renews each hold on its own and answers each one's outcome in
// order: plain, read and write holds renewed; an owner that holds nothing, or whose field is a hold
// of the other family (a read renewal of a plain hold), is not held; a key of another type is refused
// and left unchanged, without keeping the holds around them from being renewed; an unknown kind is
// invalid.
func TestRenewHoldsMixed(t *testing.T) {
	ops, c := setup(t)
	ctx := t.Context()
	const short = 10 * time.Second
	p := "renewholds:mixed:"
	if _, err := ops.Acquire(ctx, p+"plain", "a", short, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.ReadAcquire(ctx, p+"rw", "r", short, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.ReadAcquire(ctx, p+"rw", "r", short, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.WriteAcquire(ctx, p+"w", "w", short, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, p+"string", "data", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Acquire(ctx, p+"after", "b", short, 0); err != nil {
		t.Fatal(err)
	}
	errs := ops.RenewHolds(ctx, []redisops.Hold{
		{Name: p + "plain", Owner: "a", Kind: redisops.RenewLock, Lease: longLease},
		{Name: p + "plain", Owner: "nobody", Kind: redisops.RenewLock, Lease: longLease},
		{Name: p + "rw", Owner: "r", Kind: redisops.RenewRead, Lease: longLease},
		{Name: p + "string", Owner: "a", Kind: redisops.RenewLock, Lease: longLease},
		{Name: p + "plain", Owner: "a", Kind: redisops.RenewRead, Lease: longLease},
		{Name: p + "w", Owner: "w", Kind: redisops.RenewWrite, Lease: longLease},
		{Name: p + "w", Owner: "r", Kind: redisops.RenewWrite, Lease: longLease},
		{Name: p + "after", Owner: "b", Kind: redisops.RenewKind(9), Lease: longLease},
		{Name: p + "after", Owner: "b", Kind: redisops.RenewLock, Lease: longLease},
		{Name: p + "gone", Owner: "b", Kind: redisops.RenewRead, Lease: longLease},
	})
	for i, want := range []error{nil, redisops.ErrNotHeld, nil, redisops.ErrWrongType, redisops.ErrNotHeld,
		nil, redisops.ErrNotHeld, redisops.ErrInvalidRenewal, nil, redisops.ErrNotHeld} {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("hold %d: got %v, want %v", i, errs[i], want)
		}
	}
	checkPTTL(t, c, p+"plain", longLease)
	checkPTTL(t, c, p+"after", longLease)
	checkPTTL(t, c, p+"w", longLease)
	for k := int64(1); k <= 2; k++ {
		checkPTTL(t, c, redisops.ReadTimeoutKey(p+"rw", "r", k), longLease)
	}
	if ttl, _ := c.PTTL(ctx, p+"string").Result(); ttl != -1 {
		t.Errorf("PTTL of the string key = %v, want -1 (untouched)", ttl)
	}
}

// TestRenewHoldsBatches: 250 holds go as three script calls in one round trip, and a server that lost
// its scripts gets them again with EVAL in one more round trip.
func TestRenewHoldsBatches(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ops := redisops.New(c)
	ctx := t.Context()
	var holds []redisops.Hold
	for i := range 250 {
		name := fmt.Sprintf("renewholds:batches:%d", i)
		if _, err := ops.Acquire(ctx, name, "a", 10*time.Second, 0); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, redisops.Hold{Name: name, Owner: "a", Kind: redisops.RenewLock, Lease: longLease})
	}
	h := &cmdCounter{}
	c.AddHook(h)
	for round := range 2 {
		if round == 1 {
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			h.rt.Store(0)
			h.scripts.Store(0)
		}
		for i, err := range ops.RenewHolds(ctx, holds) {
			if err != nil {
				t.Fatalf("round %d, hold %d: %v", round, i, err)
			}
		}
	}
	// After SCRIPT FLUSH: the pipeline of three EVALSHA meets NOSCRIPT, then three EVAL.
	if rt, n := h.rt.Load(), h.scripts.Load(); rt != 2 || n != 6 {
		t.Errorf("after SCRIPT FLUSH: %d round trips, %d script calls; want 2 and 6", rt, n)
	}
	checkPTTL(t, c, "renewholds:batches:249", longLease)
}

// TestRenewHoldsCluster: on Redis Cluster the holds are grouped by slot, one script call per slot,
// and renewed on every master in one pipeline; a hold that is gone answers ErrNotHeld alone.
func TestRenewHoldsCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	ops := redisops.New(c)
	ctx := t.Context()
	var holds []redisops.Hold
	slots := map[int]bool{}
	for i := range 40 {
		name := fmt.Sprintf("renewholds:cluster:%d", i)
		if i%4 == 0 {
			name = fmt.Sprintf("{renewholds:tag}:%d", i) // several holds in one slot
		}
		if _, err := ops.Acquire(ctx, name, "a", 10*time.Second, 0); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, redisops.Hold{Name: name, Owner: "a", Kind: redisops.RenewLock, Lease: longLease})
		slots[cl.KeySlot(t, name)] = true
	}
	holds = append(holds, redisops.Hold{Name: "{renewholds:tag}:0", Owner: "gone", Kind: redisops.RenewLock, Lease: longLease})
	ops.RenewHolds(ctx, holds[:40]) // loads the script on every master
	h := &cmdCounter{}
	c.AddHook(h)
	errs := ops.RenewHolds(ctx, holds)
	for i, err := range errs[:40] {
		if err != nil {
			t.Errorf("hold %d (%s): %v", i, holds[i].Name, err)
		}
	}
	if !errors.Is(errs[40], redisops.ErrNotHeld) {
		t.Errorf("the hold that is gone: got %v, want ErrNotHeld", errs[40])
	}
	if n := h.scripts.Load(); n != int64(len(slots)) {
		t.Errorf("%d script calls, want one per slot: %d", n, len(slots))
	}
	for _, hd := range holds[:40] {
		got, err := c.PTTL(ctx, hd.Name).Result()
		if err != nil || got <= longLease-ttlSlack {
			t.Errorf("PTTL %s = %v, %v; want about %v", hd.Name, got, err, longLease)
		}
	}
}

// TestRenewHoldsOtherFamilyNotHeld: a write or read renewal of an owner whose field sits in a hash
// without a mode (a plain lock's hold) answers ErrNotHeld and changes nothing, as WriteRenew and
// ReadRenew answer for the same hold.
func TestRenewHoldsOtherFamilyNotHeld(t *testing.T) {
	ops, c := setup(t)
	ctx := t.Context()
	const short = 10 * time.Second
	name := "renewholds:otherfamily"
	if _, err := ops.Acquire(ctx, name, "a", short, 0); err != nil {
		t.Fatal(err)
	}
	errs := ops.RenewHolds(ctx, []redisops.Hold{
		{Name: name, Owner: "a", Kind: redisops.RenewWrite, Lease: longLease},
		{Name: name, Owner: "a", Kind: redisops.RenewRead, Lease: longLease},
	})
	single := []error{ops.WriteRenew(ctx, name, "a", longLease), ops.ReadRenew(ctx, name, "a", longLease)}
	for i, kind := range []string{"write", "read"} {
		if !errors.Is(errs[i], redisops.ErrNotHeld) {
			t.Errorf("RenewHolds of a %s hold over a plain hold: got %v, want %v", kind, errs[i], redisops.ErrNotHeld)
		}
		if !errors.Is(single[i], redisops.ErrNotHeld) {
			t.Errorf("single %s renewal over a plain hold: got %v, want %v", kind, single[i], redisops.ErrNotHeld)
		}
	}
	if ttl, err := c.PTTL(ctx, name).Result(); err != nil || ttl > short {
		t.Errorf("PTTL of the plain hold: got %v, %v, want at most %v (unchanged)", ttl, err, short)
	}
}
