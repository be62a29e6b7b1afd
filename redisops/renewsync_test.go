package redisops_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
// ErrNotHeld. A server that lost its scripts costs no second WAIT.
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

	// A server without the scripts (a restart, a promoted replica, SCRIPT FLUSH): one WAIT per renewal.
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	before = waitCalls(t, client)
	if err := ops.Renew(t.Context(), name, "a", time.Minute); err != nil {
		t.Fatalf("renew after SCRIPT FLUSH = %v, want nil", err)
	}
	if n := waitCalls(t, client) - before; n != 1 {
		t.Errorf("renew after SCRIPT FLUSH: %d WAITs, want 1", n)
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
