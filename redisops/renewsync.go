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
	rs := o.sync
	if rs == nil || rs.unsupported.Load() || len(c.keys) == 0 {
		return o.run(ctx, c), nil
	}
	t, ok, err := o.syncTarget(ctx, c.keys[0])
	switch {
	case err != nil:
		reply = redis.NewCmd(ctx)
		reply.SetErr(err)
		return reply, nil
	case !ok:
		return o.run(ctx, c), nil
	}
	want := rs.want(ctx, o.client, t.master)
	if want == 0 {
		return o.run(ctx, c), nil
	}
	timeout := rs.waitTimeout(t.opts)
	var wait *redis.Cmd
	for round := 0; ; round++ {
		pipe := t.pipe.Pipeline()
		if round > 0 || !rs.isLoaded(t.master, c.script.Hash()) {
			reply = c.script.Eval(ctx, pipe, c.keys, c.args...)
		} else {
			reply = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		wait = pipe.Do(ctx, "wait", want, timeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // each command keeps its own error
		err := reply.Err()
		if scriptRan(err) {
			rs.setLoaded(t.master, c.script.Hash())
		}
		if err == nil || !isNoScript(err) || round > 0 {
			break
		}
		// The server lost its scripts (a restart, a failover, SCRIPT FLUSH): the renewal did not
		// run. It goes again with EVAL, against counts read again, since the server may be another.
		rs.forgetScripts()
		rs.markStale()
		if want = rs.wantAfter(ctx, o.client, t.master, time.Now()); want == 0 {
			return o.run(ctx, c), nil
		}
	}
	if err := reply.Err(); err != nil {
		if !isErrorReply(err) && !callerGone(ctx, err) {
			rs.forgetScripts()
			rs.markStale() // perhaps a failover: the replicas may have changed
		}
		if cc, ok := o.client.(*redis.ClusterClient); ok && isRedirect(err) {
			cc.ReloadState(ctx)
		}
		return reply, nil
	}
	if n, err := reply.Int64(); err != nil || n != 1 {
		return reply, nil // not renewed: nothing to wait for
	}
	acked, err := wait.Int64()
	switch {
	case err != nil && isErrorReply(err):
		// WAIT is not offered here: the safeguard is given up, as for acquisitions.
		rs.unsupported.Store(true)
		return reply, nil
	case err == nil && acked >= int64(want):
		return reply, nil
	}
	rs.markStale()
	if err != nil {
		return reply, fmt.Errorf("%w: WAIT for %d replicas failed: %w", ErrRenewalNotSynced, want, err)
	}
	why := fmt.Sprintf("%d of %d replicas acknowledged within %v", acked, want, timeout)
	if rs.want(ctx, o.client, t.master) < want {
		return reply, fmt.Errorf("%w (%w): %s", ErrRenewalNotSynced, ErrReplicasChanged, why)
	}
	return reply, fmt.Errorf("%w: %s", ErrRenewalNotSynced, why)
}

// WaitsForReplicas reports whether a call on the lock name that gives or renews a hold would now be
// followed by WAIT: the replica-sync safeguard is on and the master has replicas to wait for. A write
// that is not waited for (the release of an inner hold resets the lock's expiry too) must then not
// raise the holder's validity. When the master cannot be found it answers true, the cautious answer.
func (o *Ops) WaitsForReplicas(ctx context.Context, name string) bool {
	return o.syncsGrants(ctx, LockKey(name))
}
