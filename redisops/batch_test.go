package redisops_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// TestBatchRunsCallsInOrder: a batch gives each call the answer it would get on its own, in the order
// the calls were added, in one round trip.
func TestBatchRunsCallsInOrder(t *testing.T) {
	ops, client := setup(t)
	ctx := t.Context()
	const name = "batch:order"
	mustRead(t, ops, name, "a", midLease)
	for _, s := range redisops.Scripts() {
		if err := s.Load(ctx, client).Err(); err != nil {
			t.Fatal(err)
		}
	}

	b := ops.NewBatch()
	n := redisops.RWNamesOf(name)
	bAcq := b.ReadAcquire(n, "b", midLease, 0)
	aAgain := b.ReadAcquire(n, "a", midLease, 1)
	aRel := b.ReadRelease(n, "a", "batch-1", redisops.UnknownHoldCount)
	ghost := b.ReadRelease(n, "ghost", "batch-2", redisops.UnknownHoldCount)
	if b.Len() != 4 {
		t.Fatalf("Len = %d, want 4", b.Len())
	}
	rt := &roundTrips{}
	client.AddHook(rt)
	b.Exec(ctx)
	if n := rt.count.Load(); n != 1 {
		t.Errorf("round trips = %d, want 1", n)
	}

	if got, err := bAcq(); err != nil || !got.OK || got.HoldCount != 1 {
		t.Errorf("b's read acquire = %+v, %v; want a first hold", got, err)
	}
	if got, err := aAgain(); err != nil || !got.OK || got.HoldCount != 2 {
		t.Errorf("a's re-entry = %+v, %v; want hold count 2", got, err)
	}
	if got, err := aRel(); err != nil || got.Remaining != 1 {
		t.Errorf("a's release = %+v, %v; want 1 left", got, err)
	}
	if _, err := ghost(); !errors.Is(err, redisops.ErrNotHeld) {
		t.Errorf("release by a non-holder = %v, want ErrNotHeld", err)
	}
	fields, err := client.HGetAll(ctx, name).Result()
	if err != nil || fields["a"] != "1" || fields["b"] != "1" || fields["mode"] != "read" {
		t.Errorf("hash = %v, %v; want a=1 b=1 mode=read", fields, err)
	}
}

// TestBatchReloadsFlushedScripts: calls that meet a server without the scripts are run again on their
// own, which loads them, instead of failing with NOSCRIPT.
func TestBatchReloadsFlushedScripts(t *testing.T) {
	ops, client := setup(t)
	ctx := t.Context()
	const name = "batch:noscript"
	mustRead(t, ops, name, "a", midLease) // loads the scripts
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Calls on one lock (one rw_read_batch.lua call, whose shared path the sequenced release lets it
	// take), then calls on two locks (a pipeline of their own scripts).
	n := redisops.RWNamesOf(name)
	b := ops.NewBatch()
	acq := b.ReadAcquire(n, "b", time.Second, 0)
	rel := b.ReadRelease(n, "a", "noscript:r1", 1)
	b.Exec(ctx)
	if got, err := acq(); err != nil || !got.OK {
		t.Errorf("read acquire after SCRIPT FLUSH = %+v, %v; want OK", got, err)
	}
	if got, err := rel(); err != nil || got.Remaining != 0 {
		t.Errorf("read release after SCRIPT FLUSH = %+v, %v; want released", got, err)
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b = ops.NewBatch()
	other := b.ReadAcquire(redisops.RWNamesOf(name+":other"), "c", time.Second, 0)
	rel = b.ReadRelease(n, "b", "noscript:r2", 1)
	b.Exec(ctx)
	if got, err := other(); err != nil || !got.OK {
		t.Errorf("read acquire on another lock after SCRIPT FLUSH = %+v, %v; want OK", got, err)
	}
	if got, err := rel(); err != nil || got.Remaining != 0 {
		t.Errorf("read release after SCRIPT FLUSH = %+v, %v; want released", got, err)
	}
}

// TestBatchSingleCall: one call runs like the Ops method (no pipeline needed).
func TestBatchSingleCall(t *testing.T) {
	ops, _ := setup(t)
	b := ops.NewBatch()
	acq := b.ReadAcquire(redisops.RWNamesOf("batch:single"), "a", time.Second, 0)
	b.Exec(t.Context())
	if got, err := acq(); err != nil || !got.OK || got.HoldCount != 1 {
		t.Errorf("single batched read acquire = %+v, %v", got, err)
	}
}

// roundTrips is a go-redis hook that counts the round trips that run scripts: one per script command
// or pipeline of them (connection set-up commands are not counted); commands counts the script commands,
// each command of a pipeline apart.
type roundTrips struct{ count, commands atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			h.count.Add(1)
			h.commands.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && isScript(cmds[0]) {
			h.count.Add(1)
		}
		for _, cmd := range cmds {
			if isScript(cmd) {
				h.commands.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }
