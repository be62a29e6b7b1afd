package redisops

import (
	"context"
	"fmt"
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

// Batch collects read acquires and read releases and runs them together in one round trip, in the
// order they were added. Each call behaves as if made on its own: its answer, and its retry-safety,
// are those of the matching [Ops] method. The calls are independent: a failed call does not stop the
// others. A Batch is for one goroutine and one Exec.
//
// Two or more calls, all on one lock, go to Redis as one call of rw_read_batch.lua, which runs them
// with the commands on the lock's hash shared among them; calls on several locks go as a pipeline of
// their own scripts.
type Batch struct {
	o     *Ops
	reads []batchRead
	// cmds are the calls' replies when they went as their own scripts; answers and err the replies
	// when they went as one rw_read_batch.lua call (err for them all).
	cmds    []*redis.Cmd
	answers []any
	err     error
}

// batchRead is one call of a Batch.
type batchRead struct {
	n       *RWNames
	r       *readerNames
	release bool
	// lease is an acquire's; requestID a release's, and seq its sequence number as rw_read_batch.lua
	// takes it (see readReleaseSeq); held is the owner's count as the caller knows it.
	lease     time.Duration
	requestID string
	seq       any
	sequenced bool
	held      int64
}

// NewBatch returns an empty batch on o's client.
func (o *Ops) NewBatch() *Batch { return &Batch{o: o} }

// Len returns the number of calls added so far.
func (b *Batch) Len() int { return len(b.reads) }

// ReadAcquire adds an [Ops.ReadAcquireNamed] call. The returned function gives its answer after Exec:
// [ErrBadArgument], with no call added, for names not made by [RWNamesOf].
func (b *Batch) ReadAcquire(n *RWNames, owner string, lease time.Duration, held int64) func() (Acquired, error) {
	if err := n.check(); err != nil {
		return func() (Acquired, error) { return Acquired{}, err }
	}
	i := len(b.reads)
	b.reads = append(b.reads, batchRead{n: n, r: n.reader(owner), lease: lease, held: held})
	return func() (Acquired, error) {
		v, err := b.reply(i)
		return readAcquireReply(n.lock, v, err)
	}
}

// ReadRelease adds an [Ops.ReadReleaseNamed] call. The returned function gives its answer after Exec:
// [ErrBadArgument], with no call added, for names not made by [RWNamesOf].
func (b *Batch) ReadRelease(n *RWNames, owner, requestID string, held int64) func() (Released, error) {
	if err := n.check(); err != nil {
		return func() (Released, error) { return Released{}, err }
	}
	i := len(b.reads)
	seq, sequenced := readReleaseSeq(requestID, held)
	b.reads = append(b.reads, batchRead{n: n, r: n.reader(owner), release: true, requestID: requestID, held: held,
		seq: seq, sequenced: sequenced})
	return func() (Released, error) {
		v, err := b.reply(i)
		return readReleaseReply(n.lock, v, err)
	}
}

// reply returns call i's reply after Exec.
func (b *Batch) reply(i int) (any, error) {
	switch {
	case b.err != nil:
		return nil, b.err
	case b.answers != nil:
		if err, ok := b.answers[i].(error); ok {
			return nil, err
		}
		return b.answers[i], nil
	}
	return b.cmds[i].Result()
}

// call returns call i as its own script's call.
func (b *Batch) call(i int) call {
	r := &b.reads[i]
	if r.release {
		return b.o.readReleaseCallSeq(r.n, r.r, r.requestID, r.seq, r.sequenced)
	}
	return b.o.readAcquireCall(r.n, r.r, r.lease, r.held)
}

// Exec runs every call added. Two or more calls, all on one lock, run as one call (see [Batch]);
// otherwise one call runs on its own, and several run in a pipeline when the client can pipeline, and
// one after another if not. A call that meets a server that lost its scripts (NOSCRIPT, after a
// restart or SCRIPT FLUSH) is run again, with EVAL, which loads the script. With the replica-sync
// safeguard on ([Ops.SetReplicaSync]) and replicas to wait for, the calls go as their own scripts in
// one pipeline with one WAIT, and each read hold that the replicas did not acknowledge is given back
// and answers an error matching [ErrNotSynced]. The answers, errors included, are read through the
// functions the adding methods returned.
func (b *Batch) Exec(ctx context.Context) {
	if b.execSynced(ctx) || b.execShared(ctx) {
		return
	}
	b.cmds = make([]*redis.Cmd, len(b.reads))
	p, ok := b.o.client.(pipeliner)
	if len(b.reads) < 2 || !ok {
		for i := range b.reads {
			b.cmds[i] = b.o.run(ctx, b.call(i))
		}
		return
	}
	pipe := p.Pipeline()
	calls := make([]call, len(b.reads))
	for i := range b.reads {
		calls[i] = b.call(i)
		b.cmds[i] = calls[i].evalsha(ctx, pipe)
	}
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	for i, c := range calls {
		if err := b.cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			b.cmds[i] = b.o.run(ctx, c)
		}
	}
}

// execShared runs the calls as one rw_read_batch.lua call when they are two or more calls on one lock,
// and reports false, having run nothing, when they are not.
func (b *Batch) execShared(ctx context.Context) bool {
	if len(b.reads) < 2 {
		return false
	}
	n := b.reads[0].n
	for i := range b.reads {
		if b.reads[i].n != n {
			return false
		}
	}
	kinds := make([]byte, len(b.reads))
	releases := 0
	for i := range b.reads {
		kinds[i] = 'a'
		if b.reads[i].release {
			kinds[i] = 'r'
			releases++
		}
	}
	command := make([]any, 0, 11+3*len(b.reads)+releases)
	command = append(command, "evalsha", rwReadBatchSHA, 3, n.lockArg, n.channelArg, n.intentArg,
		b.o.latchArg, b.o.publishArg, n.allReadersArg, UnlockMessage, string(kinds))
	for i := range b.reads {
		command = append(command, b.reads[i].r.owner)
	}
	for i := range b.reads {
		if r := &b.reads[i]; r.release {
			command = append(command, releaseLatch(n, r.r, r.requestID, r.sequenced))
		}
	}
	for i := range b.reads {
		r := &b.reads[i]
		if r.release {
			command = append(command, r.seq, "")
		} else {
			command = append(command, b.o.leaseArg(r.lease), boxedCount(r.held))
		}
	}
	answers, err := b.o.run(ctx, call{script: rwReadBatchScript, command: command}).Slice()
	if err == nil && len(answers) != len(b.reads) {
		err = fmt.Errorf("lockwarden: a read batch of %d calls answered %d", len(b.reads), len(answers))
	}
	b.answers, b.err = answers, err
	return true
}

// execSynced runs the calls as Exec does when the replica-sync safeguard waits for replicas after the
// holds they give, and reports false, having run nothing, when it does not. A copy of the calls then
// takes their undos (see runSynced).
func (b *Batch) execSynced(ctx context.Context) bool {
	first := slices.IndexFunc(b.reads, func(r batchRead) bool { return !r.release })
	if first < 0 || !b.o.syncsGrants(ctx, b.reads[first].n.lock) {
		return false
	}
	calls := make([]call, len(b.reads))
	for i := range b.reads {
		calls[i] = b.call(i)
		if r := &b.reads[i]; !r.release {
			calls[i].grant = b.o.undoRead(r.n.lock, r.r.owner.(string), r.lease)
		}
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
