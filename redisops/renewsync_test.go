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

// renewals are the renewals of every lock family, on holds that renewalHolds took.
func renewals(ops *redisops.Ops, name string) []struct {
	what  string
	renew func(ctx context.Context) error
} {
	return []struct {
		what  string
		renew func(ctx context.Context) error
	}{
		{"renew", func(ctx context.Context) error { return ops.Renew(ctx, name, "a", time.Minute) }},
		{"fair renew", func(ctx context.Context) error { return ops.Renew(ctx, name+":fair", "a", time.Minute) }},
		{"write renew", func(ctx context.Context) error { return ops.WriteRenew(ctx, name+":w", "w", time.Minute) }},
		{"read renew", func(ctx context.Context) error { return ops.ReadRenew(ctx, name+":r", "r", time.Minute) }},
	}
}

// renewalHolds takes the holds that renewals renews, with a lease of 10 s.
func renewalHolds(t *testing.T, ops *redisops.Ops, name string) {
	t.Helper()
	ctx := t.Context()
	for what, take := range map[string]func() (redisops.Acquired, error){
		"acquire": func() (redisops.Acquired, error) { return ops.Acquire(ctx, name, "a", 10*time.Second, 0) },
		"fair acquire": func() (redisops.Acquired, error) {
			return ops.FairAcquire(ctx, name+":fair", "a", 10*time.Second, time.Minute, 0, true)
		},
		"write acquire": func() (redisops.Acquired, error) { return ops.WriteAcquire(ctx, name+":w", "w", 10*time.Second, 0, 0) },
		"read acquire":  func() (redisops.Acquired, error) { return ops.ReadAcquire(ctx, name+":r", "r", 10*time.Second, 0) },
	} {
		if got, err := take(); err != nil || !got.OK {
			t.Fatalf("%s = %+v, %v; want a hold", what, got, err)
		}
	}
}

// TestReplicaSyncRenewals: with replica sync on, every renewal (plain, fair, write, read) is followed by
// one WAIT. With the replica in sync it succeeds; with the replica paused it takes effect on the master
// all the same (nothing is given back) but answers ErrRenewalNotSynced after about the sync timeout,
// without ErrReplicasChanged (the replica is still attached). A renewal of a hold that is gone answers
// ErrNotHeld. A server that lost its scripts unnoticed gets the renewal again with EVAL, after a
// second WAIT.
func TestReplicaSyncRenewals(t *testing.T) {
	_, replica, client := startWithReplica(t)
	ops := syncedOps(client)
	const name = "replicasync:renewals"
	renewalHolds(t, ops, name)

	before := waitCalls(t, client)
	for i, r := range renewals(ops, name) {
		if err := r.renew(t.Context()); err != nil {
			t.Fatalf("%s with the replica in sync = %v, want nil", r.what, err)
		}
		if n := waitCalls(t, client) - before; n != i+1 {
			t.Fatalf("after %s: %d WAITs, want %d", r.what, n, i+1)
		}
	}

	// A server that lost the scripts unnoticed (SCRIPT FLUSH): NOSCRIPT, then EVAL, each with a WAIT.
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	before = waitCalls(t, client)
	if err := ops.Renew(t.Context(), name, "a", time.Minute); err != nil {
		t.Fatalf("renew after SCRIPT FLUSH = %v, want nil", err)
	}
	if n := waitCalls(t, client) - before; n != 2 {
		t.Errorf("renew after SCRIPT FLUSH: %d WAITs, want 2", n)
	}

	replica.Pause()
	t.Cleanup(replica.Resume)
	for _, key := range []string{name, name + ":fair", name + ":w", name + ":r"} {
		if err := client.PExpire(t.Context(), key, 10*time.Second).Err(); err != nil {
			t.Fatalf("PEXPIRE %s: %v", key, err)
		}
	}
	for _, r := range renewals(ops, name) {
		start := time.Now()
		err := r.renew(t.Context())
		took := time.Since(start)
		if !errors.Is(err, redisops.ErrRenewalNotSynced) || errors.Is(err, redisops.ErrReplicasChanged) {
			t.Fatalf("%s with the replica paused = %v, want ErrRenewalNotSynced without ErrReplicasChanged", r.what, err)
		}
		if took < syncTimeout || took > syncTimeout+2*time.Second {
			t.Errorf("%s answered after %v, want about %v", r.what, took, syncTimeout)
		}
	}
	// The renewals took effect on the master: the leases are back to a minute.
	for _, key := range []string{name, name + ":fair", name + ":w", name + ":r"} {
		if d := pttl(t, client, key); d < 30*time.Second {
			t.Errorf("PTTL %s after the unacknowledged renewal = %v, want about a minute", key, d)
		}
	}

	// Not held: ErrNotHeld, whatever the replica does.
	if err := ops.Renew(t.Context(), name, "nobody", time.Minute); !errors.Is(err, redisops.ErrNotHeld) {
		t.Errorf("renew by an owner that holds nothing = %v, want ErrNotHeld", err)
	}
}

// evalHook counts the EVAL and EVALSHA commands a client sends, pipelined or not.
type evalHook struct{ eval, evalSha atomic.Int64 }

func (h *evalHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *evalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *evalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *evalHook) count(cmd redis.Cmder) {
	switch cmd.Name() {
	case "eval":
		h.eval.Add(1)
	case "evalsha":
		h.evalSha.Add(1)
	}
}

// TestReplicaSyncRenewalsUseEvalSha: a synced renewal sends its script with EVAL only while the master
// is not known to have it, and with EVALSHA (41 bytes rather than the whole script) after that.
func TestReplicaSyncRenewalsUseEvalSha(t *testing.T) {
	_, _, client := startWithReplica(t)
	evals := &evalHook{}
	client.AddHook(evals)
	ops := syncedOps(client)
	const name = "replicasync:renewals-evalsha"
	renewalHolds(t, ops, name)
	for round := range 2 {
		eval, evalSha := evals.eval.Load(), evals.evalSha.Load()
		for _, r := range renewals(ops, name) {
			if err := r.renew(t.Context()); err != nil {
				t.Fatalf("%s, round %d = %v, want nil", r.what, round+1, err)
			}
		}
		if round == 1 {
			if n, m := evals.eval.Load()-eval, evals.evalSha.Load()-evalSha; n != 0 || m != 4 {
				t.Errorf("second round of renewals: %d EVAL and %d EVALSHA, want 0 and 4", n, m)
			}
		}
	}
}

// TestRenewMany: the renewals of one lock's holds answer each as on its own (renewed, not held, a
// renewal of an unknown kind refused), after one WAIT for all of them.
func TestRenewMany(t *testing.T) {
	_, _, client := startWithReplica(t)
	ops := syncedOps(client)
	const name = "replicasync:renew-many"
	renewalHolds(t, ops, name)
	if got, err := ops.ReadAcquire(t.Context(), name+":r", "r2", 10*time.Second, 0); err != nil || !got.OK {
		t.Fatalf("second read acquire = %+v, %v; want a hold", got, err)
	}
	before := waitCalls(t, client)
	errs := ops.RenewMany(t.Context(), name+":r", []redisops.Renewal{
		{Owner: "r", Kind: redisops.RenewRead, Lease: time.Minute},
		{Owner: "nobody", Kind: redisops.RenewRead, Lease: time.Minute},
		{Owner: "r2", Kind: redisops.RenewRead, Lease: time.Minute},
		{Owner: "r", Kind: redisops.RenewKind(9), Lease: time.Minute},
	})
	if errs[0] != nil || !errors.Is(errs[1], redisops.ErrNotHeld) || errs[2] != nil || !errors.Is(errs[3], redisops.ErrInvalidRenewal) {
		t.Errorf("RenewMany = %v; want nil, ErrNotHeld, nil, ErrInvalidRenewal", errs)
	}
	if n := waitCalls(t, client) - before; n != 1 {
		t.Errorf("%d WAITs, want 1", n)
	}
	if d := pttl(t, client, name+":r"); d < 30*time.Second {
		t.Errorf("PTTL after RenewMany = %v, want about a minute", d)
	}
}

// TestReplicaSyncRenewHolds: RenewHolds of holds of every family on several names is followed by one
// WAIT; with the replica paused, every hold it renewed answers ErrRenewalNotSynced (renewed on the
// master all the same) and the one that is gone ErrNotHeld, after that one WAIT.
func TestReplicaSyncRenewHolds(t *testing.T) {
	_, replica, client := startWithReplica(t)
	ops := syncedOps(client)
	const name = "replicasync:renew-holds"
	renewalHolds(t, ops, name)
	holds := []redisops.Hold{
		{Name: name, Owner: "a", Kind: redisops.RenewLock, Lease: time.Minute},
		{Name: name + ":fair", Owner: "a", Kind: redisops.RenewLock, Lease: time.Minute},
		{Name: name + ":w", Owner: "w", Kind: redisops.RenewWrite, Lease: time.Minute},
		{Name: name + ":r", Owner: "r", Kind: redisops.RenewRead, Lease: time.Minute},
		{Name: name, Owner: "nobody", Kind: redisops.RenewLock, Lease: time.Minute},
	}
	for round, paused := range []bool{false, true} {
		if paused {
			replica.Pause()
			t.Cleanup(replica.Resume)
		}
		before := waitCalls(t, client)
		errs := ops.RenewHolds(t.Context(), holds)
		if n := waitCalls(t, client) - before; n != 1 {
			t.Errorf("round %d: %d WAITs, want 1", round, n)
		}
		for i, err := range errs[:4] {
			if paused != errors.Is(err, redisops.ErrRenewalNotSynced) || (!paused && err != nil) {
				t.Errorf("round %d, hold %d: %v; want ErrRenewalNotSynced %v", round, i, err, paused)
			}
		}
		if !errors.Is(errs[4], redisops.ErrNotHeld) {
			t.Errorf("round %d: the hold that is gone: %v, want ErrNotHeld", round, errs[4])
		}
	}
	if d := pttl(t, client, name+":w"); d < 30*time.Second {
		t.Errorf("PTTL after the unacknowledged renewal = %v, want about a minute", d)
	}
}
