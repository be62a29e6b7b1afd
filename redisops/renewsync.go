package redisops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrRenewalNotSynced is returned by a renewal ([Ops.Renew], [Ops.ReadRenew], [Ops.WriteRenew]) that
// the master carried out but that fewer replicas than required acknowledged within the sync timeout
// (see [Ops.SetReplicaSync]). Nothing is undone: the hold stays held on the master, with the new
// expiry. But a replica promoted now may keep the expiry of an earlier renewal, and since Redis
// replicates an expiry as an absolute time (PEXPIREAT), the lock ends there when that earlier lease
// ends: the holder must go on counting from its last acknowledged renewal or acquisition, and renew
// again. When the replica count, read again at once, is lower than the one the WAIT asked for (a
// failover left the new master with fewer replicas), the error also matches [ErrReplicasChanged]: a
// renewal tried again at once asks for what the master has now.
var ErrRenewalNotSynced = errors.New("lockwarden: renewal not acknowledged by replicas")

// runRenewing runs c, a renewal script that answers 1 when it renewed and 0 when the owner holds
// nothing, followed by WAIT on the same connection, in the same pipeline, when the replica-sync
// safeguard asks for it (as [Ops.runGranting] does for a call that gives a hold). syncErr is not nil
// when the script renewed but fewer replicas than required acknowledged it: it matches
// [ErrRenewalNotSynced], and the renewal is not undone.
//
// The script goes with EVALSHA where the master is known to have it, and with EVAL where it is not
// (its first use there, or after a connection error or a new replication id, as after a failover or a
// restart), as for acquisitions. A server that lost it unnoticed answers NOSCRIPT: the renewal then
// goes again with EVAL, followed by a second WAIT.
func (o *Ops) runRenewing(ctx context.Context, c call) (reply *redis.Cmd, syncErr error) {
	replies, syncErrs := o.runRenewals(ctx, []call{c})
	return replies[0], syncErrs[0]
}

// runRenewals is runRenewing for calls, renewals on the keys of one lock: they go in one pipeline
// followed by one WAIT, which covers every write before it on the connection.
func (o *Ops) runRenewals(ctx context.Context, calls []call) (replies []*redis.Cmd, syncErrs []error) {
	replies, syncErrs = make([]*redis.Cmd, len(calls)), make([]error, len(calls))
	runAll := func(todo []int) { o.runPipelined(ctx, calls, todo, replies) }
	all := allOf(calls)
	rs := o.sync
	if rs == nil || rs.unsupported.Load() || len(calls) == 0 || len(calls[0].keys) == 0 {
		runAll(all)
		return replies, syncErrs
	}
	t, ok, err := o.syncTarget(ctx, calls[0].keys[0])
	switch {
	case err != nil:
		for i := range replies {
			replies[i] = redis.NewCmd(ctx)
			replies[i].SetErr(err)
		}
		return replies, syncErrs
	case !ok:
		runAll(all)
		return replies, syncErrs
	}
	want := rs.want(ctx, o.client, t.master)
	if want == 0 {
		runAll(all)
		return replies, syncErrs
	}
	waits, wants := make([]*redis.Cmd, len(calls)), make([]int, len(calls))
	var timeout time.Duration
	for round, todo := 0, all; len(todo) > 0; round++ {
		// Worked out for each round: a second one comes after the counts were read again.
		timeout = rs.renewalWaitTimeout(ctx, t.opts)
		wait, again := o.pipeWithWait(ctx, t, calls, todo, round > 0, want, timeout, replies)
		for _, i := range todo {
			waits[i], wants[i] = wait, want
		}
		if len(again) == 0 || round > 0 {
			break
		}
		// The server lost its scripts (a restart, a failover, SCRIPT FLUSH): those renewals did not
		// run. They go again with EVAL, against counts read again, since the server may be another.
		rs.forgetScripts()
		rs.markStale()
		if want = rs.wantAfter(ctx, o.client, t.master, time.Now()); want == 0 {
			runAll(again)
			for _, i := range again {
				waits[i] = nil
			}
			break
		}
		todo = again
	}
	// changed caches, per WAIT, whether the replica count read again after it fell short is lower.
	changed := make(map[*redis.Cmd]bool)
	for i := range calls {
		if waits[i] != nil {
			syncErrs[i] = o.checkRenewed(ctx, replies[i], waits[i], t.master, wants[i], timeout, changed)
		}
	}
	return replies, syncErrs
}

// checkRenewed looks at the reply of a renewal and at the WAIT that followed it, and returns an error
// matching [ErrRenewalNotSynced] when it renewed but fewer than want replicas acknowledged it.
func (o *Ops) checkRenewed(ctx context.Context, reply, wait *redis.Cmd, master string, want int, timeout time.Duration, changed map[*redis.Cmd]bool) error {
	rs := o.sync
	if err := reply.Err(); err != nil {
		o.noteCallError(ctx, err)
		return nil
	}
	if !renewedAny(reply) {
		return nil // not renewed: nothing to wait for
	}
	acked, enough, err := rs.acknowledged(wait, want)
	if enough {
		return nil
	}
	rs.markStale()
	if err != nil {
		return fmt.Errorf("%w: WAIT for %d replicas failed: %w", ErrRenewalNotSynced, want, err)
	}
	why := fmt.Sprintf("%d of %d replicas acknowledged within %v", acked, want, timeout)
	lower, ok := changed[wait]
	if !ok {
		lower = rs.want(ctx, o.client, master) < want
		changed[wait] = lower
	}
	if lower {
		return fmt.Errorf("%w (%w): %s", ErrRenewalNotSynced, ErrReplicasChanged, why)
	}
	return fmt.Errorf("%w: %s", ErrRenewalNotSynced, why)
}

// renewedAny reports whether the reply of a renewal script says that it renewed a hold: 1, or an
// array (renew_many.lua) with a 1 in it.
func renewedAny(reply *redis.Cmd) bool {
	if n, err := reply.Int64(); err == nil {
		return n == 1
	}
	vals, err := reply.Slice()
	if err != nil {
		return false
	}
	for _, v := range vals {
		if n, ok := v.(int64); ok && n == 1 {
			return true
		}
	}
	return false
}

// RenewKind says which hold of a lock a [Renewal] renews: the Redis-level notion of which renewal
// script runs and which field of the lock's hash it extends, not a kind of lock (that is messages.Kind;
// the reentrant and the fair lock renew alike, with RenewLock). Each lock actor's strategy maps its
// kinds to these.
type RenewKind int

const (
	// RenewLock renews a hold of a reentrant or fair lock, as [Ops.Renew] does.
	RenewLock RenewKind = iota
	// RenewRead renews an owner's read holds of a read-write lock, as [Ops.ReadRenew] does.
	RenewRead
	// RenewWrite renews the write hold of a read-write lock, as [Ops.WriteRenew] does.
	RenewWrite
)

// Renewal is one renewal of [Ops.RenewMany].
type Renewal struct {
	// Owner is the owner id whose hold is renewed.
	Owner string
	// Kind says which kind of hold, and so which renewal script; an unknown kind gets
	// [ErrInvalidRenewal].
	Kind RenewKind
	// Lease is the hold's new lease from now, rounded up to whole milliseconds (at least 1 ms).
	Lease time.Duration
}

// RenewMany makes the renewals of holds on the lock name, each as [Ops.Renew], [Ops.ReadRenew] or
// [Ops.WriteRenew] would, in one round trip: with the replica-sync safeguard on, the scripts go in one
// pipeline followed by one WAIT (which covers every write before it on the connection), so replicas
// that lag cost the renewals one sync timeout, not one each. It returns each renewal's error, nil
// when it counted, in the order of renewals; an unknown kind gets [ErrInvalidRenewal].
func (o *Ops) RenewMany(ctx context.Context, name string, renewals []Renewal) []error {
	errs := make([]error, len(renewals))
	calls, at := make([]call, 0, len(renewals)), make([]int, 0, len(renewals))
	for i, r := range renewals {
		var c call
		switch r.Kind {
		case RenewLock:
			c = call{script: renewScript, keys: []string{LockKey(name)}, args: []any{millis(r.Lease), r.Owner}}
		case RenewRead:
			c = call{script: rwReadRenewScript, keys: []string{LockKey(name), readTimeoutPrefix(name, r.Owner)},
				args: []any{millis(r.Lease), r.Owner}}
		case RenewWrite:
			c = call{script: rwWriteRenewScript, keys: []string{LockKey(name)},
				args: []any{millis(r.Lease), WriteField(r.Owner), r.Owner}}
		default:
			errs[i] = fmt.Errorf("%w: kind %d", ErrInvalidRenewal, r.Kind)
			continue
		}
		calls, at = append(calls, c), append(at, i)
	}
	if len(calls) == 0 {
		return errs
	}
	replies, syncErrs := o.runRenewals(ctx, calls)
	for j, i := range at {
		n, err := replies[j].Int64()
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("lockwarden: renew %q: %w", name, typed(err))
		case n == 0:
			errs[i] = ErrNotHeld
		case syncErrs[j] != nil:
			errs[i] = fmt.Errorf("lockwarden: renew %q: %w", name, syncErrs[j])
		}
	}
	return errs
}

// ErrInvalidRenewal is returned by [Ops.RenewMany] for a [Renewal] of an unknown kind.
var ErrInvalidRenewal = errors.New("lockwarden: invalid renewal")

// WaitsForReplicas reports whether a call on the lock name that gives or renews a hold would now be
// followed by WAIT: the replica-sync safeguard is on and the master has replicas to wait for. A write
// that is not waited for (the release of an inner hold resets the lock's expiry too) must then not
// raise the holder's validity. When the master cannot be found it answers true, the cautious answer.
func (o *Ops) WaitsForReplicas(ctx context.Context, name string) bool {
	return o.syncsGrants(ctx, LockKey(name))
}
