package redisops

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxHoldsPerCall is how many holds one script call of [Ops.RenewHolds] renews at most: Redisson's
// renewal batch.
const MaxHoldsPerCall = 100

var (
	//go:embed renew_many.lua
	renewManySource string
	renewManyScript = redis.NewScript(renewManySource)
)

// Hold is one watchdog hold for [Ops.RenewHolds]: the owner's hold of a kind on the lock name, to be
// renewed to lease.
type Hold struct {
	// Name is the lock name.
	Name string
	// Owner is the owner id whose hold is renewed.
	Owner string
	// Kind says which kind of hold, and so which renewal script; an unknown kind gets
	// [ErrInvalidRenewal].
	Kind RenewKind
	// Lease is the hold's new lease from now, rounded up to whole milliseconds (at least 1 ms).
	Lease time.Duration
}

// RenewHolds renews holds, on any lock names, as [Ops.RenewMany] renews each, in as few script calls
// as it can: up to [MaxHoldsPerCall] holds per call, the holds of one call on keys of one Redis Cluster
// slot, and every call in one pipeline (one round trip per master). Each hold is renewed on its own:
// one that is not held, or whose key holds another type, leaves the others renewed. With the replica-sync safeguard on, the calls to one master are followed by one WAIT,
// and a hold those replicas did not acknowledge answers an error matching [ErrRenewalNotSynced], as
// [Ops.Renew] does; the masters are waited for at the same time.
//
// It returns each hold's error, nil when it was renewed, in the order of holds: [ErrNotHeld] when
// the owner no longer holds it (also when the owner's field is a hold of the other family of locks,
// as [Ops.ReadRenew] and [Ops.WriteRenew] answer), an error matching [ErrWrongType] when the lock's
// key holds another type (nothing was changed), [ErrInvalidRenewal] for an unknown kind, or the call's error. It is safe for
// concurrent use.
func (o *Ops) RenewHolds(ctx context.Context, holds []Hold) []error {
	errs := make([]error, len(holds))
	// The holds of one call share a slot (on Redis Cluster) and a lease.
	type group struct {
		slot  int
		lease time.Duration
	}
	groups := make(map[group][]int)
	var order []group
	for i, h := range holds {
		if h.Kind != RenewLock && h.Kind != RenewRead && h.Kind != RenewWrite {
			errs[i] = fmt.Errorf("%w: kind %d", ErrInvalidRenewal, h.Kind)
			continue
		}
		g := group{lease: h.Lease}
		if o.cluster {
			g.slot = Slot(LockKey(h.Name))
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	var calls []call
	var of [][]int // of[j] are the holds of calls[j], in the order of its answers
	for _, g := range order {
		at := groups[g]
		for len(at) > 0 {
			n := min(len(at), MaxHoldsPerCall)
			c, ordered := renewHoldsCall(holds, at[:n])
			calls, of = append(calls, c), append(of, ordered)
			at = at[n:]
		}
	}
	if len(calls) == 0 {
		return errs
	}
	replies, syncErrs := o.runHoldRenewals(ctx, calls)
	for j, at := range of {
		vals, err := replies[j].Slice()
		if err == nil && len(vals) != len(at) {
			err = fmt.Errorf("unexpected reply %v", vals)
		}
		for n, i := range at {
			name := holds[i].Name
			if err != nil {
				errs[i] = fmt.Errorf("lockwarden: renew %q: %w", name, typed(err))
				continue
			}
			switch v, _ := vals[n].(int64); v {
			case 1:
				if syncErrs[j] != nil {
					errs[i] = fmt.Errorf("lockwarden: renew %q: %w", name, syncErrs[j])
				}
			case 0:
				errs[i] = ErrNotHeld
			case -1:
				errs[i] = fmt.Errorf("lockwarden: renew %q: %w", name,
					wrongTypeError{fmt.Errorf("WRONGTYPE %s holds another type than a hash", LockKey(name))})
			default:
				errs[i] = fmt.Errorf("lockwarden: renew %q: unexpected reply %v", name, vals[n])
			}
		}
	}
	return errs
}

// MasterOf names the master that serves the lock name: its address on Redis Cluster (from the
// client's slot map, or "" when it cannot be found), and "" otherwise. Callers use it to group calls
// by master.
func (o *Ops) MasterOf(ctx context.Context, name string) string {
	cc, ok := o.client.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	node, err := cc.MasterForKey(ctx, LockKey(name))
	if err != nil {
		return ""
	}
	return node.Options().Addr
}

// renewHoldsCall is the renew_many.lua call that renews the holds at of holds, which share a lease
// (and a slot), and the holds in the order of its answers: lock holds, then write holds, then read
// holds.
func renewHoldsCall(holds []Hold, at []int) (call, []int) {
	ordered := make([]int, 0, len(at))
	for _, kind := range []RenewKind{RenewLock, RenewWrite, RenewRead} {
		for _, i := range at {
			if holds[i].Kind == kind {
				ordered = append(ordered, i)
			}
		}
	}
	p, w := 0, 0
	for _, i := range at {
		switch holds[i].Kind {
		case RenewLock:
			p++
		case RenewWrite:
			w++
		}
	}
	keys, args := make([]string, 0, len(at)), make([]any, 0, 3+len(at))
	args = append(args, millis(holds[at[0]].Lease), p, w)
	for _, i := range ordered {
		h := holds[i]
		keys = append(keys, LockKey(h.Name))
		if h.Kind == RenewRead {
			keys = append(keys, readTimeoutPrefix(h.Name, h.Owner))
		}
		args = append(args, h.Owner)
	}
	return call{script: renewManyScript, keys: keys, args: args}, ordered
}

// runHoldRenewals runs calls, renewals on keys of any masters: with the replica-sync safeguard on,
// as runRenewals runs them, one pipeline and one WAIT per master, the masters at the same time; with
// it off, in one pipeline.
func (o *Ops) runHoldRenewals(ctx context.Context, calls []call) ([]*redis.Cmd, []error) {
	replies, syncErrs := make([]*redis.Cmd, len(calls)), make([]error, len(calls))
	if rs := o.sync; rs == nil || rs.unsupported.Load() {
		o.runPipelined(ctx, calls, allOf(calls), replies)
		return replies, syncErrs
	}
	byMaster := map[string][]int{}
	if cc, ok := o.client.(*redis.ClusterClient); ok {
		for j, c := range calls {
			addr := ""
			if node, err := cc.MasterForKey(ctx, c.keys[0]); err == nil {
				addr = node.Options().Addr
			} // else runRenewals meets the same error and answers it
			byMaster[addr] = append(byMaster[addr], j)
		}
	} else {
		byMaster[""] = allOf(calls)
	}
	var wg sync.WaitGroup
	for _, at := range byMaster {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := make([]call, len(at))
			for n, j := range at {
				group[n] = calls[j]
			}
			rep, errs := o.runRenewals(ctx, group)
			for n, j := range at {
				replies[j], syncErrs[j] = rep[n], errs[n]
			}
		}()
	}
	wg.Wait()
	return replies, syncErrs
}

// allOf returns the indexes of calls.
func allOf(calls []call) []int {
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	return all
}

// runPipelined runs the calls of todo in one pipeline when there are several and the client can
// pipeline, and on their own otherwise, storing their replies in replies. The calls that met a server
// that lost its scripts (NOSCRIPT: a restart, a failover, SCRIPT FLUSH) did not run: they go again,
// in one more pipeline, with EVAL.
func (o *Ops) runPipelined(ctx context.Context, calls []call, todo []int, replies []*redis.Cmd) {
	p, ok := o.client.(pipeliner)
	if len(todo) < 2 || !ok {
		for _, i := range todo {
			replies[i] = o.run(ctx, calls[i])
		}
		return
	}
	pipe := p.Pipeline()
	for _, i := range todo {
		c := calls[i]
		replies[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	var again []int
	for _, i := range todo {
		if err := replies[i].Err(); err != nil && isNoScript(err) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return
	}
	pipe = p.Pipeline()
	for _, i := range again {
		c := calls[i]
		replies[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
}
