package redisops

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPipelines is how many round trips a [Batcher] has under way at once by default. A lone caller
// always finds one free, so it is never delayed behind a batch; under load the calls that find none
// wait and go together in the next one. More round trips under way keep Redis busier while the client
// settles the answers of another, at the price of smaller batches. In BenchmarkLockCost (Lock+Unlock
// on 32 names, through the lock actors) on a 2-CPU VM, with Redis on a CPU apart from the client, 4
// gave 0.80-0.90x the floor's ops/s against 2's 0.72-0.83x (two sets of three alternating runs); with
// client and Redis sharing both CPUs, 0.67-0.73x against 0.66-0.68x in the first set and 0.69-0.71x
// against 0.68-0.72x in the second, so no gain there beyond the noise. Redis CPU per pair stayed the
// same within the noise (1.21-1.51x the floor's either way), at 0.31 round trips per pair against 0.18
// and 26 allocations per pair against 24.5 (a pipeline's own allocations shared by fewer calls); 3
// fell between 2 and 4. The contention benchmarks (BenchmarkContended, BenchmarkContendedProcesses,
// BenchmarkFairContended) did not move.
const DefaultPipelines = 4

// Batcher sends script calls to Redis, pipelining the calls that are pending at the same moment into
// one round trip (group commit). It is safe for concurrent use.
//
// Up to its number of pipelines are under way at once. A call that finds one free is sent at once, on
// the caller's goroutine; the calls made while none is free wait, and the next free one carries all of
// them, in the order they were made, sent on the goroutine of the first of them. A call
// goes with EVALSHA; one answered NOSCRIPT (after a restart or SCRIPT FLUSH) did not run, and is sent
// again with EVAL, which loads the script.
//
// A call whose context ends before it is sent is answered at once with the context's error and not
// sent. A pipeline carrying several calls is not ended by the context of one of its callers, so a
// caller that gives up does not fail the others: it is bounded by the client's timeouts, by the latest
// of its callers' deadlines when each has one (which the client honours with ContextTimeoutEnabled),
// and it is cancelled once every caller's context has ended, which stops the client's retries. A call
// sent on its own uses its caller's context, as a direct call does. A connection error fails every
// call of its pipeline, with the error a direct call would have met, and the next calls use a new
// connection.
//
// The calls of one caller of [Batcher.Do] run in the order it makes them, since it waits for each
// answer. Within a pipeline the calls run in order, except that a call answered NOSCRIPT runs after
// the calls behind it in its pipeline that found their script.
type Batcher struct {
	client redis.Scripter
	// pipe is client's pipeline maker, nil when it has none: calls are then sent one by one.
	pipe  pipeliner
	slots int

	mu sync.Mutex
	// inFlight counts the round trips under way, at most slots.
	inFlight int
	// queue holds the calls that wait for a free round trip.
	queue []*pending
	// spare holds batch slices for reuse.
	spare [][]*pending

	pool sync.Pool
}

// pending is one call waiting for its answer.
type pending struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	// command, when set, is the call's EVALSHA command given whole (see Batcher.doCommand), in place
	// of keys and args.
	command []any
	cmd     *redis.Cmd
	// done (capacity 1) wakes a caller of Do: its answer is in cmd, or it is to send lead.
	done chan struct{}
	lead []*pending
	// watched marks a call sent with others whose context ends theirs (see sharedContext).
	watched bool
}

// NewBatcher returns a Batcher on client with up to pipelines round trips under way at once
// ([DefaultPipelines] when pipelines < 1). It starts no goroutine: every call is sent on the goroutine
// of one of its callers.
func NewBatcher(client redis.Scripter, pipelines int) *Batcher {
	if pipelines < 1 {
		pipelines = DefaultPipelines
	}
	b := &Batcher{client: client, slots: pipelines}
	b.pipe, _ = client.(pipeliner)
	b.pool.New = func() any { return &pending{done: make(chan struct{}, 1)} }
	return b
}

func (b *Batcher) get(ctx context.Context, script *redis.Script, keys []string, args []any) *pending {
	p := b.pool.Get().(*pending)
	p.ctx, p.script, p.keys, p.args = ctx, script, keys, args
	return p
}

// run sends the call p on its own on c, with EVALSHA and then, if the server does not know the script,
// with EVAL, as [redis.Script.Run] does.
func (p *pending) run(ctx context.Context, c redis.Scripter) *redis.Cmd {
	if p.command != nil {
		return runCommand(ctx, c, p.script, p.command)
	}
	return p.script.Run(ctx, c, p.keys, p.args...)
}

// evalsha adds the call p, with EVALSHA, to the pipeline pipe.
func (p *pending) evalsha(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	return call{script: p.script, keys: p.keys, args: p.args, command: p.command}.evalsha(ctx, pipe)
}

// eval adds the call p, with EVAL, to the pipeline pipe.
func (p *pending) eval(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	keys, args := p.keys, p.args
	if p.command != nil {
		keys, args = splitCommand(p.command)
	}
	return p.script.Eval(ctx, pipe, keys, args...)
}

// evalshaCommand returns an EVALSHA command, for Batcher.doCommand: the command name, the script's
// SHA1 (sha, its Hash boxed), numKeys, then the numKeys keys and the arguments of keysAndArgs. The
// caller passes them boxed (as any), so that what it boxed once for many calls (the SHA1, a lock's
// keys, the lease) is not boxed again; go-redis' Script.EvalSha boxes the SHA1 and every key on every
// call. The keys must be strings (splitCommand relies on it).
func evalshaCommand(sha any, numKeys int, keysAndArgs ...any) []any {
	cmd := make([]any, 0, 3+len(keysAndArgs))
	cmd = append(cmd, "evalsha", sha, numKeys)
	return append(cmd, keysAndArgs...)
}

// commands recycles the EVALSHA commands of the calls of every Lock and Unlock (newCommand).
var commands = sync.Pool{New: func() any { return new([]any) }}

// newCommand is evalshaCommand in a slice that freeCommand gives back for reuse once the call has
// returned and its reply has been read: nothing refers to a call's command after that (the batcher
// answers a call once its round trip is over, and go-redis keeps a command only in the reply).
func newCommand(sha any, numKeys int, keysAndArgs ...any) *[]any {
	c := commands.Get().(*[]any)
	*c = append(append((*c)[:0], "evalsha", sha, numKeys), keysAndArgs...)
	return c
}

// freeCommand gives back a command of newCommand, which its caller no longer uses.
func freeCommand(c *[]any) {
	clear(*c)
	commands.Put(c)
}

// splitCommand returns the keys and the arguments of an EVALSHA command made by evalshaCommand.
func splitCommand(command []any) ([]string, []any) {
	n := command[2].(int)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = command[3+i].(string)
	}
	return keys, command[3+n:]
}

// doer is the method of every go-redis client and pipeline that sends a command given whole.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// runCommand sends the EVALSHA command of script on its own on c, and again with EVAL if the server
// does not know the script.
func runCommand(ctx context.Context, c redis.Scripter, script *redis.Script, command []any) *redis.Cmd {
	if d, ok := c.(doer); ok {
		if cmd := d.Do(ctx, command...); cmd.Err() == nil || !isNoScript(cmd.Err()) {
			return cmd
		}
		keys, args := splitCommand(command)
		return script.Eval(ctx, c, keys, args...)
	}
	keys, args := splitCommand(command)
	return script.Run(ctx, c, keys, args...)
}

func (b *Batcher) put(p *pending) {
	*p = pending{done: p.done}
	b.pool.Put(p)
}

// doCommand runs script as Do does, with its EVALSHA command given whole, as evalshaCommand makes it,
// so that the keys and arguments its caller boxed once are not boxed again.
func (b *Batcher) doCommand(ctx context.Context, script *redis.Script, command []any) *redis.Cmd {
	if err := ctx.Err(); err != nil {
		return errCmd(ctx, err)
	}
	p := b.get(ctx, script, nil, nil)
	p.command = command
	return b.do(ctx, p)
}

// Do runs script with keys and args, as [redis.Script.Run] does, and returns its reply once it has
// come. It returns at once, with ctx's error in the reply, when ctx has ended, and so it does when ctx
// ends while the call still waits for a round trip (the call is then not sent).
func (b *Batcher) Do(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if err := ctx.Err(); err != nil {
		return errCmd(ctx, err)
	}
	return b.do(ctx, b.get(ctx, script, keys, args))
}

// do sends the call p, as Do describes, and returns its reply.
func (b *Batcher) do(ctx context.Context, p *pending) *redis.Cmd {
	b.mu.Lock()
	if b.inFlight < b.slots && len(b.queue) == 0 {
		b.inFlight++
		b.mu.Unlock()
		b.sendOne(p)
		b.next(nil)
	} else {
		b.queue = append(b.queue, p)
		b.mu.Unlock()
		select {
		case <-p.done:
		case <-ctx.Done():
			if b.dequeue(p) {
				cmd := errCmd(ctx, ctx.Err())
				b.put(p)
				return cmd
			}
			// A round trip has taken the call already: it is answered with the others.
			<-p.done
		}
		if batch := p.lead; batch != nil {
			p.lead = nil
			b.send(batch, p)
			b.next(batch)
		}
	}
	cmd := p.cmd
	b.put(p)
	return cmd
}

// dequeue takes p out of the queue and reports whether it was still there.
func (b *Batcher) dequeue(p *pending) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.queue {
		if q == p {
			copy(b.queue[i:], b.queue[i+1:])
			b.queue[len(b.queue)-1] = nil
			b.queue = b.queue[:len(b.queue)-1]
			return true
		}
	}
	return false
}

// next is called when a round trip has ended: batch (nil for a lone call) has been answered. The
// round trip's slot goes to the calls pending, if any: the first of their callers sends them.
func (b *Batcher) next(batch []*pending) {
	b.mu.Lock()
	if batch != nil {
		clear(batch)
		b.spare = append(b.spare, batch[:0])
	}
	if len(b.queue) == 0 {
		b.inFlight--
		b.mu.Unlock()
		return
	}
	batch = append(b.spareLocked(), b.queue...)
	clear(b.queue)
	b.queue = b.queue[:0]
	leader := batch[0]
	leader.lead = batch
	b.mu.Unlock()
	leader.done <- struct{}{}
}

// spareLocked returns an empty batch slice, reused when one is spare.
func (b *Batcher) spareLocked() []*pending {
	if n := len(b.spare); n > 0 {
		s := b.spare[n-1]
		b.spare = b.spare[:n-1]
		return s
	}
	return make([]*pending, 0, 8)
}

// sendOne sends the lone call p with its caller's context.
func (b *Batcher) sendOne(p *pending) {
	if err := p.ctx.Err(); err != nil {
		p.cmd = errCmd(p.ctx, err)
		return
	}
	defer answerPanic(p.ctx, p)
	p.cmd = p.run(p.ctx, b.client)
}

// ErrPanicked answers the calls of a round trip in which the client panicked (a hook of the
// application's, for instance): the batcher recovers, so that its round trips stay usable and the
// other callers of the round trip are answered.
var ErrPanicked = errors.New("lockwarden: the Redis client panicked")

// answerPanic, deferred by a sender, recovers a panic of the client and answers each call of ps that
// has no reply with ErrPanicked.
func answerPanic(ctx context.Context, ps ...*pending) {
	r := recover()
	if r == nil {
		return
	}
	err := fmt.Errorf("%w: %v", ErrPanicked, r)
	for _, p := range ps {
		if p.cmd == nil || p.cmd.Err() == nil && p.cmd.Val() == nil {
			p.cmd = errCmd(ctx, err)
		}
	}
}

// send sends the calls of batch, in one pipeline when there are several, and answers them: self, the
// caller sending it, reads its own reply; the others are woken.
func (b *Batcher) send(batch []*pending, self *pending) {
	live := 0
	var first *pending
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.cmd = errCmd(p.ctx, err)
			continue
		}
		if first == nil {
			first = p
		}
		live++
	}
	b.sendLive(batch, first, live)
	for _, p := range batch {
		if p != self {
			p.done <- struct{}{}
		}
	}
	if len(batch) > 1 {
		// The callers just woken are queued on this goroutine's processor, behind it. Yield, so that
		// they go on (and make their next calls, which then share a round trip) before this caller
		// does: at 32 goroutines (BenchmarkLockCost) that takes the round trips per Lock+Unlock from
		// 0.22-0.23 to 0.17-0.18 with 2 round trips under way, and from 0.39-0.40 to 0.31-0.32 with 4
		// (0.65-0.68x the floor's ops/s without it, 0.67-0.73x with it), and Redis' CPU with it.
		runtime.Gosched()
	}
}

// sendLive sends the live calls of batch (live of them, the first first), in one pipeline when there
// are several. A panic of the client answers every call of the batch it left without a reply.
func (b *Batcher) sendLive(batch []*pending, first *pending, live int) {
	if live > 0 {
		defer answerPanic(first.ctx, batch...)
	}
	switch {
	case live == 0:
	case live == 1:
		first.cmd = first.run(first.ctx, b.client)
	default:
		ctx, release := sharedContext(batch, first.ctx)
		defer release()
		if b.pipe == nil {
			for _, p := range batch {
				if p.cmd == nil {
					p.cmd = p.run(ctx, b.client)
				}
			}
		} else {
			b.pipeline(batch, ctx)
		}
	}
}

// sharedContext returns the context of the live calls of batch (those not yet answered) sent
// together, and a function that releases it once they are answered. It keeps the values of ctx, the
// first caller's (for tracing), but not its end, so that a caller that gives up does not fail the
// others: its deadline is the latest of the callers' (none when one of them has none), and it is
// cancelled once every caller's context has ended. So the cancel of a context that all the callers
// share (a coordinator's lifetime) stops the client's retries, as it does for a lone call.
func sharedContext(batch []*pending, ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if latest, ok := latestDeadline(batch); ok {
		ctx, cancel = withDeadline(ctx, cancel, latest)
	}
	for _, p := range batch {
		if p.cmd == nil && p.ctx.Done() == nil {
			// This caller's context never ends, so neither does the calls' together.
			return ctx, cancel
		}
	}
	for _, p := range batch {
		p.watched = p.cmd == nil
	}
	w := &watch{batch: batch, cancel: cancel}
	w.mu.Lock()
	w.watchNext()
	w.mu.Unlock()
	return ctx, w.release
}

// watch cancels the context of calls sent together once every caller's context has ended. It
// watches one caller's context at a time, and the next one's when that one ends, so that a pipeline
// that is answered first, as nearly all are, costs one watch and not one per call.
type watch struct {
	mu     sync.Mutex
	batch  []*pending
	next   int
	stop   func() bool
	cancel context.CancelFunc
	done   bool
}

// watchNext watches the context of the next watched call of batch that has not ended, or, when none
// is left, cancels. w.mu is held.
func (w *watch) watchNext() {
	for w.next < len(w.batch) {
		p := w.batch[w.next]
		w.next++
		if p.watched && p.ctx.Err() == nil {
			w.stop = context.AfterFunc(p.ctx, w.ended)
			return
		}
	}
	w.cancel()
}

// ended is called when the watched context has ended.
func (w *watch) ended() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.watchNext()
	}
}

// release ends the watch, once the calls are answered (batch may then be reused), and the context.
func (w *watch) release() {
	w.mu.Lock()
	w.done = true
	if w.stop != nil {
		w.stop()
	}
	w.mu.Unlock()
	w.cancel()
}

// withDeadline returns ctx bounded by d, and a function that cancels it and then calls cancel.
func withDeadline(ctx context.Context, cancel context.CancelFunc, d time.Time) (context.Context, context.CancelFunc) {
	ctx, cancelDeadline := context.WithDeadline(ctx, d)
	return ctx, func() { cancelDeadline(); cancel() }
}

// pipeline sends the calls of batch that have no reply yet in one pipeline, with EVALSHA, and those
// answered NOSCRIPT again with EVAL, in a second one, both with ctx.
func (b *Batcher) pipeline(batch []*pending, ctx context.Context) {
	pipe := b.pipe.Pipeline()
	for _, p := range batch {
		if p.cmd == nil {
			p.cmd = p.evalsha(ctx, pipe)
		}
	}
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	var again redis.Pipeliner
	for _, p := range batch {
		if err := p.cmd.Err(); err != nil && isNoScript(err) {
			if again == nil {
				again = b.pipe.Pipeline()
			}
			p.cmd = p.eval(ctx, again)
		}
	}
	if again != nil {
		_, _ = again.Exec(ctx)
	}
}

// latestDeadline returns the latest deadline of the calls of batch not yet answered, ok false when one
// of them has none.
func latestDeadline(batch []*pending) (latest time.Time, ok bool) {
	for _, p := range batch {
		if p.cmd != nil {
			continue
		}
		d, has := p.ctx.Deadline()
		if !has {
			return time.Time{}, false
		}
		if d.After(latest) {
			latest = d
		}
	}
	return latest, !latest.IsZero()
}

// errCmd returns a reply that carries err.
func errCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
