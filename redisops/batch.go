package redisops

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// call is one script call: the script with its keys and arguments, or with its EVALSHA command given
// whole (command, see evalshaCommand; then keys and args are not set). Ops.run and a Batch's pipeline
// send a command given whole; runSynced, the path of calls followed by WAIT, takes it apart (see
// withKeys); calls renewing holds must have keys and args.
type call struct {
	script  *redis.Script
	keys    []string
	args    []any
	command []any
	// grant, when not nil, says how to give back the hold the call may give (see [Ops.SetReplicaSync]).
	grant *grant
}

// run runs c through o's batcher (in one pipeline with the calls of other goroutines pending at the
// same moment, or on its own when none is), with EVALSHA, and again with EVAL if the server does not
// know the script.
func (o *Ops) run(ctx context.Context, c call) *redis.Cmd {
	if c.command != nil {
		if o.batcher == nil {
			return runCommand(ctx, o.client, c.script, c.command)
		}
		return o.batcher.doCommand(ctx, c.script, c.command)
	}
	if o.batcher == nil {
		return c.script.Run(ctx, o.client, c.keys, c.args...)
	}
	return o.batcher.Do(ctx, c.script, c.keys, c.args...)
}

// do runs script with keys and args as run runs a call.
func (o *Ops) do(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return o.run(ctx, call{script: script, keys: keys, args: args})
}

// runChecked runs c on its own like run, and a call that may give a hold as [Ops.runGranting] does; a
// hold that replicas did not acknowledge is given back and the reply carries the [ErrNotSynced] error.
func (o *Ops) runChecked(ctx context.Context, c call) *redis.Cmd {
	if c.grant == nil {
		return o.run(ctx, c)
	}
	reply, syncErr := o.runGranting(ctx, c, *c.grant)
	if syncErr != nil && reply.Err() == nil {
		reply.SetErr(syncErr)
	}
	return reply
}

// withKeys returns c with its keys and arguments apart, as runSynced needs them; c itself when they
// are.
func (c call) withKeys() call {
	if c.command != nil {
		c.keys, c.args = splitCommand(c.command)
		c.command = nil
	}
	return c
}

// evalsha adds c, with EVALSHA, to the pipeline pipe.
func (c call) evalsha(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	if c.command != nil {
		return pipe.Do(ctx, c.command...)
	}
	return c.script.EvalSha(ctx, pipe, c.keys, c.args...)
}

// unknownHoldArg is UnknownHoldCount as a command argument: boxing a negative int64 allocates.
var unknownHoldArg any = int64(UnknownHoldCount)

// boxedCount returns the hold count held as a command argument, allocating only for counts above 255.
func boxedCount(held int64) any {
	if held == UnknownHoldCount {
		return unknownHoldArg
	}
	return held
}

// pipeliner is what a client needs for [Batch] to send its calls in one round trip. Every go-redis
// client (single node, failover, cluster, ring, universal) has it.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// Batch collects lock script calls and runs them together in one round trip (a pipeline), in the
// order they were added. Each call behaves as if made on its own: its answer, and its retry-safety,
// are those of the matching [Ops] method. The calls are independent: a failed call does not stop the
// others. A Batch is for one goroutine and one Exec.
type Batch struct {
	o     *Ops
	calls []call
	cmds  []*redis.Cmd
	// grants are the calls that give a hold, which the replica-sync safeguard gives back when replicas
	// do not acknowledge it: their undos are made only when Exec finds that it waits for replicas.
	grants []batchGrant
}

// batchGrant is a read acquire of a Batch: the index of its call, and the hold it may give.
type batchGrant struct {
	i     int
	name  string
	owner string
	lease time.Duration
}

// NewBatch returns an empty batch on o's client.
func (o *Ops) NewBatch() *Batch { return &Batch{o: o} }

// Len returns the number of calls added so far.
func (b *Batch) Len() int { return len(b.calls) }

func (b *Batch) add(c call) int {
	b.calls = append(b.calls, c)
	return len(b.calls) - 1
}

// ReadAcquire adds an [Ops.ReadAcquireNamed] call. The returned function gives its answer after Exec:
// [ErrBadArgument], with no call added, for names not made by [RWNamesOf].
func (b *Batch) ReadAcquire(n *RWNames, owner string, lease time.Duration, held int64) func() (Acquired, error) {
	if err := n.check(); err != nil {
		return func() (Acquired, error) { return Acquired{}, err }
	}
	i := b.add(b.o.readAcquireCall(n, owner, lease, held))
	b.grants = append(b.grants, batchGrant{i: i, name: n.lock, owner: owner, lease: lease})
	name := n.lock
	return func() (Acquired, error) { return readAcquireReply(name, b.cmds[i]) }
}

// ReadRelease adds an [Ops.ReadReleaseNamed] call. The returned function gives its answer after Exec:
// [ErrBadArgument], with no call added, for names not made by [RWNamesOf].
func (b *Batch) ReadRelease(n *RWNames, owner, requestID string, held int64) func() (Released, error) {
	if err := n.check(); err != nil {
		return func() (Released, error) { return Released{}, err }
	}
	i := b.add(b.o.readReleaseCall(n, owner, requestID, held))
	name := n.lock
	return func() (Released, error) { return readReleaseReply(name, b.cmds[i]) }
}

// Exec runs every call added. One call runs on its own; several run in a pipeline when the client can
// pipeline, and otherwise one after another. A call that meets a server that lost its scripts
// (NOSCRIPT, after a restart or SCRIPT FLUSH) is run again on its own, which loads the script. With the
// replica-sync safeguard on ([Ops.SetReplicaSync]) and replicas to wait for, the calls and one WAIT go
// in one pipeline, and each read hold that the replicas did not acknowledge is given back and answers
// an error matching [ErrNotSynced]. The answers, errors included, are read through the functions the
// adding methods returned.
func (b *Batch) Exec(ctx context.Context) {
	b.cmds = make([]*redis.Cmd, len(b.calls))
	if b.execSynced(ctx) {
		return
	}
	p, ok := b.o.client.(pipeliner)
	if len(b.calls) < 2 || !ok {
		for i, c := range b.calls {
			b.cmds[i] = b.o.run(ctx, c)
		}
		return
	}
	pipe := p.Pipeline()
	for i, c := range b.calls {
		b.cmds[i] = c.evalsha(ctx, pipe)
	}
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	for i, c := range b.calls {
		if err := b.cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			b.cmds[i] = b.o.run(ctx, c)
		}
	}
}

// execSynced runs the calls as Exec does when the replica-sync safeguard waits for replicas after the
// holds they give, and reports false, having run nothing, when it does not. A copy of the calls then
// takes their undos (see runSynced).
func (b *Batch) execSynced(ctx context.Context) bool {
	if len(b.grants) == 0 || !b.o.syncsGrants(ctx, b.grants[0].name) {
		return false
	}
	calls := slices.Clone(b.calls)
	for _, g := range b.grants {
		calls[g.i].grant = b.o.undoRead(g.name, g.owner, g.lease)
	}
	replies, syncErrs, ok := b.o.runSynced(ctx, calls)
	if !ok {
		return false
	}
	for i, reply := range replies {
		if syncErrs[i] != nil && reply.Err() == nil {
			reply.SetErr(syncErrs[i])
		}
	}
	b.cmds = replies
	return true
}
